"""Small helpers the screen readers share: finding rows (phrases: :mod:`.phrases`). Pure."""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["NBSP", "bottom_rows", "last_nonblank", "squash"]

NBSP = "\u00a0"
_SPACE = re.compile(r"\s+")


def squash(text: str) -> str:
    """Text without any whitespace (wrapping and indentation differ between screens)."""
    return _SPACE.sub("", text.replace(NBSP, " "))


def last_nonblank(rows: Sequence[str], before: int | None = None) -> int:
    """Index of the last row with text (before ``before``), or -1."""
    index = len(rows) if before is None else before
    index -= 1
    while index >= 0 and not rows[index].strip():
        index -= 1
    return index


def bottom_rows(rows: Sequence[str], count: int, *, before: int | None = None) -> list[int]:
    """Indices of the last ``count`` rows with text (before ``before``), top to bottom."""
    found: list[int] = []
    index = last_nonblank(rows, before)
    while index >= 0 and len(found) < count:
        found.append(index)
        index = last_nonblank(rows, index)
    found.reverse()
    return found
