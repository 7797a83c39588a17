"""Secrets in environments and text: which variables are secret, and their values hidden.

A variable is secret when its name holds TOKEN, KEY, SECRET or PASSWORD (any case): its value
is passed on to the server but never written to a log, a record or the screen.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["REDACTED", "SECRET_MARKERS", "is_secret", "redact", "scrub", "secret_values"]

#: Names that mark a variable as secret: its value is passed on, never written.
SECRET_MARKERS = ("TOKEN", "KEY", "SECRET", "PASSWORD")
REDACTED = "***"


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
