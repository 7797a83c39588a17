"""Hardware + model profiles for the simulator (REFERENCE.md sections 1, 4 and 5).

A profile describes one TP-N box serving one model: topology (link type, path types NCCL sees,
channels), the model shape that sets the decode allreduce size (hidden x 2 bytes per token) and
count (layers x allreduces per layer), and the compute time per token. Built-ins:

* ``pcie-8x-mla``: the motivating box (REFERENCE.md section 1): 8 GPUs on PCIe only, dual socket,
  DeepSeek-V3-style MLA model (61 layers, hidden 7168, 2 allreduces per layer, 14336-byte decode
  allreduce). Allreduce is ~67 % of decode time at NCCL defaults; ~72 tok/s single stream.
* ``nvlink-8x``: 8 GPUs on NVLink; vLLM's custom allreduce takes every decode-sized allreduce
  (REFERENCE.md section 5), so NCCL variables change decode speed by nothing measurable.
* ``nvlink-8x-nccl``: the same box with the custom allreduce disabled
  (``--disable-custom-all-reduce``): NCCL runs the decode allreduce, still a small share.
* ``fast-tiny``: a small TP-4 PCIe model at ~600 tok/s with a 0.3 s load, for quick tests.

TOML files use the same keys as :class:`Profile` (plus ``extends = "<built-in name>"`` to start
from a built-in). Times are in milliseconds (``*_ms``) or microseconds (``*_us``), sizes in bytes,
bandwidths in GB/s (1 GB/s = 1000 bytes/us).
"""

from __future__ import annotations

import dataclasses
import os

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python < 3.11
    tomllib = None


class ProfileError(ValueError):
    """A profile name or file that cannot be used; the message says why."""


@dataclasses.dataclass(frozen=True)
class Profile:
    """One simulated serving box. Units in field names; sources in REFERENCE.md sections 1-5.

    Topology (NCCL's view, src/graph/topo.h): ``link`` is ``"pcie"`` or ``"nvlink"`` (selects
    NCCL's hardware latency row, src/graph/tuning.cc); ``gpu_path`` / ``cross_path`` are the
    NCCL path types of ordinary ring hops and of the ``cross_fraction`` of hops that cross CPU
    sockets; P2P is used on a hop when its path is no worse than the P2P level
    (``p2p_default_level`` unless NCCL_P2P_LEVEL overrides), otherwise SHM through host memory.
    ``default_channels`` is what NCCL's topology search finds; ``per_channel_bw_GBps`` and
    ``link_bw_cap_GBps`` bound the bus bandwidth (REFERENCE.md section 4).
    """

    name: str
    model: str
    tp: int
    layers: int
    allreduces_per_layer: int
    hidden: int
    dtype_bytes: int
    compute_ms: float  # per decode token at batch 1, everything but the allreduces
    batch_compute_slope: float  # compute(B) = compute_ms * (1 + slope * (B - 1))
    prefill_fixed_ms: float  # TTFT floor (scheduling, first forward pass)
    prefill_ms_per_token: float  # prefill compute per prompt token
    link: str  # "pcie" | "nvlink"
    gpu_path: str  # NCCL path type between ring neighbours (PIX/PXB/PHB/SYS/NVL)
    cross_path: str  # path type of hops that cross sockets
    cross_fraction: float  # share of ring hops on cross_path (0..1)
    p2p_default_level: str  # NCCL's automatic P2P level on this platform
    default_channels: int  # channels found by NCCL's topology search
    per_channel_bw_GBps: float
    link_bw_cap_GBps: float
    op_overhead_us: float  # per allreduce, outside NCCL's model (launch, host sync, stragglers)
    shm_step_factor: float  # SHM hop latency / P2P hop latency
    tree_chain_penalty: float  # real single-node Tree (a chain) hop latency / NCCL's model
    max_conn_one_us: float  # per-allreduce change with CUDA_DEVICE_MAX_CONNECTIONS=1 (<0 helps)
    max_conn_per_doubling_us: float  # per-allreduce cost per doubling above 8 connections
    custom_allreduce_max_bytes: int  # vLLM custom allreduce handles messages up to this; 0 = off
    custom_allreduce_us: float  # time of one custom allreduce
    nvls: bool  # NVLink SHARP available (NVSwitch gen 3 + Hopper)
    nccl_version: str
    max_model_len: int
    load_time_s: float
    noise: float  # default per-request multiplicative speed noise (fraction, 1 sigma)

    @property
    def decode_bytes(self) -> int:
        """Bytes of one decode allreduce at batch 1: hidden x dtype bytes (REFERENCE.md s. 4)."""
        return self.hidden * self.dtype_bytes

    @property
    def allreduces_per_token(self) -> int:
        """Allreduces per decoded token: layers x allreduces per layer."""
        return self.layers * self.allreduces_per_layer


_PCIE_8X_MLA = Profile(
    name="pcie-8x-mla",
    model="sim/kimi-k2.5-mla-tp8",
    tp=8,
    layers=61,
    allreduces_per_layer=2,
    hidden=7168,
    dtype_bytes=2,
    compute_ms=4.55,
    batch_compute_slope=0.15,
    prefill_fixed_ms=30.0,
    prefill_ms_per_token=0.25,
    link="pcie",
    gpu_path="PXB",
    cross_path="SYS",
    cross_fraction=0.25,
    p2p_default_level="PXB",
    default_channels=4,
    per_channel_bw_GBps=12.0,
    link_bw_cap_GBps=48.0,
    op_overhead_us=45.0,
    shm_step_factor=2.5,
    tree_chain_penalty=1.3,
    max_conn_one_us=-0.5,
    max_conn_per_doubling_us=0.15,
    custom_allreduce_max_bytes=0,
    custom_allreduce_us=0.0,
    nvls=False,
    nccl_version="2.27.3",
    max_model_len=32768,
    load_time_s=2.0,
    noise=0.02,
)

_NVLINK_8X = Profile(
    name="nvlink-8x",
    model="sim/llama-70b-tp8",
    tp=8,
    layers=80,
    allreduces_per_layer=2,
    hidden=8192,
    dtype_bytes=2,
    compute_ms=18.0,
    batch_compute_slope=0.08,
    prefill_fixed_ms=20.0,
    prefill_ms_per_token=0.08,
    link="nvlink",
    gpu_path="NVL",
    cross_path="NVL",
    cross_fraction=0.0,
    p2p_default_level="SYS",
    default_channels=16,
    per_channel_bw_GBps=20.0,
    link_bw_cap_GBps=240.0,
    op_overhead_us=3.0,
    shm_step_factor=4.0,
    tree_chain_penalty=1.1,
    max_conn_one_us=0.0,
    max_conn_per_doubling_us=0.0,
    custom_allreduce_max_bytes=8 * 1024 * 1024,
    custom_allreduce_us=9.0,
    nvls=False,
    nccl_version="2.27.3",
    max_model_len=32768,
    load_time_s=1.5,
    noise=0.02,
)

_NVLINK_8X_NCCL = dataclasses.replace(
    _NVLINK_8X, name="nvlink-8x-nccl", custom_allreduce_max_bytes=0, custom_allreduce_us=0.0)

_FAST_TINY = Profile(
    name="fast-tiny",
    model="sim/tiny-tp4",
    tp=4,
    layers=16,
    allreduces_per_layer=2,
    hidden=2048,
    dtype_bytes=2,
    compute_ms=1.0,
    batch_compute_slope=0.1,
    prefill_fixed_ms=5.0,
    prefill_ms_per_token=0.02,
    link="pcie",
    gpu_path="PXB",
    cross_path="PXB",
    cross_fraction=0.0,
    p2p_default_level="PXB",
    default_channels=2,
    per_channel_bw_GBps=12.0,
    link_bw_cap_GBps=24.0,
    op_overhead_us=6.0,
    shm_step_factor=2.5,
    tree_chain_penalty=1.3,
    max_conn_one_us=-0.5,
    max_conn_per_doubling_us=0.15,
    custom_allreduce_max_bytes=0,
    custom_allreduce_us=0.0,
    nvls=False,
    nccl_version="2.27.3",
    max_model_len=8192,
    load_time_s=0.3,
    noise=0.02,
)

BUILTIN: dict[str, Profile] = {p.name: p for p in (_PCIE_8X_MLA, _NVLINK_8X, _NVLINK_8X_NCCL,
                                                   _FAST_TINY)}
DEFAULT_PROFILE = "pcie-8x-mla"

_FIELDS = {f.name: f for f in dataclasses.fields(Profile)}


def _coerce(key: str, value, source: str):
    """Check a TOML value against the field's annotated type (int, float, str, bool)."""
    kind = _FIELDS[key].type
    if kind == "bool":
        if not isinstance(value, bool):
            raise ProfileError(f"{source}: {key} must be true/false, got {value!r}")
        return value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise ProfileError(f"{source}: {key} must be an integer, got {value!r}")
        return value
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ProfileError(f"{source}: {key} must be a number, got {value!r}")
        return float(value)
    if not isinstance(value, str):
        raise ProfileError(f"{source}: {key} must be a string, got {value!r}")
    return value


def _validate(p: Profile, source: str) -> Profile:
    """Reject values the cost model cannot use (the message names the key)."""
    if p.link not in ("pcie", "nvlink"):
        raise ProfileError(f"{source}: link must be 'pcie' or 'nvlink', got {p.link!r}")
    if p.tp < 1 or p.layers < 1 or p.allreduces_per_layer < 0 or p.hidden < 1:
        raise ProfileError(f"{source}: tp, layers, hidden must be >= 1")
    if not 0.0 <= p.cross_fraction <= 1.0:
        raise ProfileError(f"{source}: cross_fraction must be within [0, 1]")
    if p.default_channels < 1 or p.per_channel_bw_GBps <= 0 or p.link_bw_cap_GBps <= 0:
        raise ProfileError(f"{source}: channels and bandwidths must be positive")
    if p.compute_ms < 0 or p.load_time_s < 0 or p.noise < 0:
        raise ProfileError(f"{source}: compute_ms, load_time_s, noise must be >= 0")
    from .ncclenv import PATH_TYPES  # local: keep this module importable on its own

    for key in ("gpu_path", "cross_path", "p2p_default_level"):
        if getattr(p, key) not in PATH_TYPES:
            raise ProfileError(f"{source}: {key} must be one of {', '.join(PATH_TYPES)}")
    return p


def profile_from_mapping(data: dict, source: str = "<mapping>") -> Profile:
    """Build a profile from TOML-like data. With ``extends = "<built-in>"`` the given keys
    override that built-in; without it every field must be present. Raises ProfileError."""
    data = dict(data)
    base_name = data.pop("extends", None)
    unknown = sorted(k for k in data if k not in _FIELDS)
    if unknown:
        raise ProfileError(f"{source}: unknown key(s) {', '.join(unknown)}; "
                           f"accepted: extends, {', '.join(_FIELDS)}")
    values = {k: _coerce(k, v, source) for k, v in data.items()}
    if base_name is not None:
        if base_name not in BUILTIN:
            raise ProfileError(f"{source}: extends = {base_name!r} is not a built-in profile "
                               f"({', '.join(BUILTIN)})")
        values.setdefault("name", os.path.splitext(os.path.basename(source))[0])
        return _validate(dataclasses.replace(BUILTIN[base_name], **values), source)
    missing = sorted(k for k in _FIELDS if k not in values)
    if missing:
        raise ProfileError(f"{source}: missing key(s) {', '.join(missing)} "
                           "(or add extends = \"<built-in>\")")
    return _validate(Profile(**values), source)


def load_profile(spec: str | None) -> Profile:
    """A built-in profile by name, or a TOML file path (``*.toml`` or any existing file)."""
    spec = spec or DEFAULT_PROFILE
    if spec in BUILTIN:
        return BUILTIN[spec]
    if spec.endswith(".toml") or os.path.isfile(spec):
        if tomllib is None:  # pragma: no cover
            raise ProfileError("TOML profiles need Python >= 3.11 (tomllib)")
        try:
            with open(spec, "rb") as fh:
                data = tomllib.load(fh)
        except OSError as exc:
            raise ProfileError(f"{spec}: cannot read profile: {exc.strerror}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ProfileError(f"{spec}: invalid TOML: {exc}") from None
        return profile_from_mapping(data, spec)
    raise ProfileError(f"unknown profile {spec!r}: use one of {', '.join(BUILTIN)} or a .toml file")
