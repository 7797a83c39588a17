"""Which failed launches are machine-suspect (tuner/server/machine.py), each spelling."""

from __future__ import annotations

import pytest

from tuner.launchers import launcher_of
from tuner.server.machine import before_nccl, machine_line

MACHINE = [
    # vLLM 0.10 V1 (vllm/v1/worker/gpu_worker.py, init_device), with its worker prefix; 0.11 names the device
    ("(VllmWorker rank=0 pid=2411) ERROR 06-01 12:00:05 [multiproc_executor.py:546] ValueError: Free memory on "
     "device (10.79/79.19 GiB) on startup is less than desired GPU memory utilization (0.9, 71.27 GiB).",
     "a start-up memory guard"),
    ("ValueError: Free memory on device cuda:0 (10.79/79.19 GiB) on startup is less than desired GPU memory "
     "utilization (0.9, 71.27 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
     "a start-up memory guard"),
    # SGLang (srt/model_executor/model_runner.py, init_torch_distributed)
    ("[2025-04-23 21:31:41 TP1] RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other "
     "processes. min_per_gpu_memory=10.2, local_gpu_memory=79.1, local_gpu_memory * 0.9=71.2", "a start-up memory guard"),
    ("RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable", "a busy device"),
    ("torch.AcceleratorError: CUDA error: CUDA-capable device(s) is/are busy or unavailable", "a busy device"),
    ("cudaErrorDevicesUnavailable", "a busy device"),
    ("CUDA_ERROR_DEVICE_UNAVAILABLE", "a busy device"),
    ('docker: Error response from daemon: Conflict. The container name "/vllm-tune" is already in use by container '
     '"3f1c". You have to remove (or rename) that container to be able to reuse that name.',
     "a container name still in use"),
    ('Error: creating container storage: the container name "vllm-tune" is already in use by 3f1c. You have to remove '
     "that container to be able to reuse that name: that name is already in use", "a container name still in use"),
    ("docker: Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?",
     "the container engine unreachable"),
]


#: A container launch's own machine lines (a name conflict, no daemon) beside the generic ones.
CONTAINER = launcher_of(["podman", "run", "--rm", "img"]).machine_lines


@pytest.mark.parametrize(("line", "what"), MACHINE)
def test_each_spelling_is_the_machines(line: str, what: str) -> None:
    assert machine_line(["INFO: loading", line], CONTAINER) == (what, line.strip())


@pytest.mark.parametrize("line", [
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",  # the set's buffers may do that
    "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`",
    "RuntimeError: NCCL error: unhandled system error",
    "vllm serve: error: unrecognized arguments: --bogus",
    "ValueError: Free memory on the host is low",
])
def test_other_failures_are_not(line: str) -> None:
    assert machine_line([line], CONTAINER) is None


def test_a_launcher_s_own_lines_are_the_machine_s_only_under_that_launcher() -> None:
    srun = launcher_of(["srun", "-n", "2", "python", "serve.py"]).machine_lines
    busy = "srun: error: Unable to allocate resources: Requested nodes are busy"
    assert machine_line([busy], srun) == ("Slurm resources busy", busy)
    assert machine_line([busy]) is None  # a plain process's log saying so is no launcher's
    docker = launcher_of(["docker", "run", "--rm", "img"]).machine_lines
    conflict = ('docker: Error response from daemon: Conflict. The container name "/x" is already in use by '
                'container "abc". You have to remove (or rename) that container to be able to reuse that name.')
    assert machine_line([conflict], docker) == ("a container name still in use", conflict)


def test_a_crash_before_nccls_first_line_is_not_a_sets_of_nccl_variables() -> None:
    nccl = {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"}
    assert before_nccl(nccl, [], nccl_logging=True, nccl_seen=False)
    assert not before_nccl(nccl, [], nccl_logging=True, nccl_seen=True)  # NCCL loaded: it may be the set's
    assert not before_nccl(nccl, [], nccl_logging=False, nccl_seen=False)  # NCCL not asked to log: no proof
    assert not before_nccl(nccl, ["--disable-custom-all-reduce"], nccl_logging=True, nccl_seen=False)  # a flag acts
    assert not before_nccl({"NCCL_PROTO": "LL", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}, [], nccl_logging=True,
                           nccl_seen=False)  # CUDA reads it at context creation, before NCCL
    assert not before_nccl({}, [], nccl_logging=True, nccl_seen=False)  # the baseline: the command's own
