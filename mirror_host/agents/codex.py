"""Reading Codex's screen. Pure.

Codex keeps its input at the bottom of an inline viewport::

    Working (36s • esc to interrupt)                  live status (only while working)

    › Ask Codex to do anything                        composer: `›` at column 0
      continuation of a long draft                    indented, up to a blank row

      gpt-5.6-luna · 100% context left                footer rows, indented

An empty composer shows a suggestion painted dim (SGR 2); that styling is the
only thing that tells "Ask Codex to do anything" the placeholder from the same
words typed by somebody, so only solid text counts as a draft. Older builds
draw a ``▌`` bar instead of ``›``.

Approvals, the trust prompt and questions replace the composer; their phrases
("Press enter to confirm or esc to cancel", "Allow command?", ``[y/n]``) and a
focused numbered option (``› 1. Yes, proceed``) near the bottom mean
``blocked``. The live status row carries a running clock, ``(12s • esc to
interrupt)`` or ``(1m 02s)``; history rows never do.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from mirror_host.agents.layout import NBSP, bottom_rows, last_nonblank
from mirror_host.agents.model import AgentState, Composer, Reading, ScreenView
from mirror_host.agents.phrases import dialog_open, has_phrase, matches_any

__all__ = ["read_codex"]

_MARKERS = ("›", "▌")
_MAX_FOOTER_ROWS = 4
_MAX_DRAFT_ROWS = 40
_STATUS_LOOKBACK = 8

DIALOG_PHRASES = (
    "press enter to confirm",
    "esc to cancel",
    "enter to submit",
    "allow command?",
    "would you like to run the following command",
    "would you like to make the following edits",
    "would you like to",
    "do you want to",
    "do you trust the contents of this directory",
    "press enter to continue",
    "[y/n]",
    "yes (y)",
)
#: Phrases only a live approval shows (answers quoting them are rarer than these rows).
_LIVE_DIALOG_PHRASES = ("press enter to confirm", "allow command?", "enter to submit answer")
#: The transcript viewer (ctrl+t) shows history, not the live composer.
_VIEWER_PHRASES = ("pgup/pgdn to", "q to quit")
_OPTION = re.compile(r"^\s*[›>]\s*\d+\.\s")
_CLOCK = re.compile(r"\((?:\d+h )?(?:\d+m )?\d+s(?: • [^)]*to interrupt)?\)(?:\s*$|\s+·)")


def _composer_row(rows: Sequence[str]) -> int | None:
    """The composer's first row: a marker row followed by its draft, a blank, the footer."""
    end = last_nonblank(rows)
    index = end
    while index >= 0 and end - index <= _MAX_FOOTER_ROWS + _MAX_DRAFT_ROWS:
        row = rows[index]
        if row.startswith(_MARKERS) and (len(row) == 1 or row[1] in (" ", NBSP)):
            # Everything below must be the draft's continuation, a blank, then footer rows.
            below = rows[index + 1 : end + 1]
            gap = next((i for i, r in enumerate(below) if not r.strip()), len(below))
            draft_rows, footer = below[:gap], below[gap:]
            footer_rows = [r for r in footer if r.strip()]
            if all(r.startswith("  ") for r in draft_rows) and len(footer_rows) <= (
                _MAX_FOOTER_ROWS
            ):
                return index
            return None
        index -= 1
    return None


def _draft(view: ScreenView, first: int) -> str:
    rows = view.rows
    text = [view.solid_text(first)[1:].replace(NBSP, " ").strip()]
    index = first + 1
    while index < len(rows) and rows[index].strip():
        text.append(rows[index].strip())
        index += 1
    return "\n".join(text).strip()


def _blocked(rows: Sequence[str]) -> str | None:
    dialog = dialog_open(rows, DIALOG_PHRASES)
    if dialog is None and matches_any(rows, (_OPTION,)):
        return "an option is focused"
    return dialog


def read_codex(view: ScreenView) -> Reading:
    """Codex's state and composer (module docstring)."""
    rows = view.rows
    first = _composer_row(rows)
    if first is None or _OPTION.match(rows[first]):
        region = [rows[i] for i in bottom_rows(rows, 25)]
        return Reading.without_composer(_blocked(region), "no composer on screen")
    draft = _draft(view, first)
    composer = Composer.holding(draft)
    end = first + 1
    while end < len(rows) and rows[end].strip():
        end += 1
    footer = rows[end:]
    if has_phrase(footer, _VIEWER_PHRASES):
        return Reading(AgentState.UNKNOWN, composer, draft, "its transcript viewer is open")
    blocker = _blocked(footer)
    if blocker is not None:
        return Reading(AgentState.BLOCKED, composer, draft, blocker)
    above = [rows[i] for i in bottom_rows(rows, _STATUS_LOOKBACK, before=first)]
    strong = has_phrase(above, _LIVE_DIALOG_PHRASES)
    if strong is not None or matches_any(above, (_OPTION,)):
        # An approval drawn above a still-visible composer (a half-drawn screen).
        return Reading(AgentState.BLOCKED, composer, draft, "an approval is open")
    for index in reversed(bottom_rows(rows, _STATUS_LOOKBACK, before=first)):
        row = rows[index].replace(NBSP, " ")
        if row.startswith(_MARKERS):
            break  # an earlier prompt: older rows belong to finished turns
        if not row.startswith(" ") and _CLOCK.search(row):
            return Reading(AgentState.WORKING, composer, draft, "its status clock is running")
    if has_phrase(footer, ("esc to interrupt",)):
        return Reading(AgentState.WORKING, composer, draft, "it offers 'esc to interrupt'")
    return Reading(AgentState.IDLE, composer, draft, "its composer is waiting")
