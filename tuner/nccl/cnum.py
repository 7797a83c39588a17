"""C integer parsing as NCCL does it: ``strtoll`` with base 0, C ``int`` conversion.

NCCL reads its integer parameters with ``strtoll(value, NULL, 0)`` into an int64 and often
stores them in an ``int`` (src/misc/param.cc, ncclLoadParam). These functions reproduce what
that makes of a spelling, so a value is judged as NCCL reads it, not as Python would.
"""

from __future__ import annotations

import re

__all__ = ["C_SPACE", "INT32_MAX", "INT64_MAX", "as_c_int", "read_int_param", "strtoll", "strtoll_erange"]

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

#: The characters C's ``isspace`` accepts (C11 7.4.1.10), skipped before a number.
C_SPACE = " \t\n\v\f\r"
_DIGITS = re.compile(r"([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")


def strtoll_erange(text: str) -> tuple[int, str, bool]:
    """C ``strtoll(text, &end, 0)``: ``(value, rest, overflowed)``.

    Base 0: ``0x`` hex, leading ``0`` octal, else decimal; leading C whitespace skipped;
    stops at the first invalid character; 0 and the whole text as rest if nothing parsed
    (C11 7.22.1.4). Out of range clamps to the int64 bound and sets ERANGE (``overflowed``).
    """
    stripped = text.lstrip(C_SPACE)
    m = _DIGITS.match(stripped)
    if not m:
        return 0, text, False
    sign, digits = m.groups()
    base = 16 if digits[:2].lower() == "0x" else (8 if digits.startswith("0") and len(digits) > 1 else 10)
    value = -int(digits, base) if sign == "-" else int(digits, base)
    if value > INT64_MAX or value < -INT64_MAX - 1:
        return (INT64_MAX if value > 0 else -INT64_MAX - 1), stripped[m.end():], True
    return value, stripped[m.end():], False


def strtoll(text: str) -> tuple[int, str]:
    """Parse ``text`` as C ``strtoll(text, &end, 0)`` does: ``(value, rest)``.

    ``strtoll("4M") == (4, "M")``, ``strtoll("abc") == (0, "abc")``, ``strtoll("010") == (8, "")``.
    """
    value, rest, _ = strtoll_erange(text)
    return value, rest


def as_c_int(value: int) -> int:
    """``value`` converted to a 32-bit C ``int`` the way gcc does (two's complement wrap)."""
    return (value + 2**31) % 2**32 - 2**31


def read_int_param(value: str) -> tuple[int | None, str | None]:
    """``(integer, None)``: what NCCL reads from ``value``; ``(None, why)`` when the spelling is
    refused (empty, outside int64, text after the number such as a unit suffix)."""
    if not value.strip(C_SPACE):
        return None, "empty: NCCL ignores an empty value (src/misc/param.cc, ncclLoadParam); leave it unset"
    parsed, rest, overflow = strtoll_erange(value)
    if overflow:
        return None, ("outside the int64 range: NCCL logs \"Invalid value\" and uses its default "
                      "(src/misc/param.cc, ncclLoadParam)")
    if rest.strip(C_SPACE):
        return None, (f"NCCL reads it with strtoll as {parsed} (it stops at {rest.strip()[:8]!r}); "
                      "write a plain integer such as 16777216: no unit suffixes")
    return parsed, None
