"""Reading Claude Code's screen. Pure.

Claude Code draws its input box at the bottom of the screen::

    ───────────────────────────────────── session label ──   top rule (label optional)
    ❯ the draft, or nothing, or a faint suggestion            prompt row, column 0
      wrapped continuation of a long draft                    indented rows
    ───────────────────────────────────────────────────────   bottom rule
      [Opus 4.8] ~/project on main                            status rows, then an
      ⏵⏵ bypass permissions on (shift+tab to cycle)           optional agents footer

Every dialog (permission prompt, select menu, plan approval, trust prompt,
question wizard, model picker) *replaces* that box, so the box being the last
thing on screen is the strongest sign that nothing is waiting for an answer.
The box is matched by its whole shape, not by a ``❯`` alone: a dialog's focused
option (``❯ 1. Yes``) and a shell prompt drawn with ``❯`` both start a row with
the same glyph. Dialog phrases ("Esc to cancel", "Do you want to proceed?") and
focused options in the rows below the box, or anywhere near the bottom when
there is no box, mean ``blocked``.

A look-alike that prints a long draft as one line leaves the wrapping to the
terminal: such continuation rows start at column 0, and are told from stray
text in the box by the terminal's soft-wrap flag.

Working is read from the live spinner row above the box (``✢ Puzzling… (3m 3s
· ↓ 9.2k tokens)``; a finished turn reads ``✻ Worked for 3s``, without the
ellipsis), from "Waiting for N background agents to finish", or from "esc to
interrupt" in the status rows. The session survey above the box ("How is Claude
doing this session?") answers to digit keys, so it counts as blocked.

A suggestion Claude paints into an empty box is faint (SGR 2); a real draft is
not, so only solid text counts as a draft.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from mirror_host.agents.layout import NBSP, bottom_rows, last_nonblank
from mirror_host.agents.model import AgentState, Composer, Reading, ScreenView
from mirror_host.agents.phrases import dialog_open, has_phrase, matches_any

__all__ = ["read_claude"]

PROMPT = "❯"
_MAX_FOOTER_ROWS = 12  # status rows, a blank, the background-agents list
_MAX_BOX_ROWS = 40  # a long wrapped draft
_SPINNER_LOOKBACK = 12

#: Phrases of Claude's dialogs, lower case.
DIALOG_PHRASES = (
    "esc to cancel",
    "enter to select",
    "enter to confirm",
    "enter to set as default",
    "to navigate",
    "do you want to",
    "would you like to proceed",
    "ready to submit your answers",
    "review your answers",
    "tab to amend",
    "ctrl+e to explain",
    "shift+tab to approve",
    "waiting for permission",
    "yes, i trust this folder",
    "press enter to continue",
)
#: A focused option: ``❯ 1. Yes``, ``❯    Next``, ``❯ ☐ Cheese``.
_POINTERS = (
    re.compile(r"^\s*❯\s*\d+\.\s"),
    re.compile(r"^\s*❯\s{2,}\S"),
    re.compile(r"^\s*❯\s*[☐☒✔◯●○\[]"),
)
#: A menu option, focused or not: ``❯ 1. Yes``, ``  2. No``.
_OPTION = re.compile(r"^\s*(?:❯\s*)?\d+\.\s")
_SPINNER = re.compile(r"^[*·✢✳✶✻✽✺]\s+\S[^…]*…(?:\s*$|\s+\()")
_BACKGROUND_AGENTS = re.compile(r"^[*·✢✳✶✻✽✺]\s+Waiting for [1-9]\d* background agents? to finish")
_SURVEY = "how is claude doing this session"
_CURSOR = "█▌▐ "
_TURN_LOOKBACK = 40
#: The opening words of a dialog's own rows (its question, its key hints).
_DIALOG_LINE = re.compile(
    r"^ ?(?:Do you want to|Would you like to|Esc to cancel|Enter to (?:select|confirm))",
    re.IGNORECASE,
)
#: Text Claude shows in an empty box that is not anybody's draft.
_PLACEHOLDERS = frozenset({"Press up to edit queued messages"})


def _is_rule(row: str) -> bool:
    """A horizontal rule from column 0, perhaps with a label inside (``── name ──``)."""
    text = row.rstrip()
    if not text.startswith("───") or not text.endswith("─"):
        return False
    dashes = text.count("─")
    return dashes >= 10 and dashes * 2 >= len(text)


@dataclass(frozen=True, slots=True)
class _Box:
    top: int
    prompt: int
    bottom: int


def _find_box(view: ScreenView) -> _Box | None:
    """The input box, if it is the last thing on screen (its status rows aside)."""
    rows = view.rows
    end = last_nonblank(rows)
    index = end
    while index >= 0 and end - index <= _MAX_FOOTER_ROWS and not _is_rule(rows[index]):
        index -= 1
    if index < 0 or not _is_rule(rows[index]):
        return None
    bottom = index
    index -= 1
    while index >= 0 and bottom - index <= _MAX_BOX_ROWS and not rows[index].startswith(PROMPT):
        if rows[index].strip() and not rows[index].startswith("  ") and not view.continues(index):
            return None  # neither indented nor soft-wrapped: this is no input box
        index -= 1
    if index < 1 or not rows[index].startswith(PROMPT) or not _is_rule(rows[index - 1]):
        return None
    if matches_any([rows[index]], _POINTERS[:1]) and not _status_rows(rows[bottom + 1 :]):
        return None  # `❯ 1. …` between rules, with no status rows under them: a menu
    return _Box(top=index - 1, prompt=index, bottom=bottom)


def _status_rows(footer: Sequence[str]) -> bool:
    """Whether the rows under a box are its status rows: some text, no dialog line, no option.

    Claude's menus put their ``❯ 1.`` row under a heading or a question, never
    right under a rule with the status rows below; so a ``❯ 1. Fix the bug``
    row in a box that is whole is the composer holding text that starts with
    a number (a prompt just pasted, say), not a focused option.
    """
    return (
        any(row.strip() for row in footer)
        and has_phrase(footer, DIALOG_PHRASES) is None
        and not matches_any(footer, (_OPTION, *_POINTERS))
    )


def _draft(view: ScreenView, box: _Box) -> str:
    rows = view.rows
    # A block drawn as the cursor ("❯ █") is not text anybody typed.
    first = view.solid_text(box.prompt)[len(PROMPT) :].replace(NBSP, " ").strip().rstrip(_CURSOR)
    lines = [first]
    for index in range(box.prompt + 1, box.bottom):
        if view.continues(index):
            lines[-1] += rows[index].rstrip()  # the terminal wrapped this line
        elif rows[index].strip():
            lines.append(rows[index].strip())
    text = "\n".join(lines).strip()
    return "" if text in _PLACEHOLDERS else text


def _blocked(rows: Sequence[str]) -> str | None:
    dialog = dialog_open(rows, DIALOG_PHRASES)
    if dialog is None and matches_any(rows, _POINTERS):
        return "a menu option is focused"
    return dialog


def _dialog_above(rows: Sequence[str], box: _Box) -> str | None:
    """A dialog drawn above a still-visible input box, in the current turn.

    Claude replaces the box with its dialogs, but a screen caught mid-redraw (or
    a look-alike) may show both; a prompt typed then would go to the dialog.
    Only rows of the current turn count (those after the last prompt echo), and
    only rows *shaped* like dialog lines (at column 0 or 1), so an answer that
    merely mentions "Esc to cancel" (indented under its ``●``) does not.
    """
    for index in range(box.top - 1, max(-1, box.top - 1 - _TURN_LOOKBACK), -1):
        row = rows[index].replace(NBSP, " ")
        option = _POINTERS[0].match(row) is not None and _has_siblings(rows, index, box.top)
        if row.startswith(PROMPT) and not option:
            break  # the echo of the last prompt (perhaps one that starts with `1. `)
        if _DIALOG_LINE.match(row) or option:
            return f"a dialog is open ({row.strip()[:40]!r})"
    return None


def _has_siblings(rows: Sequence[str], index: int, end: int) -> bool:
    """Whether the focused option at ``index`` has other options around it (no blank between).

    A menu offers at least two; the echo of a one-line prompt such as ``❯ 1.
    Fix the bug`` stands alone between blank rows.
    """
    above = index - 1
    while above >= 0 and rows[above].strip():
        if _OPTION.match(rows[above]):
            return True
        above -= 1
    below = index + 1
    while below < end and rows[below].strip():
        if _OPTION.match(rows[below]):
            return True
        below += 1
    return False


def _working(rows: Sequence[str], box: _Box) -> str | None:
    footer = rows[box.bottom + 1 :]
    if has_phrase(footer, ("esc to interrupt",)):
        return "its status line offers 'esc to interrupt'"
    for index in reversed(bottom_rows(rows, _SPINNER_LOOKBACK, before=box.top)):
        row = rows[index].replace(NBSP, " ")
        if row.startswith(PROMPT):
            break  # the echo of the last prompt: anything older is a finished turn
        if _SPINNER.match(row) or _BACKGROUND_AGENTS.match(row):
            return f"its spinner is running ({row.strip()[:40]!r})"
    return None


def read_claude(view: ScreenView) -> Reading:
    """Claude Code's state and composer (module docstring)."""
    rows = view.rows
    box = _find_box(view)
    if box is None:
        region = [rows[i] for i in bottom_rows(rows, 30)]
        return Reading.without_composer(_blocked(region), "no input box on screen")
    draft = _draft(view, box)
    composer = Composer.holding(draft)
    blocker = _blocked(rows[box.bottom + 1 :]) or _dialog_above(rows, box)
    if blocker is not None:
        return Reading(AgentState.BLOCKED, composer, draft, blocker)
    working = _working(rows, box)
    if working is not None:
        return Reading(AgentState.WORKING, composer, draft, working)
    above = [rows[i] for i in bottom_rows(rows, 4, before=box.top)]
    if has_phrase(above, (_SURVEY,)):
        return Reading(AgentState.BLOCKED, composer, draft, "the session survey is open")
    return Reading(AgentState.IDLE, composer, draft, "its input box is waiting")
