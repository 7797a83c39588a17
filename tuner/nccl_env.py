"""What NCCL (and CUDA) accept in the environment variables nccl-tune sets.

NCCL reads integer variables once per process with ``strtoll(value, NULL, 0)`` and never
complains: ``NCCL_BUFFSIZE=4M`` is 4 bytes and ``abc`` is 0 (NCCL src/misc/param.cc,
REFERENCE.md section 2). nccl-tune refuses such values before a 36-minute relaunch is spent
on a setting the server would silently misread.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

#: Names that mark a variable as secret: its value is passed on, never written.
SECRET_MARKERS = ("TOKEN", "KEY", "SECRET", "PASSWORD")
REDACTED = "***"

#: Variables the baseline strips from the inherited environment (REFERENCE.md section 2).
TUNING_PREFIXES = ("NCCL_",)
TUNING_NAMES = ("CUDA_DEVICE_MAX_CONNECTIONS",)

ALGOS = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")
PROTOS = ("LL", "LL128", "Simple")
P2P_LEVELS = ("LOC", "NVL", "PIX", "PXB", "PHB", "SYS")
COLLECTIVES = ("allreduce", "broadcast", "reduce", "allgather", "reducescatter", "sendrecv")

# Integer variables: (min, max, extra rule) per REFERENCE.md section 2; None = unbounded.
_INT_RANGES: dict[str, tuple[int | None, int | None]] = {
    "NCCL_MAX_NCHANNELS": (1, 64),
    "NCCL_MIN_NCHANNELS": (0, 64),
    "NCCL_MAX_NRINGS": (1, 64),
    "NCCL_MIN_NRINGS": (0, 64),
    "NCCL_MAX_CTAS": (1, 64),
    "NCCL_MIN_CTAS": (0, 64),
    "NCCL_BUFFSIZE": (1, None),
    "NCCL_NTHREADS": (64, 512),
    "NCCL_P2P_DISABLE": (0, 1),
    "NCCL_SHM_DISABLE": (0, 1),
    "NCCL_IB_DISABLE": (0, 1),
    "NCCL_CUMEM_ENABLE": (0, 1),
    "NCCL_NVLS_ENABLE": (0, 2),
    "NCCL_CROSS_NIC": (0, 2),
    "NCCL_SOCKET_NTHREADS": (1, 16),
    "NCCL_NSOCKS_PERTHREAD": (1, 16),
    "CUDA_DEVICE_MAX_CONNECTIONS": (1, 32),
}

_STRTOLL = re.compile(r"\s*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")


def strtoll(text: str) -> tuple[int, str]:
    """Parse ``text`` as C ``strtoll(text, &end, 0)`` does.

    Returns ``(value, rest)``: the parsed integer and the unparsed remainder. Base 0 means
    ``0x`` hex, leading ``0`` octal, else decimal; parsing stops at the first invalid
    character and yields 0 if nothing parsed (C99 7.20.1.4). ``strtoll("4M") == (4, "M")``.
    """
    m = _STRTOLL.match(text)
    if not m:
        return 0, text
    sign, digits = m.groups()
    base = 16 if digits[:2].lower() == "0x" else (8 if digits.startswith("0") and len(digits) > 1 else 10)
    value = int(digits, base)
    return (-value if sign == "-" else value), text[m.end():]


def is_secret(name: str) -> bool:
    """True when ``name`` contains TOKEN, KEY, SECRET or PASSWORD (case-insensitive)."""
    upper = name.upper()
    return any(marker in upper for marker in SECRET_MARKERS)


def redact(env: Mapping[str, str]) -> dict[str, str]:
    """Copy of ``env`` with every secret variable's value replaced by ``***``."""
    return {k: (REDACTED if is_secret(k) else v) for k, v in env.items()}


def secret_values(env: Mapping[str, str]) -> list[str]:
    """Values of the secret variables in ``env`` worth scrubbing from text (4+ chars)."""
    return sorted({v for k, v in env.items() if is_secret(k) and len(v) >= 4}, key=len, reverse=True)


def scrub(text: str, secrets: list[str]) -> str:
    """``text`` with every occurrence of each secret value replaced by ``***``."""
    for value in secrets:
        text = text.replace(value, REDACTED)
    return text


def is_tuning_variable(name: str) -> bool:
    """True for the variables a baseline must not inherit: ``NCCL_*`` and CUDA_DEVICE_MAX_CONNECTIONS."""
    return name.startswith(TUNING_PREFIXES) or name in TUNING_NAMES


def _list_problem(value: str, allowed: tuple[str, ...]) -> str | None:
    """Check an NCCL_ALGO / NCCL_PROTO list: ``A,B``, ``^A``, or ``allreduce:a;broadcast:b``."""
    lowered = {a.lower() for a in allowed}
    parts = value.split(";") if ":" in value else [value]
    for part in parts:
        body = part
        if ":" in part:
            coll, body = part.split(":", 1)
            if coll.strip().lower() not in COLLECTIVES:
                return f"unknown collective '{coll}' (known: {', '.join(COLLECTIVES)})"
        body = body.strip()
        if body.startswith("^"):
            body = body[1:]
        tokens = [t.strip() for t in body.split(",")]
        for token in tokens:
            if token.lower() not in lowered:
                return f"unknown token '{token}'"
    return None


def check_value(name: str, value: str) -> str | None:
    """Return why NCCL would misread or reject ``name=value``, or None when it is fine.

    Integers must be consumed whole by strtoll (no unit suffixes) and lie in the documented
    range; NCCL_ALGO / NCCL_PROTO tokens must be known (NCCL >= 2.24 fails init on an unknown
    token, <= 2.23 silently ignores it); NCCL_P2P_LEVEL must be a known level.
    Source: REFERENCE.md section 2 (NCCL src/misc/param.cc, src/graph/tuning.cc).
    """
    if name in _INT_RANGES:
        parsed, rest = strtoll(value)
        if rest.strip() or not value.strip():
            return (f"NCCL reads it with strtoll as {parsed} (it stops at '{rest.strip()[:8]}'); "
                    "write a plain integer such as 16777216, no unit suffix")
        low, high = _INT_RANGES[name]
        if (low is not None and parsed < low) or (high is not None and parsed > high):
            return f"{parsed} is outside [{low}, {high if high is not None else 'inf'}]"
        if name == "NCCL_NTHREADS" and parsed % 32:
            return f"{parsed} is not a multiple of 32"
        return None
    if name == "NCCL_ALGO":
        problem = _list_problem(value, ALGOS)
        return f"{problem}; known algorithms: {', '.join(ALGOS)} (comma list, ^ excludes)" if problem else None
    if name == "NCCL_PROTO":
        problem = _list_problem(value, PROTOS)
        return f"{problem}; known protocols: {', '.join(PROTOS)} (comma list, ^ excludes)" if problem else None
    if name == "NCCL_P2P_LEVEL":
        if value.upper() in P2P_LEVELS or value in ("0", "1", "2", "3", "4"):
            return None
        return f"unknown level; NCCL silently ignores it. Known: {', '.join(P2P_LEVELS)} or 0-4"
    return None


def accepted(name: str) -> str:
    """One-line description of what ``name`` accepts, for error messages."""
    if name in _INT_RANGES:
        low, high = _INT_RANGES[name]
        extra = ", multiple of 32" if name == "NCCL_NTHREADS" else ""
        return f"a plain integer in [{low}, {high if high is not None else 'inf'}]{extra} (decimal or 0x hex, no suffix)"
    if name == "NCCL_ALGO":
        return f"a comma list of {', '.join(ALGOS)}; '^' excludes; or 'allreduce:ring;broadcast:tree'"
    if name == "NCCL_PROTO":
        return f"a comma list of {', '.join(PROTOS)}; '^' excludes"
    if name == "NCCL_P2P_LEVEL":
        return f"one of {', '.join(P2P_LEVELS)} or 0-4"
    return "any string"


def unsafe_reason(name: str, value: str) -> str | None:
    """Why ``name=value`` can corrupt data or hang, or None for a safe-ish setting.

    Forcing LL128 where NCCL disabled it "can lead to data corruption" (NCCL docs); NCCL
    enables LL128 by itself where it is safe. NVLS on unsupported hardware and exotic
    algorithms (CollNet*, NVLS*, PAT) can hang (nccl #1197). REFERENCE.md section 2.
    """
    if name == "NCCL_PROTO" and not value.strip().startswith("^"):
        bodies = [p.split(":", 1)[-1] for p in value.split(";")]
        if any("ll128" in [t.strip().lower() for t in b.split(",")] for b in bodies):
            return "forces LL128, which can corrupt data where NCCL disabled it (PCIe)"
    if name == "NCCL_ALGO" and not value.strip().startswith("^"):
        exotic = {"collnetdirect", "collnetchain", "nvls", "nvlstree", "pat"}
        bodies = [p.split(":", 1)[-1] for p in value.split(";")]
        tokens = {t.strip().lower() for b in bodies for t in b.split(",")}
        if tokens & exotic:
            return f"forces {', '.join(sorted(tokens & exotic))}, which hangs on unsupported hardware"
    if name == "NCCL_NVLS_ENABLE" and value.strip() == "1":
        return "forces NVLS, which needs NVSwitch gen 3 and Hopper+ (hang reported, nccl #1197)"
    return None


def cross_problems(env: Mapping[str, str]) -> list[tuple[str, str]]:
    """Problems between variables of one set, as ``(key, reason)``: MIN channels above MAX."""
    problems = []
    for lo_name, hi_name in (("NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS"),
                             ("NCCL_MIN_NRINGS", "NCCL_MAX_NRINGS"),
                             ("NCCL_MIN_CTAS", "NCCL_MAX_CTAS")):
        if lo_name in env and hi_name in env:
            lo, hi = strtoll(env[lo_name])[0], strtoll(env[hi_name])[0]
            if lo > hi:
                problems.append((lo_name, f"{lo_name}={lo} is above {hi_name}={hi}"))
    return problems
