"""NCCL's lines as launchers, servers and NCCL versions spell them, beyond the eight real logs:
each prefix stripped by the one home (tuner.nccl.lines), each line read for who logged it."""

from __future__ import annotations

import pytest

from tests.unit.readlog.facts import REALLOGS
from tuner.nccl import confirmations, machine_from_log, parse_log, strip_launcher
from tuner.nccl.lines import read_line, strip_wrappers
from tuner.nccl.p2p import LEVEL_VARIABLES, read_level, read_p2p_level
from tuner.nccl.types import NcclVersion
from tuner.screen import parse_output

LINE = "gpu-3:4773:4790 [1] NCCL INFO comm 0x55d0 rank 5 nRanks 8 nNodes 1 localRanks 8 localRank 5 MNNVL 0"


@pytest.mark.parametrize("prefix", [
    "[1,5]<stdout>:",                                # mpirun --tag-output
    "Thu Jul 18 15:41:05 2024<stdout>:",             # mpirun --timestamp-output
    "Thu Jul  4 09:01:05 2024[1,5]<stderr>:",        # both, a one-digit day
    "5: ", " 5: ", "12: ",                           # srun --label, right-aligned task ids
    "[5] ",                                          # MPICH/Hydra -prepend-rank
    "[rank5]:", "[default5]:",                       # torchrun
    "2024-06-07T10:19:28.123456789Z ",               # docker logs -t, kubectl logs --timestamps
    "2024-06-07T10:19:28+02:00 ",
    "\x1b[36m(RayWorkerVllm pid=4773)\x1b[0m ",      # Ray, coloured
    "ESC[36m(RayWorkerVllm pid=4773)ESC[0m ",        # Ray, colour pasted as text
    "(RayWorkerVllm pid=4773) ",                     # vLLM's older Ray actor
    "(RayWorkerWrapper pid=4773, ip=10.0.0.7) ",
    "2024-06-07T10:19:28.1Z [1,5]<stdout>:ESC[36m(RayWorkerVllm pid=4773)ESC[0m ",  # several at once
])
def test_every_launcher_prefix_leaves_the_nccl_line(prefix):
    body, _rank, folded = strip_wrappers(prefix + LINE)
    line = read_line(body)
    assert line is not None and folded == 0
    assert (line.process, line.thread, line.dev) == ("gpu-3:4773", "gpu-3:4773:4790", 1)
    parsed = parse_log([prefix + LINE])
    assert parsed.thread_ranks == {"gpu-3:4773:4790": {5}} and parsed.ranks == [5]


@pytest.mark.parametrize("tail", [" [repeated 4x across cluster]", "\x1b[32m [repeated 4x across cluster]\x1b[0m",
                                  "ESC[32m [repeated 4x across cluster] (Ray deduplicates logs by default. Set RAY",
                                  " [repeated 4x across cluster] (Ray deduplicates logs by default.)"])
def test_ray_fold_tail_with_or_without_colour(tail):
    body, _rank, folded = strip_wrappers("(RayWorkerVllm pid=4773) " + LINE + tail)
    assert folded == 4 and body == LINE


def test_nccls_own_bracket_is_not_a_launcher_rank():
    for text in ("[1] NCCL INFO Broadcast: opCount a", "[1] 15269.938482 topoGetAlgoInfo:1535 NCCL TRACE 24 Bytes"):
        assert strip_launcher(text) == text
        assert read_line(strip_wrappers(text)[0]).dev == 1


def test_a_redacted_bracketed_host_is_still_a_process():
    line = read_line("[pod-name]:4773:4773 [1] NCCL INFO NCCL_P2P_LEVEL set by environment to NVL")
    assert line is not None and line.process == "[pod-name]:4773" and line.thread == "[pod-name]:4773:4773"
    assert line.host == "[pod-name]"


def test_torchrun_prefix_is_not_a_bracketed_host():
    line = read_line(strip_wrappers("[default0]:node:12:13 [0] NCCL INFO x")[0])
    assert line is not None and line.process == "node:12"


def test_nccl_2_18_hex_bus_ids_and_transport_to_the_end_of_the_line():
    lines = [
        "n:10:11 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0",
        "n:10:11 [0] NCCL INFO Channel 00/0 : 0[101c0] -> 1[101d0] via P2P/IPC/read",
        "n:10:12 [1] NCCL INFO Channel 00/0 : 1[101d0] -> 0[101c0] via P2P/IPC/read",
        "n:10:13 [1] NCCL INFO Channel 01/0 : 1[101d0] -> 0[101c0] via P2P/direct pointer/read",
        "n:10:14 [0] NCCL INFO Channel 02/0 : 0[1a000] -> 1[1b000] [receive] via NET/Some Plugin v9/0/GDRDMA",
        "n:10:15 [0] NCCL INFO Channel 02 : 0[101c0] -> 1[101d0] via SHM/direct/direct comm 0x55 nRanks 02",
    ]
    parsed = parse_log(lines)
    assert parsed.peers == {(0, 1, "P2P/IPC/read"): 1, (1, 0, "P2P/IPC/read"): 1, (1, 0, "P2P/direct pointer/read"): 1,
                            (0, 1, "NET/Some Plugin v9/0/GDRDMA"): 1, (0, 1, "SHM/direct/direct"): 1}
    # the sender logs P2P/SHM lines, the receiver [receive] lines
    assert parsed.thread_ranks == {"n:10:11": {0}, "n:10:12": {1}, "n:10:13": {1}, "n:10:14": {1}, "n:10:15": {0}}
    machine = machine_from_log(parsed)
    assert machine is not None and machine.p2p_pairs == {(0, 1), (1, 0)} and machine.shm_pairs == {(0, 1)}
    assert machine.net_pairs == {(0, 1)}


def test_net_echo_without_by_environment_and_a_period_dropped():
    parsed = parse_log(["h:1:1 [0] NCCL INFO NCCL_IB_HCA set to mlx5_0:1,mlx5_1:1",
                        "h:1:1 [0] NCCL INFO NCCL_SOCKET_IFNAME set to enp1s0f1np1",
                        "h:1:1 [0] NCCL INFO NCCL_BUFFSIZE set by environment to 4194304.",
                        "h:1:1 [0] NCCL INFO P2P Chunksize set to 524288"])
    assert parsed.echoes == {"NCCL_IB_HCA": {"h:1": "mlx5_0:1,mlx5_1:1"}, "NCCL_SOCKET_IFNAME": {"h:1": "enp1s0f1np1"},
                             "NCCL_BUFFSIZE": {"h:1": "4194304"}}


def test_diag_lines_of_2_31_are_kept_apart():
    parsed = parse_log(["h:1:2 [0] NCCL DIAG P2P 0 -> 1: 250.1 GB/s read, 248.9 GB/s write",
                        "h:1:2 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0"])
    assert parsed.diag == ["P2P 0 -> 1: 250.1 GB/s read, 248.9 GB/s write"]
    assert parsed.info_lines == 1 and parsed.threads == {"h:1:2"}


@pytest.mark.parametrize(("name", "value", "echo"), [("NCCL_NET_GDR_LEVEL", "1", "PIX"), ("NCCL_NET_GDR_LEVEL", "2", "PXB"),
                                                     ("NCCL_NET_GDR_LEVEL", "PHB", "PHB"), ("NCCL_P2P_LEVEL", "4", "SYS"),
                                                     ("NCCL_P2P_LEVEL", "NVL", "NVL")])
def test_every_level_variable_compares_by_its_level_name(name, value, echo):
    assert name in LEVEL_VARIABLES
    assert read_level(name, value, NcclVersion(2, 26, 5))[0] == echo
    lines = [f"h:{10 + r}:{20 + r} [{r}] NCCL INFO {text}" for r in range(2) for text in (
        f"{name} set by environment to {echo}",
        f"comm 0x{r} rank {r} nRanks 2 nNodes 1 localRanks 2 localRank {r} MNNVL 0",
        f"ncclCommInitRank comm 0x{r} rank {r} nranks 2 cudaDev {r} nvmlDev {r} busId 0 commId 0x9 - Init COMPLETE")]
    proof = confirmations({name: value}, parse_log(lines), NcclVersion(2, 26, 5))
    assert proof.confirmed == {name: echo} and proof.rows[0].echoed == (0, 1)


def test_read_p2p_level_is_the_level_reader():
    assert read_p2p_level("2", NcclVersion(2, 21, 5)) == read_level("NCCL_P2P_LEVEL", "2", NcclVersion(2, 21, 5))


def test_one_process_running_two_ranks_confirms_for_both():
    """nccl-tests -t 2: one process, one thread per rank; each variable echoed once per process."""
    lines = (REALLOGS / "01-ncclt331-a100-sendrecv-2.22.3.log").read_text().splitlines()
    proof = confirmations({"NCCL_P2P_LEVEL": "NVL", "NCCL_BUFFSIZE": "4194304"}, parse_log(lines))
    assert proof.not_applied == {} and proof.unverifiable == []
    assert {row.name: row.echoed for row in proof.rows} == {"NCCL_P2P_LEVEL": (0, 1), "NCCL_BUFFSIZE": (0, 1)}


def test_one_process_running_two_ranks_that_echoed_another_value_is_not_applied():
    lines = (REALLOGS / "01-ncclt331-a100-sendrecv-2.22.3.log").read_text().splitlines()
    proof = confirmations({"NCCL_P2P_LEVEL": "SYS"}, parse_log(lines))
    assert "NCCL_P2P_LEVEL" in proof.not_applied and proof.not_applied["NCCL_P2P_LEVEL"].startswith("ranks 0-1 echoed NCCL_P2P_LEVEL=NVL")


def test_eight_ranks_in_one_process_are_eight_threads_in_the_machine_model():
    lines = (REALLOGS / "10-ncclt307-8x4090-dualsocket-graph.log").read_text().splitlines()
    parsed = parse_log(lines)
    assert len(parsed.threads) == 8 and parsed.ranks_of == {"node031:1936469": set(range(8))}
    machine = machine_from_log(parsed)
    assert machine is not None and machine.shm_pairs == {(r, (r + 1) % 8) for r in range(8)}
    assert machine.process == "node031:1936469" and machine.thread is not None


@pytest.mark.parametrize("prefix", ["0: ", "[0] ", "[rank0]:", "2024-06-07T10:19:28.123456789Z ",
                                    "Thu Jul 18 15:41:05 2024<stdout>:", "[1,0]<stdout>:"])
def test_nccl_tests_rows_behind_every_launcher_prefix(prefix):
    text = "\n".join(prefix + line for line in [
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)",
        "     1048576        262144     float     sum      -1    354.9    2.95    5.76      0    345.7    3.03    5.92      0",
    ])
    rows = parse_output(text).rows
    assert len(rows) == 1 and rows[0].size_bytes == 1048576 and rows[0].out_of_place.busbw_GBps == 5.76


def test_a_silent_process_of_two_ranks_is_named_by_both():
    """Two processes of two ranks each (threads 20+r): the first echoes NCCL_ALGO, the second
    reaches Init COMPLETE without it, so its two ranks never saw it."""
    lines = []
    for r in range(4):
        pid, tid = 10 + r // 2, 20 + r
        if r == 0:
            lines.append(f"h:{pid}:{tid} [{r}] NCCL INFO NCCL_ALGO set by environment to Ring")
        lines += [f"h:{pid}:{tid} [{r}] NCCL INFO comm 0x{r} rank {r} nRanks 4 nNodes 1 localRanks 4 localRank {r} MNNVL 0",
                  f"h:{pid}:{tid} [{r}] NCCL INFO ncclCommInitRank comm 0x{r} rank {r} nranks 4 cudaDev {r} nvmlDev {r} "
                  "busId 0 commId 0x9 - Init COMPLETE"]
    proof = confirmations({"NCCL_ALGO": "Ring"}, parse_log(lines), NcclVersion(2, 26, 5))
    why = proof.not_applied["NCCL_ALGO"]
    assert why.startswith("ranks 2-3 logged communicator init through Init COMPLETE but never echoed NCCL_ALGO")
    assert "2 echoes for 4 ranks" in why and proof.rows[0].echoed == (0, 1)
