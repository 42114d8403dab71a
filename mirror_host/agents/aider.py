"""Reading aider's screen. Pure.

aider is a line-oriented chat: when its turn is over the last row is its
prompt, ``> `` or a mode prompt (``architect> ``, ``ask> ``, ``multi> ``), often
under a horizontal rule. Anything typed sits after the prompt. Its questions
end the screen instead (``Run shell command? (Y)es/(N)o [Yes]:``) and mean
``blocked``: a prompt typed there would answer the question. While it streams
a reply, the last row is the reply, so a screen that ends in neither is
``working``.
"""

from __future__ import annotations

import re

from mirror_host.agents.layout import NBSP, last_nonblank
from mirror_host.agents.model import AgentState, Composer, Reading, ScreenView

__all__ = ["read_aider"]

_PROMPT = re.compile(r"^(?:[a-z][a-z-]{0,15})?> ?(.*)$")
_QUESTION = re.compile(r"\(Y\)es/\(N\)o|\[(?:Yes|No|Y|N|y|n)\]:\s*\S*$|\? \[[yYnN]/[yYnN]\]")


def read_aider(view: ScreenView) -> Reading:
    """aider's state and composer (module docstring)."""
    rows = view.rows
    last = last_nonblank(rows)
    if last < 0:
        return Reading(AgentState.UNKNOWN, Composer.ABSENT, reason="the screen is empty")
    row = rows[last].replace(NBSP, " ")
    if _QUESTION.search(row):
        return Reading(AgentState.BLOCKED, Composer.ABSENT, reason="it asks a question")
    match = _PROMPT.match(row)
    cursor = view.cursor
    if match is None or (cursor is not None and cursor[1] != last):
        # A quoted "> " line of a reply is not the prompt: the cursor sits on the prompt.
        return Reading(AgentState.WORKING, Composer.ABSENT, reason="it is still writing")
    solid = _PROMPT.match(view.solid_text(last).replace(NBSP, " ").rstrip())
    draft = (solid.group(1) if solid else match.group(1)).strip()
    composer = Composer.holding(draft)
    return Reading(AgentState.IDLE, composer, draft, "its prompt is waiting")
