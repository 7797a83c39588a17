"""Causes ranked by what ended the process (issue 32, item 5): fatal lines and signals outrank
NCCL WARNs; NCCL's harmless WARNs (by version, tuner.nccl.benign_warn) and a kind's benign lines
are never the cause; JSON log lines are read for their message, not their envelope. Lines are
spelled as the cited sources print them; the launches are real processes."""

from __future__ import annotations

import json

import pytest

from tests.unit.server._support import config, python_server
from tuner.errors import TrialFailed
from tuner.nccl import benign_warn
from tuner.server import ServerProcess
from tuner.server.logtail import CAUSE_MAX_CHARS, CauseKind, find_cause, level_and_body, line_kind, warn_keys
from tuner.servers import kind_named

P = "node7:4242:4250 [0]"
# Harmless WARNs, as NCCL prints them (src/misc/cudawrap.cc, src/misc/ibvwrap.cc, src/plugin/net.cc,
# src/transport/net_ib.cc, src/graph/topo.cc)
LIBCUDA = (f"{P} misc/cudawrap.cc:179 NCCL WARN Failed to find CUDA library libcuda.so (NCCL_CUDA_PATH='') : "
           "libcuda.so: cannot open shared object file: No such file or directory")
BENIGN = [LIBCUDA,
          f"{P} misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]",
          f"{P} NCCL WARN NET/Plugin : No plugin found (libnccl-net.so), using internal implementation",
          f"{P} NCCL WARN NET/Plugin: Failed to find ncclNetPlugin_v6 symbol.",
          f"{P} transport/net_ib.cc:93 NCCL WARN Could not find real path of mlx5_0 (/sys/class/infiniband/mlx5_0/device)",
          f"{P} graph/xml.cc:432 NCCL WARN Could not find real path of /sys/class/pci_bus/0000:00/../../0000:00:05.0"]


@pytest.mark.parametrize("line", BENIGN)
def test_harmless_nccl_warns_are_never_a_cause(line: str) -> None:
    assert line_kind(line) is CauseKind.BENIGN
    assert find_cause([line]) is None


def test_benign_by_nccl_version() -> None:
    msg = "Failed to find CUDA library libcuda.so (NCCL_CUDA_PATH='') : libcuda.so: cannot open shared object file"
    assert benign_warn(msg, "2.18.1") and benign_warn(msg, None) and benign_warn(msg, "not a version")
    assert not benign_warn(msg, "2.21.5")  # outside cudawrap's dlopen era: a candidate again
    assert benign_warn("Invalid NCCL_NTHREADS 1024 (maximum 512).", "2.26.6")
    assert not benign_warn("Invalid NCCL_NTHREADS 1024 (maximum 512).", "2.27.3")
    assert not benign_warn("Cuda failure 'out of memory'", None)
    # the version read from the tail decides: vLLM's "is using nccl==" line
    later = ["INFO 05-10 10:00:04 pynccl.py:58] vLLM is using nccl==2.21.5", LIBCUDA]
    cause = find_cause(later)
    assert cause is not None and cause.kind is CauseKind.NCCL_WARN


def test_a_fatal_python_error_after_benign_warns_wins() -> None:
    # NCCL 2.18.1's init WARN on each rank, then vLLM #17242's segfault in the decode allreduce
    lines = [*BENIGN[:3], "*** SIGSEGV received at time=1715335241 on cpu 17 ***",
             "PC: @     0x7f7e7ba49b8a  (unknown)  addProxyOpIfNeeded()",
             "Fatal Python error: Segmentation fault", "",
             "Current thread 0x00007f6c0e5b6480 (most recent call first):",
             '  File "/x/vllm/distributed/device_communicators/pynccl_wrapper.py", line 246 in ncclAllReduce',
             '  File "/x/vllm/distributed/device_communicators/pynccl.py", line 110 in all_reduce']
    cause = find_cause(lines)
    assert cause is not None and cause.kind is CauseKind.FATAL
    assert cause.text == "Fatal Python error: Segmentation fault (in ncclAllReduce)"


def test_a_fatal_line_outranks_a_real_warn_and_keeps_it_as_detail() -> None:
    warn = f"{P} enqueue.cc:1556 NCCL WARN Cuda failure 'an illegal memory access was encountered'"
    lines = [warn, "terminate called after throwing an instance of 'c10::DistBackendError'",
             "  what():  [PG 0 Rank 0] Process group watchdog thread terminated with exception", "Aborted (core dumped)"]
    cause = find_cause(lines)
    assert cause is not None and cause.kind is CauseKind.FATAL
    assert cause.text.startswith("terminate called after throwing an instance of 'c10::DistBackendError': what():")
    assert cause.text.endswith("[NCCL WARN Cuda failure 'an illegal memory access was encountered']")


def test_a_real_warn_stays_the_detail_of_an_nccl_error() -> None:
    warn = f"{P} misc/socket.cc:484 NCCL WARN NET/Socket : connect to 10.0.0.2<43215> failed : Connection refused"
    lines = [LIBCUDA, warn, "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
             "remote process exited or there was a network error, NCCL version 2.18.1"]
    cause = find_cause(lines)
    assert cause is not None and cause.kind is CauseKind.DEVICE
    assert cause.text.endswith("[NCCL WARN NET/Socket : connect to 10.0.0.2<43215> failed : Connection refused]")
    assert find_cause([LIBCUDA, warn]).kind is CauseKind.NCCL_WARN  # type: ignore[union-attr]


def test_warns_printed_before_the_launch_served_are_not_the_cause() -> None:
    warn = f"{P} NCCL WARN NET/IB : Got async event : GID table change"
    served = warn_keys([warn, "INFO: Uvicorn running on http://0.0.0.0:8000"])
    later = [warn, "Killed"]
    assert find_cause(later).kind is CauseKind.FATAL  # type: ignore[union-attr]
    assert find_cause([warn]).kind is CauseKind.NCCL_WARN  # type: ignore[union-attr]
    assert find_cause([warn], served=served) is None


def test_a_kinds_benign_and_fatal_lines() -> None:
    sglang = kind_named("sglang")
    ignored = "[2025-04-23 21:31:41] Ignore import error when loading sglang.srt.models.mllama4: No module named 'x'"
    assert line_kind(ignored, kind=sglang) is CauseKind.BENIGN
    tgi = kind_named("tgi")
    died = "2024-05-10T10:00:09.1Z ERROR text_generation_launcher: Shard 0 failed to start"
    assert line_kind(died, kind=tgi) is CauseKind.FATAL
    assert line_kind("ERROR: Engine core initialization failed. See root cause above.", kind=tgi) is CauseKind.WRAPPER


# -- JSON lines --------------------------------------------------------------------------------
_LONG = "x" * 400


def _tracing(level: str, message: str) -> str:
    # tracing-subscriber's JSON format, as TGI's launcher writes it with --json-output
    return json.dumps({"timestamp": "2024-02-14T10:00:00.123456Z", "level": level,
                       "fields": {"message": message}, "target": "text_generation_launcher",
                       "filename": "launcher/src/main.rs", "line_number": 1061,
                       "span": {"rank": 0, "name": "shard-manager"},
                       "spans": [{"rank": 0, "name": "shard-manager"}]})


def test_a_json_error_longer_than_the_cut_gives_its_message() -> None:
    error = "RuntimeError: CUDA error: an illegal memory access was encountered " + _LONG
    lines = [_tracing("INFO", "Starting shard"), _tracing("WARN", "Could not import Mamba: No module named 'x'"),
             _tracing("ERROR", error)]
    assert len(lines[-1]) > CAUSE_MAX_CHARS
    cause = find_cause(lines)
    assert cause is not None and cause.kind is CauseKind.DEVICE
    assert cause.text == error[:CAUSE_MAX_CHARS] and "timestamp" not in cause.text
    assert level_and_body(lines[0]) == ("INFO", "Starting shard")


def test_a_json_line_cut_by_a_cap_still_gives_its_message() -> None:
    cut = _tracing("ERROR", "torch.OutOfMemoryError: CUDA out of memory. " + _LONG)[:300]
    assert level_and_body(cut)[0] == "ERROR"
    assert find_cause([cut]).text.startswith("torch.OutOfMemoryError: CUDA out of memory.")  # type: ignore[union-attr]


def test_loguru_serialized_records() -> None:
    # loguru's serialize=True (loguru/_handler.py, _serialize_record), as TGI's shards log
    record = {"text": "2024-02-14 10:00:00.000 | ERROR | server:serve:1 - Error when initializing model\nTraceback...\n",
              "record": {"level": {"name": "ERROR", "no": 40, "icon": "x"}, "message": "Error when initializing model",
                         "exception": {"type": "ValueError", "value": "sharded is not supported for this model",
                                       "traceback": True}, "name": "text_generation_server.server"}}
    warning = {"text": "w\n", "record": {"level": {"name": "WARNING"}, "message": "ValueError: only a warning"}}
    cause = find_cause([json.dumps(warning), json.dumps(record)])
    assert cause is not None and cause.kind is CauseKind.EXCEPTION
    assert cause.text == "ValueError: sharded is not supported for this model (Error when initializing model)"


def test_python_json_logger_records() -> None:
    line = json.dumps({"asctime": "2024-02-14 10:00:00,000", "levelname": "ERROR", "name": "srv",
                       "message": "engine failed", "exc_info": "Traceback (most recent call last):\n  File \"a.py\", "
                       "line 1, in <module>\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"})
    cause = find_cause([json.dumps({"levelname": "INFO", "message": "ready"}), line])
    assert cause is not None and cause.kind is CauseKind.MEMORY
    assert cause.text.startswith("torch.OutOfMemoryError: CUDA out of memory.") and "asctime" not in cause.text
    assert level_and_body('{"model": "m", "n": 1}') == ("", '{"model": "m", "n": 1}')  # no log record


# -- real launches: what ended the process leads -------------------------------------------------
def _died(tmp_path, lines: list[str], end: str) -> str:
    code = f"import os, signal, sys\nfor s in {lines!r}: print(s, flush=True)\n{end}\n"
    cfg = config(python_server(code))
    with pytest.raises(TrialFailed) as info, ServerProcess(cfg, {}, tmp_path / "log") as server:
        server.wait_ready(20)
    return info.value.cause


def test_benign_warns_then_sigabrt(tmp_path) -> None:
    cause = _died(tmp_path, BENIGN, "os.kill(os.getpid(), signal.SIGABRT)")
    assert cause == "killed by signal 6", cause


def test_a_real_warn_then_sigkill_the_signal_leads(tmp_path) -> None:
    warn = f"{P} NCCL WARN NET/IB : Got async event : port error"
    cause = _died(tmp_path, [*BENIGN[:2], warn], "os.kill(os.getpid(), signal.SIGKILL)")
    assert cause == "killed by signal 9 [after NCCL WARN NET/IB : Got async event : port error]", cause


def test_benign_warns_then_a_python_exception_and_exit_1(tmp_path) -> None:
    lines = [*BENIGN, "Traceback (most recent call last):", '  File "x.py", line 1, in <module>',
             "KeyError: 'model_type'"]
    cause = _died(tmp_path, lines, "sys.exit(1)")
    assert cause == "KeyError: 'model_type' (exit status 1)", cause


def test_an_nccl_error_exit_keeps_its_real_warn(tmp_path) -> None:
    warn = f"{P} enqueue.cc:47 NCCL WARN Cuda failure 'out of memory'"
    lines = [LIBCUDA, warn, "RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)"]
    cause = _died(tmp_path, lines, "sys.exit(1)")
    assert cause.startswith("RuntimeError: NCCL error: unhandled cuda error"), cause
    assert cause.endswith("[NCCL WARN Cuda failure 'out of memory'] (exit status 1)"), cause
    assert _died(tmp_path, [LIBCUDA, warn], "sys.exit(1)") == "NCCL WARN Cuda failure 'out of memory' (exit status 1)"
