"""SGLang (``python -m sglang.launch_server``, ``sglang serve``), as read in its released source,
v0.4.7 to v0.5.x.

Command: ``python/sglang/srt/server_args.py``, ``ServerArgs.add_cli_args`` (``--model-path``,
``--tp-size``/``--tp``, ``--port``, default 30000). Routes: ``python/sglang/srt/entrypoints/
http_server.py`` (``/health``, ``/v1/models``, ``/get_model_info`` with ``model_path``). Log: its
lines carry ``[YYYY-mm-dd HH:MM:SS TPn]`` (sglang/srt/utils.py, configure_logger);
``"sglang is using nccl==%s"`` (sglang/srt/distributed/device_communicators/pynccl.py). The
start-up memory guard, measured before the model loads: ``"The memory capacity is unbalanced.
Some GPUs may be occupied by other processes."`` (sglang/srt/model_executor/model_runner.py,
init_torch_distributed). CUDA-graph capture: ``"Capture cuda graph begin"`` (cuda_graph_runner.py);
DeepGEMM's JIT compile on a first request (sglang #5031). Its own variables start with
``SGLANG_``; it sets ``CUDA_DEVICE_MAX_CONNECTIONS`` itself (sglang/srt/server_args.py,
``_set_envs_and_config``: ``os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = "4"``). Wrappers that
point at the root error: ``"Scheduler hit an exception"`` (sglang/srt/managers/scheduler.py),
``"Received sigquit from a child process. It usually means the child failed."``
(sglang/srt/entrypoints/engine.py), ``"Initialization failed. warmup error"``
(sglang/srt/entrypoints/http_server.py, _wait_and_warmup). Its lines carry no level, so harmless
ones are named: ``"Ignore import error when loading sglang.srt.models.%s: %s"``
(sglang/srt/models/registry.py, import_model_classes: an optional model's import) and ``"Fail to
set RLIMIT_NOFILE: %s"`` (sglang/srt/utils.py, set_ulimit).

A server across nodes: ``--nnodes``, ``--node-rank`` and ``--dist-init-addr HOST:PORT`` (alias
``--nccl-init-addr``; python/sglang/srt/server_args.py, ``ServerArgs.add_cli_args``, v0.4.7 and
v0.5.x); every node runs the same command, the head (rank 0) serves HTTP.
"""

from __future__ import annotations

from tuner.servers.kind import ModelRoute, ServerKind

__all__ = ["SGLANG", "node_flags"]

def node_flags(nnodes: int, rank: int, head: str, dist_port: int) -> tuple[str, ...]:
    """SGLang's flags for node ``rank`` of ``nnodes`` (see the module docstring)."""
    return ("--nnodes", str(nnodes), "--node-rank", str(rank), "--dist-init-addr", f"{head}:{dist_port}")


SGLANG = ServerKind(
    name="sglang",
    title="SGLang",
    command=(r"\bsglang\b",),
    log_marks=(r"\bsglang\b", r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?: [A-Z]+\d+)* TP\d+"),
    tp_options=("--tp-size", "--tp"),
    model_options=("--model-path", "--model"),
    default_port=30000,
    model_routes=(ModelRoute("/v1/models", ("data", 0, "id")), ModelRoute("/get_model_info", ("model_path",))),
    version_lines=(r"\bsglang(?:==| version:? )(?P<v>\d+\.\d+\S*)",),
    nccl_version_lines=(r"\bsglang(?:-diffusion)? is using nccl==(?P<v>\d+\.\d+\.\d+)",),
    fatal_lines=(r"Scheduler hit an exception", r"Received sigquit from a child process"),
    machine_lines=(r"The memory capacity is unbalanced",),
    warmup_lines=(r"Capture cuda graph", r"DeepGEMM", r"\bJIT\b.*[Cc]ompil|[Cc]ompil\w* .*\bJIT\b"),
    log_prefixes=(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?: [A-Z]+\d+)*\] ?",),
    benign_lines=(r"Ignore import error when loading sglang\.srt\.models\.", r"Fail to set RLIMIT_NOFILE"),
    honours_ignore_eos=True,
    # sglang/srt/server_args.py, ServerArgs.disable_custom_all_reduce: NCCL carries every allreduce
    reference_flags=("--disable-custom-all-reduce",),
    env_prefixes=("SGLANG_",),
    nccl_overrides={"CUDA_DEVICE_MAX_CONNECTIONS": "SGLang sets it to 4 itself (sglang/srt/server_args.py, "
                                                   "_set_envs_and_config)"},
    # sglang/srt/entrypoints/engine.py logs "server_args=ServerArgs(..., port=30000, ...)"
    port_lines=(r"ServerArgs\(.*?[(,\s]port=(?P<port>\d{1,5})\b",),
    launch_line="{env}python -m sglang.launch_server --model-path MODEL --tp {tp}{flags}",
    wrapper_lines=(r"Scheduler hit an exception", r"Received sigquit from a child proces",
                   r"It usually means the child failed", r"Initialization failed\. warmup error"),
    sources="sglang v0.4.7, v0.5.x: srt/server_args.py, srt/entrypoints/http_server.py, "
            "srt/model_executor/model_runner.py, srt/distributed/device_communicators/pynccl.py",
    node_flags=node_flags,
)
