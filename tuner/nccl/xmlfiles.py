"""NCCL's two XML input files: a topology (``NCCL_TOPO_FILE``) and a graph (``NCCL_GRAPH_FILE``).

NCCL reads both at communicator init, with its own small XML reader (src/graph/xml.cc, tags
v2.18.6-1 to v2.30.7-1):

* ``NCCL_TOPO_FILE`` (src/graph/topo.cc, ncclTopoGetSystem: "NCCL_TOPO_FILE set by environment
  to %s"): the machine as NCCL should see it, read by ``ncclTopoGetXmlFromFile`` with the one
  root handler ``system``; ``ncclTopoXmlLoadSystem`` needs ``version`` equal to
  ``NCCL_TOPO_XML_VERSION`` (1, src/graph/xml.h: "XML Topology has wrong version %d, %d
  needed") and loads its ``cpu`` children. A file that cannot be opened is only an INFO line
  ("Could not open XML topology file %s : %s"): NCCL then detects the machine itself, silently.
* ``NCCL_GRAPH_FILE`` (src/graph/search.cc, ncclTopoCompute: "NCCL_GRAPH_FILE set by environment
  to %s"): the search's result given up front, read by ``ncclTopoGetXmlGraphFromFile`` with the
  root handler ``graphs`` (``version`` equal to ``NCCL_GRAPH_XML_VERSION``, 1) and its ``graph``
  children; ``ncclTopoGetGraphFromXmlSub`` takes the graph whose ``id`` is the one being
  searched (0 ring, 1 tree, 2 CollNet chain, 3 NVLS, 4 CollNet direct: src/init.cc) and reads
  ``crossnic``, ``pattern``, ``nchannels``, ``speedintra``, ``speedinter``, ``typeintra``,
  ``typeinter`` and ``samechannels`` (each required: xmlGetAttrStr "Attribute %s of node %s not
  found"; ``latencyinter`` optional), each ``channel``'s ``gpu``/``net`` children by ``dev``
  (hex). When that graph has channels, NCCL returns before its own search ("Search %d : %d
  channels loaded from XML graph"); a file that cannot be opened fails init ("Could not open
  XML graph file %s : %s", ncclSystemError).

NCCL's reader is stricter than XML: it skips only spaces and line ends between tags
("XML Parse error : expecting '<', got '%c'"), so text, tabs and an ``<?xml ...?>`` declaration
(read as an element ``?xml`` whose ``?`` ends it: "XML Parse : expected >, got '?'") fail init.
Names and values are at most ``MAX_STR_LEN`` (255) - 1 characters. :func:`read_xml_file`
checks all this with Python's ``xml.etree`` before any launch.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from tuner.nccl.cnum import strtoll

__all__ = ["FILE_VARS", "GRAPH_FILE_VAR", "TOPO_FILE_VAR", "XML_VERSION", "read_xml_file"]

GRAPH_FILE_VAR = "NCCL_GRAPH_FILE"
TOPO_FILE_VAR = "NCCL_TOPO_FILE"
#: NCCL_TOPO_XML_VERSION and NCCL_GRAPH_XML_VERSION (src/graph/xml.h): both 1 in 2.18-2.30.
XML_VERSION = 1
#: Each variable whose value is a file path -> (its XML root, what NCCL does with it, where it is read).
FILE_VARS: dict[str, tuple[str, str]] = {
    TOPO_FILE_VAR: ("system", "NCCL describes the machine from this file instead of detecting it "
                              "(src/graph/topo.cc, ncclTopoGetSystem; src/graph/xml.cc, ncclTopoGetXmlFromFile)"),
    GRAPH_FILE_VAR: ("graphs", "NCCL takes its ring/tree graphs from this file and skips its own search "
                               "(src/graph/search.cc, ncclTopoCompute; src/graph/xml.cc, ncclTopoGetXmlGraphFromFile)"),
}
#: The attributes ncclTopoGetGraphFromXmlSub (src/graph/search.cc) requires of each ``graph``.
GRAPH_ATTRS = ("id", "crossnic", "pattern", "nchannels", "speedintra", "speedinter", "typeintra", "typeinter",
               "samechannels")
_MAX_STR = 254  # MAX_STR_LEN 255 (src/graph/xml.h), the last byte for the '\0'
_LINK_TYPES = ("LOC", "NVL", "NVB", "PIX", "PXB", "PXN", "P2C", "PHB", "SYS")  # search.cc kvDictLinkType
_GAP = " \n\r"  # what xmlGetNode skips between tags


@dataclass(frozen=True)
class XmlGraph:
    """One ``graph`` of a graph file: ``id`` (0 ring, 1 tree, ...), ``pattern`` (4 ring,
    src/include/graph.h), ``nchannels`` as written, ``speed_intra``/``speed_inter`` in GB/s per
    channel, ``type_intra``/``type_inter`` (path names), ``channels``: the ``dev`` of each
    channel's ``gpu`` children, in ring order (src/graph/search.cc ncclTopoGetChannelFromXml)."""

    id: int
    pattern: int
    nchannels: int
    speed_intra: float
    speed_inter: float
    type_intra: str
    type_inter: str
    same_channels: int
    channels: tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class NcclXmlFile:
    """A file NCCL will read: ``var`` (NCCL_TOPO_FILE or NCCL_GRAPH_FILE), ``path`` (absolute),
    ``root`` (``system`` or ``graphs``), ``name`` (the root's optional ``name``), ``graphs``
    (empty for a topology), ``cpus`` (``cpu`` children of a topology)."""

    var: str
    path: str
    root: str
    name: str | None
    graphs: tuple[XmlGraph, ...] = ()
    cpus: int = 0

    @property
    def ring(self) -> XmlGraph | None:
        """The graph NCCL uses for its rings (id 0, src/init.cc ``ringGraph->id = 0``), or None."""
        return next((g for g in self.graphs if g.id == 0), None)


def _c_int(text: str) -> int | None:
    """``strtol(text, NULL, 0)`` for a value that is a whole number (decimal, 0x hex, 0 octal);
    None for one with no digits or trailing characters (NCCL would read a prefix: refused)."""
    value, rest = strtoll(text)
    return value if text.strip() and not rest.strip() else None


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _lexical(text: str) -> str | None:
    """Where NCCL's own reader (xml.cc, xmlGetNode) fails on text Python's parser accepts."""
    head = text.lstrip(_GAP)
    if head.startswith("<?"):
        return ("it starts with an XML declaration (<?xml ...?>), which NCCL's reader does not know: "
                "\"XML Parse : expected >, got '?'\" (src/graph/xml.cc, xmlGetNode); remove that line")
    if head[:1] != "<":
        return f"it does not start with '<': \"XML Parse error : expecting '<', got '{head[:1]}'\""
    return None


def _text_problem(elem: ET.Element) -> str | None:
    for node in elem.iter():
        for part, where in ((node.text, f"inside <{node.tag}>"), (node.tail, f"after </{node.tag}>")):
            if part and part.strip(_GAP):
                shown = part.strip(_GAP)[:20]
                return (f"{where} there is {shown!r}: NCCL's reader skips only spaces and line ends between tags "
                        "(tabs and text fail: \"XML Parse error : expecting '<'\", src/graph/xml.cc, xmlGetNode)")
        for key, value in node.attrib.items():
            if len(key) > _MAX_STR or len(value) > _MAX_STR:
                return f"<{node.tag}> {key}=... is longer than NCCL's MAX_STR_LEN (255, src/graph/xml.h)"
        if len(node.tag) > _MAX_STR:
            return "an element name is longer than NCCL's MAX_STR_LEN (255, src/graph/xml.h)"
    return None


def _version(root: ET.Element, what: str) -> str | None:
    raw = root.get("version")
    if raw is None:
        return f"<{root.tag}> has no version attribute (NCCL: \"Attribute version of node {root.tag} not found\")"
    if _c_int(raw) != XML_VERSION:
        return (f"<{root.tag} version=\"{raw}\">: NCCL needs version {XML_VERSION} (\"XML {what} has wrong version "
                f"%d, {XML_VERSION} needed\", src/graph/xml.cc)")
    return None


def _graph(node: ET.Element, i: int) -> tuple[XmlGraph | None, str | None]:
    missing = [a for a in GRAPH_ATTRS if a not in node.attrib]
    if missing:
        return None, (f"graph {i} lacks {', '.join(missing)} (NCCL: \"Attribute {missing[0]} of node graph not "
                      "found\", src/graph/search.cc, ncclTopoGetGraphFromXmlSub)")
    ints = {a: _c_int(node.attrib[a]) for a in ("id", "crossnic", "pattern", "nchannels", "samechannels")}
    floats = {a: _float(node.attrib[a]) for a in ("speedintra", "speedinter")}
    bad = [a for a, v in {**ints, **floats}.items() if v is None]
    if bad:
        return None, f"graph {i}: {bad[0]}=\"{node.attrib[bad[0]]}\" is not a number"
    types = [node.attrib[a] for a in ("typeintra", "typeinter")]
    for t in types:
        if not any(t.startswith(k) for k in _LINK_TYPES):  # kvConvertToInt compares the name's prefix
            return None, (f"graph {i}: path type \"{t}\" is none of {', '.join(_LINK_TYPES)} (NCCL falls back to LOC, "
                          "src/graph/xml.h kvConvertToInt)")
    channels = []
    for c, chan in enumerate(node):
        if chan.tag != "channel":
            continue
        devs = []
        for sub in chan:
            if sub.tag in ("gpu", "net") and "dev" not in sub.attrib:
                return None, (f"graph {i} channel {c}: <{sub.tag}> has no dev (NCCL: \"Attribute dev of node {sub.tag} "
                              "not found\", src/graph/search.cc, ncclTopoGetChannelFromXml)")
            if sub.tag == "gpu":
                try:
                    devs.append(int(sub.attrib["dev"], 16))  # strtol(str, NULL, 16)
                except ValueError:
                    return None, f"graph {i} channel {c}: gpu dev=\"{sub.attrib['dev']}\" is not hexadecimal"
        channels.append(tuple(devs))
    assert ints["id"] is not None and ints["pattern"] is not None and ints["nchannels"] is not None
    assert ints["samechannels"] is not None and floats["speedintra"] is not None and floats["speedinter"] is not None
    return XmlGraph(ints["id"], ints["pattern"], ints["nchannels"], floats["speedintra"], floats["speedinter"],
                    types[0], types[1], ints["samechannels"], tuple(channels)), None


def read_xml_file(var: str, path: str | os.PathLike[str]) -> tuple[NcclXmlFile | None, str | None]:
    """Read ``path`` as NCCL reads the file of ``var`` (:data:`FILE_VARS`): ``(file, None)``, or
    ``(None, why)`` in one sentence (not found, unreadable, not XML, a construct NCCL's reader
    fails on, the wrong root, a missing or wrong ``version``, a graph lacking an attribute NCCL
    requires, no ``graph`` at all). Never raises for a bad file; ValueError for a ``var`` that
    is not a file variable. What only the machine can tell (a ``dev`` no GPU has: "XML Import
    Channel : dev %ld not found") is not checked."""
    if var not in FILE_VARS:
        raise ValueError(f"{var} is not one of {', '.join(FILE_VARS)}")
    root_name = FILE_VARS[var][0]
    file = Path(path)
    try:
        text = file.read_bytes().decode("utf-8")
    except FileNotFoundError:
        return None, f"file not found: {file}"
    except IsADirectoryError:
        return None, f"{file} is a folder, not a file"
    except OSError as exc:
        return None, f"{file} cannot be read: {exc.strerror or exc}"
    except UnicodeDecodeError:
        return None, f"{file} is not text (UTF-8)"
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        return None, f"{file} is not XML ({exc})"
    why = _lexical(text) or _text_problem(root)
    if why:
        return None, f"{file}: {why}"
    if root.tag != root_name:
        return None, (f"{file} has root <{root.tag}>; {var} needs <{root_name} version=\"{XML_VERSION}\"> "
                      f"(NCCL ignores any other element: \"Ignoring element {root.tag}\", src/graph/xml.cc, xmlLoadSub)")
    why = _version(root, "Topology" if root_name == "system" else "Graph")
    if why:
        return None, f"{file}: {why}"
    name = root.get("name")
    if root_name == "system":
        return NcclXmlFile(var, str(file), root_name, name, cpus=sum(1 for c in root if c.tag == "cpu")), None
    graphs = []
    for i, node in enumerate(c for c in root if c.tag == "graph"):
        graph, why = _graph(node, i)
        if why:
            return None, f"{file}: {why}"
        assert graph is not None
        graphs.append(graph)
    if not graphs:
        return None, f"{file}: <graphs> holds no <graph>, so NCCL searches as if the file were not given"
    return NcclXmlFile(var, str(file), root_name, name, tuple(graphs)), None
