"""The delivery engine's safety rules, each once, against a scripted adapter.

The adapter here is no pane: it answers each step as the test scripts it and
records what the engine asked of it, so every rule of
:mod:`mirror_host.commands.delivery` is checked apart from any source (the
adapters' own tests are test_agent_delivery.py, test_shell_delivery.py and the
integration tests). Everything runs on Trio's virtual clock, so the grace, the
echo and the finishing deadline cost no real time and are measured exactly.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any
from uuid import uuid4

import pytest
import trio
import trio.testing

from mirror_host.commands.delivery import (
    FINISH_SECONDS,
    Delivered,
    Delivery,
    DeliveryTiming,
    Echoed,
    Guard,
    Look,
    NotYet,
    Ready,
    Refused,
    Unconfirmed,
    Verdict,
    deliver,
    watch_echo,
    withheld,
)
from mirror_host.commands.responses import UNSTEADY
from mirror_host.errors import InputRefused, PaneNotFound, PaneSourceError

TIMING = DeliveryTiming()
BUSY = "TARGET_BUSY_FOR_TEST"
READY = Ready("state", second_look=True, identity=1)


class Scripted:
    """A :class:`~mirror_host.commands.delivery.Target` whose every answer is scripted."""

    busy_code = BUSY

    def __init__(self, *looks: Look[str] | Exception) -> None:
        #: What successive looks say; the last one repeats.
        self.looks = list(looks) or [READY]
        self.steps: list[str] = []
        self.typed: float | None = None
        self.write_does: Callable[[Guard], Delivered | None] = lambda guard: None
        self.verdict: Verdict | Exception = Echoed()
        self.enter_error: Exception | None = None
        #: Virtual seconds the confirmation takes.
        self.confirm_seconds = 0.0
        self.after_write: Callable[[], None] = lambda: None

    def problem(self, text: str) -> str | None:
        return "empty" if not text else None

    async def look(self, pane_id: object) -> Look[str]:
        self.steps.append("look")
        answer = self.looks.pop(0) if len(self.looks) > 1 else self.looks[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def last_typed(self, pane_id: object) -> float | None:
        return self.typed

    async def write(self, delivery: Delivery, state: str, guard: Guard) -> Delivered | None:
        self.steps.append("write")
        whole = self.write_does(guard)
        self.after_write()
        return whole

    async def confirm(self, delivery: Delivery, state: str) -> Verdict:
        self.steps.append("confirm")
        await trio.sleep(self.confirm_seconds)
        if isinstance(self.verdict, Exception):
            raise self.verdict
        return self.verdict

    async def enter(self, delivery: Delivery, state: str) -> None:
        self.steps.append("enter")
        if self.enter_error is not None:
            raise self.enter_error

    def what(self, state: str) -> str:
        return f"text to {state}"


class Lease:
    """``authorized`` answering from a script (then holding), counting its questions."""

    def __init__(self, *answers: bool) -> None:
        self.answers: Iterator[bool] = iter(answers)
        self.asked = 0

    def __call__(self) -> bool:
        self.asked += 1
        return next(self.answers, True)


async def run(
    target: Scripted,
    text: str = "fix it",
    *,
    lease: Callable[[], bool] = lambda: True,
    command: str = "agentsInput",
    **options: Any,
) -> Any:
    delivery = Delivery(
        text=text, pane_id=uuid4(), command=command, authorized=lease, timing=TIMING
    )
    return await deliver(target, delivery, **options)


def error(result: Any) -> tuple[str, str]:
    assert result["ok"] is False, result
    return result["error"]["code"], result["error"]["message"]


# ------------------------------------------------------------------ the happy path


async def test_a_delivery_is_look_write_confirm_enter_and_its_data(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    target = Scripted()
    with caplog.at_level(logging.INFO, "mirror_host.commands.delivery"):
        result = await run(target, "héllo 👋")
    assert target.steps == ["look", "look", "write", "confirm", "enter"]
    assert result == {
        "ok": True, "command": "agents.input", "schema_version": "prowl.cli.agents.input.v1",
        "data": {"input": {"source": "argument", "characters": 7,
                           "bytes": len("héllo 👋".encode()), "trailing_enter_sent": True}},
    }  # fmt: skip
    assert "delivered a 11-byte text to state" in caplog.messages


async def test_a_command_line_is_argv(autojump_clock: trio.testing.MockClock) -> None:
    target = Scripted(Ready("shell"))
    result = await run(target, "ls", command="send")
    assert result["command"] == "send" and result["data"]["input"]["source"] == "argv"


# ------------------------------------------------------------------ 1. validate


async def test_a_bad_text_is_refused_before_anything_is_looked_at(
    autojump_clock: trio.testing.MockClock,
) -> None:
    target = Scripted()
    assert error(await run(target, "")) == ("INVALID_ARGUMENT", "empty")
    assert target.steps == []


# ------------------------------------------------------------------ 2, 3. read, settle, refuse


async def test_a_definite_refusal_ends_it_at_once(autojump_clock: trio.testing.MockClock) -> None:
    target = Scripted(Refused("AGENT_NOT_FOUND", "none here"))
    started = trio.current_time()
    assert error(await run(target)) == ("AGENT_NOT_FOUND", "none here")
    assert target.steps == ["look"] and trio.current_time() == started


async def test_what_may_change_gets_the_grace_then_its_refusal(
    autojump_clock: trio.testing.MockClock,
) -> None:
    target = Scripted(NotYet(BUSY, "still working"))
    started = trio.current_time()
    assert error(await run(target)) == (BUSY, "still working")
    waited = trio.current_time() - started
    assert TIMING.settle_seconds <= waited < TIMING.settle_seconds + TIMING.settle_poll
    assert "write" not in target.steps


async def test_what_settles_within_the_grace_is_delivered(
    autojump_clock: trio.testing.MockClock,
) -> None:
    working = NotYet(BUSY, "still working")
    target = Scripted(working, working, working, READY)
    assert (await run(target))["ok"] is True
    assert target.steps == ["look"] * 5 + ["write", "confirm", "enter"]


async def test_ready_must_hold_on_a_second_look_by_the_same_identity(
    autojump_clock: trio.testing.MockClock,
) -> None:
    restarted = Ready("state", second_look=True, identity=2)
    target = Scripted(READY, restarted, restarted)
    assert (await run(target))["ok"] is True
    assert target.steps[:4] == ["look", "look", "look", "write"]  # 1≠2: a third look
    half_drawn = Scripted(READY, NotYet(BUSY, "unreadable"))
    assert error(await run(half_drawn))[0] == BUSY
    assert "write" not in half_drawn.steps


async def test_a_steady_ready_needs_no_second_look(autojump_clock: trio.testing.MockClock) -> None:
    target = Scripted(Ready("shell"))
    assert (await run(target))["ok"] is True
    assert target.steps == ["look", "write", "confirm", "enter"]


async def test_ready_just_as_the_grace_runs_out_gets_one_confirming_look(
    autojump_clock: trio.testing.MockClock,
) -> None:
    looks = int(TIMING.settle_seconds / TIMING.settle_poll) + 1
    working = NotYet(BUSY, "still working")
    late = Scripted(*[working] * looks, READY, READY)
    assert (await run(late))["ok"] is True
    assert late.steps.count("look") == looks + 2


async def test_a_ready_never_seen_twice_alike_is_refused_when_the_grace_runs_out(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The identity changes on every look (an agent restarting, a status stamp that
    # hooks keep rewriting): never confirmed, so nothing is written.
    looks = int(TIMING.settle_seconds / TIMING.settle_poll) + 3
    changing = Scripted(*(Ready("state", second_look=True, identity=n) for n in range(looks)))
    code, message = error(await run(changing))
    assert code == BUSY and message == UNSTEADY
    assert "write" not in changing.steps


@pytest.mark.parametrize(
    ("failure", "code", "words"),
    [(PaneNotFound("gone"), "TARGET_NOT_FOUND", "gone"),
     (PaneSourceError("tmux exploded"), BUSY, "could not read the pane (tmux exploded)")],
)  # fmt: skip
async def test_a_target_that_cannot_be_read_gets_nothing(
    failure: Exception, code: str, words: str, autojump_clock: trio.testing.MockClock
) -> None:
    target = Scripted(failure)
    found = error(await run(target))
    assert found[0] == code and words in found[1]
    assert target.steps == ["look"]


async def test_a_known_ready_target_is_not_looked_at(
    autojump_clock: trio.testing.MockClock,
) -> None:
    target = Scripted(Refused(BUSY, "would refuse"))
    assert (await run(target, ready="launched"))["ok"] is True
    assert target.steps == ["write", "confirm", "enter"]


# ------------------------------------------------------------------ 4, 5. quiet, authorise


async def test_a_mac_typing_just_now_refuses(autojump_clock: trio.testing.MockClock) -> None:
    target = Scripted()
    target.typed = time.monotonic()
    code, message = error(await run(target))
    assert code == BUSY and "typing" in message and "write" not in target.steps
    target.typed = time.monotonic() - TIMING.quiet_seconds
    assert (await run(target))["ok"] is True


async def test_no_lease_writes_nothing(autojump_clock: trio.testing.MockClock) -> None:
    target = Scripted()
    assert error(await run(target, lease=Lease(False)))[0] == "REMOTE_COMMAND_REJECTED"
    assert "write" not in target.steps


async def test_the_lease_is_asked_right_before_the_write_and_the_enter(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lease = Lease()
    target = Scripted()
    asked_at: dict[str, int] = {}
    target.write_does = lambda guard: asked_at.setdefault("write", lease.asked) and None
    assert (await run(target, lease=lease))["ok"] is True
    assert asked_at == {"write": 1} and lease.asked == 2


# ------------------------------------------------------------------ 6. write


def refuse(guard: Guard) -> None:
    raise InputRefused("the pane's input is busy")


def ask_again(guard: Guard) -> None:
    guard.check()


@pytest.mark.parametrize(
    ("write", "lease", "code", "words"),
    [
        (refuse, Lease(), BUSY, "the pane's input is busy; nothing was sent."),
        (ask_again, Lease(True, False), "REMOTE_COMMAND_REJECTED", "no longer owns"),
    ],
)
async def test_a_write_that_wrote_nothing_is_a_refusal(
    write: Callable[[Guard], None],
    lease: Lease,
    code: str,
    words: str,
    autojump_clock: trio.testing.MockClock,
) -> None:
    target = Scripted()
    target.write_does = write
    found = error(await run(target, lease=lease))
    assert found[0] == code and words in found[1]
    assert target.steps[-1] == "write"


@pytest.mark.parametrize(
    ("failure", "words"),
    [(PaneNotFound("gone"), "The pane went away."), (PaneSourceError("boom"), "(boom)")],
)
async def test_a_write_that_failed_is_uncertain(
    failure: Exception, words: str, autojump_clock: trio.testing.MockClock
) -> None:
    def fail(guard: Guard) -> None:
        raise failure

    target = Scripted()
    target.write_does = fail
    code, message = error(await run(target))
    assert code == "SEND_FAILED" and words in message and "unconfirmed" in message
    assert target.steps[-1] == "write"


async def test_a_target_that_took_the_text_whole_is_done(
    autojump_clock: trio.testing.MockClock,
) -> None:
    target = Scripted()
    target.write_does = lambda guard: Delivered()
    assert (await run(target))["ok"] is True
    assert target.steps[-1] == "write"


# ------------------------------------------------------------------ 7, 8, 9. confirm, re-check, Enter


@pytest.mark.parametrize(
    ("verdict", "words"),
    [
        (withheld("the text never appeared"), "Enter was not sent: the text never appeared"),
        (PaneNotFound("gone"), "Enter was not sent: the pane went away"),
        (PaneSourceError("slow"), "Enter was not sent: the pane could not be read (slow)"),
    ],
)
async def test_no_confirmation_no_enter(
    verdict: Verdict | Exception, words: str, autojump_clock: trio.testing.MockClock
) -> None:
    target = Scripted()
    target.verdict = verdict
    code, message = error(await run(target))
    assert code == "SEND_FAILED" and words in message
    assert "enter" not in target.steps


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (Delivered(), (True, None)),
        (Refused("SHELL_NOT_READY", "nothing ran"), (False, "SHELL_NOT_READY")),
        (Unconfirmed("cannot tell"), (False, "SEND_FAILED")),
    ],
)
async def test_a_target_that_answers_for_itself_gets_no_enter(
    answer: Verdict, expected: tuple[bool, str | None], autojump_clock: trio.testing.MockClock
) -> None:
    target = Scripted(Ready("shell"))
    target.verdict = answer
    result = await run(target, "ls", command="send")
    code = None if result["ok"] else result["error"]["code"]
    assert (result["ok"], code) == expected
    assert "enter" not in target.steps


async def test_a_mac_typing_meanwhile_withholds_the_enter(
    autojump_clock: trio.testing.MockClock,
) -> None:
    target = Scripted()

    def typed() -> None:
        target.typed = time.monotonic()

    target.after_write = typed
    code, message = error(await run(target))
    assert code == "SEND_FAILED" and "typed in the pane on a Mac" in message
    assert "enter" not in target.steps


async def test_a_lease_lost_after_the_write_withholds_the_enter(
    autojump_clock: trio.testing.MockClock,
) -> None:
    target = Scripted()
    code, message = error(await run(target, lease=Lease(True, False)))
    assert code == "SEND_FAILED" and "lost the pane" in message
    assert "enter" not in target.steps


async def test_an_enter_that_failed_is_uncertain(autojump_clock: trio.testing.MockClock) -> None:
    target = Scripted()
    target.enter_error = PaneSourceError("broken pipe")
    code, message = error(await run(target))
    assert code == "SEND_FAILED" and "Enter may not have been (broken pipe)" in message


# ------------------------------------------------------------------ finishing shielded


async def test_from_the_write_on_it_finishes_whatever_cancels_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Cancelled after the write (a connection ending), it still ends with its own answer."""
    target = Scripted()
    target.confirm_seconds = 1.0
    results: list[Any] = []
    with trio.CancelScope() as scope:
        target.after_write = scope.cancel
        results.append(await run(target))
    assert results and results[0]["ok"] is True
    assert target.steps[-1] == "enter"


async def test_cancelled_before_the_write_it_writes_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    target = Scripted(NotYet(BUSY, "still working"))
    with trio.move_on_after(1.0):
        await run(target)
    assert "write" not in target.steps


async def test_it_never_finishes_for_long(autojump_clock: trio.testing.MockClock) -> None:
    target = Scripted()
    target.confirm_seconds = FINISH_SECONDS * 3
    started = trio.current_time()
    code, message = error(await run(target))
    assert code == "SEND_FAILED" and "stopped waiting" in message
    assert trio.current_time() - started == pytest.approx(TIMING.settle_poll + FINISH_SECONDS)
    assert "enter" not in target.steps


# ------------------------------------------------------------------ the echo


async def test_the_echo_is_awaited_within_its_time(autojump_clock: trio.testing.MockClock) -> None:
    looks: list[float] = []

    async def never() -> str | None:
        looks.append(trio.current_time())
        return None if len(looks) < 3 else "something else shows"

    started = trio.current_time()
    assert await watch_echo(TIMING, never, "never shown") == withheld("something else shows")
    assert trio.current_time() - started == pytest.approx(TIMING.echo_seconds)
    assert looks[1] - looks[0] == pytest.approx(TIMING.echo_poll)

    async def soon() -> Echoed | None:
        return Echoed() if trio.current_time() - started >= TIMING.echo_seconds + 0.2 else None

    assert await watch_echo(TIMING, soon, "never shown") == Echoed()
