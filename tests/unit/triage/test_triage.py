"""The triage (tuner/triage) on NcclMachine objects built directly, in NCCL's line formats."""

from tuner.nccl.machine import (
    CpuNode,
    NcclMachine,
    P2pLevelInForce,
    PeerTransport,
    SearchFallback,
    SearchGraph,
    TopoLink,
)
from tuner.nccl.types import NcclVersion
from tuner.triage import Triage, triage
from tuner.triage.findings import NO_GRAPH
from tuner.triage.model import COMBINED

V = NcclVersion(2, 27, 3)
FALLBACK_LINE = "host:1:1 [0] NCCL INFO Could not find a path for pattern 4, falling back to simple order"
SYS_LINE = "host:1:1 [0] NCCL INFO + SYS[16.0] - CPU/0-1"


def _links_two_sockets() -> tuple[TopoLink, ...]:
    out = [TopoLink("CPU/0-0", "CPU/0-1", "SYS", 16.0, SYS_LINE),
           TopoLink("CPU/0-1", "CPU/0-0", "SYS", 16.0, "host:1:1 [0] NCCL INFO + SYS[16.0] - CPU/0-0")]
    for r in range(8):
        cpu = "CPU/0-0" if r < 4 else "CPU/0-1"
        out.append(TopoLink(cpu, f"GPU/0-{r}000", "PCI", 24.0,
                            f"host:1:1 [0] NCCL INFO + PCI[24.0] - GPU/0-{r}000 ({r})"))
    return tuple(out)


def _peers(shm_cross: bool) -> tuple[PeerTransport, ...]:
    out = []
    for r in range(8):
        d = (r + 1) % 8
        cross = (r < 4) != (d < 4)
        kind = "SHM" if cross and shm_cross else "P2P"
        via = "SHM/direct/direct" if kind == "SHM" else "P2P/CUMEM"
        out.append(PeerTransport(0, r, d, kind, via, f"host:1:1 [{r}] NCCL INFO Channel 00/0 : {r}[{r}] -> "
                                                     f"{d}[{d}] via {via}"))
    return tuple(out)


def machine(*, fallback: bool, shm: bool, level: str | None = "PXB", bw: float = 24.0, nch: int = 2,
            sys_bw: float = 16.0) -> NcclMachine:
    cpus = (CpuNode("CPU/0-0", 0, "x86", "AMD", 0, "CPU/0-0 (1/2/-1)"), CpuNode("CPU/0-1", 1, "x86", "AMD", 0, ""))
    links = tuple(lk if lk.kind != "SYS" else TopoLink(lk.src, lk.dst, "SYS", sys_bw, lk.line)
                  for lk in _links_two_sockets())
    if fallback:
        graph = SearchGraph(4, 0, 1, 0.1, 0.1, "SYS", "SYS", 0,
                            "NCCL INFO Pattern 4, crossNic 0, nChannels 1, bw 0.100000/0.100000, type SYS/SYS, "
                            "sameChannels 0")
        fells = (SearchFallback(4, "INFO", FALLBACK_LINE),)
    else:
        graph = SearchGraph(4, 0, nch, bw, bw, "SYS", "PIX", 1,
                            f"NCCL INFO Pattern 4, crossNic 0, nChannels {nch}, bw {bw:f}/{bw:f}, type SYS/PIX, "
                            "sameChannels 1")
        fells = ()
    return NcclMachine(cpus, tuple(f"GPU/0-{r}000" for r in range(8)), links, (graph,), fells, _peers(shm),
                       P2pLevelInForce(level, "default", "NCCL 2.27 default: PXB on every CPU (src/graph/paths.cc)"),
                       None, 8)


def test_fallback_with_shm_pairs_proposes_the_combined_fix_first():
    t = triage(machine(fallback=True, shm=True), version=V, nranks=8, decode_bytes=[14336])
    kinds = [f.kind for f in t.findings]
    assert kinds == ["fallback", "inter-cpu", "shm-by-level"]
    assert not t.model_right
    fb = t.findings[0]
    assert "falling back to simple order" in fb.sentence and "src/graph/search.cc" in fb.sentence
    assert "Ring/Simple 339 us at 14336 B" in fb.cost and "Ring/LL" in fb.cost
    assert "AMD_BW" in t.findings[1].sentence
    shm = t.findings[2]
    assert "3->4" in shm.sentence and "7->0" in shm.sentence and "NCCL_P2P_LEVEL=SYS" in shm.sentence
    sets = t.fix_sets()
    assert sets[0].env == {"NCCL_P2P_LEVEL": "SYS", "NCCL_PROTO": "LL"}
    assert sets[0].name == "fix: fallback"  # the combination equals the fallback's own fix: deduplicated
    assert [s.env for s in sets] == [{"NCCL_P2P_LEVEL": "SYS", "NCCL_PROTO": "LL"}, {"NCCL_P2P_LEVEL": "SYS"}]
    assert "hang" in sets[1].reason


def test_prefill_adds_the_channel_floor_to_the_fallback_fix():
    t = triage(machine(fallback=True, shm=False), version=V, nranks=8, decode_bytes=[14336],
               prefill_bytes=28 << 20)
    assert t.fix_sets()[0].env == {"NCCL_PROTO": "LL", "NCCL_MIN_NCHANNELS": "8"}


def test_shm_across_sockets_without_fallback_names_sys():
    t = triage(machine(fallback=False, shm=True, sys_bw=40.0), version=V, nranks=8, decode_bytes=[14336])
    assert [f.kind for f in t.findings] == ["shm-by-level"]
    assert [s.env for s in t.fix_sets()] == [{"NCCL_P2P_LEVEL": "SYS"}]


def test_level_that_covers_the_path_is_not_blamed():
    t = triage(machine(fallback=False, shm=True, level="SYS", sys_bw=40.0), version=V, nranks=8,
               decode_bytes=[14336])
    assert t.model_right and t.fix_sets() == []
    t = triage(machine(fallback=False, shm=True, sys_bw=40.0), version=V, nranks=8, decode_bytes=[14336],
               p2p_disabled=True)
    assert t.model_right


def test_model_right_says_so_in_one_line():
    t = triage(machine(fallback=False, shm=False, sys_bw=40.0), version=V, nranks=8, decode_bytes=[14336])
    assert t.model_right and not t.findings
    assert t.lines()[0].startswith("NCCL's model of this machine looks right: ")
    assert t.lines()[0].endswith("the night goes on as planned")
    assert "Ring/LL" in t.summary


def test_simple_at_decode_on_a_slow_graph():
    t = triage(machine(fallback=False, shm=False, bw=0.2, nch=1, sys_bw=40.0), version=V, nranks=8,
               decode_bytes=[14336])
    assert [f.kind for f in t.findings] == ["simple-at-decode"]
    assert t.fix_sets()[0].env == {"NCCL_PROTO": "LL"}


def test_no_graph_lines_said_once():
    assert triage(None, version=V, nranks=8).lines() == [NO_GRAPH]


def test_round_trip_and_combined_name():
    t = triage(machine(fallback=True, shm=True), version=V, nranks=8, decode_bytes=[14336],
               prefill_bytes=28 << 20)
    assert Triage.from_dict(t.to_dict()) == t
    sets = t.fix_sets()
    assert len({tuple(sorted(s.env.items())) for s in sets}) == len(sets)
    assert all(s.name == COMBINED or s.name.startswith("fix: ") for s in sets)


def test_no_decode_size_is_said():
    t = triage(machine(fallback=True, shm=False), version=V, nranks=8)
    assert "from 4 KiB up" in t.findings[0].cost
    assert any("No decode allreduce size" in n for n in t.notes)


def test_the_bound_counts_what_the_space_can_hold_of_each_fix():
    """fix_bound: one per finding kind whose fix the space holds (the fallback and Simple at
    decode never meet), their combination, one per graph/topology file; 0 when none."""
    from tuner.triage import fix_bound

    assert fix_bound({"NCCL_ALGO": ("unset", "Ring")}).most == 0
    assert fix_bound({"NCCL_PROTO": ("unset", "LL", "Simple")}).most == 1
    both = fix_bound({"NCCL_PROTO": ("unset", "LL"), "NCCL_P2P_LEVEL": ("unset", "PXB", "PHB", "SYS")})
    assert (both.most, both.combined) == (3, True)
    assert "NCCL_P2P_LEVEL=PHB/SYS" in both.text() and both.text().startswith("at most 3 here: ")
    files = fix_bound({"NCCL_GRAPH_FILE": ("unset", "/a.xml"), "NCCL_TOPO_FILE": ("unset", "/t.xml")})
    assert (files.most, files.files) == (2, 2)
    assert fix_bound({"NCCL_MIN_NCHANNELS": ("unset", "16"), "NCCL_P2P_LEVEL": ("unset", "PXB")}).most == 1


def test_every_fix_proposed_is_one_the_bound_knows():
    """FIX_VALUES (the dry run's bound) holds every value the triage proposes, by finding kind."""
    from tuner.triage.findings import FIX_VALUES

    cases = [triage(machine(fallback=True, shm=True), version=V, nranks=8, decode_bytes=[14336],
                    prefill_bytes=28 << 20),
             triage(machine(fallback=False, shm=True, sys_bw=40.0), version=V, nranks=8, decode_bytes=[14336]),
             triage(machine(fallback=False, shm=False, bw=0.2, nch=1, sys_bw=40.0), version=V, nranks=8,
                    decode_bytes=[14336])]
    seen = 0
    for t in cases:
        for finding in t.findings:
            for fix in finding.fixes:
                for var, value in fix.env.items():
                    assert value in FIX_VALUES[finding.kind][var], (finding.kind, var, value)
                    seen += 1
    assert seen >= 5
