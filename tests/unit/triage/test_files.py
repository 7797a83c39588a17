"""The triage proposes the space's graph/topology files after the combined fix, only where they can help."""

from tests.unit.triage.test_triage import V, machine
from tuner.triage import Triage, triage
from tuner.triage.model import FILES

GRAPH = "/srv/graphs/ring8.xml"
TOPO = "/srv/topo/amd-2cpu.xml"


def test_graph_file_comes_right_after_the_combined_fix():
    t = triage(machine(fallback=True, shm=True), version=V, nranks=8, decode_bytes=[14336],
               files={"NCCL_GRAPH_FILE": [GRAPH]})
    assert [f.kind for f in t.findings] == ["fallback", "inter-cpu", "shm-by-level", FILES]
    assert "(3 findings)" in t.summary  # the user's files are not a finding about NCCL's model
    sets = t.fix_sets()
    assert sets[0].env == {"NCCL_P2P_LEVEL": "SYS", "NCCL_PROTO": "LL"}  # the combined fix first
    assert sets[1].name == "fix: graph file ring8.xml"
    assert sets[1].env == {"NCCL_GRAPH_FILE": GRAPH}  # never merged into the combination
    assert "src/graph/search.cc, ncclTopoCompute" in sets[1].reason and "skips its own search" in sets[1].reason
    assert sets[2].env == {"NCCL_P2P_LEVEL": "SYS"}
    said = t.findings[-1].sentence
    assert f"NCCL_GRAPH_FILE={GRAPH}" in said and "after the combined fix" in said
    assert Triage.from_dict(t.to_dict()) == t


def test_one_set_per_file_graph_then_topology():
    t = triage(machine(fallback=True, shm=False), version=V, nranks=8, decode_bytes=[14336],
               files={"NCCL_TOPO_FILE": [TOPO], "NCCL_GRAPH_FILE": [GRAPH, "/srv/graphs/two.xml", GRAPH]})
    names = [s.name for s in t.fix_sets()]
    assert names == ["fix: fallback", "fix: graph file ring8.xml", "fix: graph file two.xml",
                     "fix: topology file amd-2cpu.xml"]
    assert "src/graph/topo.cc, ncclTopoGetSystem" in t.fix_sets()[-1].reason


def test_inter_cpu_alone_is_enough_for_the_files():
    t = triage(machine(fallback=False, shm=False), version=V, nranks=8, decode_bytes=[14336],
               files={"NCCL_TOPO_FILE": [TOPO]})
    assert "inter-cpu" in [f.kind for f in t.findings]
    assert {"NCCL_TOPO_FILE": TOPO} in [s.env for s in t.fix_sets()]
    assert "inter-CPU bandwidth" in t.findings[-1].sentence


def test_no_file_without_a_space_offering_one_or_without_the_fallback():
    plain = triage(machine(fallback=True, shm=False), version=V, nranks=8, decode_bytes=[14336])
    assert FILES not in [f.kind for f in plain.findings]
    empty = triage(machine(fallback=True, shm=False), version=V, nranks=8, decode_bytes=[14336],
                   files={"NCCL_GRAPH_FILE": []})
    assert empty == plain
    right = triage(machine(fallback=False, shm=False, sys_bw=40.0), version=V, nranks=8, decode_bytes=[14336],
                   files={"NCCL_GRAPH_FILE": [GRAPH]})
    assert right.model_right and right.fix_sets() == []
    shm_only = triage(machine(fallback=False, shm=True, sys_bw=40.0), version=V, nranks=8, decode_bytes=[14336],
                      files={"NCCL_GRAPH_FILE": [GRAPH]})
    assert [s.env for s in shm_only.fix_sets()] == [{"NCCL_P2P_LEVEL": "SYS"}]
