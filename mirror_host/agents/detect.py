"""One verdict per pane: the foreground process names the agent, its screen says the rest. Pure.

The agent is taken from the foreground process group only. A screen alone
proves nothing: ``cat`` of a saved Claude screen, a pager, or a shell whose
prompt happens to be ``❯`` all *look* like an agent and would swallow a prompt
(or run it). Once the process says which agent it is, that agent's screen
reader decides the state and the composer; a layout the reader does not know
is ``unknown`` and nothing is typed into it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from mirror_host.agents.aider import read_aider
from mirror_host.agents.claude import read_claude
from mirror_host.agents.codex import read_codex
from mirror_host.agents.gemini import read_gemini
from mirror_host.agents.model import (
    Agent,
    AgentState,
    Composer,
    Detection,
    ForegroundProcess,
    Reading,
    ScreenView,
)
from mirror_host.agents.omp import read_omp
from mirror_host.agents.opencode import read_opencode
from mirror_host.agents.process import identify_group

__all__ = ["READERS", "detect", "read_screen"]

#: Each agent's screen reader.
READERS: dict[Agent, Callable[[ScreenView], Reading]] = {
    Agent.CLAUDE: read_claude,
    Agent.CODEX: read_codex,
    Agent.GEMINI: read_gemini,
    Agent.OPENCODE: read_opencode,
    Agent.AIDER: read_aider,
    Agent.OMP: read_omp,
}


def read_screen(agent: Agent, view: ScreenView) -> Detection:
    """What ``agent``'s screen reader makes of ``view``."""
    reading = READERS[agent](view)
    return Detection(
        agent=agent,
        state=reading.state,
        composer=reading.composer,
        draft=reading.draft,
        reason=reading.reason,
    )


def detect(processes: Iterable[ForegroundProcess], view: ScreenView) -> Detection:
    """The agent in the foreground process group (leader first) and its screen's verdict."""
    found = identify_group(processes)
    if found is None:
        return Detection(
            agent=None,
            state=AgentState.UNKNOWN,
            composer=Composer.ABSENT,
            reason="no coding agent runs in the foreground",
        )
    agent, pid = found
    return replace(read_screen(agent, view), pid=pid)
