"""A phone's prompt into an agent on Herdr: the adapter for guarded delivery. I/O.

:mod:`mirror_host.commands.delivery` runs the sequence; :class:`HerdrTarget`
says what it means on Herdr, which reports each agent's state itself:

* **look**: the pane as Herdr describes it now (``pane.get``): no agent is
  ``AGENT_NOT_FOUND``; ``blocked`` (a dialog would swallow the text and Enter
  would answer it) refuses; ``working`` gets Prowl's 5 s grace, then refuses.
  Herdr's state comes from the agent's hooks, not from a screen that could be
  caught half-drawn, so "ready" needs no second look.
* **write**: ``agent.prompt`` (bracketed text, then Enter: the delivery is
  whole) where the server has it. Its refusals that write nothing
  (``agent_blocked``, an agent not ready) are refusals; on servers without it
  (``unknown variant``, which wrote nothing either), the lease is asked again
  and the text goes with ``pane.send_input``, but only into an empty
  composer: the pane's screen is read (``pane.read`` ``visible`` ``ansi``,
  drawn as polling draws it) and read by the agent's own screen reader, with
  Herdr's ``agent`` standing in for a process (as agliteterm's status does).
  A draft there refuses (the prompt would be submitted with it), and so do a
  dialog, a working agent and a layout the host cannot recognise: nothing is
  typed blindly.
* **confirm** (older servers): the composer holds exactly the prompt, as on
  tmux panes (:func:`~mirror_host.commands.agent_input.composer_echo`: the
  same prompt already on screen in the transcript does not count); then the
  engine sends Enter with ``pane.send_keys``.

Herdr's source does not see what a Mac types into its panes (Herdr's own
clients type directly), so there is no quiet rule here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from uuid import UUID

from mirror_host.agents import AgentState, Composer, Detection, ForegroundProcess, detect
from mirror_host.commands.agent_input import BUSY, composer_echo, prompt_problem
from mirror_host.commands.delivery import (
    Delivered,
    Delivery,
    DeliveryTiming,
    Guard,
    Look,
    NotYet,
    Ready,
    Refused,
    Verdict,
    watch_echo,
)
from mirror_host.commands.responses import AGENT_WHO, NO_AGENT, still_working, waiting_for_answer
from mirror_host.errors import InputRefused, PaneSourceError
from mirror_host.panes.herdr.protocol import (
    HerdrError,
    HerdrPane,
    HerdrUnknownMethod,
    parse_pane,
)
from mirror_host.terminal import Screen
from mirror_host.terminal.view import ScreenText

__all__ = ["HERDR_TIMING", "HerdrAim", "HerdrCaller", "HerdrPanes", "HerdrTarget"]

#: Herdr is asked over a socket per request: a little less often than a screen is read.
HERDR_TIMING = DeliveryTiming(settle_poll=0.2, echo_poll=0.1)
#: ``agent.prompt`` errors that mean nothing was written (handle_agent_prompt,
#: src/app/api/agents.rs, Herdr 0.8.2), in words.
_NOT_WRITTEN = {
    "agent_blocked": "{who} is waiting for an answer on Host",
    "agent_not_ready": "{who} is not ready: {message}",
    "agent_not_found": "{who} is not ready: {message}",
    "agent_not_running": "{who} is not ready: {message}",
    "empty_agent_prompt": "Herdr found the prompt empty",
}


def _unready(found: Detection, who: str) -> str | None:
    """Why a prompt must not be typed into this composer (an old Herdr's fallback), or
    ``None`` when it is empty and the agent idle."""
    if found.state is AgentState.BLOCKED:
        return _NOT_WRITTEN["agent_blocked"].format(who=who)
    if found.state is AgentState.WORKING:
        return _NOT_WRITTEN["agent_not_ready"].format(who=who, message="it is still working")
    if found.composer is Composer.DRAFT:
        return f"{who}'s input box holds an unsent draft on Host (send or clear it there first)"
    if found.state is AgentState.IDLE and found.composer is Composer.EMPTY:
        return None
    return (
        f"Host cannot recognise {who}'s input box ({found.reason}), and this Herdr "
        "cannot take a prompt whole (it has no agent.prompt: update Herdr)"
    )


class HerdrPanes(Protocol):
    """What delivery uses of the Herdr source (a ``HerdrCommandSource`` is one)."""

    def pane_record(self, pane_id: UUID) -> HerdrPane:
        """The latest Herdr record of a listed pane.

        Raises:
            PaneNotFound: not in the last snapshot.
        """
        ...

    def uuid_of(self, pane: HerdrPane) -> UUID:
        """The id the host lists ``pane`` under."""
        ...

    async def call_on_pane(
        self, pane_id: UUID, method: str, params: Mapping[str, Any]
    ) -> dict[str, Any]:
        """``method`` on a listed pane by its current Herdr id.

        Raises:
            PaneNotFound, PaneSourceError.
        """
        ...

    async def read_screen(self, pane: HerdrPane) -> Screen:
        """The pane's visible rows read now, on a screen.

        Raises:
            PaneNotFound, PaneSourceError.
        """
        ...


class HerdrCaller(Protocol):
    """Requests to the Herdr server (the source's client: one request per connection)."""

    async def call(self, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """One request, one reply.

        Raises:
            PaneSourceUnavailable: Herdr is not running.
            HerdrError: Herdr answered with an error (typed by code).
            PaneSourceError: the reply was malformed or too slow.
        """
        ...


@dataclass(frozen=True, slots=True)
class HerdrAim:
    """Where the prompt goes: the pane as found ready, and what ``agent.prompt`` names
    (the pane's id, or a launched agent's name)."""

    pane: HerdrPane
    target: str


class HerdrTarget:
    """The delivery adapter for an agent in a Herdr pane."""

    problem = staticmethod(prompt_problem)
    busy_code = BUSY

    def __init__(self, panes: HerdrPanes, client: HerdrCaller) -> None:
        self.panes = panes
        self.client = client
        #: Whether the server has ``agent.prompt`` (``None``: not asked yet).
        self.has_agent_prompt: bool | None = None

    async def look(self, pane_id: UUID) -> Look[HerdrAim]:
        pane = await self._fresh(self.panes.pane_record(pane_id))
        if not pane.agent:
            return Refused("AGENT_NOT_FOUND", NO_AGENT)
        if pane.agent_status == "blocked":
            return Refused(BUSY, waiting_for_answer(AGENT_WHO))
        if pane.agent_status == "working":
            return NotYet(BUSY, still_working(AGENT_WHO))
        return Ready(HerdrAim(pane, pane.pane_id))

    async def _fresh(self, record: HerdrPane) -> HerdrPane:
        """The pane as Herdr describes it now (under its new id if it moved)."""
        try:
            result = await self.panes.call_on_pane(self.panes.uuid_of(record), "pane.get", {})
        except HerdrUnknownMethod:
            return record
        pane = result.get("pane")
        parsed = parse_pane(pane) if isinstance(pane, dict) else None
        return parsed or record

    def last_typed(self, pane_id: UUID) -> None:
        return None

    async def write(self, delivery: Delivery, state: HerdrAim, guard: Guard) -> Delivered | None:
        """``agent.prompt`` where the server has it (whole), else ``pane.send_input``."""
        if self.has_agent_prompt is not False:
            try:
                await self.client.call(
                    "agent.prompt", {"target": state.target, "text": delivery.text}
                )
                self.has_agent_prompt = True
                return Delivered()
            except HerdrUnknownMethod:
                self.has_agent_prompt = False
            except HerdrError as exc:
                why = _NOT_WRITTEN.get(exc.code)
                if why is not None:
                    raise InputRefused(why.format(who=AGENT_WHO, message=exc.message)) from exc
                raise
            # Refused as unknown, it wrote nothing.
        # An older server: the text is typed into the composer as it is, so only an
        # empty one may take it. The lease is asked again after every await.
        guard.check()
        try:
            found = await self._composer(state.pane)
        except PaneSourceError as exc:  # nothing was written yet
            raise InputRefused(f"Host could not read the pane ({exc})") from exc
        why = _unready(found, _who(found, state.pane))
        if why is not None:
            raise InputRefused(why)
        guard.check()
        await self.client.call(
            "pane.send_input", {"pane_id": state.pane.pane_id, "text": delivery.text}
        )
        return None

    async def _composer(self, pane: HerdrPane) -> Detection:
        """The agent Herdr names, as one pseudo-process, and its screen's verdict now."""
        stand_in = (ForegroundProcess(pid=0, name=pane.agent or ""),)
        return detect(stand_in, ScreenText(await self.panes.read_screen(pane)))

    async def confirm(self, delivery: Delivery, state: HerdrAim) -> Verdict:
        """The composer holds exactly the prompt (older servers)."""

        async def echo() -> Verdict | str | None:
            return composer_echo(await self._composer(state.pane), delivery.text)

        return await watch_echo(delivery.timing, echo, "the text never appeared in the composer")

    async def enter(self, delivery: Delivery, state: HerdrAim) -> None:
        await self.client.call("pane.send_keys", {"pane_id": state.pane.pane_id, "keys": ["Enter"]})

    def what(self, state: HerdrAim) -> str:
        return f"prompt to {state.pane.agent}"


def _who(found: Detection, pane: HerdrPane) -> str:
    """The agent's name for people: the host's, else Herdr's."""
    if found.agent is not None:
        return found.agent.display_name
    return pane.display_agent or pane.agent or AGENT_WHO
