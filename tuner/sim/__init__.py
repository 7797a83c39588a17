"""Simulated TP-N vLLM server and nccl-tests all_reduce_perf whose speed depends on NCCL's
environment.

A self-contained subpackage (stdlib only; imports nothing from the rest of ``tuner``, and the
core never imports it) used to develop and test nccl-tune without GPUs. Modules:

* ``ncclconst``: numbers and names transcribed from NCCL's source, cited per item;
* ``ncclenv``: read NCCL variables as NCCL does (strtoll, parseList, version rules);
* ``costmodel``: NCCL's tuning model, launch resources, chunking, and the realised time;
* ``arbackends``: vLLM's allreduce backends by version (custom allreduce, torch and NCCL
  symmetric memory, FlashInfer, FlashInfer PCIe IPC): its switches, dispatch and log lines;
* ``profiles``: the simulated boxes; every number that is not NCCL's, with its source;
* ``nccllog`` / ``vllmlog``: NCCL's and vLLM's log lines, NCCL_DEBUG filtering; ``nccltopo``:
  NCCL's GRAPH lines (topology, search graphs, the search fallback);
* ``ncclstdio``: where a process's NCCL lines physically go (NCCL_DEBUG_FILE, or stdout cut in
  4096-byte blocks as on a real server's pipe); ``raycluster``: vLLM 0.8.2 on Ray (the workers'
  environment, Ray's log prefixes and folding);
* ``ncclnet``: NCCL's network between nodes (the IB or Socket plugin, NET lines, cross-node
  channels); ``nodes``: the TCP rendezvous of a server across nodes (one process per node);
* ``startup``: a server's start and every rank's lines; ``server``: the engine and its life
  cycle; ``http_api``: the OpenAI endpoints; ``procs`` / ``worker``: TP worker processes;
  ``faults``: failure modes, set-bound ones too; ``textgen``: answers; ``greedy``: their greedy
  paths (late parting, corruption) and logprobs;
* ``allreduceperf`` / ``jsonout``: the all_reduce_perf stand-in;
* ``cli``: ``nccl-tune sim serve|all-reduce-perf|model|profiles|faults``.
"""

__all__ = ["main"]


def main(argv: list[str] | None = None, prog: str = "nccl-tune sim") -> int:
    """Same as ``tuner.sim.cli.main``."""
    from .cli import main as _main

    return _main(argv, prog)
