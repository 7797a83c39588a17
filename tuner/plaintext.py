"""Rich tables as plain text: one line per row whatever the terminal width (for files and pipes)."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table

__all__ = ["plain_table"]

_WIDE = 100_000  # characters: wider than any row, so a piped table never wraps


def plain_table(table: Table) -> str:
    """``table`` as plain text, one line per row whatever the width (trailing blanks removed)."""
    console = Console(file=io.StringIO(), width=_WIDE, color_system=None, legacy_windows=False)
    with console.capture() as capture:
        console.print(table)
    return "\n".join(line.rstrip() for line in capture.get().splitlines())
