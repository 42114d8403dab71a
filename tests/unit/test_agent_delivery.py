"""Guarded delivery's edges that real panes cannot be timed into: the lease lost between
paste and Enter, an echo that never comes, a dialog or another process appearing after
the paste, a Mac typing meanwhile. The pane here is a real libghostty screen drawn like
Claude Code; only the source around it is scripted."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any
from uuid import UUID, uuid4

import pytest
import trio.testing

from mirror_host import control as c
from mirror_host.agents import ForegroundProcess
from mirror_host.commands.agent_input import (
    AgentPaneTarget,
    agent_delivery,
    bracketed,
    carries,
    prompt_problem,
)
from mirror_host.commands.delivery import DeliveryTiming, deliver
from mirror_host.commands.launch import AgentPaneCommands
from mirror_host.commands.responses import NO_LONGER_OWNS
from mirror_host.commands.service import CommandService
from mirror_host.errors import InputRefused, PaneNotFound, PaneSourceError
from mirror_host.terminal import Screen
from tests.unit.test_session import PANE, events, outgoing, packet, subscribed

#: The host's own timing: every test runs on Trio's virtual clock (``autojump_clock``),
#: so waiting out a 2 s echo or a 5 s grace costs no real time, and order is all that counts.
TIMING = DeliveryTiming()
WIDTH, HEIGHT = 100, 20
CLAUDE = ForegroundProcess(pid=100, name="claude", argv=("claude",))


def draw(composer: str = "", *, dialog: bool = False) -> Screen:
    rule = "─" * WIDTH
    rows = ["╭─── Claude Code ───╮", "", "● Earlier answer.", ""]
    if dialog:
        rows += [rule, " Do you want to proceed?", " ❯ 1. Yes", "   2. No", " Esc to cancel"]
    else:
        rows += [rule, f"❯\u00a0{composer}", rule, "  [Opus 4.8] ~/project"]
    screen = Screen(WIDTH, HEIGHT)
    screen.feed(b"\x1b[?2004h" + "\r\n".join(rows).encode())
    return screen


class ScriptedPanes:
    """An :class:`AgentPanes` whose pane is a drawn screen; the agent echoes pastes."""

    def __init__(self) -> None:
        self.current = draw()
        self.processes: tuple[ForegroundProcess, ...] = (CLAUDE,)
        self.written: list[bytes] = []
        self.echo = True
        self.after_paste: Callable[[], None] = lambda: None
        self.paste_error: Exception | None = None
        self.before_paste: Callable[[], Awaitable[None]] = trio.lowlevel.checkpoint
        self.raw_input: float | None = None
        self.gone = False

    async def foreground(self, pane_id: UUID) -> tuple[ForegroundProcess, ...]:
        if self.gone:
            raise PaneNotFound("gone")
        return self.processes

    async def screen(self, pane_id: UUID) -> Screen:
        if self.gone:
            raise PaneNotFound("gone")
        return self.current

    async def paste(self, pane_id: UUID, text: str, authorized: Callable[[], bool]) -> None:
        await self.before_paste()  # a source's own awaits before its bytes go
        if self.paste_error is not None:
            raise self.paste_error
        if not authorized():
            raise InputRefused(NO_LONGER_OWNS)
        self.written.append(bracketed(text))
        if self.echo:
            self.current = draw(text)
        self.after_paste()

    async def press_enter(self, pane_id: UUID) -> None:
        self.written.append(b"\r")

    def last_raw_input(self, pane_id: UUID) -> float | None:
        return self.raw_input


class LateEcho(ScriptedPanes):
    """An agent that draws a paste only by the second look at its screen."""

    def __init__(self) -> None:
        super().__init__()
        self.echo = False
        self.pasted: str | None = None
        self.looks = 0

    async def paste(self, pane_id: UUID, text: str, authorized: Callable[[], bool]) -> None:
        await super().paste(pane_id, text, authorized)
        self.pasted = text

    async def screen(self, pane_id: UUID) -> Screen:
        if self.pasted is not None:
            self.looks += 1
            if self.looks > 1:
                self.current = draw(self.pasted)
        return await super().screen(pane_id)


async def run(panes: ScriptedPanes, prompt: str = "fix it", **options: Any) -> Any:
    authorized = options.pop("authorized", lambda: True)
    delivery = agent_delivery(uuid4(), prompt, dispatch=False, authorized=authorized, timing=TIMING)
    return await deliver(AgentPaneTarget(panes), delivery)


def error(result: Any) -> tuple[str, str]:
    assert result["ok"] is False
    return result["error"]["code"], result["error"]["message"]


async def test_delivered_with_exactly_one_enter(autojump_clock: trio.testing.MockClock) -> None:
    panes = ScriptedPanes()
    result = await run(panes, "fix it")
    assert result["ok"] is True and result["data"]["input"]["trailing_enter_sent"] is True
    assert panes.written == [bracketed("fix it"), b"\r"]


async def test_a_prompt_longer_than_a_row_is_delivered(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The echo runs past the right edge; the terminal wraps it to column 0 of the next row."""
    panes = ScriptedPanes()
    prompt = "Explain the failing test and fix it " * 5
    assert len(prompt) > WIDTH
    result = await run(panes, prompt)
    assert result["ok"] is True, result
    assert panes.written == [bracketed(prompt), b"\r"]


async def test_a_prompt_that_starts_like_a_menu_option_is_delivered(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """`❯ 1. Fix the bug` in the whole input box is our own paste, not a focused option."""
    panes = ScriptedPanes()
    result = await run(panes, "1. Fix the bug")
    assert result["ok"] is True, result
    assert panes.written == [bracketed("1. Fix the bug"), b"\r"]


async def test_lease_lost_before_the_paste_types_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    panes = ScriptedPanes()
    result = await run(panes, authorized=lambda: False)
    assert result["error"]["code"] == "REMOTE_COMMAND_REJECTED"
    assert panes.written == []


async def test_lease_lost_after_the_paste_sends_no_enter(
    autojump_clock: trio.testing.MockClock,
) -> None:
    panes = ScriptedPanes()
    checks = iter([True, True, False])  # the engine's look, the paste's own, then gone
    result = await run(panes, authorized=lambda: next(checks))
    code, message = error(result)
    assert code == "SEND_FAILED" and "lost the pane" in message
    assert panes.written == [bracketed("fix it")]


async def test_lease_lost_while_the_source_prepares_the_paste_types_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # tmux leaves copy mode first, agliteterm waits out a busy pane: the lease is
    # asked again right before the bytes go, not only before the source starts.
    panes = ScriptedPanes()
    owned = [True]

    async def takeover_meanwhile() -> None:
        owned[0] = False
        await trio.sleep(0.1)

    panes.before_paste = takeover_meanwhile
    result = await run(panes, authorized=lambda: owned[0])
    assert error(result) == ("REMOTE_COMMAND_REJECTED", "The mirror no longer owns this pane.")
    assert panes.written == []


async def test_no_echo_no_enter(autojump_clock: trio.testing.MockClock) -> None:
    panes = ScriptedPanes()
    panes.echo = False
    code, message = error(await run(panes))
    assert code == "SEND_FAILED" and "never appeared" in message
    assert panes.written == [bracketed("fix it")]


async def test_a_dialog_after_the_paste_gets_no_enter(
    autojump_clock: trio.testing.MockClock,
) -> None:
    panes = ScriptedPanes()

    def dialog() -> None:
        panes.current = draw(dialog=True)

    panes.after_paste = dialog
    code, message = error(await run(panes))
    assert code == "SEND_FAILED" and "dialog" in message
    assert panes.written == [bracketed("fix it")]


async def test_another_process_after_the_paste_gets_no_enter(
    autojump_clock: trio.testing.MockClock,
) -> None:
    panes = ScriptedPanes()

    def restarted() -> None:
        panes.processes = (ForegroundProcess(pid=101, name="claude", argv=("claude",)),)

    panes.after_paste = restarted
    code, message = error(await run(panes))
    assert code == "SEND_FAILED" and "agent in the pane changed" in message
    assert panes.written == [bracketed("fix it")]


async def test_mac_typing_meanwhile_gets_no_enter(autojump_clock: trio.testing.MockClock) -> None:
    panes = ScriptedPanes()

    def typed() -> None:
        panes.raw_input = time.monotonic()

    panes.after_paste = typed
    code, message = error(await run(panes))
    assert code == "SEND_FAILED" and "typed" in message
    assert panes.written == [bracketed("fix it")]


async def test_extra_text_in_the_composer_gets_no_enter(
    autojump_clock: trio.testing.MockClock,
) -> None:
    panes = ScriptedPanes()

    def typed_too() -> None:
        panes.current = draw("fix it and more")

    panes.after_paste = typed_too
    code, _ = error(await run(panes))
    assert code == "SEND_FAILED"
    assert panes.written == [bracketed("fix it")]


async def test_losing_the_lease_while_the_echo_is_awaited_finishes_without_enter(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Cancelled between the paste and the Enter (the lease lost), delivery still ends
    with its own answer: ``SEND_FAILED``, the text perhaps waiting in the composer, no
    Enter. Never a cancellation, which the service reports as "cancelled before delivery"."""
    panes = LateEcho()
    owned = [True]
    result: Any = None
    with trio.CancelScope() as scope:

        def lost() -> None:
            owned[0] = False
            scope.cancel()

        panes.after_paste = lost
        result = await run(panes, authorized=lambda: owned[0])
    assert result is not None, "cancelled, with no answer of its own"
    code, message = error(result)
    assert code == "SEND_FAILED" and "lost the pane" in message
    assert panes.written == [bracketed("fix it")]


async def test_a_receipt_for_input_whose_lease_went_mid_delivery_is_unconfirmed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Through the command service: the lease ends (``ended``, as a takeover does) after
    the paste, while the echo is awaited. The retained result, which ``commandReceipt``
    returns after a reconnect, says the text may sit unsent (``SEND_FAILED``: "unknown"
    to the apps), not that it was cancelled before delivery (``TIMEOUT``: "rejected")."""
    panes = LateEcho()
    service = CommandService(AgentPaneCommands(panes, timing=TIMING))
    session, sub = subscribed()
    request_id = uuid4()
    envelope = c.CommandEnvelope(
        output="json", command=c.AgentsInputCommand(pane=str(PANE), prompt="fix it")
    )
    command = c.Command(
        subscription_id=sub,
        command_request=c.CommandRequest(request_id=request_id, request=envelope),
    )
    session.receive_data(packet(command), 0.0)
    (requested,) = events(session)

    def taken_over() -> None:  # what Hub.end does
        session.send_ended(c.EndReason.TAKEN_OVER)
        service.lease_lost(session)

    panes.after_paste = taken_over
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        service.handle(session, requested)
        await trio.sleep(TIMING.echo_seconds + 1)
        receipt = service.receipts.get(request_id)
        assert receipt is not None and receipt.done
        code, message = error(receipt.result)
        assert code == "SEND_FAILED" and "lost the pane" in message
        assert panes.written == [bracketed("fix it")]
        assert c.Ended(reason=c.EndReason.TAKEN_OVER) in outgoing(session)
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize(
    ("failure", "code"),
    [
        (InputRefused("no bracketed paste"), "DISPATCH_TARGET_BUSY"),
        (PaneSourceError("tmux exploded"), "SEND_FAILED"),
        (PaneNotFound("gone mid-paste"), "SEND_FAILED"),
    ],
)
async def test_paste_failures(
    failure: Exception, code: str, autojump_clock: trio.testing.MockClock
) -> None:
    panes = ScriptedPanes()
    panes.paste_error = failure
    assert error(await run(panes))[0] == code
    assert b"\r" not in panes.written


async def test_gone_before_anything_is_target_not_found(
    autojump_clock: trio.testing.MockClock,
) -> None:
    panes = ScriptedPanes()
    panes.gone = True
    assert error(await run(panes))[0] == "TARGET_NOT_FOUND"


async def test_draft_and_dialog_are_refused_at_once(autojump_clock: trio.testing.MockClock) -> None:
    panes = ScriptedPanes()
    panes.current = draw("half a thought")
    assert "draft" in error(await run(panes))[1]
    panes.current = draw(dialog=True)
    assert "waiting for an answer" in error(await run(panes))[1]
    panes.processes = (ForegroundProcess(pid=5, name="bash", argv=("-bash",)),)
    assert error(await run(panes))[0] == "AGENT_NOT_FOUND"
    assert panes.written == []


def test_carries() -> None:
    assert carries("fix it\nand test", "fix it and test")
    assert carries("[Pasted text #2 +3 lines]", "a\nb\nc\nd")
    assert carries("[Pasted text #2 +5 lines] tail end", "head\n" * 5 + "tail end")
    assert not carries("[Pasted text #2 +5 lines] tail", "head\n" * 5 + "tail end")
    assert not carries("fix it and more", "fix it")
    assert not carries("it", "fix it")  # a short visible part proves nothing
    long = "word " * 40
    assert carries(long[-60:], long)  # the top of a long draft scrolled away


def test_prompt_problem() -> None:
    assert prompt_problem("hello\n\tworld\r\n") is None
    assert prompt_problem(" \n ") == "The dispatch prompt is empty."
    for bad in ("\x1b[201~", "\x03", "\x7f", "\x9b2J", "\x00"):
        assert prompt_problem(f"a{bad}b") is not None, repr(bad)


def test_carries_ignores_a_drawn_cursor() -> None:
    assert carries("fix it█", "fix it")
    assert not carries("fix█ it", "fix it")
