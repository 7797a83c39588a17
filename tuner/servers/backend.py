"""Who carries the inference server's decode allreduce: NCCL, or a kernel of the server's own.

vLLM and SGLang route small allreduces to a custom allreduce, torch symmetric memory,
FlashInfer or MSCCL++ before NCCL; only when NCCL carries the decode allreduce can NCCL's
variables change decode speed. :func:`allreduce_backend` says who does, from the server's log,
command and environment; :func:`prove` says whether one launch applied the backend its set
asked for (a :class:`tuner.servers.BackendChoice`); :data:`SERVER_OVERRIDES` lists the NCCL
variables a server overwrites.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from tuner.nccl import NcclVersion, version_in_text
from tuner.servers.catalogue import BACKEND_SERVERS
from tuner.servers.choice import BackendChoice, BackendName, ServerName
from tuner.servers.kinds import GENERIC, KINDS, kind_named, kind_of
from tuner.servers.vllm import VLLM

__all__ = ["SERVER_OVERRIDES", "Backend", "BackendProof", "allreduce_backend", "dispatch_order", "prove"]


@dataclass(frozen=True)
class Backend:
    """Who runs the server's decode allreduce.

    ``name``: ``nccl`` (pynccl / torch.distributed), ``nccl_symmetric`` (NCCL symmetric-memory
    kernels, NCCL_ALGO/NCCL_PROTO do not select them), ``custom_allreduce``, ``symm_mem`` (torch
    symmetric memory), ``flashinfer``, ``mscclpp``, ``none`` (tensor parallelism 1) or
    ``unknown``; ``nccl_on_decode_path``: True when NCCL variables can change the decode
    allreduce, False when they cannot, None when unknown; ``reason``: the evidence, quoted.
    """

    name: BackendName
    nccl_on_decode_path: bool | None
    reason: str
    server: ServerName | None = None
    nccl_version: NcclVersion | None = None


#: vLLM's names in its dispatch line to ours (cuda_communicator.py,
#: CudaCommunicator._log_all_reduce_backend_selection, v0.22.0 to v0.33.0; QUICK_REDUCE and
#: AITER_CUSTOM are ROCm's own kernels).
DISPATCH_BACKENDS: dict[str, BackendName] = {
    "FLASHINFER_PCIE_IPC": "flashinfer", "FLASHINFER": "flashinfer", "NCCL_SYMM_MEM": "nccl_symmetric",
    "QUICK_REDUCE": "custom_allreduce", "AITER_CUSTOM": "custom_allreduce", "CUSTOM": "custom_allreduce",
    "SYMM_MEM": "symm_mem", "PYNCCL": "nccl",
}
#: ``"Using %s all-reduce backends (in dispatch order) for group '%s' out of potential backends:
#: %s."``, the first ``%s`` a list such as ``['CUSTOM', 'SYMM_MEM', 'PYNCCL']`` (vLLM 0.22.0+,
#: cuda_communicator.py, CudaCommunicator._log_all_reduce_backend_selection).
_DISPATCH_LINE = re.compile(r"Using \[(?P<list>[^\]]*)\] all-reduce backends \(in dispatch order\) for group "
                            r"'(?P<group>[^']*)'")


def dispatch_order(log_lines: Iterable[str]) -> tuple[list[str], str] | None:
    """vLLM 0.22+'s dispatch order for its tensor-parallel group and the line saying it, else None.

    ``(["CUSTOM", "SYMM_MEM", "PYNCCL"], line)``: the backends vLLM tries per allreduce, in order,
    each one taking the sizes it accepts; the group is the ``tp`` one (``tp``, ``tp:0``).
    """
    for line in log_lines:
        m = _DISPATCH_LINE.search(line)
        if m and m.group("group").split(":")[0] == "tp":
            names = [n.strip().strip("'\"") for n in m.group("list").split(",") if n.strip()]
            return names, m.group(0)
    return None


_CA_DISABLED = re.compile(r"Custom ?[Aa]ll[Rr]educe(?:V2)? is disabled (?:because|due to) (?P<why>[^.]*)")
#: NCCL's per-operation line for an allreduce on a symmetric kernel (2.27+, TUNING):
#: ``"%s [Symmetric]: %ld Bytes -> Kernel %s nchannels %d nthreads %d"`` (src/enqueue.cc,
#: ncclLaunchPrepare, v2.27.3-1), `` nWorks %d`` added from 2.28 (src/scheduler/symmetric_sched.cc,
#: ncclSymmetricTaskScheduler, v2.28.9-1 to v2.30.7-1).
_SYM_ALLREDUCE = re.compile(r"\bAllReduce \[Symmetric\]: \d+ Bytes -> Kernel \S+ nchannels \d+ nthreads \d+"
                            r"(?: nWorks \d+)?")


def _flag(argv: Sequence[str], *names: str) -> bool:
    """True when one of ``names`` is given as a bare flag or as ``--flag=true``/``=1``."""
    for a in argv:
        key, sep, val = a.partition("=")
        if key in names and (not sep or val.lower() in ("1", "true")):
            return True
    return False


def _option(argv: Sequence[str], *names: str) -> str | None:
    for i, a in enumerate(argv):
        if a in names and i + 1 < len(argv):
            return argv[i + 1]
        key, sep, val = a.partition("=")
        if sep and key in names:
            return val
    return None


def _server_of(argv: Sequence[str], text: str, forced: str | None = None) -> ServerName | None:
    """The server kind of ``argv`` and its log ``text`` (:func:`tuner.servers.kinds.kind_of`) when
    it has backend switches, else None."""
    kind = kind_of(argv, text.splitlines(), forced=forced)
    return next((name for name in BACKEND_SERVERS if name == kind.name), None)


def allreduce_backend(log_lines: Iterable[str], argv: Sequence[str], env: Mapping[str, str] | None = None,
                      forced: str | None = None) -> Backend:
    """Which backend carries the decode allreduce, from the server's log, command and environment.

    vLLM tries, per allreduce, its custom allreduce (world size 2, or more GPUs all joined by
    NVLink; tensors under 8 MiB), then torch symmetric memory (``VLLM_ALLREDUCE_USE_SYMM_MEM``,
    NVSwitch multicast only), then pynccl (vllm/distributed/device_communicators/
    cuda_communicator.py, all_reduce; custom_all_reduce.py, CustomAllreduce.__init__ and
    should_custom_ar). It logs "Custom allreduce is disabled because ..." when it cannot use its
    kernel (more than two PCIe-only GPUs, no P2P, unsupported world size, several nodes) and
    ``--disable-custom-all-reduce`` turns it off. SGLang follows the same custom allreduce with
    ``--disable-custom-all-reduce``, ``--enable-mscclpp``, ``--enable-torch-symm-mem`` and
    ``--enable-symm-mem`` (NCCL symmetric memory) (sglang/srt/server_args.py). With NCCL's
    TUNING lines in the log, an ``AllReduce [Symmetric]: ... -> Kernel ...`` line (2.27+) says
    so whatever the flags. ``forced``: ``server.kind``, forcing the kind the command and log would name.
    """
    env = env or {}
    lines = list(log_lines)
    text = "\n".join(lines)
    server = _server_of(argv, text, forced)
    version = version_in_text(text)

    def result(name: BackendName, on_path: bool | None, reason: str) -> Backend:
        return Backend(name, on_path, reason, server, version)

    tp_text = _option(argv, "--tensor-parallel-size", "-tp", "--tp", "--tp-size")
    config_tp = re.search(r"tensor_parallel_size=(\d+)", text)
    tp = int(tp_text) if tp_text and tp_text.isdigit() else (int(config_tp.group(1)) if config_tp else None)
    if tp == 1:
        return result("none", False, "tensor parallel size 1: the decode step has no allreduce")
    if server is None:
        if re.search(r"disable_custom_all_reduce=False[,)]", text) and not _flag(argv, "--disable-custom-all-reduce"):
            # a vLLM-family engine under another name (a fork, a wrapper that renames its lines)
            return result("custom_allreduce", False,
                          "the server's engine config says disable_custom_all_reduce=False, so its custom allreduce "
                          "takes decode-sized allreduces, but neither the command nor the log names vLLM or SGLang")
        kind = kind_of(argv, lines, forced=forced)
        if kind is not GENERIC and kind in KINDS:
            return result("unknown", None, f"the server is {kind.title}, whose allreduce backends nccl-tune has not "
                                           "read: whether NCCL carries its decode allreduce is not known")
        return result("unknown", None, "neither the command nor the log names a server whose allreduce backends "
                                       "nccl-tune has read (" + ", ".join(kind_named(s).title for s in BACKEND_SERVERS) + ")")
    if server == "vllm" and (order := dispatch_order(lines)):
        names, said = order
        first = DISPATCH_BACKENDS.get(names[0], "unknown") if names else "unknown"
        on_path = True if first == "nccl" else (None if first in ("nccl_symmetric", "unknown") else False)
        return result(first, on_path, f"vLLM logged \"{said}\": {names[0] if names else 'nothing'} comes "
                      "first for the tensor-parallel allreduce, later ones take only the sizes it refuses"
                      + ("" if first == "nccl" else "; NCCL variables cannot change the decode allreduce it takes"))
    # backends that go before the custom allreduce in dispatch (vLLM: cuda_communicator.py,
    # CudaCommunicator.all_reduce, v0.17.0 to v0.33.0; SGLang: parallel_state.py,
    # GroupCoordinator._resolve_outplace_all_reduce_method, v0.5.23)
    if server == "vllm" and env.get("VLLM_ALLREDUCE_USE_FLASHINFER", "0") not in ("0", "") \
            and "FlashInfer All Reduce is disabled" not in text:
        return result("flashinfer", False, "VLLM_ALLREDUCE_USE_FLASHINFER is set: FlashInfer's allreduce goes first "
                                           "in vLLM's dispatch for the sizes it takes")
    if server == "sglang" and _flag(argv, "--enable-mscclpp") and "PyMscclpp is disabled" not in text \
            and "PyMscclpp is unavailable" not in text:
        return result("mscclpp", False, "--enable-mscclpp: MSCCL++ goes before SGLang's custom allreduce for the "
                                        "sizes it takes")
    disabled = [m.group(0).strip() for m in _CA_DISABLED.finditer(text)]
    # the engine-config line ("..., disable_custom_all_reduce=True, ..."), not the warning's advice
    flag_off = _flag(argv, "--disable-custom-all-reduce") or re.search(r"disable_custom_all_reduce=True[,)]", text)
    if not flag_off and not disabled:
        if server == "vllm" and not (VLLM.marks(text) or tp):
            return result("unknown", None, "no vLLM start-up line in the log to judge the allreduce backend by")
        return result("custom_allreduce", False,
                      f"{server}'s custom allreduce is on (no \"Custom allreduce is disabled\" line, no "
                      "--disable-custom-all-reduce): it takes decode-sized allreduces, so NCCL variables "
                      "cannot change them (NCCL still runs the per-step logits all-gather in vLLM's V1 engine); add "
                      "--disable-custom-all-reduce to the server command to measure NCCL")
    why = "--disable-custom-all-reduce" if flag_off else f"\"{disabled[0]}\""
    if sym := _SYM_ALLREDUCE.search(text):
        return result("nccl_symmetric", None, f"custom allreduce off ({why}); NCCL logged \"{sym.group(0)}\": "
                                              "allreduces run on NCCL's symmetric kernels, which NCCL_ALGO/PROTO do "
                                              "not pick (src/scheduler/symmetric_sched.cc)")
    if server == "vllm":
        if env.get("VLLM_ALLREDUCE_USE_FLASHINFER", "0") not in ("0", "") and "FlashInfer All Reduce is disabled" not in text:
            return result("flashinfer", False, f"custom allreduce off ({why}) but VLLM_ALLREDUCE_USE_FLASHINFER is set")
        if env.get("VLLM_USE_NCCL_SYMM_MEM", "0") not in ("0", ""):
            return result("nccl_symmetric", None, f"custom allreduce off ({why}); VLLM_USE_NCCL_SYMM_MEM routes "
                                                  "allreduces to NCCL symmetric kernels, which NCCL_ALGO/PROTO do not pick")
        if env.get("VLLM_ALLREDUCE_USE_SYMM_MEM", "") == "1" and "SymmMemCommunicator" not in text:
            return result("symm_mem", None, f"custom allreduce off ({why}); VLLM_ALLREDUCE_USE_SYMM_MEM=1 lets torch "
                                            "symmetric memory take small allreduces on NVSwitch GPUs")
    else:
        if _flag(argv, "--enable-mscclpp"):
            return result("mscclpp", False, f"custom allreduce off ({why}) but --enable-mscclpp takes small allreduces")
        if _flag(argv, "--enable-torch-symm-mem"):
            return result("symm_mem", None, f"custom allreduce off ({why}); --enable-torch-symm-mem takes "
                                            "allreduces on SM90+ NVLink GPUs")
        if _flag(argv, "--enable-symm-mem"):
            return result("nccl_symmetric", None, f"custom allreduce off ({why}); --enable-symm-mem uses NCCL "
                                                  "symmetric kernels, which NCCL_ALGO/PROTO do not pick")
    return result("nccl", True, f"custom allreduce off: {why}; the decode allreduce goes to NCCL (pynccl)")


#: Variables a server overwrites in its own environment before NCCL starts, with the source.
SERVER_OVERRIDES: dict[str, dict[str, str]] = {
    "sglang": {
        "CUDA_DEVICE_MAX_CONNECTIONS": "sglang/srt/entrypoints/engine.py, _set_envs_and_config sets it",
        "NCCL_CUMEM_ENABLE": "sglang/srt/entrypoints/engine.py, _set_envs_and_config sets it (0, or --enable-symm-mem)",
        "NCCL_NVLS_ENABLE": "sglang/srt/entrypoints/engine.py, _set_envs_and_config sets it from --enable-nccl-nvls",
    },
    "vllm": {
        "NCCL_CUMEM_ENABLE": "vllm/env_override.py (older: vllm/__init__.py) sets 0 unless already non-zero",
    },
}


@dataclass(frozen=True)
class BackendProof:
    """What one launch's log says about the backend its set asked for.

    ``choice``: the catalogue entry the set's params name (None: the set names no backend
    switch); ``ran``: the backend the log shows carried the decode allreduce (:func:`allreduce_backend`);
    ``applied``: True when the log proves the asked-for backend ran, False when the server
    ignored it or fell back (``reason`` quotes the line, or says which proving line is absent),
    None for a set that asks for no backend; ``reason``: the evidence; ``lines``: the log lines
    quoted.
    """

    choice: BackendChoice | None
    ran: BackendName
    applied: bool | None
    reason: str
    lines: tuple[str, ...] = ()


def _first(patterns: Sequence[str], lines: Sequence[str]) -> tuple[str, str] | None:
    """The first ``(match, line)`` of any of ``patterns`` in ``lines``."""
    for pattern in patterns:
        rx = re.compile(pattern)
        for line in lines:
            if m := rx.search(line):
                return m.group(0).strip(), line
    return None


def prove(choice: BackendChoice | None, log_lines: Iterable[str], argv: Sequence[str],
          env: Mapping[str, str]) -> BackendProof:
    """Whether the launch whose log is ``log_lines`` ran the backend ``choice`` asks for.

    ``choice``: the set's catalogue entry (``tuner.servers.choice_of``), None for a set naming
    no backend switch (``applied`` None). Not applied when a refusal line of ``choice`` is in
    the log (quoted), when vLLM 0.22+'s dispatch line puts another backend first, when the log
    shows another backend carrying the decode allreduce, or when none of the choice's proving
    lines is there; applied when one is and nothing refuses. A choice whose server prints no
    proving line in the versions read (``proof`` empty: SGLang's MSCCL++ and torch symmetric
    memory) is applied when the log shows that backend and no refusal. A set for NCCL is proven
    by the log showing NCCL carries decode (pynccl's ``"vLLM is using nccl==%s"`` /
    ``"sglang is using nccl==%s"``, or the dispatch line led by ``PYNCCL``).
    """
    lines = list(log_lines)
    backend = allreduce_backend(lines, argv, env)
    if choice is None:
        return BackendProof(None, backend.name, None, "the set names no backend switch: " + backend.reason)
    if refused := _first(choice.refusal, lines):
        said, line = refused
        return BackendProof(choice, backend.name, False, f"the server logged \"{said}\"",
                            (line,))
    order = dispatch_order(lines) if choice.server == "vllm" else None
    if order is not None and choice.dispatch is not None:
        names, said = order
        if not names or names[0] != choice.dispatch:
            return BackendProof(choice, backend.name, False,
                                f"vLLM logged \"{said}\", so "
                                f"{names[0] if names else 'no backend'} comes first, not {choice.dispatch}", (said,))
        return BackendProof(choice, backend.name, True, f"vLLM logged \"{said}\"", (said,))
    if (choice.backend == "nccl" or not choice.proof) and backend.name not in (choice.backend, "unknown"):
        return BackendProof(choice, backend.name, False,
                            f"the log shows {backend.name} carrying the decode "
                            f"allreduce ({backend.reason})")
    if not choice.proof:
        return BackendProof(choice, backend.name, True,
                            f"its switch is set and no refusal line is in the log "
                            f"({choice.server} prints no line saying this backend ran)")
    if proven := _first(choice.proof, lines):
        said, line = proven
        return BackendProof(choice, choice.backend, True, f"the server logged \"{said}\"",
                            (line,))
    wanted = " or ".join(f"/{p}/" for p in choice.proof)
    return BackendProof(choice, backend.name, False,
                        f"the proving line {wanted} is absent from the log")
