"""Typing a phone's prompt into a coding agent, Prowl's guarded way: the adapter for
agent panes (tmux, local and agliteterm panes). I/O.

``agentsInput`` (and ``agentsDispatch``) put text into an agent's composer for
a phone that cannot send raw input. :mod:`mirror_host.commands.delivery` runs
the sequence and keeps its rules (the lease before the paste and before the
Enter, a Mac typing meanwhile, finishing shielded); :class:`AgentPaneTarget`
says what they mean for an agent in a pane (docs/security.md):

1. The prompt is text: tabs and line breaks are the only control characters
   it may hold (an escape sequence could end the paste early and type keys).
2. The pane's foreground process must be a recognised agent whose screen shows
   it idle with an empty composer, on two looks. An agent still working gets a
   few seconds to finish (Prowl's grace, as on Herdr); a dialog (``blocked``),
   a draft or a layout we cannot read gets nothing typed at all.
3. The prompt is pasted the way a terminal pastes: *bracketed* when the agent
   turned bracketed paste on (it takes the text as one paste, never as
   keystrokes); to an agent that did not, only a prompt without line breaks
   and tabs, as plain text (typed as keys it means the same).
4. The screen is read until the composer holds exactly the prompt (at most
   2 s), and the Enter (``\\r``) may follow only if the agent process is
   unchanged too.

A source without a process table of its own (agliteterm) stands in for one
(:class:`AgentPanes`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol
from uuid import UUID

from mirror_host.agents import (
    AgentState,
    Composer,
    Detection,
    ForegroundProcess,
    ScreenView,
    detect,
    identify_group,
)
from mirror_host.agents.layout import squash
from mirror_host.commands.delivery import (
    Delivered,
    Delivery,
    DeliveryTiming,
    Echoed,
    Guard,
    Look,
    NotYet,
    Ready,
    Refused,
    Target,
    Verdict,
    deliver,
    watch_echo,
    withheld,
)
from mirror_host.commands.responses import NO_AGENT, still_working, waiting_for_answer
from mirror_host.control.swiftjson import JSONValue
from mirror_host.terminal import Screen
from mirror_host.terminal.view import ScreenText

__all__ = [
    "BUSY",
    "AgentInput",
    "AgentPaneTarget",
    "AgentPanes",
    "AgentReading",
    "agent_delivery",
    "bracketed",
    "carries",
    "composer_echo",
    "observe",
    "plain_pasteable",
    "prompt_problem",
]

PASTE_START = b"\x1b[200~"
PASTE_END = b"\x1b[201~"
#: The code of every refusal of an agent's prompt that is not about the prompt itself.
BUSY = "DISPATCH_TARGET_BUSY"


class AgentPanes(Protocol):
    """What delivery needs from a source, for its panes."""

    async def foreground(self, pane_id: UUID) -> tuple[ForegroundProcess, ...]:
        """The pane's foreground process group, leader first.

        Raises:
            PaneNotFound, PaneSourceError.
        """
        ...

    async def screen(self, pane_id: UUID) -> Screen | ScreenView:
        """The pane's screen as it is now (read it before the next ``await``); a
        source without an emulator of its own hands over a :class:`ScreenView`.

        Raises:
            PaneNotFound, PaneSourceError.
        """
        ...

    async def paste(self, pane_id: UUID, text: str, authorized: Callable[[], bool]) -> None:
        """Write ``text`` as one paste: bracketed if the agent turned bracketed paste on.

        To an agent that did not, a terminal sends a paste as plain text; that
        is safe only for :func:`plain_pasteable` text. ``authorized`` (the lease)
        is asked right before the bytes go, after any await.

        Raises:
            InputRefused: nothing was written (its text says why).
            PaneNotFound, PaneSourceError: it may or may not have been.
        """
        ...

    async def press_enter(self, pane_id: UUID) -> None:
        """Send one Enter (``\\r``)."""
        ...

    def last_raw_input(self, pane_id: UUID) -> float | None:
        """When a client last wrote raw input to the pane (``time.monotonic``), if ever."""
        ...


_FORBIDDEN = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_PASTE_TOKEN = re.compile(r"^\[Pasted (?:text|content)[^\]]*\]", re.IGNORECASE)
#: Glyphs some programs draw as their cursor at the end of the input.
_CURSOR_GLYPHS = "█▌▐"
#: The visible end of a long draft is enough once it is this long (the top may scroll away).
_TAIL = 40


def prompt_problem(prompt: str) -> str | None:
    """Why ``prompt`` cannot be typed, or ``None``."""
    if not prompt.strip():
        return "The dispatch prompt is empty."
    if _FORBIDDEN.search(prompt):
        return (
            "The prompt contains control characters; only text, tabs and line breaks can be typed."
        )
    return None


def bracketed(text: str) -> bytes:
    """``text`` as one bracketed paste."""
    return PASTE_START + text.encode("utf-8") + PASTE_END


def plain_pasteable(text: str) -> bool:
    """Whether ``text`` means the same typed as keys as pasted: no line break, no tab.

    A program that never turned bracketed paste on reads a paste as keys, and
    would take a line break for Enter (sending half a prompt) and a tab for
    completion; other text (a valid prompt holds no other control characters)
    just lands in its input.
    """
    return not any(ch in text for ch in "\n\r\t")


def carries(draft: str, prompt: str) -> bool:
    """Whether the composer's ``draft`` is exactly the pasted ``prompt``.

    Wrapping and indentation are ignored. An agent that collapses a long paste
    into a token (``[Pasted text #3 +5 lines]``) counts if whatever literal text
    follows the token ends the prompt; a draft whose top scrolled out of view
    counts if its visible part, long enough to be telling, ends the prompt.
    """
    wanted, seen = squash(prompt), squash(draft).rstrip(_CURSOR_GLYPHS)
    if seen == wanted:
        return True
    token = _PASTE_TOKEN.match(draft.strip())
    if token is not None:
        return wanted.endswith(squash(draft.strip()[token.end() :]))
    return len(seen) >= _TAIL and wanted.endswith(seen)


def composer_echo(found: Detection, prompt: str) -> Verdict | str | None:
    """What one look after the paste says: the composer holds exactly ``prompt``
    (:class:`Echoed`), a dialog opened (no Enter), something else is there (why,
    if time runs out), or nothing telling yet (``None``)."""
    if found.state is AgentState.BLOCKED:
        return withheld(f"a dialog opened in the pane ({found.reason})")
    if found.state is AgentState.IDLE and found.composer is Composer.DRAFT:
        if carries(found.draft, prompt):
            return Echoed()
        return "the composer holds something other than the text sent"
    return None


def agent_delivery(
    pane_id: UUID,
    prompt: str,
    *,
    dispatch: bool,
    authorized: Callable[[], bool],
    timing: DeliveryTiming,
) -> Delivery:
    """A phone's ``agentsInput`` (or ``agentsDispatch``) as a :class:`Delivery`."""
    command = "agentsDispatch" if dispatch else "agentsInput"
    return Delivery(
        text=prompt, pane_id=pane_id, command=command, authorized=authorized, timing=timing
    )


class AgentInput:
    """A backend's ``agentsInput`` and ``agentsDispatch``: the engine, to its target."""

    #: Where agent input goes, and how long delivery waits (set by the backend).
    target: Target[Any]
    timing: DeliveryTiming

    async def agent_input(
        self, pane_id: UUID, prompt: str, *, dispatch: bool, authorized: Callable[[], bool]
    ) -> JSONValue:
        """Guarded delivery of ``prompt`` (:mod:`mirror_host.commands.delivery`)."""
        delivery = agent_delivery(
            pane_id, prompt, dispatch=dispatch, authorized=authorized, timing=self.timing
        )
        return await deliver(self.target, delivery)


def _view(screen: Screen | ScreenView) -> ScreenView:
    return ScreenText(screen) if isinstance(screen, Screen) else screen


async def _look(
    panes: AgentPanes, pane_id: UUID
) -> tuple[Detection, tuple[ForegroundProcess, ...]]:
    processes = await panes.foreground(pane_id)
    screen = await panes.screen(pane_id)
    return detect(processes, _view(screen)), processes


async def observe(panes: AgentPanes, pane_id: UUID) -> Detection:
    """The pane's agent, state and composer now."""
    found, _ = await _look(panes, pane_id)
    return found


def _refusal(found: Detection) -> Refused | None:
    """Why nothing may be typed into this pane, or ``None`` when it is ready."""
    if found.agent is None:
        return Refused("AGENT_NOT_FOUND", NO_AGENT)
    name = found.agent.display_name
    if found.state is AgentState.BLOCKED:
        return Refused(BUSY, waiting_for_answer(name, found.reason))
    if found.state is AgentState.WORKING:
        return Refused(BUSY, still_working(name))
    if found.state is AgentState.UNKNOWN or found.composer is Composer.ABSENT:
        return Refused(
            BUSY, f"Host cannot recognise {name}'s input box ({found.reason}); nothing was sent."
        )
    if found.composer is Composer.DRAFT:
        return Refused(
            BUSY,
            f"{name}'s input box holds an unsent draft on Host; nothing was sent. "
            "Send or clear it there first.",
        )
    return None


@dataclass(frozen=True, slots=True)
class AgentReading:
    """An agent found ready: its verdict and the process group it was found in."""

    found: Detection
    processes: tuple[ForegroundProcess, ...]


class AgentPaneTarget:
    """The delivery adapter for an agent in a pane of :class:`AgentPanes`."""

    problem = staticmethod(prompt_problem)
    busy_code = BUSY

    def __init__(self, panes: AgentPanes) -> None:
        self.panes = panes

    async def look(self, pane_id: UUID) -> Look[AgentReading]:
        """The agent's verdict: no agent, a dialog or a draft is definite; a working
        agent or a screen we cannot read may change; "ready" needs a second look (a
        half-drawn screen could fake it)."""
        found, processes = await _look(self.panes, pane_id)
        return self.verdict(found, processes)

    def verdict(
        self, found: Detection, processes: tuple[ForegroundProcess, ...]
    ) -> Look[AgentReading]:
        """:meth:`look`'s answer for what one look found."""
        refusal = _refusal(found)
        if refusal is None:
            return Ready(AgentReading(found, processes), second_look=True, identity=found.pid)
        if (
            found.agent is None  # a screen never names one: waiting cannot change it
            or found.state is AgentState.BLOCKED
            or found.composer is Composer.DRAFT
        ):
            return refusal
        return NotYet(refusal.code, refusal.message)

    def last_typed(self, pane_id: UUID) -> float | None:
        return self.panes.last_raw_input(pane_id)

    async def write(
        self, delivery: Delivery, state: AgentReading, guard: Guard
    ) -> Delivered | None:
        await self.panes.paste(delivery.pane_id, delivery.text, guard.holds)
        return None

    async def confirm(self, delivery: Delivery, state: AgentReading) -> Verdict:
        """The composer holds exactly the prompt, and the same agent process runs."""
        pane_id, prompt = delivery.pane_id, delivery.text

        async def echo() -> Verdict | str | None:
            found = detect(state.processes, _view(await self.panes.screen(pane_id)))
            return composer_echo(found, prompt)

        seen = await watch_echo(delivery.timing, echo, "the text never appeared in the composer")
        if not isinstance(seen, Echoed):
            return seen
        now = identify_group(await self.panes.foreground(pane_id))
        if now != (state.found.agent, state.found.pid):
            return withheld("the agent in the pane changed")
        return seen

    async def enter(self, delivery: Delivery, state: AgentReading) -> None:
        await self.panes.press_enter(delivery.pane_id)

    def what(self, state: AgentReading) -> str:
        return f"prompt to {state.found.agent}"
