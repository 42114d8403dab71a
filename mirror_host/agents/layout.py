"""Small helpers the screen readers share: finding rows, matching phrases. Pure."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

__all__ = [
    "NBSP",
    "bottom_rows",
    "dialog_open",
    "has_phrase",
    "last_nonblank",
    "matches_any",
    "squash",
]

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


def has_phrase(lines: Iterable[str], phrases: Iterable[str]) -> str | None:
    """The first of ``phrases`` (lower case) found in any of ``lines``, or ``None``."""
    text = "\n".join(line.replace(NBSP, " ").lower() for line in lines)
    return next((phrase for phrase in phrases if phrase in text), None)


def dialog_open(lines: Iterable[str], phrases: Iterable[str]) -> str | None:
    """Why ``lines`` hold a dialog (the first of its ``phrases`` found), or ``None``."""
    phrase = has_phrase(lines, phrases)
    return None if phrase is None else f"a dialog is open ({phrase!r})"


def matches_any(lines: Iterable[str], patterns: Iterable[re.Pattern[str]]) -> bool:
    """Whether any line matches any of the patterns."""
    compiled = list(patterns)
    return any(p.search(line.replace(NBSP, " ")) for line in lines for p in compiled)
