"""The dry run's line on NCCL's default P2P level, judged before the baseline from the config
(``[nccl] version`` and ``cpu_vendor``) and the server's tensor-parallel size
(src/graph/paths.cc, ncclTopoCheckP2p, by tag: see :func:`tuner.nccl.default_p2p_level`)."""

from __future__ import annotations

import sys

from tuner.inputs.config import load_config
from tuner.nccl import NcclVersion, Topology
from tuner.planning import Facts, rules_before_the_night
from tuner.sweep.dryrun import _tp_size, p2p_default_line

V227, V222 = NcclVersion(2, 27, 3), NcclVersion(2, 22, 3)


def test_known_from_the_config():
    assert p2p_default_line(Facts(V227, None, "AMD"), 8) == (
        "NCCL_P2P_LEVEL default here: PXB (NCCL 2.27.3, AMD, 8 GPUs; src/graph/paths.cc ncclTopoCheckP2p)")
    assert "SYS (NCCL 2.27.3, AMD, 2 GPUs;" in p2p_default_line(Facts(V227, None, "AMD"), 2)
    assert "SYS (NCCL 2.22.3, AMD, 8 GPUs;" in p2p_default_line(Facts(V222, None, "AMD"), 8)
    assert "PXB (NCCL 2.22.3, Intel, 8 GPUs;" in p2p_default_line(Facts(V222, None, "Intel"), 8)
    # 2.23+ on 8 GPUs: PXB whatever the CPU; Intel: PXB whatever the release
    assert "PXB (NCCL 2.27.3, any CPU, 8 GPUs;" in p2p_default_line(Facts(V227), 8)
    assert "PXB (every supported NCCL, Intel, 8 GPUs;" in p2p_default_line(Facts(None, None, "Intel"), 8)


def test_not_known_yet():
    head = "NCCL_P2P_LEVEL default here: not known yet (it needs "
    tail = "; the baseline will tell)"
    assert p2p_default_line(Facts(None, None, "AMD"), 8) == head + "[nccl] version" + tail  # 2.22 SYS, 2.23+ PXB
    assert p2p_default_line(Facts(V222), 8) == head + "[nccl] cpu_vendor" + tail  # the CPU decides up to 2.22
    assert p2p_default_line(Facts(V227, None, "AMD")) == (  # the GPU count decides on AMD
        head + "the GPU count (a --tensor-parallel-size in the server command)" + tail)


def test_the_log_topology_wins_and_takes_the_config_cpu_when_it_named_none():
    logged = Topology(nranks=4, link="pcie", cpu_vendor="Intel")
    assert Facts(V227, logged, "AMD").cpu == "Intel"
    facts = Facts(V227, Topology(nranks=2, link="pcie"), "AMD")
    assert facts.topology is not None and facts.topology.cpu_vendor == "AMD" and facts.cpu == "AMD"
    assert "SYS (NCCL 2.27.3, AMD, 2 GPUs;" in p2p_default_line(facts, 8)  # the topology's count, not the flag's


def test_tensor_parallel_flags():
    assert _tp_size(["vllm", "serve", "m", "--tensor-parallel-size", "8"]) == 8
    assert _tp_size(["vllm", "serve", "m", "-tp=4"]) == 4
    assert _tp_size(["python", "-m", "sglang.launch_server", "--tp-size", "2"]) == 2
    assert _tp_size(["vllm", "serve", "m"]) is None


def test_rules_before_the_night_read_cpu_vendor(tmp_path):
    (tmp_path / "space.toml").write_text('[variables.NCCL_PROTO]\nvalues = ["LL"]\n')
    path = tmp_path / "exp.toml"
    path.write_text(f'[server]\ncommand = ["{sys.executable}", "serve", "--port", "{{port}}"]\n'
                    f'[sweep]\nspace = "{tmp_path / "space.toml"}"\n[nccl]\nversion = "2.27.3"\ncpu_vendor = "amd"\n')
    facts = rules_before_the_night(load_config(path), None).facts()
    assert facts.version == V227 and facts.cpu_vendor == "AMD" and facts.topology is None
