"""vLLM (``vllm serve``, ``python -m vllm.entrypoints.openai.api_server``), as read in its
released source, v0.10.1.1 to v0.11.0 (and the lines older releases printed, where cited).

Command: ``vllm/entrypoints/cli/serve.py`` (the model is ``serve``'s positional, or ``--model``);
``vllm/engine/arg_utils.py``, ``EngineArgs.add_cli_args`` (``--tensor-parallel-size``/``-tp``);
``vllm/entrypoints/openai/cli_args.py`` (``--port``, default 8000). Routes:
``vllm/entrypoints/openai/api_server.py`` (``/health``, ``/v1/models``). Log: ``"vLLM API server
version %s"`` (api_server.py, run_server); ``"Initializing a V1 LLM engine (v%s)"``
(vllm/v1/engine/core.py); ``"vLLM is using nccl==%s"`` (vllm/distributed/device_communicators/
pynccl.py, PyNcclCommunicator.__init__). The start-up memory guard, measured before NCCL loads:
``"Free memory on device (%.2f/%.2f GiB) on startup is less than desired GPU memory utilization
(%.2f, %.2f GiB)"`` (vllm/v1/worker/gpu_worker.py, Worker.init_device, v0.10.1.1 and v0.11.0;
``vllm/utils/__init__.py``'s MemorySnapshot). CUDA-graph capture (``"Capturing CUDA graphs"``,
vllm/v1/worker/gpu_model_runner.py, capture_model) and torch.compile (``"Compiling a graph for
dynamic shape"``, vllm/compilation/backends.py). Wrappers that point at the root error:
``"Engine core initialization failed. See root cause above"`` (vllm/v1/engine/utils.py,
wait_for_engine_startup), ``EngineDeadError`` (vllm/v1/engine/exceptions.py), ``"EngineCore
failed to start"`` / ``"EngineCore encountered a fatal error"`` (vllm/v1/engine/core.py), ``"Error
executing method %s. This might cause deadlock in distributed execution."`` (vllm/worker/
worker_base.py, v0.4-v0.9), ``"Exception in worker %s while processing method %s"``
(vllm/executor/multiproc_worker_utils.py, v0.5-v0.9), ``"Worker failed with error %s, please
check the stack trace above for the root cause"`` (vllm/v1/executor/multiproc_executor.py).
Harmless lines: ``"Failed to import from vllm._C with %r"`` (vllm/_custom_ops.py, a CPU-only
import) and ``"Failed to read commit hash"`` (vllm/version.py, a source checkout). Its own variables start with ``VLLM_``
(vllm/envs.py); ``VLLM_API_KEY`` is read when ``--api-key`` is unset (api_server.py).

A server across nodes (the mp executor, no Ray): ``--nnodes/-n``, ``--node-rank/-r``,
``--master-addr``, ``--master-port`` (vllm/engine/arg_utils.py, ``EngineArgs.add_cli_args``'s
parallel group; ``ParallelConfig.nnodes``/``node_rank``/``master_addr``/``master_port``, vllm/config/
parallel.py), added by vllm-project/vllm PR #23691 "[V1] Support MP Executor for multi node
distributed inference" (merged 2025-11-14; first release v0.12.0, not re-read at that tag here), and
``--headless`` (vllm/entrypoints/cli/serve.py: the engine without the API server) on every node
but the head.
"""

from __future__ import annotations

import re

from tuner.servers.kind import ServerKind

__all__ = ["RAY_COPIES_NCCL_FROM", "VLLM", "node_flags", "ray_silent_why"]

#: vLLM copies ``NCCL_*`` to Ray workers from 0.17.0 (vllm/ray/ray_env.py, vllm-project/vllm PR #34383);
#: before, only its own registered variables ("Copying the following environment variables to workers",
#: vllm/executor/ray_distributed_executor.py up to 0.16).
RAY_COPIES_NCCL_FROM = (0, 17, 0)


def _release(version: str | None) -> tuple[int, ...] | None:
    m = re.match(r"v?(\d+)\.(\d+)(?:\.(\d+))?", version or "")
    return tuple(int(x or 0) for x in m.groups()) if m else None


def ray_silent_why(name: str, version: str | None, copied: list[str] | None) -> str:
    """Why vLLM ``version``'s Ray workers never saw ``name`` (``copied``: the names its Ray
    executor said it copies, None when not said): from 0.17.0 vLLM copies ``NCCL_*`` itself, so
    the worker's node withheld it; before, it copies only its own variables."""
    release = _release(version)
    if release is not None and release >= RAY_COPIES_NCCL_FROM and name.startswith("NCCL_") and (
            copied is None or any(c.startswith("NCCL_") for c in copied)):
        return (f"vLLM {version} copies NCCL_* to its Ray workers (vllm/ray/ray_env.py), so the worker node withheld "
                "it: a value set where that node's `ray start` ran wins; check that node's environment.")
    listed = f" (this log: 'Copying the following environment variables to workers: {copied}')" if copied is not None else ""
    who = f"vLLM {version}" if version else "vLLM before 0.17.0 (this log names no vLLM version)"
    return (f"Ray workers keep the environment of `ray start`, and {who} copies only its own variables to them"
            f"{listed}. Export {name} before `ray start` on every node, or put {name} in Ray's "
            "runtime_env={'env_vars': {...}}; vLLM 0.17.0 and later copy NCCL_* to Ray workers themselves.")


def node_flags(nnodes: int, rank: int, head: str, dist_port: int) -> tuple[str, ...]:
    """vLLM's flags for node ``rank`` of ``nnodes`` (see the module docstring)."""
    flags = ("--nnodes", str(nnodes), "--node-rank", str(rank), "--master-addr", head, "--master-port", str(dist_port))
    return (*flags, "--headless") if rank > 0 else flags


VLLM = ServerKind(
    name="vllm",
    title="vLLM",
    command=(r"\bvllm\b",),
    log_marks=(r"\bvLLM\b", r"vllm\.entrypoints", r"\(VllmWorker\b", r"\(Worker_TP\d", r"\(EngineCore"),
    tp_options=("--tensor-parallel-size", "-tp"),
    model_options=("--model",),
    model_after="serve",
    default_port=8000,
    # custom allreduce off: NCCL carries every allreduce (vllm/engine/arg_utils.py,
    # EngineArgs.disable_custom_all_reduce), the correctness gate's reference configuration
    reference_flags=("--disable-custom-all-reduce",),
    version_lines=(r"vLLM API server version (?P<v>\d\S*)", r"Initializing an? (?:V\d )?LLM engine \(v(?P<v2>\d[^)\s]*)\)"),
    nccl_version_lines=(r"\bvLLM is using nccl==(?P<v>\d+\.\d+\.\d+)",),
    fatal_lines=(r"EngineDeadError", r"EngineCore encountered a fatal error"),
    machine_lines=(r"Free memory on device .{0,40}on startup is less than desired GPU memory utilization",),
    warmup_lines=(r"Capturing CUDA graph", r"Capturing cudagraphs", r"Compiling a graph for", r"torch\.compile"),
    log_prefixes=(r"\((?:VllmWorker|Worker_TP\d+|EngineCore\w*|APIServer|RayWorkerWrapper)[^()]*pid=\d+[^()]*\) ?",),
    benign_lines=(r"Failed to import from vllm\._C with", r"Failed to read commit hash"),
    env_prefixes=("VLLM_",),
    api_key_env=("VLLM_API_KEY",),
    launch_line="{env}vllm serve MODEL --tensor-parallel-size {tp}{flags}",
    ray_silent_why=ray_silent_why,
    # api_server.py, run_server_worker; entrypoints/utils.py, log_non_default_args (older: cli_args.py);
    # before 0.6: "args: Namespace(host=None, port=8000, ..."
    port_lines=(r"Starting vLLM API server(?: \d+)? on https?://(?:\[[^\]]*\]|[^\s:/]+):(?P<port>\d{1,5})",
                r"non-default args: \{.*'port': (?P<port2>\d{1,5})\b", r"\bargs: Namespace\(.*?[(,\s]port=(?P<port3>\d{1,5})\b"),
    wrapper_lines=(r"Engine core initialization failed", r"EngineCore encountered (?:an issue|a fatal error)",
                   r"EngineCore failed to start", r"EngineCore hit an exception", r"\b(?:Async)?EngineDeadError\b",
                   r"Error executing method", r"Worker failed with error",
                   r"Exception in worker \S+ while processing method"),
    sources="vllm v0.10.1.1, v0.11.0: entrypoints/cli/serve.py, engine/arg_utils.py, entrypoints/openai/api_server.py, "
            "v1/worker/gpu_worker.py, distributed/device_communicators/pynccl.py",
    node_flags=node_flags,
)
