"""Simulated TP-N vLLM server whose decode speed depends on its NCCL environment.

A self-contained subpackage (stdlib only; imports nothing from the rest of ``tuner``) used to
develop and test nccl-tune without GPUs. Modules:

* ``ncclenv``: read NCCL variables as NCCL does (strtoll, NCCL_ALGO/NCCL_PROTO grammar);
* ``costmodel``: NCCL's algorithm choice (src/graph/tuning.cc) and the realised allreduce time;
* ``profiles``: built-in boxes (pcie-8x-mla, nvlink-8x, nvlink-8x-nccl, fast-tiny) and TOML ones;
* ``server``: the OpenAI-compatible HTTP server; ``worker``: TP worker processes;
* ``faults``: failure modes; ``textgen``: deterministic answers; ``nccllog``: NCCL log lines;
* ``cli``: ``python -m tuner.sim serve --port P [--profile NAME|FILE] [--fault MODE] ...``.
"""

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Same as ``tuner.sim.cli.main``."""
    from .cli import main as _main

    return _main(argv)
