"""Reading OpenCode's screen. Pure.

OpenCode (a full-screen TUI) draws its composer as a run of rows behind a heavy
left bar, closed by a half-block rule, with status rows under it::

    ┃
    ┃  Ask anything… "Fix broken tests"           the placeholder, or the draft
    ┃
    ┃  Build · Claude Sonnet 4.5 Anthropic         the agent/model row: last inside the bar
    ╹▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀
    ~/project                    tab agents  ctrl+p commands

The placeholder is ordinary painted text starting "Ask anything"; a draft that
begins with those words reads as empty, which can only refuse a delivery that
would otherwise have been allowed (never the reverse: it is not typed into).
A permission dialog ("△ Permission required", "enter confirm") owns the
bottom of the screen; "esc interrupt" and the ``■■■■`` progress bar mean the
agent is working.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from mirror_host.agents.layout import NBSP, bottom_rows
from mirror_host.agents.model import AgentState, Composer, Reading, ScreenView
from mirror_host.agents.phrases import dialog_open, has_phrase, matches_any

__all__ = ["read_opencode"]

_MAX_STATUS_ROWS = 6
_MAX_DRAFT_ROWS = 100
_RULE = re.compile(r"^\s*╹▀+$")
_BAR = re.compile(r"^\s*┃")
_BARE_BAR = re.compile(r"^\s*┃\s*$")
_GUTTER = re.compile(r"^\s*┃  (.*)$")
_MODEL_ROW = re.compile(r"^\s*┃\s{2}\S[^·]*·\s?\S")
_PROGRESS = re.compile(r"[■⬝]{4,}")
PLACEHOLDER_PREFIX = "Ask anything"
DIALOG_PHRASES = (
    "permission required",
    "always allow",
    "enter confirm",
    "⇆ select",
    "enter submit",
    "enter toggle",
    "esc dismiss",
)
WORKING_PHRASES = ("esc interrupt", "esc to interrupt", "ctrl+c to interrupt")


def _composer(rows: Sequence[str]) -> tuple[int, int, int] | None:
    """``(first draft row, last draft row, rule row)`` of the composer at the bottom."""
    status = 0
    rule = len(rows) - 1
    while rule >= 0:
        row = rows[rule].rstrip()
        if _RULE.match(row):
            break
        if row:
            if _BAR.match(row):
                return None  # a bar row under everything: a dialog owns the bottom
            status += 1
            if status > _MAX_STATUS_ROWS:
                return None
        rule -= 1
    if rule < 0:
        return None
    model = rule - 1
    while model >= 0 and rule - model <= 2 and _BARE_BAR.match(rows[model]):
        model -= 1
    if model < 0 or not _MODEL_ROW.match(rows[model]):
        return None
    last = model - 1
    if last < 0 or not _BARE_BAR.match(rows[last]):
        return None  # no separator row above the agent row: not a layout we know
    first = last
    while first - 1 >= 0 and model - first < _MAX_DRAFT_ROWS and _BAR.match(rows[first - 1]):
        first -= 1
    return first, last - 1, rule


def read_opencode(view: ScreenView) -> Reading:
    """OpenCode's state and composer (module docstring)."""
    rows = view.rows
    region = [rows[i] for i in bottom_rows(rows, 30)]
    found = _composer(rows)
    if found is None:
        return Reading.without_composer(
            dialog_open(region, DIALOG_PHRASES), "no composer on screen"
        )
    first, last, rule = found
    lines: list[str] = []
    for index in range(first, last + 1):
        match = _GUTTER.match(view.solid_text(index).replace(NBSP, " "))
        if match is None and not _BARE_BAR.match(rows[index]):
            return Reading(AgentState.UNKNOWN, Composer.ABSENT, reason="an unknown composer row")
        lines.append(match.group(1).strip() if match else "")
    draft = "\n".join(lines).strip()
    draft = "" if draft.startswith(PLACEHOLDER_PREFIX) else draft
    composer = Composer.holding(draft)
    dialog = dialog_open(rows[rule + 1 :], DIALOG_PHRASES)
    if dialog is not None:
        return Reading(AgentState.BLOCKED, composer, draft, dialog)
    if has_phrase(region, WORKING_PHRASES) or matches_any(region, (_PROGRESS,)):
        return Reading(AgentState.WORKING, composer, draft, "it offers to interrupt its turn")
    return Reading(AgentState.IDLE, composer, draft, "its composer is waiting")
