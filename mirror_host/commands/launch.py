"""Parts of ``create`` and ``list`` the tmux and local backends share. I/O.

A launched agent gets its first prompt through the same guarded delivery as a
phone's (:mod:`mirror_host.commands.agent_input`), once it shows an empty,
idle composer; an agent that never gets there within half a minute, or stops
on a dialog (a trust prompt, a login), gets nothing typed.
"""

from __future__ import annotations

from uuid import UUID

import trio

from mirror_host.agents import Agent, AgentState
from mirror_host.commands.agent_input import AgentPanes, DeliveryTiming, deliver, observe
from mirror_host.commands.responses import cli_error
from mirror_host.control.swiftjson import JSONValue
from mirror_host.errors import PaneSourceError

__all__ = ["KNOWN_AGENTS", "READY_SECONDS", "first_prompt", "task_status"]

#: The agents this host can read, as ``(program, name)`` for the default profiles.
KNOWN_AGENTS = tuple((agent.value, agent.display_name) for agent in Agent)
#: How long a freshly started agent may take to show its composer.
READY_SECONDS = 30.0
_READY_POLL = 0.2


async def first_prompt(
    panes: AgentPanes, pane_id: UUID, prompt: str, *, timing: DeliveryTiming
) -> JSONValue | None:
    """Deliver a launched agent's first prompt; ``None`` on success, else a ``create`` error."""
    why = "it did not show an empty input box"
    with trio.move_on_after(READY_SECONDS):
        while True:
            try:
                found = await observe(panes, pane_id)
            except PaneSourceError as exc:
                why = f"the pane could not be read ({exc})"
                break
            if found.ready:
                result = await deliver(
                    panes,
                    pane_id,
                    prompt,
                    command="agentsInput",
                    authorized=lambda: True,  # create outlives its connection
                    timing=timing,
                )
                if isinstance(result, dict) and result.get("ok") is True:
                    return None
                error = result.get("error") if isinstance(result, dict) else None
                why = str(error.get("message")) if isinstance(error, dict) else "delivery failed"
                break
            if found.state is AgentState.BLOCKED:
                why = f"it is waiting for an answer ({found.reason})"
                break
            await trio.sleep(_READY_POLL)
    return cli_error(
        "create", "CREATE_FAILED", f"The pane was opened, but its first prompt was not sent: {why}."
    )


def task_status(state: AgentState | None) -> str:
    """``list``'s ``task.status`` for an agent state (``running`` only while it works)."""
    return "running" if state is AgentState.WORKING else "idle"
