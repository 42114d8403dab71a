"""Small helpers the screen readers share: matching phrases and patterns in rows. Pure."""

from __future__ import annotations

import re
from collections.abc import Iterable

from mirror_host.agents.layout import NBSP

__all__ = ["dialog_open", "has_phrase", "matches_any"]


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
