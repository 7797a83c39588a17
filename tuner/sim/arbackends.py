"""vLLM's allreduce backends by version: which of them a server builds, which one takes an
allreduce of a given size, and the lines each one logs.

Read in the released wheels' source (``vllm/distributed/device_communicators/``), versions
0.10.2, 0.11.0, 0.16.0, 0.17.0, 0.22.0, 0.25.0-0.30.0; a rule is cited with the file and the
versions read. ``CudaCommunicator.__init__`` (cuda_communicator.py) builds, for the TP group
only: torch symmetric memory (``VLLM_ALLREDUCE_USE_SYMM_MEM``), FlashInfer allreduce
(``VLLM_ALLREDUCE_USE_FLASHINFER``, 0.17.0+), FlashInfer PCIe IPC allreduce
(``VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC``, 0.30.0+), then the custom allreduce (unless
``--disable-custom-all-reduce``); NCCL symmetric memory (``VLLM_USE_NCCL_SYMM_MEM``, 0.11.0+)
is pynccl's. ``CudaCommunicator.all_reduce`` tries them per call in the version's order and
falls through to pynccl (NCCL). Variables are read as vLLM's envs.py does
(``bool(int(os.getenv(NAME, default)))``); one a version does not have is ignored.

Sizes are bytes of a bf16 ``[tokens, hidden]`` tensor; capabilities are ints (90 = SM 9.0).
"""

from __future__ import annotations

import dataclasses

from .profiles import Profile

MiB = 1024 * 1024
KiB = 1024

#: Packages ``serve --sim-missing`` can take away (the server then logs vLLM's import failure).
MISSING_PACKAGES = ("flashinfer",)

#: Backend names as ``CudaCommunicator._log_all_reduce_backend_selection`` prints them, and the
#: simulator's ``via`` for each (AllreduceCost.via).
VIA = {"FLASHINFER_PCIE_IPC": "flashinfer_pcie_ipc", "FLASHINFER": "flashinfer",
       "NCCL_SYMM_MEM": "nccl_symm_mem", "CUSTOM": "custom", "SYMM_MEM": "symm_mem",
       "PYNCCL": "nccl"}

#: ``all_potential_ar_backends`` (cuda_communicator.py) by first version read with that list.
_POTENTIAL = (
    ((0, 22, 0), ("NCCL_SYMM_MEM", "QUICK_REDUCE", "FLASHINFER", "CUSTOM", "SYMM_MEM", "PYNCCL")),
    ((0, 25, 0), ("NCCL_SYMM_MEM", "QUICK_REDUCE", "FLASHINFER", "AITER_CUSTOM", "CUSTOM",
                  "SYMM_MEM", "PYNCCL")),
    ((0, 29, 0), ("FLASHINFER", "NCCL_SYMM_MEM", "QUICK_REDUCE", "AITER_CUSTOM", "CUSTOM",
                  "SYMM_MEM", "PYNCCL")),
    ((0, 30, 0), ("FLASHINFER_PCIE_IPC", "FLASHINFER", "NCCL_SYMM_MEM", "QUICK_REDUCE",
                  "AITER_CUSTOM", "CUSTOM", "SYMM_MEM", "PYNCCL")),
)

#: (name, first version that reads it, default by first version) from vllm/envs.py: symm mem
#: default 0 in 0.10.2, 1 from 0.11.0; NCCL symm mem absent in 0.10.2, default 0 from 0.11.0;
#: FlashInfer absent in 0.16.0, default 0 in 0.17.0-0.28.0, 1 from 0.29.0; PCIe IPC absent in
#: 0.29.0, default 0 in 0.30.0.
SWITCHES = {
    "VLLM_ALLREDUCE_USE_SYMM_MEM": ((0, 10, 2), (((0, 10, 2), "0"), ((0, 11, 0), "1"))),
    "VLLM_USE_NCCL_SYMM_MEM": ((0, 11, 0), (((0, 11, 0), "0"),)),
    "VLLM_ALLREDUCE_USE_FLASHINFER": ((0, 17, 0), (((0, 17, 0), "0"), ((0, 29, 0), "1"))),
    "VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC": ((0, 30, 0), (((0, 30, 0), "0"),)),
}

#: CustomAllreduce's max size where torch symm mem is live (all_reduce_utils.py
#: CUSTOM_ALL_REDUCE_MAX_SIZES: 9.0 and 10.0 in 0.11.0-0.30.0, 10.3 read from 0.22.0, 10.7 from 0.27.0).
_CA_MAX = {90: {2: 64 * MiB, 4: 32 * MiB, 6: MiB // 2, 8: MiB // 4},
           100: {2: 2 * MiB, 4: 2 * MiB, 6: MiB, 8: MiB},
           103: {2: 4 * MiB, 4: 4 * MiB, 6: 8 * MiB, 8: 4 * MiB},
           107: {2: 4 * MiB, 4: 4 * MiB, 6: 8 * MiB, 8: 4 * MiB}}
#: SYMM_MEM_ALL_REDUCE_MAX_SIZES (all_reduce_utils.py, same versions as above).
_SYMM_MAX = {90: {2: 64 * MiB, 4: 32 * MiB, 6: 64 * MiB, 8: 64 * MiB},
             100: {2: 8 * MiB, 4: 32 * MiB, 6: 128 * MiB, 8: 128 * MiB},
             103: {2: 4 * MiB, 4: 32 * MiB, 6: 32 * MiB, 8: 64 * MiB},
             107: {2: 4 * MiB, 4: 32 * MiB, 6: 32 * MiB, 8: 64 * MiB}}
_CAP_SINCE = {103: (0, 22, 0), 107: (0, 27, 0)}
#: FlashInfer allreduce workspace (MB) by capability and world size
#: (compilation/passes/fusion/allreduce_rms_fusion.py FI_ALLREDUCE_FUSION_MAX_SIZE_MB, 0.17.0 and
#: 0.30.0; 103 and 107 as read in 0.30.0).
_FI_MAX_MB: dict[int, dict[int, float]] = {90: {2: 64, 4: 2, 8: 0.5}, 100: {2: 64, 4: 32, 8: 1},
              103: {2: 64, 4: 64, 8: 4}, 107: {2: 64, 4: 64, 8: 2}}
#: FlashInferPcieIpcAllReduce world sizes (flashinfer_pcie_ipc_all_reduce.py, 0.30.0).
PCIE_IPC_WORLD_SIZES = (2, 4, 8)
#: vLLM's largest CUDA-graph capture size by default (config/compilation.py, 0.30.0: "capped at
#: 512 by default"): the PCIe IPC workspace is prepared for batches up to it.
MAX_CAPTURE_TOKENS = 512


def vtuple(version: str) -> tuple[int, ...]:
    """``"0.30.0"`` -> (0, 30, 0); a suffix after the numbers (``.post1``, ``rc1``) is dropped.
    Raises ValueError when the text does not start with a number."""
    out = []
    for part in version.split("."):
        digits = ""
        for ch in part:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            break
        out.append(int(digits))
    if not out:
        raise ValueError(f"not a version: {version!r}")
    return tuple([*out, 0, 0, 0][:3])


def cap_str(cc: int) -> str:
    """120 -> ``"12.0"``: ``DeviceCapability.as_version_str`` (vllm/platforms/interface.py)."""
    return f"{cc // 10}.{cc % 10}"


def read_switches(version: str, environ: dict) -> dict[str, bool]:
    """The backend variables the vLLM ``version`` reads, as its envs.py does; a variable the
    version does not have is absent from the result. Raises ValueError for a value ``int()``
    refuses, as vLLM's ``bool(int(...))`` does."""
    v = vtuple(version)
    out = {}
    for name, (since, defaults) in SWITCHES.items():
        if v < since:
            continue
        default = [d for first, d in defaults if v >= first][-1]
        out[name] = bool(int(environ.get(name, default)))
    return out


@dataclasses.dataclass(frozen=True)
class BackendPlan:
    """What one vLLM server builds for its TP group. ``enabled``: vLLM's names in dispatch
    order (PYNCCL last), as the 0.22+ INFO line lists them; ``ca_max`` / ``symm_max`` /
    ``fi_max`` / ``ipc_max``: the largest bytes each takes (exclusive for custom and symm mem,
    inclusive for FlashInfer and PCIe IPC); ``fi_workspace_fails``: the FlashInfer workspace
    cannot be created (first use disables it); ``init_lines`` / ``rank0_lines``: (level, src,
    message) every rank / rank 0 logs at init; ``warmup_lines``: rank 0's before graph capture;
    ``lazy_lines``: every rank's at the first FlashInfer use (the profiling forward)."""

    version: str
    tp: int
    enabled: tuple[str, ...]
    ca_max: int
    symm_max: int
    fi_max: int
    ipc_max: int
    fi_workspace_fails: bool
    nccl_symm_rule: str  # "thresholds" (< 0.17) or "ranges" (0.17+), all_reduce_utils.py
    init_lines: tuple = ()
    rank0_lines: tuple = ()
    warmup_lines: tuple = ()
    lazy_lines: tuple = ()
    registers_info: bool = True  # "Registering %d cuda graph addresses" is INFO up to 0.26

    def has(self, name: str) -> bool:
        """Whether backend ``name`` (vLLM's spelling) was built and not disabled at init."""
        return name in self.enabled

    def _nccl_symm_takes(self, nbytes: int) -> bool:
        """all_reduce_utils.py ``should_nccl_symm_mem_allreduce``: 0.11.0-0.16.0 from 2 MiB (TP
        4) / 1 MiB (TP 8); from 0.17.0 outside custom_ar_preferred_ranges (16 KiB, 512 KiB) at TP
        4 and (16 KiB, 128 KiB) at TP 8; always above TP 8."""
        if not self.has("NCCL_SYMM_MEM") or self.tp < 4:
            return False
        if self.nccl_symm_rule == "thresholds":
            threshold = {4: 2 * MiB, 8: MiB}.get(self.tp)
            if threshold is not None and nbytes >= threshold:
                return True
            return self.tp > 8
        bounds = {4: (16 * KiB, 512 * KiB), 8: (16 * KiB, 128 * KiB)}.get(self.tp)
        if bounds is not None:
            return nbytes <= bounds[0] or nbytes >= bounds[1]
        return self.tp > 8

    def pick(self, nbytes: int) -> str:
        """vLLM's name of the backend that takes a bf16 allreduce of ``nbytes``
        (cuda_communicator.py ``CudaCommunicator.all_reduce`` of the version)."""
        v = vtuple(self.version)
        fi = (self.has("FLASHINFER") and not self.fi_workspace_fails and nbytes <= self.fi_max)
        ipc = self.has("FLASHINFER_PCIE_IPC") and nbytes <= self.ipc_max
        ca = self.has("CUSTOM") and nbytes % 16 == 0 and nbytes < self.ca_max
        symm = self.has("SYMM_MEM") and nbytes % 4 == 0 and nbytes < self.symm_max
        if v >= (0, 29, 0):  # FlashInfer is checked first and keeps NCCL symm mem out
            order = [("FLASHINFER_PCIE_IPC", ipc), ("FLASHINFER", fi)] if fi else [
                ("NCCL_SYMM_MEM", self._nccl_symm_takes(nbytes)), ("FLASHINFER_PCIE_IPC", ipc)]
        else:
            order = [("NCCL_SYMM_MEM", self._nccl_symm_takes(nbytes)), ("FLASHINFER", fi)]
        order += [("CUSTOM", ca), ("SYMM_MEM", symm)]
        for name, takes in order:
            if takes:
                return name
        return "PYNCCL"

    def using_line(self) -> tuple[str, str, str] | None:
        """Rank 0's INFO line naming the backends (cuda_communicator.py
        ``_log_all_reduce_backend_selection``, 0.22.0-0.30.0, ``info_once(..., scope="global")``):
        ``"Using %s all-reduce backends (in dispatch order) for group '%s' out of potential
        backends: %s."``; None before 0.22."""
        v = vtuple(self.version)
        lists = [names for first, names in _POTENTIAL if v >= first]
        if not lists:
            return None
        def fmt(names) -> str:
            return "[" + ", ".join(f"'{b}'" for b in names) + "]"
        return ("INFO", "cuda_communicator.py:231",
                f"Using {fmt(self.enabled)} all-reduce backends (in dispatch order) for group "
                f"'tp:0' out of potential backends: {fmt(lists[-1])}.")


def _symm_mem(p: Profile, v: tuple) -> tuple[bool, list]:
    """SymmMemCommunicator.__init__ (symm_mem.py, 0.11.0-0.30.0): (live, warnings)."""
    cc = p.compute_capability
    known = cc in _SYMM_MAX and v >= _CAP_SINCE.get(cc, (0, 0, 0))
    if not known:
        return False, [("WARNING", "symm_mem.py:66",
                        f"SymmMemCommunicator: Device capability {cap_str(cc)} not supported, "
                        "communicator is not available.")]
    if p.tp not in _SYMM_MAX[cc]:
        return False, [("WARNING", "symm_mem.py:73",
                        f"SymmMemCommunicator: World size {p.tp} not supported, communicator is "
                        "not available.")]
    if not p.nvswitch_multicast:  # torch_symm_mem.rendezvous(...).multicast_ptr == 0
        return False, [("WARNING", "symm_mem.py:106",
                        "SymmMemCommunicator: symmetric memory multicast operations are not "
                        "supported.")]
    return True, []


def _custom(p: Profile, v: tuple, symm_live: bool) -> tuple[bool, int, list]:
    """CustomAllreduce.__init__ (custom_all_reduce.py): (enabled, max_size, warnings). World
    sizes [2, 4, 6, 8] to 0.26.0, 16 added in 0.27.0; the PCIe refusal for more than two GPUs;
    max_size 8 MiB, cut to CUSTOM_ALL_REDUCE_MAX_SIZES where torch symm mem is live."""
    sizes = (2, 4, 6, 8, 16) if v >= (0, 27, 0) else (2, 4, 6, 8)
    if p.disable_custom_all_reduce or p.tp == 1:
        return False, 0, []
    if p.nnodes > 1:  # in_the_same_node_as(group, source_rank=0) is not all True
        return False, 0, [("WARNING", "custom_all_reduce.py:91",
                           "Custom allreduce is disabled because this process group spans across nodes.")]
    if p.tp not in sizes:
        return False, 0, [("WARNING", "custom_all_reduce.py:104",
                           f"Custom allreduce is disabled due to an unsupported world size: "
                           f"{p.tp}. Supported world sizes: {list(sizes)}. To silence this "
                           "warning, specify disable_custom_all_reduce=True explicitly.")]
    if p.tp > 2 and not p.nvlink_fully_connected:
        return False, 0, [("WARNING", "custom_all_reduce.py:154",
                           "Custom allreduce is disabled because it's not supported on more than "
                           "two PCIe-only GPUs. To silence this warning, specify "
                           "disable_custom_all_reduce=True explicitly.")]
    max_size = 8192 * 1024
    cc = p.compute_capability
    if symm_live and cc in _CA_MAX and p.tp in _CA_MAX[cc]:
        max_size = min(_CA_MAX[cc][p.tp], max_size)
    return True, max_size, []


def plan_for(profile: Profile, environ: dict | None = None,
             missing: frozenset[str] | tuple = ()) -> BackendPlan:
    """The backends the vLLM of ``profile.vllm_version`` builds on this box, with the
    variables of ``environ`` and the packages in ``missing`` absent. Raises ValueError for a
    switch value vLLM's ``int()`` refuses."""
    p = profile
    v = vtuple(p.vllm_version)
    sw = read_switches(p.vllm_version, environ or {})
    init: list = []
    rank0: list = []
    warmup: list = []
    lazy: list = []
    enabled: list[str] = []
    no_fi = "flashinfer" in missing
    multi = p.tp > 1
    symm_live = False
    if multi and sw.get("VLLM_ALLREDUCE_USE_SYMM_MEM"):
        symm_live, lines = _symm_mem(p, v)
        init += lines
    fi_max = 0
    fi_fails = False
    if multi and sw.get("VLLM_ALLREDUCE_USE_FLASHINFER"):
        table = _FI_MAX_MB.get(p.compute_capability, {})
        if p.compute_capability in (103, 107) and v < (0, 30, 0):
            table = {}  # only 90 and 100 in the 0.17.0 table
        if no_fi:  # flashinfer_all_reduce.py: import flashinfer.comm failed
            init.append(("INFO", "flashinfer_all_reduce.py:241",
                         "FlashInfer All Reduce is disabled because flashinfer is not available"))
        elif p.tp not in table:
            init.append(("WARNING", "flashinfer_all_reduce.py:266",
                         f"FlashInfer All Reduce is disabled because it is not supported for "
                         f"world_size={p.tp}."))
        else:
            enabled.append("FLASHINFER")
            fi_max = int(table[p.tp] * MiB)
            # The trtllm workspace maps every peer's buffer: it needs P2P over NVLink here.
            fi_fails = not p.nvlink_fully_connected
            if fi_fails:
                err = "CUDA error: peer access is not supported between these two devices"
                if v >= (0, 30, 0):
                    msg = f"Failed to initialize FlashInfer All Reduce workspace: {err}."
                else:
                    msg = (f"Failed to initialize FlashInfer All Reduce workspace: {err}. "
                           "FlashInfer All Reduce will be disabled.")
                # logger.warning on every rank up to 0.29; warning_once (local rank 0) in 0.30
                (warmup if v >= (0, 30, 0) else lazy).append(
                    ("WARNING", "flashinfer_all_reduce.py:211", msg))
    ipc_max = 0
    if multi and sw.get("VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC"):
        if no_fi:
            rank0.append(("WARNING", "flashinfer_pcie_ipc_all_reduce.py:61",
                          "FlashInfer PCIe IPC all-reduce was requested but this FlashInfer build "
                          "does not provide PcieIpcAllReduceWorkspace; falling back to another "
                          "all-reduce backend."))
        elif p.tp not in PCIE_IPC_WORLD_SIZES:
            rank0.append(("WARNING", "flashinfer_pcie_ipc_all_reduce.py:72",
                          f"FlashInfer PCIe IPC all-reduce does not support world_size={p.tp}; "
                          f"supported sizes are {PCIE_IPC_WORLD_SIZES}."))
        else:
            enabled.insert(0, "FLASHINFER_PCIE_IPC")
            ipc_max = MAX_CAPTURE_TOKENS * p.decode_bytes
            warmup.append(("INFO", "flashinfer_pcie_ipc_all_reduce.py:151",
                           f"Initialized FlashInfer PCIe IPC all-reduce for TP{p.tp}, "
                           f"hidden_dim={p.hidden}, dtype=torch.bfloat16, "
                           f"max_tokens={MAX_CAPTURE_TOKENS}."))
    # 0.22+ lists it only where the TP size can dispatch it (TP 4, 8, or above 8)
    if multi and sw.get("VLLM_USE_NCCL_SYMM_MEM") and p.tp >= 4 and (
            v < (0, 22, 0) or p.tp in (4, 8) or p.tp > 8):
        pos = 0 if v < (0, 29, 0) else len([b for b in enabled if b.startswith("FLASHINFER")])
        enabled.insert(pos, "NCCL_SYMM_MEM")
    ca_on, ca_max, lines = (False, 0, [])
    if multi:
        ca_on, ca_max, lines = _custom(p, v, symm_live)
    init += lines
    if ca_on:
        enabled.append("CUSTOM")
    if symm_live:
        enabled.append("SYMM_MEM")
    if multi:
        enabled.append("PYNCCL")
    cc = p.compute_capability
    symm_max = _SYMM_MAX.get(cc, {}).get(p.tp, 0) if symm_live else 0
    plan = BackendPlan(p.vllm_version, p.tp, tuple(enabled), ca_max, symm_max, fi_max, ipc_max,
                       fi_fails, "thresholds" if v < (0, 17, 0) else "ranges",
                       tuple(init), tuple(rank0), tuple(warmup), tuple(lazy),
                       registers_info=v < (0, 27, 0))
    using = plan.using_line()
    if using is not None:
        plan = dataclasses.replace(plan, rank0_lines=(*plan.rank0_lines, using))
    return plan
