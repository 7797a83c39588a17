"""NCCL's init diagnostics (2.31+): when a baseline asks for them, and their P2P check's lines read
back, in the forms src/diagnostics/p2p.cc prints (ncclDiagP2pReport, ncclDiagP2pReportSummary),
through the log parser as a server's stdout carries them."""

from __future__ import annotations

from tuner.nccl import DIAGNOSTICS_VAR, NcclVersion, diagnostics_env, parse_log, read_diag

OK = "node0:24563 NCCL DIAG [OK]   p2p: verified P2P access in both directions between every GPU pair (2 peer accesses)"
PARTIAL = "node0:24563 NCCL DIAG [INFO] p2p: only 1/2 GPU-to-GPU peer accesses passed verification"
EDGE = ("node0:24563 NCCL DIAG [INFO] p2p: write mismatch srcRank=0 srcCudaDev=0 srcNvmlDev=0 dstRank=1 dstCudaDev=1 "
        "dstNvmlDev=1 path=PHB handle=CUMEM_POSIX_FD expected=0x00d1a6000000001 got=0x0000000000000000 "
        "verify=0x0000000000000000; check the affected pair with 'nvidia-smi topo -p2p p', then check Linux "
        "bare-metal IOMMU mode and PCIe ACS settings")
IMPORT = ("node0:24563 NCCL DIAG [INFO] p2p: peer-memory import failed srcRank=1 srcCudaDev=1 srcNvmlDev=3 dstRank=0 "
          "dstCudaDev=0 dstNvmlDev=2 path=PXB handle=LEGACY_CUDA_IPC reason=import; check CUDA IPC support, GPU "
          "visibility, and process or container isolation")


def test_asked_for_unless_the_version_is_known_to_be_older():
    assert diagnostics_env(None) == {DIAGNOSTICS_VAR: "1"}  # an older NCCL ignores a name it does not declare
    assert diagnostics_env(NcclVersion(2, 31, 0)) == {"NCCL_RUN_DIAGNOSTICS": "1"}
    assert diagnostics_env(NcclVersion(2, 32, 1)) == {"NCCL_RUN_DIAGNOSTICS": "1"}
    assert diagnostics_env(NcclVersion(2, 30, 9)) == {}
    assert diagnostics_env(NcclVersion(2, 21, 5)) == {}
    assert diagnostics_env(None, {"NCCL_RUN_DIAGNOSTICS": "0"}) == {}  # the user's own setting stands


def test_the_p2p_lines_read_through_the_log_parser():
    parsed = parse_log(["node0:24563 NCCL DIAG === NCCL Diagnostics ===", PARTIAL, EDGE, IMPORT,
                        "node0:24563 NCCL DIAG NCCL diagnostics completed in 245.3 ms across 2 ranks"])
    results = read_diag(parsed.diag)
    assert [r.kind for r in results] == ["partial", "edge", "edge"]  # the header and timing are no results
    assert (results[0].passed, results[0].tested) == (1, 2)
    edge = results[1]
    assert (edge.what, edge.src, edge.dst, edge.src_gpu, edge.dst_gpu, edge.path) == ("write mismatch", 0, 1, 0, 1, "PHB")
    assert edge.advice.startswith("check the affected pair with 'nvidia-smi topo -p2p p'")
    imp = results[2]
    assert (imp.what, imp.src_gpu, imp.dst_gpu, imp.path) == ("peer-memory import failed", 3, 2, "PXB")


def test_a_clean_check():
    [ok] = read_diag(parse_log([OK]).diag)  # host:pid and no device: DIAG_PRINT's own prefix
    assert (ok.kind, ok.passed, ok.tested) == ("ok", 2, 2)
    assert read_diag(["[INFO] net bw: 265.1/391.5/398.0 Gbit/s min/median/max cross-nic bw"]) == []


def test_diag_print_prefix_is_read_as_nccl_writes_it_wrapped_or_not():
    """DIAG_PRINT writes ``host:pid NCCL DIAG`` (no tid, no device: src/include/diagnostics_log.h);
    behind a vLLM worker's or torchrun's prefix it is the same line."""
    for line in (OK, f"(VllmWorker rank=0 pid=24563) {OK}", f"[rank0]:{OK}",
                 "h:1:2 [0] NCCL DIAG [OK]   p2p: verified P2P access in both directions between every GPU pair (2 peer accesses)"):
        parsed = parse_log([line])
        assert [r.kind for r in read_diag(parsed.diag)] == ["ok"], line
    assert parse_log([OK]).processes == {"node0:24563"}
