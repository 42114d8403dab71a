"""Reading Gemini CLI's screen. Pure.

Gemini CLI draws its input as a rounded box near the bottom::

    ⠏ Counting electrons… (esc to cancel, 3s)                 working: a spinner row

    ╭───────────────────────────────────────────────╮
    │ >   Type your message or @path/to/file        │        `>` marker; the placeholder
    ╰───────────────────────────────────────────────╯
    ~/project (main*)   no sandbox   gemini-2.5-pro            footer row(s)

The placeholder is drawn in grey, not dim, so it is recognised by its words.
A ``!`` marker (or "Type your shell command") is shell mode, where a prompt
would run as a command, and vim's normal mode ("Press 'i' for INSERT mode.")
would read it as keystrokes: neither counts as an empty composer.

Tool confirmations ("Allow execution of: 'rm'?", "Apply this change?",
"Waiting for user confirmation…", ``● 1. Yes, allow once``) sit above the box
and mean ``blocked``; here "esc to cancel" is the *working* spinner's hint.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from mirror_host.agents.layout import NBSP, bottom_rows, last_nonblank
from mirror_host.agents.model import AgentState, Composer, Reading, ScreenView
from mirror_host.agents.phrases import dialog_open, matches_any

__all__ = ["read_gemini"]

_MAX_FOOTER_ROWS = 4
_MAX_BOX_ROWS = 40
PLACEHOLDER = "Type your message or @path/to/file"
_EMPTY_PLACEHOLDERS = frozenset({PLACEHOLDER, "Press 'Esc' for NORMAL mode."})
_NOT_A_PROMPT = frozenset({"Type your shell command", "Press 'i' for INSERT mode."})

DIALOG_PHRASES = (
    "allow execution",
    "apply this change",
    "do you want to proceed",
    "waiting for user confirmation",
    "allow once",
    "allow always",
    "yes, allow",
    "no, suggest changes",
    "modify with external editor",
    "do you trust this folder",
    "trust folder",
    "(y/n)",
)
_SPINNER = re.compile(r"^\s*[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏⠁⠂⠄⡀⢀⠠⠐⠈]\s+\S")
_CANCEL_CLOCK = re.compile(r"\(esc to cancel, \d+")


def _box(rows: Sequence[str]) -> tuple[int, int] | None:
    """``(top, bottom)`` of the input box, if it is the last thing above the footer."""
    end = last_nonblank(rows)
    bottom = end
    while bottom >= 0 and end - bottom <= _MAX_FOOTER_ROWS and not rows[bottom].startswith("╰"):
        bottom -= 1
    if bottom < 0 or not rows[bottom].startswith("╰") or not rows[bottom].rstrip().endswith("╯"):
        return None
    top = bottom - 1
    while top >= 0 and bottom - top <= _MAX_BOX_ROWS and rows[top].startswith("│"):
        top -= 1
    if top < 0 or top == bottom - 1 or not rows[top].startswith("╭"):
        return None
    return top, bottom


def _inner(row: str) -> str:
    text = row.rstrip()
    text = text[1:] if text.startswith("│") else text
    text = text[:-1] if text.endswith("│") else text
    return text.replace(NBSP, " ").strip()


def read_gemini(view: ScreenView) -> Reading:
    """Gemini CLI's state and composer (module docstring)."""
    rows = view.rows
    box = _box(rows)
    above = bottom_rows(rows, 25, before=box[0] if box else None)
    region = [rows[i] for i in above]
    dialog = dialog_open(region, DIALOG_PHRASES)
    if dialog is not None:
        return Reading(AgentState.BLOCKED, Composer.ABSENT, reason=dialog)
    if box is None:
        return Reading(AgentState.UNKNOWN, Composer.ABSENT, reason="no input box on screen")
    top, bottom = box
    first = _inner(view.solid_text(top + 1))
    marker, _, text = first.partition(" ")
    if marker not in (">", "*"):
        return Reading(AgentState.UNKNOWN, Composer.ABSENT, reason="the input is in shell mode")
    lines = [text.strip(), *(_inner(rows[i]) for i in range(top + 2, bottom))]
    draft = "\n".join(line for line in lines if line)
    if draft in _NOT_A_PROMPT:
        return Reading(AgentState.UNKNOWN, Composer.ABSENT, reason="the input takes commands")
    draft = "" if draft in _EMPTY_PLACEHOLDERS else draft
    composer = Composer.holding(draft)
    near = [rows[i] for i in bottom_rows(rows, 6, before=top)]
    if matches_any(near, (_SPINNER, _CANCEL_CLOCK)):
        return Reading(AgentState.WORKING, composer, draft, "its spinner is running")
    return Reading(AgentState.IDLE, composer, draft, "its input box is waiting")
