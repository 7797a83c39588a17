"""The proof rank by rank: every rank of the communicator accounted for, folds never proof for
the ranks they hide, lost or cut lines unverifiable (never "not applied"), silent ranks named
with the likely cause. Lines are in NCCL's format (src/debug.cc; src/init.cc; src/misc/param.cc)."""

from __future__ import annotations

import os
import time

import pytest

from tuner.nccl import confirmations, find_debug_files, has_pid, parse_log, read_sources, server_log_source
from tuner.nccl.files import expand_debug_file
from tuner.nccl.log import LogSource, parse_sources
from tuner.nccl.proof import rank_list


def rank_lines(rank: int, nranks: int = 4, *, echoes: dict[str, str] | None = None, complete: bool = True,
               host: str = "gpu1", wrapper: str = "") -> list[str]:
    p = f"{wrapper}{host}:{100 + rank}:{100 + rank} [{rank}] NCCL INFO "
    out = [p + "cudaDriverVersion 12080"]
    if rank == 0:
        out.append(p + "NCCL version 2.27.3+cuda12.9")
    out.append(p + f"comm 0x{rank:x}0 rank {rank} nRanks {nranks} nNodes 1 localRanks {nranks} localRank {rank} MNNVL 0")
    out += [p + f"{k} set by environment to {v}" for k, v in (echoes or {}).items()]
    if complete:
        out.append(p + f"ncclCommInitRank comm 0x{rank:x}0 rank {rank} nranks {nranks} cudaDev {rank} nvmlDev {rank} "
                   "busId 18000 commId 0x1 - Init COMPLETE")
    return out


SET = {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL"}


def proof(lines: list[str], launched: dict[str, str] | None = None):
    c = confirmations(launched or SET, parse_log(lines))
    return c, {r.name: r for r in c.rows}


def test_every_rank_echoing_is_confirmed_with_its_source():
    c, rows = proof([line for r in range(4) for line in rank_lines(r, echoes=SET)])
    assert c.confirmed == SET and c.not_applied == {}
    assert (rows["NCCL_ALGO"].ranks_text(), rows["NCCL_ALGO"].source_text()) == ("0-3 (4/4)", "server log x4")


def test_a_rank_whose_lines_never_arrived_is_unverifiable_not_confirmed():
    c, rows = proof([line for r in range(3) for line in rank_lines(r, echoes=SET)])
    assert c.confirmed == {} and c.not_applied == {} and c.unverifiable == ["NCCL_ALGO", "NCCL_PROTO"]
    assert "no line of ranks 3 reached the log" in rows["NCCL_ALGO"].why


def test_lines_that_stop_before_init_complete_are_lost_not_silent():
    lines = [line for r in range(3) for line in rank_lines(r, echoes=SET)] + rank_lines(3, complete=False)
    c, rows = proof(lines)
    assert c.not_applied == {} and "stop before Init COMPLETE" in rows["NCCL_PROTO"].why
    assert rows["NCCL_PROTO"].echoed == (0, 1, 2)


def test_a_rank_that_completed_init_without_echoing_is_not_applied():
    lines = [line for r in range(3) for line in rank_lines(r, echoes=SET)] + rank_lines(3)
    c, _rows = proof(lines)
    assert set(c.not_applied) == {"NCCL_ALGO", "NCCL_PROTO"}
    assert c.not_applied["NCCL_ALGO"].startswith("rank 3 logged communicator init through Init COMPLETE")
    assert "3 echoes for 4 ranks" in c.not_applied["NCCL_ALGO"]
    assert "never got the variable" in c.not_applied["NCCL_ALGO"]  # no Ray here


@pytest.mark.parametrize("junk", ["INFO 06-01 12:00:09 [custom_all_reduce.py:61] Custom allreduce is disabled",
                                  " 2026-06-01 12:00:09,123 uvicorn", "\tSIM MODEL {}"])
def test_an_echo_with_another_writers_text_stuck_to_it_proves_no_other_value(junk):
    lines = [line for r in range(4) for line in rank_lines(r, echoes={"NCCL_ALGO": "Ring" if r != 1 else "Ring" + junk,
                                                                       "NCCL_PROTO": "LL"})]
    c, rows = proof(lines)
    assert "NCCL_ALGO" not in c.not_applied and c.confirmed == {"NCCL_PROTO": "LL"}
    assert "the echo of rank 1 was cut by the pipe" in rows["NCCL_ALGO"].why


def test_a_clean_other_value_is_not_applied():
    lines = [line for r in range(4) for line in rank_lines(r, echoes={"NCCL_ALGO": "Tree" if r == 2 else "Ring",
                                                                       "NCCL_PROTO": "LL"})]
    c, _rows = proof(lines)
    assert c.not_applied["NCCL_ALGO"] == "rank 2 echoed NCCL_ALGO=Tree but the trial launched Ring"


def test_a_cut_echo_on_the_pipe_is_rejoined_and_a_lost_tail_is_never_not_applied():
    whole = [line for r in range(4) for line in rank_lines(r, echoes=SET)]
    text = "\n".join(whole) + "\n"
    cut_at = text.index("to Ring", text.index("[1] NCCL INFO NCCL_ALGO")) + 5  # "...to Ri|ng"
    api = "INFO 06-01 12:00:09 [api_server.py:1] request done\n"
    rejoined = text[:cut_at] + api + text[cut_at:]
    c = confirmations(SET, parse_sources([server_log_source(rejoined)]))
    assert c.confirmed == SET, c
    lost = text[:cut_at] + api  # the worker was SIGKILLed: its tail never came (ranks 2, 3 lost too)
    c = confirmations(SET, parse_sources([server_log_source(lost)]))
    assert c.not_applied == {} and c.confirmed == {}


def test_a_mismatch_on_a_rejoined_line_proves_no_other_value():
    lines = [line for r in range(4) for line in rank_lines(r, echoes={"NCCL_ALGO": "Riple" if r == 1 else "Ring"})]
    index = lines.index(next(line for line in lines if "Riple" in line))
    c = confirmations({"NCCL_ALGO": "Ring"}, parse_sources([LogSource("server log", lines, (), 1, frozenset({index}))]))
    assert c.not_applied == {} and c.unverifiable == ["NCCL_ALGO"]


RAY = "(RayWorkerWrapper pid=2101, ip=10.0.0.1) "


@pytest.mark.parametrize("fold", [" [repeated 2x across cluster]",
                                  " [repeated 2x across cluster] (Ray deduplicates logs by default. Set "
                                  "RAY_DEDUP_LOGS=0 to disable log deduplication, or see https://docs.ray.io/en/master/"
                                  "ray-observability/user-guides/configure-logging.html#log-deduplication for more options.)"])
def test_folded_echoes_count_but_never_prove_the_ranks_they_hide(fold):
    lines = rank_lines(0, echoes=SET) + rank_lines(1, echoes=SET, wrapper=RAY)
    lines += [line + fold for line in rank_lines(3, echoes=SET, wrapper=RAY)]  # ranks 2 and 3, one shown
    c, rows = proof(lines)
    assert c.not_applied == {} and c.confirmed == {}
    row = rows["NCCL_ALGO"]
    assert row.echoed == (0, 1, 3) and "ranks 2 are hidden in Ray-folded lines" in row.why and "RAY_DEDUP_LOGS=0" in row.why


def test_ray_workers_that_completed_init_silently_get_ray_s_reason_without_a_server_s():
    base = rank_lines(0, echoes=SET) + rank_lines(1, wrapper=RAY) + rank_lines(2, wrapper=RAY) + rank_lines(3, wrapper=RAY)
    c, _ = proof(base)
    assert "Ray workers keep the environment of `ray start`" in c.not_applied["NCCL_ALGO"]
    assert "runtime_env" in c.not_applied["NCCL_ALGO"]
    said = []
    c = confirmations(SET, parse_log(base), server_version="9.9",
                      silent_why=lambda name, version, copied: said.append((name, version)) or f"{name} withheld")
    assert c.not_applied["NCCL_ALGO"].endswith("NCCL_ALGO withheld") and ("NCCL_ALGO", "9.9") in said


def test_rank_list_is_compact():
    assert rank_list([7, 0, 1, 2, 5, 8]) == "0-2, 5, 7-8" and rank_list([]) == ""


def test_debug_file_patterns_expand_as_nccl_does(tmp_path):
    assert expand_debug_file("/x/%h.%p.log", "gpu1", 42) == "/x/gpu1.42.log"
    assert expand_debug_file("a%%b%q%", "h", 1) == "a%b%q%"
    assert has_pid("n.%h.%p") and not has_pid("n.%h.log") and not has_pid("n.%%p")
    for host, pid in (("gpu1", 11), ("gpu2", 12), ("gpu1", 13)):
        (tmp_path / f"n.{host}.{pid}.log").write_text("x\n")
    (tmp_path / "other.log").write_text("x\n")
    found = find_debug_files(str(tmp_path / "n.%h.%p.log"))
    assert [(f.host, f.pid) for f in found] == [("gpu1", 11), ("gpu1", 13), ("gpu2", 12)]
    assert [f.pid for f in find_debug_files(str(tmp_path / "n.%h.%p.log"), pids=[12])] == [12]
    old = tmp_path / "n.gpu1.11.log"
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    assert 11 not in [f.pid for f in find_debug_files(str(tmp_path / "n.%h.%p.log"), since=time.time() - 60)]
    assert [f.pid for f in find_debug_files("n.%h.%p.log", cwd=tmp_path)] == [11, 13, 12]


def test_files_come_first_and_each_rank_says_its_source(tmp_path):
    for r in range(3):
        (tmp_path / f"gpu1.{100 + r}.log").write_text("\n".join(rank_lines(r, echoes=SET)) + "\n")
    server_log = "\n".join(rank_lines(3, echoes=SET)) + "\n"  # rank 3 could not open its file
    parsed = read_sources(server_log, str(tmp_path / "%h.%p.log"), show_from=tmp_path)
    c = confirmations(SET, parsed)
    assert c.confirmed == SET
    row = c.rows[0]
    assert row.sources == (("gpu1.100.log", 1), ("gpu1.101.log", 1), ("gpu1.102.log", 1), ("server log", 1))
    assert row.source_text() == "NCCL_DEBUG_FILE x3 + server log x1"
    assert str(parsed.nccl_version) == "2.27.3"


def test_ray_colour_codes_are_read_through():
    cyan, green, reset = "\x1b[36m", "\x1b[32m", "\x1b[0m"
    coloured = f"{cyan}(RayWorkerWrapper pid=2101, ip=10.0.0.1){reset} "
    lines = rank_lines(0, echoes=SET) + rank_lines(1, wrapper=coloured)
    lines += [f"{line}{green} [repeated 2x across cluster]{reset}" for line in rank_lines(3, wrapper=coloured)]
    c = confirmations(SET, parse_sources([server_log_source("\n".join(lines) + "\n")]))
    assert c.not_applied["NCCL_ALGO"].startswith("ranks 1, 3 logged communicator init")
    assert "ranks 2 are hidden in Ray-folded lines" in c.not_applied["NCCL_ALGO"]


def test_two_tp_groups_are_both_counted():
    # PP 2 x TP 4: two communicators of 4 ranks, on 8 processes; the second group never got the set
    group_a = [line for r in range(4) for line in rank_lines(r, echoes=SET, host="gpu1")]
    group_b = [line for r in range(4) for line in rank_lines(r, host="gpu2")]
    c, _rows = proof(group_a + group_b)
    assert set(c.not_applied) == {"NCCL_ALGO", "NCCL_PROTO"} and "4 echoes for 8 ranks" in c.not_applied["NCCL_ALGO"]


def test_another_servers_files_in_a_shared_place_are_not_read(tmp_path):
    # two servers on one host share a user's NCCL_DEBUG_FILE place; the other one's ranks echoed LL
    mine = [100, 101, 102, 103]
    for r in range(4):
        (tmp_path / f"gpu1.{100 + r}.log").write_text("\n".join(rank_lines(r)) + "\n")  # ours: never got NCCL_PROTO
        other = [line.replace(f":{100 + r}:", f":{200 + r}:") for line in rank_lines(r, echoes={"NCCL_PROTO": "LL"})]
        (tmp_path / f"gpu1.{200 + r}.log").write_text("\n".join(other) + "\n")
    parsed = read_sources("", str(tmp_path / "%h.%p.log"), pids=mine)
    c = confirmations({"NCCL_PROTO": "LL"}, parsed)
    assert "NCCL_PROTO" in c.not_applied and parsed.nranks == 4 and len(parsed.comm_ranks) == 4
    # one file for every process (no %p): only the lines of this launch's processes
    shared = tmp_path / "one.log"
    shared.write_text("".join((tmp_path / f"gpu1.{p}.log").read_text() for p in (100, 200, 101, 201, 102, 202, 103, 203)))
    parsed = read_sources("", str(shared), pids=mine)
    assert sorted(parsed.comm_ranks) == [f"gpu1:{p}" for p in mine]
