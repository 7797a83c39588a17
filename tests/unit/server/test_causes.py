"""find_cause on real server log tails (tests/fixtures/logtails, each with its source) and on the
precedence rules: root errors above wrappers, wrappers above harmless warnings."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tuner.server.logtail import CauseKind, announced_port, extract_cause, find_cause, level_and_body, line_kind

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "logtails"
CASES = Path(__file__).resolve().parents[2] / "cases"


def _load(path: Path) -> tuple[dict[str, str], list[str]]:
    header: dict[str, str] = {}
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines) and lines[i].startswith("# "):
        key, _, value = lines[i][2:].partition(":")
        header[key.strip()] = value.strip()
        i += 1
    return header, lines[i:]


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.log")), ids=lambda p: p.stem)
def test_cause_of_each_real_tail(path: Path) -> None:
    header, lines = _load(path)
    assert header["source"].startswith("https://github.com/"), "every fixture names its source"
    cause = find_cause(lines)
    assert cause is not None
    assert cause.kind is CauseKind[header["expect-kind"]], cause
    assert header["expect"] in cause.text, cause.text
    if "expect-port" in header:
        assert cause.port == int(header["expect-port"])
    assert extract_cause(lines) == cause.text


def test_every_kind_the_brief_names_has_a_real_tail() -> None:
    kinds = {_load(p)[0]["expect-kind"] for p in FIXTURES.glob("*.log")}
    assert {"MEMORY", "DEVICE", "WRAPPER", "ADDRESS_IN_USE"} <= kinds
    names = " ".join(p.stem for p in FIXTURES.glob("*.log"))
    for shape in ("vllm-engine-init", "vllm-engine-dead", "sglang-scheduler", "nccl-", "illegal-memory", "torch-oom"):
        assert shape in names


def test_case_03_wrapper_is_skipped_for_the_engine_error() -> None:
    # The lines case 03's server prints, read without running it (the launcher test runs it).
    lines = [ast.literal_eval(line.split("p(", 1)[1].rsplit(")", 1)[0])
             for line in (CASES / "03-engine-init-wrapper" / "server.py").read_text().splitlines()
             if line.startswith("p(")]
    cause = find_cause(lines)
    assert cause is not None and cause.kind is CauseKind.MEMORY
    assert cause.text.startswith("ValueError: No available memory for the cache blocks")


def test_warnings_only_when_nothing_else() -> None:
    only_warnings = ["/x/warnings.py:1: DeprecationWarning: `foo` is deprecated",
                     "WARNING 01-01 00:00:00 [config.py:1] Casting torch.bfloat16 to torch.float16."]
    cause = find_cause(only_warnings)
    assert cause is not None and cause.kind is CauseKind.WARNING
    assert "DeprecationWarning" in cause.text
    earlier_warning = [*only_warnings, "KeyError: 'model_type'"]
    assert extract_cause(earlier_warning) == "KeyError: 'model_type'"


def test_root_first_consequences_later() -> None:
    # Two ranks: rank 0's OOM is the root; rank 1 reports the broken collective after it.
    lines = ["(VllmWorker TP0 pid=1) ERROR 01-01 00:00:00 [x.py:1] torch.OutOfMemoryError: CUDA out of memory.",
             "(VllmWorker TP1 pid=2) ERROR 01-01 00:00:00 [x.py:1] RuntimeError: NCCL error: remote process exited"]
    assert extract_cause(lines) == "torch.OutOfMemoryError: CUDA out of memory."
    assert extract_cause(lines[::-1]) == "torch.OutOfMemoryError: CUDA out of memory."


def test_traceback_source_lines_are_not_causes() -> None:
    lines = ['  File "x.py", line 3, in f', '    raise RuntimeError("CUDA error: fake")', "ValueError: real"]
    assert extract_cause(lines) == "ValueError: real"


def test_info_lines_count_only_when_nothing_else() -> None:
    relogged = ["2025-03-08 02:04:48,693 - __main__ - INFO - Scheduler hit an exception: Traceback",
                "2025-03-08 02:04:48,694 - __main__ - INFO - torch.OutOfMemoryError: CUDA out of memory."]
    assert extract_cause(relogged) == "torch.OutOfMemoryError: CUDA out of memory."
    assert extract_cause(["INFO 01-01 00:00:00 [x.py:1] Aborted request 7", "ValueError: bad"]) == "ValueError: bad"


def test_prefixes_and_levels() -> None:
    assert level_and_body("(APIServer pid=1) ERROR 01-01 00:00:09 [core.py:708]   File \"a\"") == ("ERROR", '  File "a"')
    assert level_and_body("[rank0]:[W409 11:42:27.7 ProcessGroupNCCL.cpp:1250] Warning: x")[0] == "WARNING"
    assert level_and_body("[2025-02-21 22:59:28 TP0] Scheduler hit")[1] == "Scheduler hit"
    assert line_kind("host:1:2 [0] NCCL INFO Bootstrap : Using eth0") is None
    assert line_kind("host:1:2 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]") is CauseKind.BENIGN
    assert line_kind("host:1:2 [0] enqueue.cc:47 NCCL WARN Cuda failure 'named symbol not found'") is CauseKind.NCCL_WARN
    # up to 2.26 getNthreads WARNs when it replaces a thread count (src/graph/tuning.cc:22 at v2.26.6-1)
    assert line_kind("host:1:2 [0] graph/tuning.cc:22 NCCL WARN Invalid NCCL_NTHREADS 1024 (maximum 512).") \
        is CauseKind.BENIGN
    assert line_kind("host:1:2 [0] graph/tuning.cc:19 NCCL WARN Invalid NCCL_LL128_NTHREADS 100 (must be a multiple "
                     "of 32)") is CauseKind.BENIGN


def test_dead_kinds() -> None:
    assert CauseKind.WRAPPER.dead and CauseKind.MEMORY.dead and CauseKind.ADDRESS_IN_USE.dead
    assert not CauseKind.EXCEPTION.dead and not CauseKind.WARNING.dead and not CauseKind.NCCL_WARN.dead
    assert not CauseKind.BENIGN.dead


def _announced() -> list[tuple[int | None, str]]:
    out = []
    for row in (FIXTURES / "announced-ports.txt").read_text().splitlines():
        if row.startswith("#") or not row.strip():
            continue
        port, source, line = (part.strip() for part in row.split(" | ", 2))
        assert source.startswith("https://github.com/")
        out.append((None if port == "none" else int(port), line))
    return out


@pytest.mark.parametrize(("port", "line"), _announced())
def test_announced_port_on_real_lines(port: int | None, line: str) -> None:
    assert announced_port(line) == port


def test_announced_port_sglang_server_args() -> None:
    # Shape of SGLang's start-up line (sglang/srt/entrypoints/engine.py logs the ServerArgs dataclass).
    line = ("[2025-08-06 20:26:00] server_args=ServerArgs(model_path='m', tokenizer_path='m', host='127.0.0.1', "
            "port=30000, nccl_port=None, metrics_port=None)")
    assert announced_port(line) == 30000
    assert announced_port("Serving HTTP on 0.0.0.0 port 8123 (http://0.0.0.0:8123/) ...") == 8123


def test_a_command_line_the_server_refuses_is_the_cause() -> None:
    # argparse's own line (Lib/argparse.py, ArgumentParser.error), as `vllm serve --bogus` prints it
    lines = ["usage: vllm serve [model_tag] [options]",
             "vllm serve: error: unrecognized arguments: --bogus-flag"]
    assert line_kind(lines[1]) is CauseKind.FATAL
    assert "unrecognized arguments: --bogus-flag" in extract_cause(lines)
    assert line_kind("INFO 12-01 we saw: error: nothing") is None
