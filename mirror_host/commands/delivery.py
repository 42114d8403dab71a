"""Guarded delivery of a phone's text into a pane, written once: the engine. I/O.

Every way the host puts a phone's text into a pane runs through :func:`deliver`:
an agent's prompt on tmux, local and agliteterm panes
(:mod:`mirror_host.commands.agent_input`) and on Herdr
(:mod:`mirror_host.commands.herdr_input`), and a shell's command line
(:mod:`mirror_host.commands.shell_input`). This module owns the sequence and
its safety rules; a small adapter per kind of target (a :class:`Target`) says
how to read the target's state, how to write to it, and how to confirm what the
write did. One :class:`Delivery` value says what goes where, under which
command name, with which authorisation and timing.

The sequence, and the rules each step keeps:

1. **Validate** (``Target.problem``): text the target must not get is
   ``INVALID_ARGUMENT``.
2. **Read and settle** (``Target.look``): a definite refusal ends it at once;
   one that may still change (an agent working, a screen caught mid-redraw:
   :class:`NotYet`) is looked at again for up to
   ``settle_seconds``; a "ready" a half-drawn screen could fake
   (``Ready.second_look``) must hold on a second look a moment later.
3. **Refuse**: a refusal before anything is written carries its own code
   (``AGENT_NOT_FOUND``, ``DISPATCH_TARGET_BUSY``, ``SHELL_BUSY`` …); a pane
   that is gone is ``TARGET_NOT_FOUND``, one that cannot be read the target's
   busy code.
4. **Quiet**: raw input from a Mac within ``quiet_seconds`` refuses.
5. **Authorise**: the lease, right before the first write
   (``REMOTE_COMMAND_REJECTED``).
6. **Write** (``Target.write``): from here on the delivery finishes shielded
   from cancellation (a lost lease, host stop), for at most
   :data:`FINISH_SECONDS`: cut off half-way it could only be reported as
   cancelled before delivery, which the apps read as "rejected" while the text
   may sit in the pane. :class:`~mirror_host.errors.InputRefused` means nothing
   was written (its refusal, or ``REMOTE_COMMAND_REJECTED`` when the lease was
   what refused); any other failure leaves the outcome uncertain:
   ``SEND_FAILED``.
7. **Confirm** (``Target.confirm``): the text shows where it should and
   nothing changed (:class:`Echoed`), or the outcome without an Enter: why it
   must not follow (:func:`withheld`: ``SEND_FAILED``), or the target's own
   final answer (a shell's).
8. **Re-check**: keys typed on a Mac since the write, then the lease, right
   before the Enter; either withholds it.
9. **Enter** (``Target.enter``): once, never blindly, never retried.
10. **Report**: ``data.input`` for a delivery, the code and message otherwise.

Once anything may have reached the pane, only an uncertain outcome is
``SEND_FAILED`` (a shell's certain "nothing ran" keeps its own code).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeAlias, TypeVar
from uuid import UUID

import trio

from mirror_host.commands.responses import (
    INPUT_UNCONFIRMED,
    MAC_TYPING,
    NO_LONGER_OWNS,
    PANE_GONE,
    UNSTEADY,
    cli_error,
    cli_success,
    enter_uncertain,
    input_delivered,
    nothing_sent,
    pane_unreadable,
    rejected,
    written_without_enter,
)
from mirror_host.control.swiftjson import JSONValue
from mirror_host.errors import InputRefused, PaneNotFound, PaneSourceError

__all__ = [
    "FINISH_SECONDS",
    "Delivered",
    "Delivery",
    "DeliveryTiming",
    "Echoed",
    "Guard",
    "LEASE_LOST",
    "Look",
    "NotYet",
    "Outcome",
    "Ready",
    "Refused",
    "Target",
    "Unconfirmed",
    "Verdict",
    "deliver",
    "watch_echo",
    "withheld",
]

logger = logging.getLogger(__name__)

#: From the first write on, the delivery finishes even if its lease is lost or the host
#: stops meanwhile (the Enter is then withheld): never cut off halfway, never for long.
FINISH_SECONDS = 10.0

S = TypeVar("S")
REJECTED = "REMOTE_COMMAND_REJECTED"


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliveryTiming:
    """How long delivery waits, and how often it looks."""

    #: A working agent may take this long to finish its turn before input is refused
    #: (an unreadable screen, too: it may be halfway through a redraw).
    settle_seconds: float = 5.0
    #: Between looks at the target, and before the second look that confirms "ready".
    settle_poll: float = 0.1
    #: The written text must show up within this time.
    echo_seconds: float = 2.0
    echo_poll: float = 0.05
    #: Raw input from a Mac client this recently refuses delivery.
    quiet_seconds: float = 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Delivery:
    """One delivery: what goes where, under which command, while what holds."""

    text: str
    pane_id: UUID
    #: ``agentsInput``, ``agentsDispatch`` or ``send``: it names the result.
    command: str
    #: Whether the phone still holds the pane's lease (a launch's first prompt has
    #: no phone: ``lambda: True``).
    authorized: Callable[[], bool]
    timing: DeliveryTiming = DeliveryTiming()

    @property
    def source(self) -> str:
        """``data.input.source`` of the result: a command line is ``argv``."""
        return "argv" if self.command == "send" else "argument"


# ------------------------------------------------------------------ what a look says


@dataclass(frozen=True, slots=True)
class Refused:
    """Nothing was written, and nothing will be: the code and message a phone hears
    (``REMOTE_COMMAND_REJECTED``: the mirror layer's own, as when the lease is gone)."""

    code: str
    message: str


@dataclass(frozen=True, slots=True)
class NotYet(Refused):
    """Refused for now, but that may change within the grace (an agent still working, a
    screen caught mid-redraw): looked at again until the grace runs out."""


@dataclass(frozen=True, slots=True)
class Ready(Generic[S]):
    """The target may take the text; ``state`` is what the adapter needs to write to it."""

    state: S
    #: Set where a half-drawn screen could fake "ready": the verdict must hold on a
    #: second look, with the same ``identity`` (the agent's process).
    second_look: bool = False
    identity: Hashable = None


Look: TypeAlias = "Ready[S] | Refused"


# ------------------------------------------------------------------ what a write came to


@dataclass(frozen=True, slots=True)
class Delivered:
    """The text went in, with its Enter."""


@dataclass(frozen=True, slots=True)
class Unconfirmed:
    """Something may have reached the pane; what became of it is not known."""

    message: str


Outcome: TypeAlias = "Delivered | Refused | Unconfirmed"


@dataclass(frozen=True, slots=True)
class Echoed:
    """The text shows where it should and nothing changed: the Enter may follow."""


#: What a confirmation says: the Enter may follow, or the outcome without it (the text
#: written but no Enter: :func:`withheld`; a target's own answer: a shell's).
Verdict: TypeAlias = "Echoed | Outcome"


def withheld(why: str) -> Unconfirmed:
    """The text was written, but the Enter must not follow, for ``why``."""
    return Unconfirmed(written_without_enter(why))


#: The lease was gone before anything reached the pane.
LEASE_LOST = Refused(REJECTED, NO_LONGER_OWNS)


class Guard:
    """The lease, asked right before each write that reaches the pane.

    Once it has said no it stays no (a lease lost is not regained) and
    :attr:`lost` tells a refusal by the lease from the target's own.
    """

    def __init__(self, authorized: Callable[[], bool]) -> None:
        self._authorized = authorized
        self.lost = False

    def holds(self) -> bool:
        if not self.lost and not self._authorized():
            self.lost = True
        return not self.lost

    def check(self) -> None:
        """For an adapter that awaits before its first byte: ask again.

        Raises:
            InputRefused: the lease is gone (nothing of this write was sent).
        """
        if not self.holds():
            raise InputRefused(NO_LONGER_OWNS)


class Target(Protocol[S]):
    """How to read one kind of target, write to it and confirm the write (an adapter)."""

    #: The code of a refusal when the target is not ready or refuses the text.
    busy_code: str

    def problem(self, text: str, /) -> str | None:
        """Why ``text`` must not go to this kind of target, or ``None``."""
        ...

    async def look(self, pane_id: UUID) -> Look[S]:
        """The target's state now.

        Raises:
            PaneNotFound, PaneSourceError.
        """
        ...

    def last_typed(self, pane_id: UUID) -> float | None:
        """When a Mac last typed into the pane (``time.monotonic``); ``None``: never, or
        the target guards itself against it (a shell refuses a line that holds text)."""
        ...

    async def write(self, delivery: Delivery, state: S, guard: Guard) -> Delivered | None:
        """Write the text; :class:`Delivered` when the target took it with its Enter.

        The engine asks ``guard`` right before this; an adapter that awaits anything
        before its first byte reaches the pane asks again (``guard.check()``).

        Raises:
            InputRefused: nothing was written.
            PaneNotFound, PaneSourceError: some of it may have been.
        """
        ...

    async def confirm(self, delivery: Delivery, state: S) -> Verdict:
        """What the write did: the text shows and nothing changed, why the Enter must not
        follow, or the target's own final answer.

        Raises:
            PaneNotFound, PaneSourceError: the target could not be read (no Enter).
        """
        ...

    async def enter(self, delivery: Delivery, state: S) -> None:
        """Send one Enter (only after :class:`Echoed`).

        Raises:
            PaneNotFound, PaneSourceError: it may or may not have been sent.
        """
        ...

    def what(self, state: S) -> str:
        """The delivery in the log's words: ``prompt to claude``."""
        ...


# ------------------------------------------------------------------ the engine


async def deliver(target: Target[S], delivery: Delivery, *, ready: S | None = None) -> JSONValue:
    """Deliver ``delivery`` to ``target`` (module docstring); the command's result.

    ``ready``: the caller already knows the target is ready (a launch that was
    just answered "ready"): it is not looked at; every other rule holds.
    """
    problem = target.problem(delivery.text)
    if problem is not None:
        return _result(delivery, Refused("INVALID_ARGUMENT", problem))
    if ready is None:
        found = await _settle(target, delivery)
        if isinstance(found, Refused):
            return _result(delivery, found)
        ready = found.state
    last = target.last_typed(delivery.pane_id)
    if last is not None and time.monotonic() - last < delivery.timing.quiet_seconds:
        return _result(delivery, Refused(target.busy_code, MAC_TYPING))
    guard = Guard(delivery.authorized)
    if not guard.holds():
        return _result(delivery, LEASE_LOST)
    with trio.CancelScope(shield=True), trio.move_on_after(FINISH_SECONDS):
        outcome = await _write_through(target, delivery, ready, guard)
        if isinstance(outcome, Delivered):
            size = len(delivery.text.encode("utf-8"))
            logger.info("delivered a %d-byte %s", size, target.what(ready))
        return _result(delivery, outcome)
    return _result(delivery, Unconfirmed(f"Host stopped waiting for the pane. {INPUT_UNCONFIRMED}"))


async def _settle(target: Target[S], delivery: Delivery) -> Ready[S] | Refused:
    """The target's verdict once it is definite, within the grace period."""
    timing = delivery.timing
    deadline = trio.current_time() + timing.settle_seconds
    try:
        found = await target.look(delivery.pane_id)
        late_looks = 0
        while True:
            if isinstance(found, Ready) and not found.second_look:
                return found
            if isinstance(found, Refused) and not isinstance(found, NotYet):
                return found
            if trio.current_time() >= deadline:
                if isinstance(found, NotYet):
                    return found
                if late_looks:
                    # Still a "ready" never seen twice alike (an identity that
                    # changes on every look): not confirmed, so not ready.
                    return Refused(target.busy_code, UNSTEADY)
                late_looks += 1  # ready just as the grace ran out: one confirming look
            await trio.sleep(timing.settle_poll)
            again = await target.look(delivery.pane_id)
            if (
                isinstance(found, Ready)
                and isinstance(again, Ready)
                and again.identity == found.identity
            ):
                return again
            found = again
    except PaneNotFound:
        return Refused("TARGET_NOT_FOUND", PANE_GONE)
    except PaneSourceError as exc:
        return Refused(target.busy_code, pane_unreadable(exc))


async def _write_through(target: Target[S], delivery: Delivery, state: S, guard: Guard) -> Outcome:
    """Steps 6 to 9: write, confirm, re-check, Enter."""
    started = time.monotonic()
    try:
        whole = await target.write(delivery, state, guard)
    except InputRefused as exc:
        return LEASE_LOST if guard.lost else Refused(target.busy_code, nothing_sent(exc))
    except PaneNotFound:
        return Unconfirmed(f"The pane went away. {INPUT_UNCONFIRMED}")
    except PaneSourceError as exc:
        return Unconfirmed(f"{INPUT_UNCONFIRMED} ({exc})")
    if whole is not None:
        return whole
    try:
        verdict = await target.confirm(delivery, state)
    except PaneNotFound:
        return withheld("the pane went away")
    except PaneSourceError as exc:
        return withheld(f"the pane could not be read ({exc})")
    if not isinstance(verdict, Echoed):
        return verdict
    last = target.last_typed(delivery.pane_id)
    if last is not None and last >= started:
        return withheld("someone typed in the pane on a Mac meanwhile")
    if not guard.holds():
        return withheld("the mirror lost the pane")
    try:
        await target.enter(delivery, state)
    except PaneSourceError as exc:
        return Unconfirmed(enter_uncertain(exc))
    return Delivered()


def _result(delivery: Delivery, outcome: Outcome) -> JSONValue:
    """The command's result for ``outcome``."""
    if isinstance(outcome, Delivered):
        return cli_success(delivery.command, input_delivered(delivery.text, delivery.source))
    if isinstance(outcome, Unconfirmed):
        return cli_error(delivery.command, "SEND_FAILED", outcome.message)
    if outcome.code == REJECTED:
        return rejected(outcome.message)
    return cli_error(delivery.command, outcome.code, outcome.message)


async def watch_echo(
    timing: DeliveryTiming,
    look: Callable[[], Awaitable[Verdict | str | None]],
    why: str,
) -> Verdict:
    """Look until the text shows (:class:`Echoed`) or ``look`` has an outcome (a dialog
    opened: no Enter), for at most ``timing.echo_seconds``.

    ``look`` may also say why the text is not there yet (a ``str``, reported if
    time runs out instead of ``why``) or nothing new (``None``).
    """
    with trio.move_on_after(timing.echo_seconds):
        while True:
            seen = await look()
            if seen is not None and not isinstance(seen, str):
                return seen
            if seen is not None:
                why = seen
            await trio.sleep(timing.echo_poll)
    return withheld(why)
