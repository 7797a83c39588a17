"""Export screen results for NCCL's example tuner plugin, beyond global environment variables.

NCCL_ALGO / NCCL_PROTO / NCCL_MAX_NCHANNELS apply to every message size: a setting that wins at
the 14 KB decode allreduce is forced on prefill's 100 MB allreduces too. A tuner plugin can choose
per size. NCCL ships one (``plugins/tuner/example`` in github.com/NVIDIA/nccl, ``ext-tuner/example``
before 2.29.7; with this CSV configuration since NCCL 2.27.5). It reads the file named by
``NCCL_TUNER_CONFIG_FILE`` (default ``nccl_tuner.conf`` in the working directory), one line per
collective and size range::

    collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,regBuff

and ships ``scripts/optimize_config.py``, which builds that file from a CSV of measurements::

    collective,size_bytes,algorithm,protocol,channels,nodes,ranks,pipeOps,regBuff,cost_metric,bandwidth_gbps,latency_us

Using it: build the plugin from the NCCL source (``make`` in ``plugins/tuner/example`` gives
``libnccl-tuner-example.so``), then start the server with ``NCCL_TUNER_PLUGIN`` set to that
file's absolute path, or to ``example`` with its directory on ``LD_LIBRARY_PATH`` (NCCL
``src/plugin/plugin_open.cc`` tries the name, then ``libnccl-tuner-<name>.so``), with
``NCCL_TUNER_CONFIG_FILE=<the written file>``, and with no NCCL_ALGO/NCCL_PROTO set. NCCL must
accept the plugin's API version (:func:`tuner_api_versions`); ``NCCL_DEBUG=INFO`` then logs
"Successfully loaded external tuner plugin" and ``TUNER/ExamplePlugin: Loaded config`` lines.

What the plugin's own parser does (``plugin.c`` ``loadConfig``/``pluginGetCollInfo``, checked in
NCCL 2.27.5 through 2.30.7), and what this writer therefore guarantees:

- lines are read with ``fgets`` into 256 bytes: a longer line is cut and its rest read as a new
  line, so every line written here is shorter than 256 bytes, comments included;
- a line is a comment only when its first byte is ``#``; fields are split with ``strtok(",")``,
  which merges empty fields, then trimmed of spaces and tabs; 8 to 10 fields are accepted;
- an unknown collective, algorithm or protocol name silently becomes allreduce, ring or simple,
  so names are checked here against the plugin's lists;
- the first matching line wins (same collective, ``min_bytes <= nBytes <= max_bytes``, nodes,
  ranks, pipeOps, regBuff equal or -1): ranges written here never overlap;
- the plugin starts every call with ``*nChannels = 1`` and changes it only for a matching line
  whose channels is not -1, and NCCL (``src/enqueue.cc`` ``ncclGetAlgoInfo``) takes any non-zero
  value as the channel count. So a size without a line, or a line with channels -1, runs on ONE
  channel, not on NCCL's default (the plugin README says otherwise). :func:`write_tuner_config`
  returns notes saying where this applies.
"""

from __future__ import annotations

import csv
import io
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from math import isqrt
from pathlib import Path

from tuner.nccl import strtoll

__all__ = [
    "PERF_CSV_COLUMNS",
    "SIZE_MAX",
    "TunerChoice",
    "TunerMeasurement",
    "choices_by_size",
    "example_plugin_exports",
    "plugin_compatibility",
    "plugin_names_from_env",
    "tuner_api_versions",
    "write_tuner_config",
    "write_tuner_perf_csv",
]

#: Names the example plugin parses (plugin.c parseCollType / parseAlgorithm / parseProtocol).
PLUGIN_COLLECTIVES = ("broadcast", "reduce", "allgather", "reducescatter", "allreduce")
PLUGIN_ALGORITHMS = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat")
PLUGIN_PROTOCOLS = ("ll", "ll128", "simple")
#: ``max_bytes`` that covers every size: plugin.c reads it with strtoull into a size_t.
SIZE_MAX = 2**64 - 1
#: plugin.c MAX_LINE_LENGTH is 256, read by fgets: at most 255 bytes including the newline.
MAX_LINE_BYTES = 255

#: The CSV header scripts/optimize_config.py reads (its README and sample_performance_data.csv).
PERF_CSV_COLUMNS = ("collective", "size_bytes", "algorithm", "protocol", "channels", "nodes", "ranks",
                    "pipeOps", "regBuff", "cost_metric", "bandwidth_gbps", "latency_us")

# NCCL_ALGO / NCCL_PROTO token (lower case; NCCL compares case-insensitively) -> plugin name.
_ALGO_TO_PLUGIN = {"tree": "tree", "ring": "ring", "collnetdirect": "collnet_direct",
                   "collnetchain": "collnet_chain", "nvls": "nvls", "nvlstree": "nvls_tree", "pat": "pat"}
_PROTO_TO_PLUGIN = {"ll": "ll", "ll128": "ll128", "simple": "simple"}

# NCCL source tree version -> tuner API versions NCCL core loads (src/plugin/tuner.cc; before
# 2.26 src/misc/tuner.cc), read from the NCCL tags. The newest is tried first.
_CORE_TUNER_API = (
    ((2, 32, 0), (7, 6, 5, 4, 3, 2)),  # NCCL 2.32 release notes: tuner API v7; its source not read here
    ((2, 30, 0), (6, 5, 4, 3, 2)),
    ((2, 28, 0), (5, 4, 3, 2)),
    ((2, 24, 0), (4, 3, 2)),
    ((2, 22, 0), (3, 2)),
    ((2, 21, 0), (2,)),
    ((2, 19, 0), (1,)),
)
# NCCL source version -> API versions the CSV example plugin of that source exports.
_EXAMPLE_EXPORTS = (
    ((2, 30, 0), (6, 5)),
    ((2, 28, 0), (5,)),
    ((2, 27, 5), (4,)),
)


@dataclass(frozen=True)
class TunerMeasurement:
    """One screened time for the tuner CSV: a collective at one size under one algorithm,
    protocol and channel count (plugin names; ``channels`` -1 when the set did not fix it),
    ``time_us`` in microseconds and ``busbw_GBps`` in GB/s. ``nodes``/``ranks``/``pipe_ops``/
    ``reg_buff`` are -1 (any) unless known. ``algorithm``/``protocol`` None mean "NCCL's own
    choice" (the untuned set): such a measurement cannot be written to the CSV."""

    collective: str
    size_bytes: int
    algorithm: str | None
    protocol: str | None
    channels: int
    time_us: float
    busbw_GBps: float
    nodes: int = -1
    ranks: int = -1
    pipe_ops: int = -1
    reg_buff: int = -1


@dataclass(frozen=True)
class TunerChoice:
    """One line of the tuner config: for ``collective`` messages of ``min_bytes`` to
    ``max_bytes`` (inclusive) use ``algorithm``/``protocol`` on ``channels`` channels (-1: the
    plugin's default, which is one channel, see the module docstring). ``note`` becomes a comment
    line above it (why this choice)."""

    collective: str
    min_bytes: int
    max_bytes: int
    algorithm: str
    protocol: str
    channels: int
    nodes: int = -1
    ranks: int = -1
    pipe_ops: int = -1
    reg_buff: int = -1
    note: str = ""

    def line(self) -> str:
        """The CSV line the plugin parses (10 fields, no spaces)."""
        return ",".join(str(v) for v in (self.collective, self.min_bytes, self.max_bytes, self.algorithm,
                                         self.protocol, self.channels, self.nodes, self.ranks,
                                         self.pipe_ops, self.reg_buff))


def plugin_names_from_env(env: Mapping[str, str]) -> tuple[str, str, int] | None:
    """(algorithm, protocol, channels) in plugin names for an NCCL environment set, or None.

    A set is expressible when NCCL_ALGO and NCCL_PROTO each name exactly one algorithm /
    protocol for every collective (no lists, no ``^`` exclusions, no per-collective syntax):
    the plugin chooses one (algorithm, protocol) pair per line. ``channels`` is
    NCCL_MAX_NCHANNELS (or NCCL_MIN_NCHANNELS when they are equal), -1 when unset. Note the
    difference: NCCL_MAX_NCHANNELS caps the channels NCCL then trims for small messages, while
    the plugin's count is used as is for every size of its range (NCCL ``src/enqueue.cc``
    ``ncclGetAlgoInfo``).
    """
    algo = env.get("NCCL_ALGO", "").strip().lower()
    proto = env.get("NCCL_PROTO", "").strip().lower()
    if algo not in _ALGO_TO_PLUGIN or proto not in _PROTO_TO_PLUGIN:
        return None
    channels = -1
    if "NCCL_MAX_NCHANNELS" in env:
        channels = strtoll(env["NCCL_MAX_NCHANNELS"])[0]
    elif "NCCL_MIN_NCHANNELS" in env:
        channels = strtoll(env["NCCL_MIN_NCHANNELS"])[0]
    return _ALGO_TO_PLUGIN[algo], _PROTO_TO_PLUGIN[proto], channels if channels > 0 else -1


def _check_names(collective: str, algorithm: str, protocol: str, what: str) -> None:
    if collective not in PLUGIN_COLLECTIVES:
        raise ValueError(f"{what}: collective {collective!r} is not one the example plugin parses "
                         f"({', '.join(PLUGIN_COLLECTIVES)}); it would silently become allreduce")
    if algorithm not in PLUGIN_ALGORITHMS:
        raise ValueError(f"{what}: algorithm {algorithm!r} is not one of {', '.join(PLUGIN_ALGORITHMS)}; "
                         "the plugin would silently use ring")
    if protocol not in PLUGIN_PROTOCOLS:
        raise ValueError(f"{what}: protocol {protocol!r} is not one of {', '.join(PLUGIN_PROTOCOLS)}; "
                         "the plugin would silently use simple")


def _atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename: never half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_tuner_perf_csv(measurements: Iterable[TunerMeasurement], path: str | Path) -> list[str]:
    """Write ``measurements`` as the CSV ``scripts/optimize_config.py`` reads; returns notes.

    Columns: :data:`PERF_CSV_COLUMNS`. ``latency_us`` is the screened time (lower is better,
    the script's default metric), ``bandwidth_gbps`` the bus bandwidth, and ``cost_metric``
    (read by no code of the script) repeats the time. Measurements without an explicit
    algorithm and protocol (NCCL's own choice) cannot be rows: they are left out and each such
    skip is listed in the returned notes. Raises ValueError for names the plugin does not know
    or a size below 0. The file is replaced atomically.
    """
    notes: list[str] = []
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(PERF_CSV_COLUMNS)
    for m in measurements:
        if m.algorithm is None or m.protocol is None:
            notes.append(f"{m.collective} {m.size_bytes} B: NCCL's own choice ({m.time_us:.2f} us) has no "
                         "algorithm/protocol to write; left out of the CSV")
            continue
        _check_names(m.collective, m.algorithm, m.protocol, f"measurement at {m.size_bytes} B")
        if m.size_bytes < 0:
            raise ValueError(f"size_bytes must be >= 0, got {m.size_bytes}")
        writer.writerow((m.collective, m.size_bytes, m.algorithm, m.protocol, m.channels, m.nodes, m.ranks,
                         m.pipe_ops, m.reg_buff, f"{m.time_us:.3f}", f"{m.busbw_GBps:.3f}", f"{m.time_us:.3f}"))
    _atomic_write(Path(path), buf.getvalue())
    return notes


def choices_by_size(measurements: Sequence[TunerMeasurement]) -> tuple[list[TunerChoice], list[str]]:
    """The fastest measurement at each screened size, as size ranges: (choices, notes).

    Ranges are built like ``scripts/optimize_config.py`` (``auto_determine_size_ranges``: the first
    from 0, one per measured size, adjacent equal choices merged) with two differences: the
    boundary between two measured sizes is their geometric mean, not the arithmetic midpoint (a
    14 KB decode size and a 28 MB prefill size would otherwise hand the decode choice, often LL,
    to every message up to 14 MB), and the last range runs to :data:`SIZE_MAX`, so no larger
    message falls to the plugin's one-channel default. Screen intermediate sizes to place the
    boundary by measurement instead. A size whose fastest
    measurement is NCCL's own choice gets no line (said in the notes). One collective and one
    (nodes, ranks) per call.
    """
    groups = {(m.collective, m.nodes, m.ranks, m.pipe_ops, m.reg_buff) for m in measurements}
    if len(groups) > 1:
        raise ValueError(f"one collective and topology per call, got {sorted(groups)}")
    by_size: dict[int, TunerMeasurement] = {}
    for m in measurements:
        best = by_size.get(m.size_bytes)
        if best is None or m.time_us < best.time_us:
            by_size[m.size_bytes] = m
    sizes = sorted(by_size)
    choices: list[TunerChoice] = []
    notes: list[str] = []
    for i, size in enumerate(sizes):
        lo = 0 if i == 0 else isqrt(sizes[i - 1] * size) + 1
        hi = SIZE_MAX if i == len(sizes) - 1 else isqrt(size * sizes[i + 1])
        m = by_size[size]
        if m.algorithm is None or m.protocol is None:
            notes.append(f"{lo}-{hi} B: NCCL's own choice was fastest at {size} B; no line written")
            continue
        note = f"fastest at {size} B: {m.time_us:.2f} us"
        prev = choices[-1] if choices else None
        if (prev is not None and prev.max_bytes + 1 == lo
                and (prev.algorithm, prev.protocol, prev.channels) == (m.algorithm, m.protocol, m.channels)):
            choices[-1] = TunerChoice(prev.collective, prev.min_bytes, hi, prev.algorithm, prev.protocol,
                                      prev.channels, prev.nodes, prev.ranks, prev.pipe_ops, prev.reg_buff,
                                      f"{prev.note}; {note}")
            continue
        choices.append(TunerChoice(m.collective, lo, hi, m.algorithm, m.protocol, m.channels, m.nodes, m.ranks,
                                   m.pipe_ops, m.reg_buff, note))
    return choices, notes


def _comment_lines(text: str) -> list[str]:
    """``text`` as ``# `` comment lines each shorter than the plugin's 256-byte line buffer."""
    lines: list[str] = []
    for paragraph in text.splitlines() or [""]:
        words, line = paragraph.split(), "#"
        for word in words:
            if len(line) + 1 + len(word) > MAX_LINE_BYTES - 1:
                lines.append(line)
                line = "#"
            line += " " + word[:MAX_LINE_BYTES - 4]
        lines.append(line)
    return lines


def write_tuner_config(choices: Sequence[TunerChoice], path: str | Path, header: str = "") -> list[str]:
    """Write ``choices`` as an example-plugin config file (NCCL_TUNER_CONFIG_FILE); returns notes.

    Each choice becomes one 10-field line (``collective,min,max,algorithm,protocol,channels,
    nNodes,nRanks,numPipeOps,regBuff``), preceded by its note as a comment; ``header`` becomes
    the leading comment. The file only takes effect when the example plugin is built and loaded
    with ``NCCL_TUNER_PLUGIN`` (and NCCL_TUNER_CONFIG_FILE points here): see the module
    docstring. Raises ValueError for a name the plugin does not know, ``min_bytes`` >
    ``max_bytes``, sizes outside 0..SIZE_MAX, overlapping ranges of the same collective and
    topology (the plugin would silently take the first), or a line of 256 bytes or more. The
    notes list what the plugin will do that a reader may not expect: sizes without a line and
    lines with channels -1 run on one channel. The file is replaced atomically.
    """
    lines = _comment_lines(header) if header else []
    groups: dict[tuple[str, int, int, int, int], list[TunerChoice]] = {}
    for c in choices:
        _check_names(c.collective, c.algorithm, c.protocol, f"choice {c.line()}")
        if not 0 <= c.min_bytes <= c.max_bytes <= SIZE_MAX:
            raise ValueError(f"choice {c.line()}: need 0 <= min_bytes <= max_bytes <= {SIZE_MAX}")
        if c.channels == 0 or c.channels < -1:
            raise ValueError(f"choice {c.line()}: channels must be a positive count or -1")
        groups.setdefault((c.collective, c.nodes, c.ranks, c.pipe_ops, c.reg_buff), []).append(c)
        if c.note:
            lines.extend(_comment_lines(c.note))
        line = c.line()
        if len(line) + 1 > MAX_LINE_BYTES:
            raise ValueError(f"choice line of {len(line)} bytes exceeds the plugin's line buffer: {line}")
        lines.append(line)
    notes: list[str] = []
    for (collective, *_), group in groups.items():
        group = sorted(group, key=lambda c: c.min_bytes)
        for a, b in pairwise(group):
            if b.min_bytes <= a.max_bytes:
                raise ValueError(f"ranges overlap for {collective}: {a.line()} and {b.line()}")
        edges = [(0, group[0].min_bytes - 1)] if group[0].min_bytes > 0 else []
        edges += [(a.max_bytes + 1, b.min_bytes - 1) for a, b in pairwise(group)
                  if b.min_bytes > a.max_bytes + 1]
        if group[-1].max_bytes < SIZE_MAX:
            edges.append((group[-1].max_bytes + 1, SIZE_MAX))
        for lo, hi in edges:
            notes.append(f"{collective} {lo}-{hi} B has no line: NCCL picks the algorithm and protocol, but the "
                         "example plugin returns 1 channel, so those collectives run on one channel")
        for c in group:
            if c.channels == -1:
                notes.append(f"{collective} {c.min_bytes}-{c.max_bytes} B has channels -1: the example plugin then "
                             "keeps its default of 1 channel, not NCCL's count")
    uncovered = [c for c in PLUGIN_COLLECTIVES if c not in {key[0] for key in groups}]
    if uncovered:
        notes.append(f"no line for {', '.join(uncovered)}: with the example plugin loaded these collectives "
                     "(e.g. the TP all-gather of logits) run on one channel")
    _atomic_write(Path(path), "\n".join(lines) + "\n")
    return notes


def _version(version: str | Sequence[int]) -> tuple[int, ...]:
    if isinstance(version, str):
        parts = version.strip().lstrip("v").split("+")[0].split("-")[0].split(".")
        return tuple(int(p) for p in parts[:3] if p.isdigit())
    return tuple(version)


def tuner_api_versions(nccl_version: str | Sequence[int]) -> tuple[int, ...]:
    """Tuner plugin API versions an NCCL release loads, newest first; () before 2.19.

    From NCCL's tuner loader (``src/plugin/tuner.cc`` ``ncclTunerPluginLoad``, ``src/misc/tuner.cc``
    before 2.26) at each release tag: 2.19-2.20 v1; 2.21 v2; 2.22-2.23 v2-v3; 2.24-2.27 v2-v4;
    2.28-2.29 v2-v5; 2.30-2.31 v2-v6 (v6 adds ``getChunkSize``; newest tag read: 2.30.7); 2.32 v7
    (a fifth compute-capability row of the cost constants; from NCCL 2.32's release notes, its
    loader assumed to keep the older versions as every earlier release did).
    """
    v = _version(nccl_version)
    for first, apis in _CORE_TUNER_API:
        if v >= first:
            return apis
    return ()


def example_plugin_exports(nccl_source_version: str | Sequence[int]) -> tuple[int, ...]:
    """API versions the CSV example plugin built from that NCCL source exports; () when that
    source has no CSV example (before 2.27.5). 2.27.5-2.27.7 v4; 2.28-2.29 v5; 2.30 v6 and v5."""
    v = _version(nccl_source_version)
    for first, apis in _EXAMPLE_EXPORTS:
        if v >= first:
            return apis
    return ()


def plugin_compatibility(nccl_version: str | Sequence[int]) -> str:
    """One sentence for the report: which tuner APIs this NCCL loads and which NCCL source's
    example plugin it can use."""
    v = _version(nccl_version)
    shown = ".".join(str(p) for p in v)
    apis = tuner_api_versions(v)
    if not apis:
        return f"NCCL {shown} loads no tuner plugin (tuner plugins start with NCCL 2.19)."
    usable = [src for src, exports in (("2.27.5-2.27.7", (4,)), ("2.28-2.29", (5,)), ("2.30+", (6, 5)))
              if set(exports) & set(apis)]
    text = f"NCCL {shown} loads tuner API " + ", ".join(f"v{a}" for a in apis) + "."
    if usable:
        return text + " Build the example plugin from NCCL " + " or ".join(usable) + " sources."
    return text + (" No NCCL release's CSV example plugin (2.27.5+, API v4+) fits it: "
                   "upgrade NCCL or use global variables.")
