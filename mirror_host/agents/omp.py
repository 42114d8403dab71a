"""Reading omp's screen. Pure.

omp draws its editor as the last box on screen, its status line as the top
border::

    ⠸ Working… ⟦esc⟧                                   working: the loader row
    ╭── π  > ⬢ Auto > ~/project > ⑂ master ▶─────────╮  top border (status)
    │  a draft long enough to wrap                    │  continuation rows
    ╰─ its last row                                  ─╯  last row: `╰─` then the text

An empty editor is a bare ``╰─``. Transcript boxes (tool output) are drawn
with the same corners, but their bottom border is a solid ``╰────``; the
editor's last row has a space or nothing after ``╰─``. A slash-command palette
may open under the editor while a ``/`` draft is typed.

Dialogs (the ask tool, approvals, pickers, the settings and resume screens)
take the editor's place; each shows a control row pairing a key with ``esc
cancel``/``Esc close`` ("Enter select · … · Esc cancel"), which means
``blocked``. The loader row ends with the interrupt key in brackets
(``⟦esc⟧``, ``⟨esc⟩`` or ``[esc]``) while a turn runs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from mirror_host.agents.layout import NBSP, bottom_rows, last_nonblank
from mirror_host.agents.model import AgentState, Composer, Reading, ScreenView
from mirror_host.agents.phrases import dialog_open, matches_any

__all__ = ["read_omp"]

_MAX_EDITOR_ROWS = 40
_MAX_PALETTE_ROWS = 20
_LOADER = re.compile(r"[⟦⟨\[]esc[⟧⟩\]]\s*$")
DIALOG_PHRASES = (
    "esc cancel",
    "esc to cancel",
    "esc close",
    "esc to close",
    "enter select",
    "enter submit",
    "enter toggle",
    "enter to change",
    "[y/n]",
)


def _editor(rows: Sequence[str]) -> tuple[int, int] | None:
    """``(top border, last row)`` of the editor: the last ``╰─`` row that is not a rule."""
    end = last_nonblank(rows)
    last = end
    while last >= 0 and end - last <= _MAX_PALETTE_ROWS:
        row = rows[last]
        if row.startswith("╰─") and (len(row) == 2 or row[2] in (" ", NBSP)):
            break
        last -= 1
    else:
        return None
    top = last - 1
    while top >= 0 and last - top <= _MAX_EDITOR_ROWS and rows[top].startswith("│"):
        top -= 1
    if top < 0 or not rows[top].startswith("╭─") or not rows[top].rstrip().endswith(("─", "╮")):
        return None
    return top, last


def _inner(row: str) -> str:
    """An editor row's text without its left corner or bar and its right border."""
    text = row[2:] if row.startswith("╰─") else row[1:]
    return text.replace(NBSP, " ").rstrip().removesuffix("╯").removesuffix("─").rstrip("│").strip()


def read_omp(view: ScreenView) -> Reading:
    """omp's state and composer (module docstring)."""
    rows = view.rows
    editor = _editor(rows)
    if editor is None or dialog_open(rows[editor[1] + 1 :], DIALOG_PHRASES):
        region = [rows[i] for i in bottom_rows(rows, 12)]
        return Reading.without_composer(dialog_open(region, DIALOG_PHRASES), "no editor on screen")
    top, last = editor
    lines = [_inner(view.solid_text(i)) for i in range(top + 1, last + 1)]
    draft = "\n".join(line for line in lines if line)
    composer = Composer.holding(draft)
    if rows[last + 1 :] and any(r.strip() for r in rows[last + 1 :]) and not draft:
        # Something under an empty editor that is not a palette of a `/` draft.
        return Reading(AgentState.UNKNOWN, Composer.ABSENT, reason="something covers the editor")
    above = [rows[i] for i in bottom_rows(rows, 8, before=top)]
    dialog = dialog_open(above, DIALOG_PHRASES)
    if dialog is not None:  # a dialog's control row right above the editor
        return Reading(AgentState.BLOCKED, composer, draft, dialog)
    loader = [rows[i] for i in bottom_rows(rows, 6, before=top)]
    if matches_any(loader, (_LOADER,)):
        return Reading(AgentState.WORKING, composer, draft, "its loader is running")
    return Reading(AgentState.IDLE, composer, draft, "its editor is waiting")
