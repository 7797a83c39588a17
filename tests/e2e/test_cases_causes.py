"""Case 37 through a whole sweep: a harmless NCCL WARN printed at every init (NCCL 2.18's cudawrap
"Failed to find CUDA library libcuda.so", nccl-tests #166) is not the cause of a segfault inside
NCCL during decode (vllm #17242); the fatal line and the signal are."""

from __future__ import annotations

from tests.e2e.test_cases import case_config, sweep


def test_37_a_benign_init_warn_is_not_the_cause_of_a_segfault(tmp_path):
    res, df = sweep(tmp_path, case_config(tmp_path, "37-benign-nccl-warn-vs-segfault"), "--no-final-baseline",
                    "--trials", "2")  # as RUN.txt runs it: the baseline and one set
    assert df is not None, res.stderr
    assert df.loc[0, "status"] == "ok", df.loc[0, "cause"]
    cause = df.loc[1, "cause"]
    assert df.loc[1, "status"] == "crashed", cause
    assert cause.startswith("Fatal Python error: Segmentation fault"), cause
    assert "ncclAllReduce" in cause and "killed by signal 11" in cause and cause.endswith("during probing"), cause
    assert "libcuda" not in cause and "NCCL WARN" not in cause, cause
