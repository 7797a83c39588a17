"""Per-rank prefixes that launchers put before nccl-tests' lines, and NCCL 2.30's WARN shape.

The outputs are the real v2.18.0 ``mpirun --tag-output`` fixture with its tags rewritten as SLURM
``srun --label`` (``0: ``, right-aligned to the widest task id) and MPICH ``-prepend-rank``
(``[0] ``) print them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tuner.record.trial import Status
from tuner.screen.nccltests import parse_output, screen_status
from tuner.server.logtail import CauseKind, find_cause

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "nccl_tests"
TAGGED = (FIX / "v2.18.0_allreduce_mpirun_tagged.txt").read_text(encoding="utf-8")
_TAG = re.compile(r"^\[1,(\d+)\]<(?:stdout|stderr)>:", re.MULTILINE)

SPELLINGS = {
    "srun --label": lambda rank: f"{rank}: ",
    "srun --label, 16 tasks": lambda rank: f"{rank:>2}: ",
    "mpiexec -prepend-rank": lambda rank: f"[{rank}] ",
}


def _relabel(label) -> str:  # type: ignore[no-untyped-def]
    return _TAG.sub(lambda m: label(int(m.group(1))), TAGGED)


@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
def test_labelled_output_parses_like_the_tagged_one(spelling: str) -> None:
    clean = parse_output(TAGGED)
    labelled = parse_output(_relabel(SPELLINGS[spelling]))
    assert clean.rows and labelled.rows == clean.rows
    assert labelled.devices == clean.devices and labelled.nccl_tests_version == "2.18.0"
    assert labelled.complete and screen_status(labelled, exit_code=0) == (Status.OK, "ok")


# src/debug.cc at v2.30.7-1 (ncclDebugLogV): "[%d] %s:%d (%s) NCCL WARN %s" with __FILE__ and
# __func__ of the WARN, here src/enqueue.cc:2063 in topoGetAlgoInfo (NCCL compiles from src/, so
# __FILE__ is "enqueue.cc"); up to v2.30.4-1 "[%d] %s:%d NCCL WARN " (ncclDebugLog, __FILE__), e.g.
# v2.29.7-1 src/enqueue.cc:1971 (topoGetAlgoInfo).
WARN_230 = ("node7:4242:4250 [0] enqueue.cc:2063 (topoGetAlgoInfo) NCCL WARN No algorithm/protocol available for "
            "function AllGather with datatype ncclBfloat16. NCCL_ALGO was set to Tree.")
WARN_OLD = "node7:4242:4250 [0] transport/net.cc:1083 NCCL WARN NET/IB : oops"
WARN_229 = ("node7:4242:4250 [0] enqueue.cc:1971 NCCL WARN Error : no algorithm/protocol available for function "
            "AllGather with datatype ncclBfloat16. NCCL_ALGO was set to Tree.")


@pytest.mark.parametrize(("warn", "message"), [
    (WARN_230, "No algorithm/protocol available for function AllGather with datatype ncclBfloat16. "
               "NCCL_ALGO was set to Tree."),
    (WARN_229, "Error : no algorithm/protocol available for function AllGather with datatype ncclBfloat16. "
               "NCCL_ALGO was set to Tree."),
    (WARN_OLD, "NET/IB : oops")])
def test_warn_lines_with_and_without_the_function_are_read(warn: str, message: str) -> None:
    anchor = "[1,0]<stdout>:#  Rank  1"
    result = parse_output(TAGGED.replace(anchor, f"[1,0]<stdout>:{warn}\n{anchor}", 1))
    assert result.nccl_warnings == [message]
    assert result.rows == parse_output(TAGGED).rows
    cause = find_cause(["INFO starting", f"0: {warn}", "RuntimeError: NCCL error: unhandled cuda error"])
    assert cause is not None and cause.kind is CauseKind.DEVICE
    assert cause.text.endswith(f"[NCCL WARN {message}]")


def test_a_complete_table_with_exit_0_is_never_crashed() -> None:
    text = TAGGED + "[1,1]<stderr>:node7: Test NCCL failure common.cu:1200 'unhandled system error / '\n"
    result = parse_output(text)
    assert result.failures and result.complete
    status, cause = screen_status(result, exit_code=0)
    assert status is Status.OK and "Test NCCL failure common.cu:1200" in cause
    assert screen_status(result, exit_code=1)[0] is Status.CRASHED
