"""Typing a phone's prompt into a coding agent, Prowl's guarded way (tmux and local panes). I/O.

``agentsInput`` (and ``agentsDispatch``) put text into an agent's composer for
a phone that cannot send raw input. The rules (docs/security.md):

1. The prompt is text: tabs and line breaks are the only control characters
   it may hold (an escape sequence could end the paste early and type keys).
2. The pane's foreground process must be a recognised agent whose screen shows
   it idle with an empty composer. An agent still working gets a few seconds to
   finish (Prowl's grace, as on Herdr); a dialog (``blocked``), a draft or a
   layout we cannot read gets nothing typed at all.
3. Nobody may have typed into the pane from a Mac within the last second.
4. The prompt is pasted the way a terminal pastes: *bracketed* when the agent
   turned bracketed paste on (it takes the text as one paste, never as
   keystrokes); to an agent that did not, only a prompt without line breaks
   and tabs, as plain text (typed as keys it means the same). The screen is
   read until the composer holds exactly it (at most 2 s), and only then, if
   the pane, the agent process and its state are unchanged, one Enter
   (``\\r``) is sent.
5. ``authorized()`` (the lease still holds) is checked right before the paste
   and again right before the Enter.
6. From the paste on, the delivery is not cancelled (a lost lease, host stop)
   but finishes, for at most :data:`FINISH_SECONDS` (:func:`finish_writing`):
   the lease gone, the Enter is withheld and the answer says the text may sit
   unsent. Cut off half-way, it could only be reported as cancelled before
   delivery, which the apps read as "rejected" with the text in the composer.

A refusal before anything was written names what was wrong (``AGENT_NOT_FOUND``,
``DISPATCH_TARGET_BUSY`` …); once the paste may have reached the pane, any
failure is ``SEND_FAILED`` saying how far it got, and nothing is retried.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol
from uuid import UUID

import trio

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
from mirror_host.commands.responses import (
    INPUT_UNCONFIRMED,
    NO_LONGER_OWNS,
    cli_error,
    cli_success,
    input_delivered,
    rejected,
)
from mirror_host.control.swiftjson import JSONValue
from mirror_host.errors import PaneNotFound, PaneSourceError
from mirror_host.terminal import Screen
from mirror_host.terminal.view import ScreenText

__all__ = [
    "AgentPanes",
    "DeliveryTiming",
    "NothingWritten",
    "PasteUnsupported",
    "bracketed",
    "carries",
    "FINISH_SECONDS",
    "deliver",
    "finish_writing",
    "observe",
    "plain_pasteable",
    "prompt_problem",
]

logger = logging.getLogger(__name__)

#: From the paste on, the echo check and the Enter finish even if the lease is lost
#: meanwhile (the Enter is then withheld): never cut off halfway, never for long.
FINISH_SECONDS = 10.0

PASTE_START = b"\x1b[200~"
PASTE_END = b"\x1b[201~"
ENTER = b"\r"

Authorized = Callable[[], bool]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliveryTiming:
    """How long delivery waits, and how often it looks."""

    #: A working agent may take this long to finish its turn before input is refused
    #: (an unreadable screen, too: it may be halfway through a redraw).
    settle_seconds: float = 5.0
    #: Between looks at the screen, and before the second look that confirms "ready".
    settle_poll: float = 0.1
    #: The pasted text must show up in the composer within this time.
    echo_seconds: float = 2.0
    echo_poll: float = 0.05
    #: Raw input from a Mac client this recently refuses delivery.
    quiet_seconds: float = 1.0


class NothingWritten(PaneSourceError):
    """The paste was refused before any of it was written (delivery says why, as busy)."""


class PasteUnsupported(NothingWritten):
    """The agent has not enabled bracketed paste; nothing was written."""


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

    async def paste(self, pane_id: UUID, text: str) -> None:
        """Write ``text`` as one paste: bracketed if the agent turned bracketed paste on.

        To an agent that did not, a terminal sends a paste as plain text; that
        is safe only for :func:`plain_pasteable` text.

        Raises:
            NothingWritten (PasteUnsupported …): nothing was written.
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


def _busy(command: str, message: str) -> JSONValue:
    return cli_error(command, "DISPATCH_TARGET_BUSY", message)


def _refusal(command: str, found: Detection) -> JSONValue | None:
    """Why nothing may be typed into this pane, or ``None`` when it is ready."""
    if found.agent is None:
        return cli_error(command, "AGENT_NOT_FOUND", "No agent is running in the selected pane.")
    name = found.agent.display_name
    if found.state is AgentState.BLOCKED:
        return _busy(
            command,
            f"{name} is waiting for an answer on Host ({found.reason}); "
            "the text would go to its dialog, so nothing was sent.",
        )
    if found.state is AgentState.WORKING:
        return _busy(command, f"{name} is still working; send again when it is idle.")
    if found.state is AgentState.UNKNOWN or found.composer is Composer.ABSENT:
        return _busy(
            command,
            f"Host cannot recognise {name}'s input box ({found.reason}); nothing was sent.",
        )
    if found.composer is Composer.DRAFT:
        return _busy(
            command,
            f"{name}'s input box holds an unsent draft on Host; nothing was sent. "
            "Send or clear it there first.",
        )
    return None


def _typed_recently(panes: AgentPanes, pane_id: UUID, timing: DeliveryTiming) -> bool:
    last = panes.last_raw_input(pane_id)
    return last is not None and time.monotonic() - last < timing.quiet_seconds


async def _settled(
    panes: AgentPanes, pane_id: UUID, timing: DeliveryTiming
) -> tuple[Detection, tuple[ForegroundProcess, ...]]:
    """The pane's verdict once it is definite, within Prowl's grace period.

    A working agent gets a few seconds to finish its turn. A screen we cannot
    read is looked at again too: an agent caught halfway through redrawing
    shows neither its composer nor a dialog. A ready verdict must hold on a
    second look a moment later, so a half-drawn screen cannot pass for one.
    """
    deadline = trio.current_time() + timing.settle_seconds
    found, processes = await _look(panes, pane_id)
    late_looks = 0
    while True:
        if (
            found.agent is None
            or found.state is AgentState.BLOCKED
            or found.composer is Composer.DRAFT
        ):
            # Definite: refused whatever happens next. (No agent process is no
            # agent: a screen never names one, so waiting cannot change it.)
            return found, processes
        if trio.current_time() >= deadline:
            if not found.ready or late_looks:
                return found, processes
            late_looks += 1  # ready just as the grace ran out: one confirming look
        await trio.sleep(timing.settle_poll)
        again, processes = await _look(panes, pane_id)
        if found.ready and again.ready and again.pid == found.pid:
            return again, processes
        found = again


async def _echoed(
    panes: AgentPanes,
    pane_id: UUID,
    processes: tuple[ForegroundProcess, ...],
    prompt: str,
    timing: DeliveryTiming,
) -> str | None:
    """``None`` once the composer holds the prompt, else why Enter must not be sent."""
    why = "the text never appeared in the composer"
    with trio.move_on_after(timing.echo_seconds):
        while True:
            screen = await panes.screen(pane_id)
            found = detect(processes, _view(screen))
            if found.state is AgentState.BLOCKED:
                return f"a dialog opened in the pane ({found.reason})"
            if found.state is AgentState.IDLE and found.composer is Composer.DRAFT:
                if carries(found.draft, prompt):
                    return None
                why = "the composer holds something other than the text sent"
            await trio.sleep(timing.echo_poll)
    return why


async def deliver(
    panes: AgentPanes,
    pane_id: UUID,
    prompt: str,
    *,
    command: str,
    authorized: Authorized,
    timing: DeliveryTiming,
) -> JSONValue:
    """Type ``prompt`` into the agent in ``pane_id`` and press Enter, or say why not.

    ``command`` is ``agentsInput`` or ``agentsDispatch`` (it names the result).
    """
    problem = prompt_problem(prompt)
    if problem is not None:
        return cli_error(command, "INVALID_ARGUMENT", problem)
    try:
        found, processes = await _settled(panes, pane_id, timing)
    except PaneNotFound:
        return cli_error(command, "TARGET_NOT_FOUND", "The selected pane is gone.")
    except PaneSourceError as exc:
        return _busy(command, f"Host could not read the pane ({exc}); nothing was sent.")
    refusal = _refusal(command, found)
    if refusal is not None:
        return refusal
    if _typed_recently(panes, pane_id, timing):
        return _busy(command, "Someone is typing in this pane on a Mac; nothing was sent.")
    if not authorized():
        return rejected(NO_LONGER_OWNS)
    started = time.monotonic()
    return await finish_writing(
        command,
        lambda: _paste_and_enter(
            panes, pane_id, prompt, found, processes, started, command, authorized, timing
        ),
    )


async def finish_writing(command: str, write: Callable[[], Awaitable[JSONValue]]) -> JSONValue:
    """Run ``write`` (a paste, its checks and the Enter) to its own answer, shielded
    from cancellation for at most :data:`FINISH_SECONDS`; past that, ``SEND_FAILED``.

    ``command`` names the result. ``write`` checks ``authorized()`` itself before
    the Enter, so a lease lost meanwhile withholds the Enter instead of cutting
    the delivery off half-way.
    """
    with trio.CancelScope(shield=True), trio.move_on_after(FINISH_SECONDS):
        return await write()
    return cli_error(
        command, "SEND_FAILED", f"Host stopped waiting for the pane. {INPUT_UNCONFIRMED}"
    )


async def _paste_and_enter(
    panes: AgentPanes,
    pane_id: UUID,
    prompt: str,
    before: Detection,
    processes: tuple[ForegroundProcess, ...],
    started: float,
    command: str,
    authorized: Authorized,
    timing: DeliveryTiming,
) -> JSONValue:
    try:
        await panes.paste(pane_id, prompt)
    except NothingWritten as exc:
        return _busy(command, f"{exc}; nothing was sent.")
    except PaneNotFound:
        return cli_error(command, "SEND_FAILED", f"The pane went away. {INPUT_UNCONFIRMED}")
    except PaneSourceError as exc:
        return cli_error(command, "SEND_FAILED", f"{INPUT_UNCONFIRMED} ({exc})")
    return await _confirm_and_enter(
        panes, pane_id, prompt, before, processes, started, command, authorized, timing
    )


async def _confirm_and_enter(
    panes: AgentPanes,
    pane_id: UUID,
    prompt: str,
    before: Detection,
    processes: tuple[ForegroundProcess, ...],
    started: float,
    command: str,
    authorized: Authorized,
    timing: DeliveryTiming,
) -> JSONValue:
    def failed(why: str) -> JSONValue:
        return cli_error(
            command,
            "SEND_FAILED",
            f"The text was written but Enter was not sent: {why}. Check the pane before retrying.",
        )

    try:
        why = await _echoed(panes, pane_id, processes, prompt, timing)
        if why is not None:
            return failed(why)
        now = identify_group(await panes.foreground(pane_id))
    except PaneNotFound:
        return failed("the pane went away")
    except PaneSourceError as exc:
        return failed(f"the pane could not be read ({exc})")
    if now != (before.agent, before.pid):
        return failed("the agent in the pane changed")
    last = panes.last_raw_input(pane_id)
    if last is not None and last >= started:
        return failed("someone typed in the pane on a Mac meanwhile")
    if not authorized():
        return failed("the mirror lost the pane")
    try:
        await panes.press_enter(pane_id)
    except (PaneNotFound, PaneSourceError) as exc:
        return cli_error(
            command, "SEND_FAILED", f"The text was written but Enter may not have been ({exc})."
        )
    logger.info("delivered a %d-byte prompt to %s", len(prompt.encode()), before.agent)
    return cli_success(command, input_delivered(prompt, "argument"))
