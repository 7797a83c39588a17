"""Every fact tests/fixtures/reallogs/README.md lists for each real log, as ``read-log --json`` gives it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

REALLOGS = Path(__file__).resolve().parents[2] / "fixtures" / "reallogs"


def _pairs(*pairs: tuple[int, int, str]) -> list[dict[str, Any]]:
    return [{"from": a, "to": b, "via": via} for a, b, via in sorted(pairs)]


def _busbw(rows: list[dict[str, Any]]) -> dict[int, float]:
    return {r["size"]: r["busbw"] for r in rows}


def check_01(d: dict[str, Any]) -> None:
    assert d["nccl_version"] == "2.22.3"
    assert d["ranks"] == [0, 1]
    assert d["processes"] == [f"lrdn2296:4063850:{t}" for t in (4063850, 4063871, 4063872, 4063882, 4063883)]
    assert d["echoes"] == {"NCCL_P2P_LEVEL": {"value": "NVL", "ranks": [0, 1]},
                           "NCCL_BUFFSIZE": {"value": "4194304", "ranks": [0, 1]}}
    assert d["peers"] == _pairs((0, 1, "P2P/direct pointer/read"), (1, 0, "P2P/direct pointer/read"))
    rows = d["nccl_tests"]
    assert len(rows) == 29 and rows[0]["size"] == 8 and rows[-1]["size"] == 2147483648
    assert _busbw(rows)[8] == 0.0 and _busbw(rows)[1048576] == 23.13
    assert _busbw(rows)[134217728] == 73.20 and _busbw(rows)[2147483648] == 71.74
    assert d["backend"] is None


def check_02(d: dict[str, Any]) -> None:
    assert d["nccl_version"] is None
    assert d["processes"] == ["node1:5170:5356", "node1:5182:5359", "node_2:4254:4327"]
    assert d["ranks"] == [2, 7]  # the receivers; 8-15 of the topology dump are not stated
    assert d["peers"] == _pairs((15, 7, "NET/IB/11/GDRDMA"), (10, 2, "NET/IB/14/GDRDMA"))
    assert d["echoes"] == {} and d["nccl_tests"] == [] and d["backend"] is None


def check_04(d: dict[str, Any]) -> None:
    assert d["nccl_version"] == "2.28.9"
    assert d["ranks"] == [0, 1]
    assert d["processes"] == ["spark-4440:24302:24302", "spark-4440:24302:24310", "spark-4440:24302:24312",
                              "spark-fb97:23491:23491", "spark-fb97:23491:23501"]
    assert d["echoes"] == {"NCCL_SOCKET_IFNAME": {"value": "enp1s0f1np1", "ranks": [0, 1]}}
    assert d["peers"] == _pairs((0, 1, "NET/IB/0"), (1, 0, "NET/IB/0"), (0, 1, "NET/IB/1"), (1, 0, "NET/IB/1"))
    assert d["nccl_tests"] == [{"size": 1073741824, "busbw": 21.99}]
    assert d["backend"] is None


def check_05(d: dict[str, Any]) -> None:
    assert d["nccl_version"] == "2.26.5"
    assert d["ranks"] == [0, 1, 2, 3]
    pids = {p.rsplit(":", 1)[0] for p in d["processes"]}
    assert pids == {"vm-host40:34001", "vm-host40:34002", "vm-host38:33957", "vm-host38:33958"}
    assert len(d["processes"]) > 4  # each with several threads
    assert d["echoes"] == {
        "NCCL_SOCKET_IFNAME": {"value": "bond0", "ranks": [0, 1, 2, 3]},
        "NCCL_P2P_LEVEL": {"value": "NVL", "ranks": [0, 1, 2, 3]},
        "NCCL_PXN_DISABLE": {"value": "0", "ranks": [0, 1, 2, 3]},
        "NCCL_NET_GDR_LEVEL": {"value": "PIX", "ranks": [0, 1, 2, 3]},
        "NCCL_IB_QPS_PER_CONNECTION": {"value": "4", "ranks": [0, 2]},
        "NCCL_IB_GID_INDEX": {"value": "3", "ranks": [0, 2]},
        "NCCL_IB_TC": {"value": "160", "ranks": [2]},
        "NCCL_IB_TIMEOUT": {"value": "21", "ranks": [2]},
    }
    assert d["peers"] == _pairs((0, 1, "P2P/CUMEM"), (1, 0, "P2P/CUMEM"), (2, 3, "P2P/CUMEM"), (3, 2, "P2P/CUMEM"),
                                (1, 2, "NET/NCCL RDMA Plugin v6/0/GDRDMA/Shared"),
                                (3, 0, "NET/NCCL RDMA Plugin v6/0(2)/GDRDMA/Shared"))
    rows = d["nccl_tests"]
    assert len(rows) == 13 and rows[0]["size"] == 1048576 and rows[-1]["size"] == 4294967296
    assert _busbw(rows)[1048576] == 14.85 and _busbw(rows)[16777216] == 43.69 and _busbw(rows)[4294967296] == 50.25
    assert d["backend"] is None


def check_09(d: dict[str, Any]) -> None:
    assert d["nccl_version"] == "2.21.5"
    assert d["backend"] == "nccl"
    assert d["ranks"] == [] and d["processes"] == [] and d["echoes"] == {} and d["peers"] == []
    assert d["nccl_tests"] == []


def check_10(d: dict[str, Any]) -> None:
    assert d["nccl_version"] is None
    assert d["ranks"] == list(range(8))
    assert d["processes"] == [f"node031:1936469:{1936513 + r}" for r in range(8)]
    assert d["peers"] == _pairs(*((r, (r + 1) % 8, "SHM/direct/direct") for r in range(8)))
    assert d["echoes"] == {} and d["nccl_tests"] == [] and d["backend"] is None


def check_13(d: dict[str, Any]) -> None:
    host = "mwh-deployment-cp2nvtm93l1ljsuft5kg-0"
    assert d["processes"] == [f"{host}:291:4483", f"{host}:291:5595", f"{host}:4095:4095", f"{host}:4095:4484",
                              f"{host}:4298:4298"]
    assert d["ranks"] == [0, 1]
    assert d["echoes"] == {"NCCL_LAUNCH_MODE": {"value": "GROUP", "ranks": [1]}}
    assert d["peers"] == _pairs((1, 2, "SHM/direct/direct"))
    assert d["backend"] == "nccl"
    assert d["nccl_tests"] == [] and d["nccl_version"] is None


def check_16(d: dict[str, Any]) -> None:
    assert d["nccl_tests"] == [{"size": 1048576, "busbw": 5.76}]
    assert d["nccl_version"] is None and d["ranks"] == [] and d["processes"] == []
    assert d["echoes"] == {} and d["peers"] == [] and d["backend"] is None


CHECKS = {
    "01-ncclt331-a100-sendrecv-2.22.3.log": check_01,
    "02-ncclt256-h200vm-amd-graph.log": check_02,
    "04-dgxspark-allgather-2.28.9.log": check_04,
    "05-ncclt321-h20vm-alltoall-2.26.5.log": check_05,
    "09-vllm0.6.6-tp8-pcie-customar-off-2.21.5.log": check_09,
    "10-ncclt307-8x4090-dualsocket-graph.log": check_10,
    "13-vllm5405-ray-literal-ESC.log": check_13,
    "16-nccl1368-mpirun-timestamp-output.log": check_16,
}
