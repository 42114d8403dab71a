"""Agent detection: which coding agent runs in a pane, its state and its composer. Pure.

The foreground process names the agent (:mod:`.process`); the agent's own
screen reader (:mod:`.claude`, :mod:`.codex`, :mod:`.gemini`, :mod:`.opencode`,
:mod:`.aider`, :mod:`.omp`) reads its state and input box from the screen text.
Nothing here reads a terminal, a process or a clock: sources hand in
:class:`ForegroundProcess` values and a :class:`ScreenView`.
"""

from __future__ import annotations

from mirror_host.agents import model
from mirror_host.agents.detect import READERS, detect, read_screen

# The model's values, re-exported as its module lists them (one list to keep).
from mirror_host.agents.model import *  # noqa: F403
from mirror_host.agents.process import agent_named, identify, identify_group

__all__ = [
    *model.__all__,
    "READERS",
    "agent_named",
    "detect",
    "identify",
    "identify_group",
    "read_screen",
]
