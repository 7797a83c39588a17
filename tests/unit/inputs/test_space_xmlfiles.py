"""NCCL_GRAPH_FILE / NCCL_TOPO_FILE in a search space: paths made absolute against the space file's
folder and read as NCCL's XML on load (so --dry-run checks them too), every problem in one InputError."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.helpers import ROOT
from tuner.errors import ExitCode, InputError
from tuner.inputs.space import load_space
from tuner.nccl import read_xml_file

XML = ROOT / "tests" / "fixtures" / "nccl_xml"
GRAPH_ACCEPTS = 'the path of an NCCL graph XML file (root <graphs version="1">'


def _space(tmp_path: Path, values: str, var: str = "NCCL_GRAPH_FILE") -> Path:
    path = tmp_path / "space.toml"
    path.write_text(f"[variables.{var}]\nvalues = {values}\n")
    return path


def _refused(path: Path) -> InputError:
    with pytest.raises(InputError) as info:
        load_space(path)
    assert info.value.exit_code == ExitCode.BAD_INPUT == 2
    return info.value


def test_relative_path_is_resolved_against_the_space_file(tmp_path, monkeypatch):
    (tmp_path / "graphs").mkdir()
    shutil.copy(XML / "ring8.xml", tmp_path / "graphs" / "ring8.xml")
    monkeypatch.chdir(ROOT)  # not the space's folder: the path is still found
    space = load_space(_space(tmp_path, '["graphs/ring8.xml", "unset"]'))
    want = str(tmp_path / "graphs" / "ring8.xml")
    assert space.variables == {"NCCL_GRAPH_FILE": (want,)}
    assert space.files() == {"NCCL_GRAPH_FILE": (want,)}
    assert space.choices()["NCCL_GRAPH_FILE"] == ("unset", want)


def test_absolute_path_and_topology_kept_as_given(tmp_path):
    graph, topo = str(XML / "ring8.xml"), str(XML / "topo8-2cpu.xml")
    path = tmp_path / "space.toml"
    path.write_text(f'[variables.NCCL_GRAPH_FILE]\nvalues = ["{graph}"]\n'
                    f'[[presets]]\nname = "topo"\nenv = {{ NCCL_TOPO_FILE = "{topo}" }}\n')
    space = load_space(path)
    assert space.variables["NCCL_GRAPH_FILE"] == (graph,)
    assert space.presets[0].env == {"NCCL_TOPO_FILE": topo}
    assert space.files() == {"NCCL_GRAPH_FILE": (graph,), "NCCL_TOPO_FILE": (topo,)}


def test_missing_file_names_the_file_the_key_the_value_and_what_is_accepted(tmp_path):
    err = _refused(_space(tmp_path, '["nowhere/ring.xml"]'))
    assert len(err.problems) == 1
    assert str(err) == (f"{tmp_path / 'space.toml'}: key 'variables.NCCL_GRAPH_FILE.values[0]' has value "
                        f"\"nowhere/ring.xml\" (file not found: {tmp_path / 'nowhere' / 'ring.xml'}); accepted: "
                        + GRAPH_ACCEPTS + " with <graph> children, as NCCL_GRAPH_DUMP_FILE writes it; in a space "
                        "file, relative to that file).")


def test_not_xml_and_wrong_root_and_a_folder_every_problem_at_once(tmp_path):
    (tmp_path / "bad.xml").write_text("graphs, not xml")
    shutil.copy(XML / "topo8-2cpu.xml", tmp_path / "topo.xml")
    (tmp_path / "dir.xml").mkdir()
    err = _refused(_space(tmp_path, '["bad.xml", "topo.xml", "dir.xml"]'))
    said = [p.why for p in err.problems]
    assert len(said) == 3
    assert "is not XML" in said[0]
    assert "has root <system>; NCCL_GRAPH_FILE needs <graphs version=\"1\">" in said[1]
    assert "is a folder" in said[2]
    assert [p.key for p in err.problems] == [f"variables.NCCL_GRAPH_FILE.values[{i}]" for i in range(3)]


def test_preset_with_a_bad_topology_file(tmp_path):
    path = tmp_path / "space.toml"
    path.write_text('[[presets]]\nname = "t"\nenv = { NCCL_TOPO_FILE = "ring8.xml" }\n')
    shutil.copy(XML / "ring8.xml", tmp_path / "ring8.xml")
    err = _refused(path)
    assert err.key == "presets[0].env.NCCL_TOPO_FILE"
    assert "needs <system version=\"1\">" in err.why and "Ignoring element graphs" in err.why
    assert err.accepted.startswith('the path of an NCCL topology XML file (root <system version="1">')


@pytest.mark.parametrize(("text", "why"), [
    ('<graphs><graph/></graphs>', "<graphs> has no version attribute"),
    ('<graphs version="2"><graph/></graphs>', "NCCL needs version 1"),
    ('<graphs version="1"></graphs>', "holds no <graph>"),
    ('<graphs version="1"><graph id="0" pattern="4"/></graphs>', "graph 0 lacks crossnic, nchannels"),
    ('<?xml version="1.0"?>\n<graphs version="1"/>', "XML declaration"),
    ('<graphs version="1">\n\t<graph/>\n</graphs>', "skips only spaces and line ends"),
    ('<graphs version="1"><graph id="0" pattern="4" crossnic="0" nchannels="1" speedintra="x" speedinter="1" '
     'typeintra="SYS" typeinter="PIX" samechannels="1"/></graphs>', 'speedintra="x" is not a number'),
    ('<graphs version="1"><graph id="0" pattern="4" crossnic="0" nchannels="1" speedintra="1" speedinter="1" '
     'typeintra="SYS" typeinter="PIX" samechannels="1"><channel><gpu/></channel></graph></graphs>',
     "<gpu> has no dev"),
])
def test_graph_files_nccl_would_refuse(tmp_path, text, why):
    (tmp_path / "g.xml").write_text(text)
    got, said = read_xml_file("NCCL_GRAPH_FILE", tmp_path / "g.xml")
    assert got is None and said is not None and why in said, said
    err = _refused(_space(tmp_path, '["g.xml"]'))
    assert why in err.why


def test_good_files_read_as_nccl_reads_them():
    graph, why = read_xml_file("NCCL_GRAPH_FILE", XML / "ring8.xml")
    assert why is None and graph is not None and graph.root == "graphs"
    ring = graph.ring
    assert ring is not None and (ring.pattern, ring.nchannels, ring.speed_intra, ring.type_intra) == (4, 2, 20.0, "SYS")
    assert ring.channels == (tuple(range(8)),) * 2
    topo, why = read_xml_file("NCCL_TOPO_FILE", XML / "topo8-2cpu.xml")
    assert why is None and topo is not None and topo.cpus == 2 and topo.graphs == ()


def test_server_env_relative_topology_is_only_a_notice():
    from tuner.nccl import check_value, value_warnings

    assert check_value("NCCL_TOPO_FILE", "topo.xml") is None
    assert "relative path" in value_warnings("NCCL_TOPO_FILE", "topo.xml")[0]
    assert "init fails" in (check_value("NCCL_GRAPH_FILE", "") or "")
