"""The log parser on real NCCL INFO excerpts (tests/fixtures/nccl_logs, sources in SOURCES.md)."""

from pathlib import Path

from tuner.nccl import DecodeChoice, NcclVersion, ParsedLog, Topology, decode_effect, parse_log, topology_from_log
from tuner.nccl.decode import COPY_ENGINE, SYMMETRIC
from tuner.nccl.lines import read_line, strip_wrappers
from tuner.nccl.log import decode_choice

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "nccl_logs"


def parse_log_file(path: Path) -> ParsedLog:
    with open(path, encoding="utf-8", errors="replace") as f:
        return parse_log(f)


def parsed(name):
    return parse_log_file(LOGS / name)


def test_every_fixture_names_its_source():
    sources = (LOGS / "SOURCES.md").read_text()
    for log in LOGS.glob("*.log"):
        assert f"`{log.name}`" in sources


def test_prefixes():
    assert strip_wrappers("(VllmWorker rank=3 pid=12) x")[:2] == ("x", 3)
    assert strip_wrappers("(Worker_TP5 pid=12) x")[:2] == ("x", 5)
    assert strip_wrappers("(RayWorkerWrapper pid=539, ip=10.0.0.1) x [repeated 15x across cluster]") == ("x", None, 15)
    assert strip_wrappers("[2026-06-28 13:34:12 TP7] x")[:2] == ("x", 7)
    line = read_line("[2026-03-03 12:11:38] h:1:2 [1] transport/net_ib.cc:2453 NCCL WARN NET/IB: boom")
    assert line is not None and line.level == "WARN" and line.process == "h:1" and line.message == "NET/IB: boom"
    assert read_line("INFO 07-09 09:39:34 [pynccl.py:70] vLLM is using nccl==2.26.2") is None


def test_warn_with_the_function_2_30_7():
    # src/debug.cc at v2.30.7-1, ncclDebugLogV: "[%d] %s:%d (%s) NCCL WARN %s" (file, line, function)
    text = ("[2026-03-03 12:11:38] h:1:2 [1] enqueue.cc:2063 (topoGetAlgoInfo) NCCL WARN No algorithm/protocol "
            "available for function AllGather with datatype ncclBfloat16. NCCL_ALGO was set to Tree.")
    line = read_line(text)
    assert line is not None and line.level == "WARN" and line.process == "h:1" and line.dev == 1
    assert line.message.startswith("No algorithm/protocol available for function AllGather")
    parsed_log = parse_log([text])
    assert parsed_log.warnings and parsed_log.warnings[0].startswith("No algorithm/protocol available")


def test_2_19_bare_version_line_and_rings():
    p = parsed("nccl-2.19.3-init.log")
    assert p.nccl_version == NcclVersion(2, 19, 3) and p.cuda_version == "12.3"
    assert p.ranks == [0] and p.nranks == 1
    assert p.ring_lines[0] == "Channel 00/32 :    0" and len(p.ring_lines) == 3


def test_string_echo_has_no_trailing_period():
    p = parsed("nccl-2.19.3-socket-ifname.log")
    assert p.echoed("NCCL_SOCKET_IFNAME") == {"gpt-dev-ppt:65960": "lo", "gpt-dev-ppt:65959": "lo"}


def test_2_20_and_shm_transport():
    assert parsed("nccl-2.20.5-vllm-tp2.log").nccl_version == NcclVersion(2, 20, 5)
    p = parsed("nccl-2.20-pcie-shm.log")
    assert p.transport_kinds == {"SHM"} and len(p.processes) == 6


def test_2_21_vllm_version_and_nvswitch_topology_dump():
    p = parsed("nccl-2.21.5-vllm-ray-nvswitch.log")
    assert p.nccl_version == p.server_nccl_version == NcclVersion(2, 21, 5)
    assert p.nvlink_peers == {"NVS"}


def test_ray_folded_echoes_and_topology():
    p = parsed("nccl-ray-folded-echoes.log")
    assert p.folded and p.ranks == [6] and p.nranks == 8 and p.nnodes == 1
    assert p.echoed("NCCL_P2P_LEVEL") == {"vllm-0:539": "NVL"}
    assert p.echoed("NCCL_CUMEM_ENABLE") == {"vllm-0:539": "0"}  # "0." -> 0
    topo = topology_from_log(p)
    assert topo is not None and topo.link == "nvswitch" and topo.has_nvls and topo.nranks == 8


def test_unknown_variable_echo_and_transport_with_comm_suffix():
    p = parsed("nccl-ray-unknown-variable.log")
    assert p.echoed("NCCL_NCHANNELS_PER_PEER") == {"k8s17:581": "16"}
    assert p.transports == {"P2P/IPC"} and len(p.tree_lines) == 1


def test_per_operation_lines_by_format():
    p = parsed("nccl-2.21-trace-per-op.log")  # COLL line + TRACE "Algo 1 proto 0"
    op = p.operations[("Broadcast", 24)]
    assert (op.algorithm, op.protocol, op.channels) == ("Ring", "LL", None)
    p = parsed("nccl-2.2x-per-op-timed.log")  # 2.20-2.22: no collective name, MPI "[0] " prefix
    op = p.operations[("unknown", 262144)]
    assert (op.algorithm, op.protocol, op.count) == ("Tree", "LL128", 3)


def test_2_25_ctas_echoes():
    p = parsed("nccl-2.25.1-ctas.log")
    assert p.nccl_version == NcclVersion(2, 25, 1)
    assert set(p.echoed("NCCL_MAX_CTAS").values()) == {"16"} and len(p.echoed("NCCL_MIN_CTAS")) == 2


def test_2_27_init_lines():
    p = parsed("nccl-2.27.5-sglang-init.log")
    assert p.thread_thresholds == (8, 8, 64, 128, 8, 64, 512, 512)
    assert p.coll_channels == 16 and p.nvls_channels == 0 and p.nranks == 16
    assert p.ranks == list(range(8)) and p.transports == {"P2P/IPC"}


def test_2_27_operations_warnings_and_server_version():
    p = parsed("nccl-2.27.5-sglang-ops.log")
    assert p.server_nccl_version == NcclVersion(2, 27, 5) and p.nccl_version is None
    assert p.warnings and p.warnings[0].startswith("NET/IB: Got completion")
    op = p.operations[("AllReduce", 4)]
    assert op.count == 2 and set(op.choices) == {("Tree", "LL", 1), ("Ring", "Simple", 1)}
    assert p.echoed("NCCL_IB_DISABLE") == {"tpgds-aihub0007:177789": "0"}


def test_2_29_tuning_table():
    p = parsed("nccl-2.29.7-tuning.log")
    assert p.nccl_version == NcclVersion(2, 29, 7)
    t = p.tuning
    assert t is not None and set(t.entries) == {"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"}
    assert t.entries["AllReduce"][("Ring", "LL")] == (16.6, 1.2)
    assert t.entries["AllGather"][("PAT", "Simple")] == (17.6, 3.6)
    assert t.max_threads[("Ring", "Simple")] == 256 and t.max_threads[("NVLSTree", "Simple")] == 640
    assert len(t.entries["AllReduce"]) == 21
    algo, proto, time_us = t.best("AllReduce", 14336)
    assert (algo, proto) == ("Ring", "LL") and abs(time_us - (16.6 + 14336 / 1200)) < 1e-6
    assert t.time_us("AllReduce", "NVLS", "Simple", 14336) is None  # bandwidth 0: disabled


def test_decode_choice_prefers_the_operation_line():
    p = parsed("nccl-2.29.7-tuning.log")
    choice = decode_choice(p, 16384, "Broadcast")
    assert (choice.algorithm, choice.protocol) == ("Ring", "LL") and "per-operation" in choice.source
    choice = decode_choice(p, 14336)
    assert (choice.algorithm, choice.protocol) == ("Ring", "LL") and "TUNING table" in choice.source
    assert decode_choice(parsed("nccl-2.19.3-init.log"), 14336) is None


def test_pre_2_18_table_layout():
    t = parsed("nccl-old-latency-algbw-table.log").tuning
    assert t is not None and t.entries["Broadcast"][("Ring", "LL")] == (6.3, 0.8)
    assert t.max_threads[("CollNet", "Simple")] == 512


def test_lines_that_are_not_nccl_are_ignored():
    p = parse_log(["INFO 07-09 09:39:34 [pynccl.py:70] vLLM is using nccl==2.26.2", "hello", ""])
    assert p.info_lines == 0 and not p.processes and p.server_nccl_version == NcclVersion(2, 26, 2)


def test_pcie_only_message_sets_the_link():
    init = (LOGS / "nccl-2.27.5-sglang-init.log").read_text().splitlines()
    server = (LOGS.parent / "server_logs" / "vllm-0.8.5-pcie-custom-ar-disabled.log").read_text().splitlines()
    assert topology_from_log(parse_log(init)).link is None
    topo = topology_from_log(parse_log(init + server), gpu_arch=120)
    assert topo.link == "pcie" and topo.gpu_arch == 120 and not topo.has_nvls


# Per-operation lines of the symmetric kernels and the copy engine, in NCCL's own format:
# src/enqueue.cc ncclLaunchPrepare (v2.27.3-1), src/scheduler/symmetric_sched.cc
# ncclSymmetricTaskScheduler (v2.28.9-1 .. v2.30.7-1), src/enqueue.cc (v2.29.7-1) and
# src/ce_coll.cc scheduleCeCollTaskToPlan (v2.30.7-1).
SYM_227 = "h:1:1 [0] NCCL INFO AllReduce [Symmetric]: 14336 Bytes -> Kernel AllReduce_AGxLL_R nchannels 4 nthreads 512"
SYM_230 = ("h:1:1 [0] NCCL INFO AllReduce [Symmetric]: 14336 Bytes -> Kernel AllReduce_AGxLLMC_R nchannels 2 "
           "nthreads 640 nWorks 1")
CE_229 = "h:1:1 [0] NCCL INFO AllGather [Copy Engine]: 1048576 Bytes -> cudaMemcpy; CE synchronization with NVLS"
CE_HIER_230 = "h:1:1 [0] NCCL INFO AllGather [Hierarchical CE]: 2097152 Bytes -> RMA proxy + CE"


def test_symmetric_and_copy_engine_operations():
    small = "h:1:1 [0] NCCL INFO AllGather [Copy Engine]: 64 Bytes -> cudaMemcpy"
    p = parse_log([SYM_227, SYM_230, CE_229, CE_HIER_230, small])
    op = p.operations[("AllReduce", 14336)]
    assert set(op.choices) == {(SYMMETRIC, "AllReduce_AGxLL_R", 4), (SYMMETRIC, "AllReduce_AGxLLMC_R", 2)}
    assert p.operations[("AllGather", 1048576)].choices == {(COPY_ENGINE, "cudaMemcpy", None): 1}
    assert p.operations[("AllGather", 2097152)].protocol == "RMA proxy + CE"
    assert p.operations[("AllGather", 64)].algorithm == COPY_ENGINE
    choice = decode_choice(parse_log([SYM_230]), 14336)
    assert choice is not None and (choice.algorithm, choice.protocol) == (SYMMETRIC, "AllReduce_AGxLLMC_R")
    assert choice.source == "per-operation TUNING line"
    assert decode_choice(parse_log([CE_229]), 1048576, "AllGather").algorithm == COPY_ENGINE


def test_decode_effect_calls_nothing_inert_on_a_symmetric_kernel():
    env = {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL", "NCCL_MAX_NCHANNELS": "2"}
    effect = decode_effect(env, 14336, 8, DecodeChoice(SYMMETRIC, "AllReduce_AGxLL_R"),
                           version=NcclVersion(2, 29, 7), topology=Topology(8, 1, "nvswitch", True, 90))
    assert effect.inert == {} and effect.effective == env


def test_a_host_glued_to_text_before_it_is_read_from_the_runs_start():
    """NCCL_LINE's host begins a run of host characters (so a long line is read in linear time,
    benchmarks/log_parse.py): text glued before the host is part of it, as before, and a host
    after a ':' still starts there."""
    from tuner.nccl.lines import line_pid, read_line

    glued = read_line("xyzgpu-node7:4242:4300 [3] NCCL INFO x")
    assert glued is not None and (glued.process, glued.dev, glued.message) == ("xyzgpu-node7:4242", 3, "x")
    after_colon = read_line("ab:cd:12:34 [0] NCCL WARN y")
    assert after_colon is not None and after_colon.process == "cd:12"
    assert read_line("x" * 100_000) is None and line_pid("NCCL " + "x:" * 50_000) is None
    long_tail = read_line("gpu1:7:7 [0] NCCL INFO " + "y" * 100_000)
    assert long_tail is not None and long_tail.process == "gpu1:7" and len(long_tail.message) == 100_000
