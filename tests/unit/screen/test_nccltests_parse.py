"""nccl-tests output of several versions parses to the exact printed numbers.

Fixtures are real excerpts (tests/fixtures/nccl_tests/SOURCES.md) except the files named
``*constructed*``, built from nccl-tests' printf/JSON code. Cases derived here from a real
fixture (cut mid-row, a log line spliced in, timestamps added) say how in their docstring.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tuner.record.trial import Status
from tuner.screen.nccltests import (
    busbw_factor,
    command_supports_json,
    nccl_tests_version,
    parse_json,
    parse_output,
    screen_status,
)

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "nccl_tests"


def read(name: str) -> str:
    return (FIX / name).read_text(encoding="utf-8")


def test_v2_18_0_mpirun_tagged_output() -> None:
    r = parse_output(read("v2.18.0_allreduce_mpirun_tagged.txt"))
    assert (r.nccl_tests_version, r.nccl_version, r.nccl_headers_version) == ("2.18.0", "2.29.7", "2.29.7")
    assert (r.program, r.collective) == ("all_reduce_perf_mpi", "allreduce")
    assert (r.n_threads, r.n_gpus, r.min_bytes, r.max_bytes) == (1, 1, 1048576, 134217728)
    assert (r.warmup_iters, r.iters, r.agg_iters, r.validation, r.graph) == (10, 50, 1, 1, 0)
    assert r.nranks == 2
    d0 = r.devices[0]
    assert (d0.rank, d0.group, d0.pid, d0.host, d0.device, d0.bus_id, d0.name) == (
        0, 0, 2994447, "lab", 0, "0000:02:00", "NVIDIA GeForce RTX 5090")
    assert r.error_column == "#wrong"
    assert [row.size_bytes for row in r.rows] == [1048576 << i for i in range(8)]
    row = r.row(16777216)
    assert row is not None and row.count == 4194304 and (row.dtype, row.redop, row.root) == ("float", "sum", -1)
    assert row.out_of_place is not None and row.in_place is not None
    assert (row.out_of_place.time_us, row.out_of_place.algbw_GBps, row.out_of_place.busbw_GBps,
            row.out_of_place.wrong) == (7728.29, 2.17, 2.17, 0)
    assert (row.in_place.time_us, row.in_place.algbw_GBps, row.in_place.busbw_GBps) == (7659.38, 2.19, 2.19)
    assert r.rows[-1].out_of_place is not None and r.rows[-1].out_of_place.time_us == 58479.5
    assert (r.out_of_bounds, r.avg_busbw_GBps, r.avg_busbw_check) == (0, 1.57614, None)
    assert r.complete and r.ok and not r.corrupted and r.problems == [] and r.failures == []
    assert screen_status(r, exit_code=0) == (Status.OK, "ok")


def test_v2_17_8_wrong_values_are_corruption() -> None:
    r = parse_output(read("v2.17.8_allreduce_wrong_values.txt"))
    assert r.nccl_tests_version == "2.17.8" and r.nccl_version == "2.29.2"
    assert len(r.rows) == 25 and r.rows[0].size_bytes == 8 and r.rows[-1].size_bytes == 134217728
    bad = r.row(1048576)
    assert bad is not None and bad.out_of_place is not None and bad.in_place is not None
    assert (bad.out_of_place.time_us, bad.out_of_place.busbw_GBps, bad.out_of_place.wrong) == (477.32, 2.20, 96)
    assert (bad.in_place.time_us, bad.in_place.wrong) == (492.81, 32)
    assert [row.size_bytes for row in r.rows if r.row_corrupted(row)] == [1048576]
    assert (r.out_of_bounds, r.avg_busbw_GBps) == (4, 4.79995)
    assert r.complete and r.corrupted and not r.ok
    assert r.failures == []  # the " .. Test failure" trailer is the call stack of the failed check
    assert any("wrong values reported at 1 size(s): 1048576" in p for p in r.problems)
    status, cause = screen_status(r, exit_code=1)
    assert status is Status.INVALID_OUTPUT and "1048576" in cause
    # The corruption guard wins even when the run was also killed.
    assert screen_status(r, killed_at_timeout=True)[0] is Status.INVALID_OUTPUT


def test_v2_17_8_cuda_failure_before_any_row() -> None:
    r = parse_output(read("v2.17.8_cuda_failure_before_rows.txt"))
    assert r.rows == [] and r.nranks == 8 and {d.host for d in r.devices} == {"gpu-1-1", "gpu-1-7"}
    assert r.failures == ["Test CUDA failure common.cu:1304: CUDA-capable device(s) is/are busy or unavailable"]
    assert not r.ok and not r.complete
    assert screen_status(r, exit_code=2) == (Status.CRASHED, r.failures[0])


def test_pre_2_13_error_column_and_nccl_log_line() -> None:
    r = parse_output(read("pre2.13_allreduce_error_column.txt"))
    assert r.error_column == "error" and r.nranks == 4 and r.nccl_tests_version is None
    assert (r.validation, r.agg_iters, r.graph) == (1, None, None)
    assert r.devices[3].pid == 197 and r.devices[3].group is None and r.devices[3].bus_id == "0x00"
    assert len(r.rows) == 7  # the "NCCL INFO Launch mode Parallel" line is not a row
    first = r.rows[0]
    assert (first.size_bytes, first.count, first.dtype, first.redop, first.root) == (33554432, 8388608, "float", "sum", None)
    assert first.out_of_place is not None and first.in_place is not None
    assert (first.out_of_place.time_us, first.out_of_place.algbw_GBps, first.out_of_place.busbw_GBps,
            first.out_of_place.wrong) == (19902.0, 1.69, 2.53, 2e-07)
    last = r.rows[-1]
    assert last.out_of_place is not None and last.out_of_place.time_us == 1258554.0
    # 2e-07 is below nccl-tests' old float tolerance (1e-5 x (nranks - 1)): not corrupted.
    assert not r.corrupted and r.ok and r.avg_busbw_GBps == 2.54225
    # busbw = algbw x 2(n-1)/n with n = 4 ranks, to the printed two decimals.
    for row in r.rows:
        assert row.out_of_place is not None
        assert row.out_of_place.busbw_GBps == pytest.approx(row.out_of_place.algbw_GBps * busbw_factor("allreduce", 4), abs=0.015)


def test_pre_2_13_broadcast_with_root_na_and_cut_off() -> None:
    r = parse_output(read("pre2.13_broadcast_root_na_truncated.txt"))
    assert r.nccl_version == "2.9.6" and r.validation == 0
    assert r.nccl_warnings == ["Failed to open libibverbs.so[.1]", "Failed to open libibverbs.so[.1]"]
    (row,) = r.rows
    assert (row.size_bytes, row.count, row.dtype, row.redop, row.root) == (8, 2, "float", None, 0)
    assert row.out_of_place is not None and row.in_place is not None
    assert (row.out_of_place.time_us, row.out_of_place.wrong) == (45.82, None)
    assert (row.in_place.time_us, row.in_place.wrong) == (38.17, None)
    assert not r.complete and not r.corrupted
    assert "the output ends before the summary lines (killed, timed out or cut off)" in r.problems
    assert screen_status(r, exit_code=None)[0] is Status.CRASHED
    assert screen_status(r, killed_at_timeout=True)[0] is Status.TIMEOUT


def test_in_place_not_checked_prints_na() -> None:
    r = parse_output(read("v2.13.4-2.14.0_alltoall_inplace_na.txt"))
    (row,) = r.rows
    assert row.out_of_place is not None and row.in_place is not None
    assert (row.redop, row.out_of_place.algbw_GBps, row.out_of_place.wrong) == ("none", 1715.44, 0)
    assert (row.in_place.time_us, row.in_place.algbw_GBps, row.in_place.wrong) == (0.78, 43046.10, None)
    assert r.devices[0].bus_id == "0x01" and r.devices[0].group == 0
    assert r.ok and r.avg_busbw_GBps == 0


def test_nccl_failure_after_rows_without_header() -> None:
    r = parse_output(read("v2.13plus_nccl_failure_after_rows.txt"))
    assert [row.size_bytes for row in r.rows] == [1073741824 << i for i in range(5)]
    last = r.rows[-1]
    assert last.out_of_place is not None and last.in_place is not None
    assert (last.count, last.out_of_place.time_us, last.out_of_place.busbw_GBps, last.in_place.busbw_GBps) == (
        4294967296, 93457.0, 367.29, 367.44)
    assert r.failures == ["Test NCCL failure common.cu:1204: unhandled cuda error (run with NCCL_DEBUG=INFO for details)"]
    assert any("layout inferred from its 13 columns" in p for p in r.problems)
    assert screen_status(r)[0] is Status.CRASHED


def test_v2_19_6_per_iteration_columns() -> None:
    r = parse_output(read("v2.19.6_constructed_per_iteration.txt"))
    assert r.nccl_tests_version == "2.19.6" and r.json_path == "/tmp/nccl-tune-screen-0007/out.json"
    row = r.row(14336)
    assert row is not None and row.out_of_place is not None and row.in_place is not None
    oop = row.out_of_place
    assert (oop.time_us, oop.algbw_GBps, oop.busbw_GBps, oop.wrong) == (45.21, 0.32, 0.55, 0)
    assert (oop.i_min_us, oop.i_max_us, oop.i_p99_us, oop.i_cv_pct) == (41.02, 97.53, 88.19, 9.41)
    big = r.row(117440512)
    assert big is not None and big.in_place is not None
    assert (big.in_place.time_us, big.in_place.i_max_us, big.in_place.i_cv_pct) == (9851.0, 10011.3, 0.58)
    assert r.ok and r.avg_busbw_GBps == 10.6977


def test_json_v3_with_per_iteration_objects() -> None:
    text = read("v2.19.6_constructed.json")
    r = parse_json(text)
    assert r == parse_output(text)  # parse_output recognises JSON
    assert (r.nccl_version, r.collective, r.nranks, r.iters) == ("2.30.7", "allreduce", 8, 200)
    row = r.row(14336)
    assert row is not None and row.out_of_place is not None and row.root == -1
    assert (row.out_of_place.time_us, row.out_of_place.algbw_GBps, row.out_of_place.busbw_GBps) == (45.21, 0.317098, 0.554921)
    assert row.out_of_place.wrong == 0.0 and row.out_of_place.i_p99_us == 88.19
    assert row.out_of_place.iteration_times_us == (41.02, 97.53, 88.19, 45.21)
    assert (r.out_of_bounds, r.avg_busbw_GBps, r.avg_busbw_check) == (0, 10.697678, None)
    assert r.ok
    # The file's "env" (the run's whole environment) is never copied into the result.
    assert "NCCL_PROTO=LL" not in repr(r) and "HOME=/root" not in repr(r)


def test_json_v1_typo_keys() -> None:
    r = parse_json(read("v2.17.5_constructed_typo_keys.json"))
    assert r.avg_busbw_GBps == pytest.approx((0.554921 + 0.559126) / 2, abs=1e-6)
    assert r.complete and r.ok and r.nccl_version == "2.28.7"


def test_json_killed_falls_back_to_text() -> None:
    killed = read("v2.19.6_constructed_killed.json")
    assert "was killed before it closed the file" in parse_json(killed).problems[0]
    text = read("v2.19.6_constructed_per_iteration.txt")
    merged = parse_output(text, json_text=killed)
    assert len(merged.rows) == 2 and merged.rows[0].out_of_place is not None
    assert merged.rows[0].out_of_place.algbw_GBps == 0.32  # the text's rounding: JSON unusable
    assert any(p.startswith("JSON: the JSON output is incomplete") for p in merged.problems)
    full = parse_output(text, json_text=read("v2.19.6_constructed.json"))
    assert full.rows[0].out_of_place is not None and full.rows[0].out_of_place.algbw_GBps == 0.317098
    assert full.nccl_tests_version == "2.19.6"  # the rest still comes from the text


def test_killed_mid_run() -> None:
    """Outputs a kill at the screen timeout leaves, made from the real v2.18.0 output.

    nccl-tests line-buffers stdout (``ncclTestSetlinebuf``, since its first commit), so a kill
    loses the unfinished line: the output ends after complete rows. A partial row survives only
    when something flushed it, i.e. an NCCL log line written to the same stdout (NCCL_DEBUG set)
    after the row's first columns or after its out-of-place half.
    """
    text = read("v2.18.0_allreduce_mpirun_tagged.txt")
    rows_end = text.index("[1,0]<stdout>:    16777216")
    r = parse_output(text[:rows_end])
    assert len(r.rows) == 4 and all(row.complete for row in r.rows) and not r.complete
    assert "the output ends before the summary lines (killed, timed out or cut off)" in r.problems
    assert screen_status(r, killed_at_timeout=True) == (Status.TIMEOUT, "killed at the screen timeout after 4 row(s)")
    assert screen_status(r, exit_code=-9) == (Status.CRASHED, "output cut off after 4 row(s) (exit code -9)")

    log = "lab:2994447:2994460 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] via NET/Socket/0\n"
    preamble = "[1,0]<stdout>:    16777216       4194304     float     sum      -1"
    r = parse_output(text[:rows_end] + preamble + log)
    assert len(r.rows) == 5 and r.rows[-1].out_of_place is None and r.rows[-1].in_place is None
    assert "size 16777216: the row stops before both halves (output cut off)" in r.problems

    oop_end = text.index("7728.29") + len("7728.29    2.17    2.17       0")
    r = parse_output(text[:oop_end] + log)
    partial = r.rows[-1]
    assert partial.out_of_place is not None and partial.out_of_place.time_us == 7728.29 and partial.in_place is None
    assert r.row(16777216) is partial and partial.best_time_us() == 7728.29
    assert "size 16777216: the row stops before the in-place half (output cut off)" in r.problems


def test_nccl_log_line_inside_a_row_is_removed() -> None:
    """NCCL_DEBUG=INFO writes to the same stdout: a log line can land between a row's first
    columns and its measurements, glued to the row (nccl-tests prints the size first, then runs
    the collective). Spliced here into the real v2.17.8 output, with and without a space."""
    text = read("v2.17.8_allreduce_wrong_values.txt")
    clean = parse_output(text)
    anchor = "        8192          2048     float     sum      -1"
    log = "gpu-1-1:662195:662210 [0] NCCL INFO Channel 00/02 :    0   1\n"
    spliced = parse_output(text.replace(anchor, anchor + log))
    assert spliced.rows == clean.rows
    warn = "gpu-1-1:662195:662210 [0] transport/net.cc:1083 NCCL WARN NET/IB : oops\n"
    spliced = parse_output(text.replace(anchor, anchor + " " + warn))
    assert spliced.rows == clean.rows and spliced.nccl_warnings == ["NET/IB : oops"]


def test_timestamps_column() -> None:
    """``-S 1`` adds ``%21s`` with ``%Y-%m-%d %H:%M:%S`` after the in-place half
    (util.cu writeTimestamp); added here to the real v2.18.0 rows."""
    lines = []
    for line in read("v2.18.0_allreduce_mpirun_tagged.txt").splitlines():
        if "float     sum" in line:
            line += "  2026-03-10 10:02:03"
        lines.append(line)
    r = parse_output("\n".join(lines))
    assert len(r.rows) == 8 and all(row.timestamp == "2026-03-10 10:02:03" for row in r.rows)
    assert r.rows[0].in_place is not None and r.rows[0].in_place.wrong == 0 and r.ok


def test_nccl_tests_1x_reports_milliseconds() -> None:
    """nccl-tests 1.x: columns ``bytes N type op time algbw busbw res`` and time in ms
    (v1.0.0 src/all_reduce.cu print_header, common.cu ``%7.3f`` of deltaSec x 1e3)."""
    text = ("# nThread 1 nGpus 2 minBytes 8 maxBytes 8 step: 1048576(bytes) warmup iters: 5 iters: 20 validation: 1\n"
            "#                                                 out-of-place                    in-place\n"
            "#      bytes             N    type      op     time  algbw  busbw      res     time  algbw  busbw      res\n"
            "     1048576        262144   float     sum    0.105  10.00  10.00    0e+00    0.104  10.08  10.08    0e+00\n"
            " Out of bounds values : 0 OK\n Avg bus bandwidth    : 10.04 \n")
    r = parse_output(text)
    (row,) = r.rows
    assert row.out_of_place is not None and row.out_of_place.time_us == pytest.approx(105.0)
    assert r.error_column == "res" and r.out_of_bounds == 0 and r.complete


def test_nothing_useful() -> None:
    r = parse_output("bash: all_reduce_perf: command not found\n")
    assert r.rows == [] and "no result rows" in r.problems and not r.ok
    r = parse_output("./all_reduce_perf: error while loading shared libraries: libnccl.so.2: cannot open shared "
                     "object file: No such file or directory\n")
    assert r.failures and r.failures[0].startswith("error while loading shared libraries")
    assert screen_status(r)[0] is Status.CRASHED


def test_json_support_detection() -> None:
    assert command_supports_json(read("v2.18.0_allreduce_mpirun_tagged.txt")) is True
    assert command_supports_json(read("pre2.13_allreduce_error_column.txt")) is None
    assert command_supports_json("2.17.2") is False and command_supports_json("v2.17.3") is True
    usage = ("USAGE: all_reduce_perf \n\t[-t,--nthreads <num threads>] \n\t"
             "[-J,--output_file <file> write output to filepath, if accessible. Infer type from suffix "
             "(only json supported presently.)] \n\t[-h,--help]\n")
    assert command_supports_json(usage) is True
    assert command_supports_json("USAGE: all_reduce_perf \n\t[-t,--nthreads <num threads>] \n\t[-h,--help]\n") is False
    assert nccl_tests_version(read("v2.17.8_allreduce_wrong_values.txt")) == "2.17.8"


def test_busbw_factor() -> None:
    assert busbw_factor("all_reduce_perf", 8) == pytest.approx(1.75)
    assert busbw_factor("AllReduce", 2) == 1.0
    assert busbw_factor("reduce_scatter", 4) == 0.75 and busbw_factor("all_gather", 8) == 0.875
    assert busbw_factor("alltoall", 8) == 0.875 and busbw_factor("broadcast", 8) == 1.0
    assert busbw_factor("sendrecv", 8) == 1.0
    with pytest.raises(ValueError, match="unknown collective"):
        busbw_factor("allfoo", 8)
    with pytest.raises(ValueError, match="nranks"):
        busbw_factor("allreduce", 0)


def test_validation_off_is_flagged() -> None:
    r = parse_output(read("pre2.13_broadcast_root_na_truncated.txt"))
    assert "validation was off (-c 0): wrong results cannot be detected; keep -c 1" in r.problems
