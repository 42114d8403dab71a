"""One subscription's sampler: watch the pane, capture it when the pacer says. I/O (Trio).

A subscribe starts a :class:`Sampler` in its connection's own nursery, with
``nursery.start`` (:meth:`Connection.start
<mirror_host.host.connection.Connection.start>`), and waits only until the
subscribe is answered; the sampler then lives on beside the connection's
reader for as long as its lease, and ends with the connection by structure
(nobody has to remember to cancel it). Only a lease that ends while its
connection goes on (taken over, its pane closed) cancels its sampler, through
:attr:`Sampler.scope`. In order:

1. It watches the pane and takes the first capture, so ``subscribed`` can carry
   frame 1 (iOS has no Send until it comes). The subscribe is answered with that
   capture (the hub grants the lease or refuses it: ``paneBusy``, a closed
   session) or, if the watch or the capture fails first, with
   ``subscribe_failed``. Then ``task_status.started()`` lets the connection's
   ordered lane go on.
2. If that takes more than :data:`FIRST_CAPTURE_SECONDS`, the subscribe is
   answered at that deadline without a first frame, while the watch and the
   capture go on (a first Herdr read can take seconds); that capture, once in,
   is frame 1 (not thrown away for another one). Where the subscribe stands
   is one value, :class:`Answer`.
3. Once granted and watching, it sleeps until the pacer's next wake or a wakeup
   (the pane changed, the client asked for a ``refresh``, a scroll was
   applied, or the client acknowledged while a capture waits for the gate: an
   acknowledgement with nothing to send wakes nobody) and does what the pacer says
   (:class:`~mirror_host.session.pacer.FramePacer`): nothing, make sure the pane
   is still listed while the gate is shut, or capture and offer the capture to
   the session. It never waits on another subscriber: a slow client's gate just
   stays shut, and the latest state goes out once it acknowledges.

Every capture has a deadline (:data:`CAPTURE_SECONDS`); one that passes it is
tried again later, never a reason to close. A pane the source no longer has
ends the lease with ``paneClosed``; any other source failure closes the
connection ("host pane is unavailable"), as does a capture the wire cannot
carry (Prowl's own host does the same). A sampler whose subscribe was refused
does nothing more to its connection, whatever a capture still under way ends
with: ``paneBusy`` left that connection open, and it may hold another lease by
then.
"""

from __future__ import annotations

import enum
import logging
import math
from dataclasses import replace
from typing import Protocol, assert_never

import trio

from mirror_host.capture.values import Capture, TextCapture, VTCapture, utf8_text
from mirror_host.control import EndReason, Intent
from mirror_host.errors import PaneNotFound, PaneSourceError
from mirror_host.host.connection import Connection
from mirror_host.limits import MAX_TEXT_BYTES, MAX_VT_BYTES
from mirror_host.panes.source import PaneSource
from mirror_host.session.lease import Lease
from mirror_host.session.pacer import FramePacer, Pace

__all__ = ["CAPTURE_SECONDS", "FIRST_CAPTURE_SECONDS", "Answer", "LeaseKeeper", "Sampler"]

logger = logging.getLogger(__name__)

#: Starting to watch a pane and its first capture; past it, ``subscribed`` goes
#: out alone and the capture under way, once in, is frame 1.
FIRST_CAPTURE_SECONDS = 5.0
#: One capture while sampling; past it, the capture is tried again later.
CAPTURE_SECONDS = 5.0


class Answer(enum.Enum):
    """Where a sampler's subscribe stands."""

    #: Not answered yet (the watch or the first capture is under way).
    PENDING = "pending"
    #: ``subscribed``: the lease is this sampler's.
    GRANTED = "granted"
    #: ``paneBusy``, ``subscribe_failed`` or a session already closed: the
    #: connection is no longer this sampler's to act on.
    REFUSED = "refused"


class LeaseKeeper(Protocol):
    """Who holds which pane (the hub): what a sampler reports to."""

    def grant(self, sampler: Sampler, first: Capture | None) -> bool:
        """Answer the subscribe: ``subscribed`` with ``first`` as frame 1 (if
        any), or a refusal. True when the lease is now the sampler's."""
        ...

    def end(self, sampler: Sampler, reason: EndReason) -> None:
        """The lease ends: ``ended``, and the sampler is cancelled. A sampler that no
        longer holds its lease (refused, taken over, released) is only cancelled."""
        ...

    def frame_sent(self) -> None:
        """A frame went out (for ``mirror-host status``)."""
        ...


class Sampler:
    """The sampler task of one subscription. See the module docstring."""

    def __init__(
        self, source: PaneSource, connection: Connection, lease: Lease, intent: Intent
    ) -> None:
        self.source = source
        self.connection = connection
        self.lease = lease
        #: The subscribe's intent, for the grant: take the pane over, or only if free.
        self.intent = intent
        self.pane_id = lease.pane_id
        #: Cancelled when the lease ends (or is refused): the watch goes with it.
        self.scope = trio.CancelScope()
        self.pacer = FramePacer(connection.session.frame_schedule)
        self._wakeup = trio.Event()
        #: Cancelled once the subscribe is answered: the first-capture deadline.
        self._deadline = trio.CancelScope()
        self.answer = Answer.PENDING

    def wake(self) -> None:
        """Something the pacer weighs changed outside it (a scroll applied)."""
        self._wakeup.set()

    def acknowledged(self) -> None:
        """The client acknowledged the outstanding frame: the gate is open again.

        Only a capture that waited for the gate needs the sampler now; with
        nothing wanted it sleeps on until the next change, as it would have
        decided itself, without the task switch (one per frame).
        """
        if self.pacer.wants_gate(trio.current_time()):
            self._wakeup.set()

    def refresh(self) -> None:
        """The client asked for a ``refresh``: capture even if nothing changed."""
        self.pacer.refresh()
        self._wakeup.set()

    def _changed(self) -> None:
        """The source's change callback."""
        self.pacer.changed()
        self._wakeup.set()

    # ------------------------------------------------------------ the task

    async def run(
        self, keeper: LeaseKeeper, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Answer the subscribe (then ``task_status.started()``), sample until cancelled.

        Whichever answers first calls ``started()``: this task with the first
        capture, or the deadline task beside it without one.
        """
        with self.scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._answer_at_deadline, keeper, task_status)
                try:
                    await self._watch(keeper, task_status)
                finally:
                    self._deadline.cancel()

    async def _answer_at_deadline(
        self, keeper: LeaseKeeper, task_status: trio.TaskStatus[None]
    ) -> None:
        """Past :data:`FIRST_CAPTURE_SECONDS`, answer without a first frame."""
        with self._deadline:
            await trio.sleep(FIRST_CAPTURE_SECONDS)
            logger.info(
                "%s: the pane's first capture takes more than %g s; subscribed without it",
                self.connection.label,
                FIRST_CAPTURE_SECONDS,
            )
            self._answer(keeper, task_status, None)

    def _answer(
        self, keeper: LeaseKeeper, task_status: trio.TaskStatus[None], first: Capture | None
    ) -> Answer:
        """Answer the subscribe once; the answer, given now or before."""
        if self.answer is Answer.PENDING:
            self._deadline.cancel()
            self.answer = Answer.GRANTED if keeper.grant(self, first) else Answer.REFUSED
            if self.answer is Answer.REFUSED:
                self.scope.cancel()  # the watch (and a capture under way) goes
            task_status.started()
        return self.answer

    def _refuse(self, task_status: trio.TaskStatus[None], problem: PaneSourceError) -> None:
        """The watch or the first capture failed before the subscribe was answered."""
        self.answer = Answer.REFUSED
        self._deadline.cancel()
        session = self.connection.session
        if isinstance(problem, PaneNotFound):
            session.subscribe_failed("the pane closed before its first frame")
        else:
            session.subscribe_failed(f"first capture failed: {problem}")
        task_status.started()

    async def _watch(self, keeper: LeaseKeeper, task_status: trio.TaskStatus[None]) -> None:
        session = self.connection.session
        try:
            async with self.source.watch(self.pane_id, self._changed):
                # What changes from here on, the first capture may not show.
                self.pacer.capture_started(trio.current_time())
                first = await self._capture()
                late = self.answer is not Answer.PENDING  # answered at the deadline, without it
                if self._answer(keeper, task_status, first) is Answer.GRANTED:
                    if late and session.offer_frame(first, trio.current_time()) is not None:
                        keeper.frame_sent()  # the capture that was under way is frame 1
                    await self._sample(keeper)
        except PaneSourceError as exc:
            if self.answer is Answer.PENDING:
                self._refuse(task_status, exc)
            elif self.answer is Answer.REFUSED:
                # Refused (paneBusy, left open) while a capture that could not be
                # cancelled was under way: the connection is no longer this sampler's.
                logger.debug(
                    "%s: a refused subscribe's capture failed: %s", self.connection.label, exc
                )
            elif isinstance(exc, PaneNotFound):
                keeper.end(self, EndReason.PANE_CLOSED)
            else:
                logger.warning("%s pane unavailable: %s", self.connection.label, exc)
                session.close(f"host pane is unavailable: {exc}")
        except Exception as exc:
            # One pane's failure ends its subscriber, never the host.
            logger.exception("%s sampling failed", self.connection.label)
            if self.answer is Answer.PENDING:
                self._refuse(task_status, PaneSourceError(f"sampling failed: {exc!r}"))
            elif self.answer is Answer.GRANTED:
                session.close("host pane is unavailable")

    async def _sample(self, keeper: LeaseKeeper) -> None:
        session, pacer = self.connection.session, self.pacer
        pacer.start(trio.current_time())
        while not session.is_closed:
            wake_at = pacer.next_wake(trio.current_time())
            if wake_at == math.inf:
                await self._wakeup.wait()  # only a wakeup: no deadline to keep
            else:
                with trio.move_on_at(wake_at):
                    await self._wakeup.wait()
            self._wakeup = trio.Event()
            now = trio.current_time()
            match pacer.due(now):
                case Pace.WAIT:
                    pass
                case Pace.CHECK_LISTED:
                    # The gate holds back frames, not the end: a pane that went away
                    # ends the lease even while a frame waits for its acknowledgement.
                    if not self.source.is_listed(self.pane_id):
                        keeper.end(self, EndReason.PANE_CLOSED)
                        return
                case Pace.CAPTURE:
                    pacer.capture_started(now)
                    capture: Capture | None = None
                    with trio.move_on_after(CAPTURE_SECONDS):
                        capture = await self._capture()
                    if capture is None:
                        # Every source here captures from memory, so this is a safety
                        # net: the pacer tries again a tick (200 ms) later, never a close.
                        logger.warning(
                            "%s: a capture took more than %g s; trying again",
                            self.connection.label,
                            CAPTURE_SECONDS,
                        )
                        pacer.capture_timed_out(trio.current_time())
                    elif session.offer_frame(capture, trio.current_time()) is not None:
                        keeper.frame_sent()
                        pacer.frame_sent(trio.current_time())
                case unexpected:
                    assert_never(unexpected)

    async def _capture(self) -> Capture:
        lease = self.lease
        capture = await self.source.capture(
            self.pane_id, lease.representation, options=lease.opt_ins
        )
        if isinstance(capture, TextCapture):
            capture = replace(capture, text=utf8_text(capture.text))
        elif capture.viewport_text is not None:
            capture = replace(capture, viewport_text=utf8_text(capture.viewport_text))
        _check_limits(capture)
        return capture


def _check_limits(capture: Capture) -> None:
    if isinstance(capture, VTCapture) and len(capture.data) > MAX_VT_BYTES:
        raise PaneSourceError(f"VT capture of {len(capture.data)} bytes exceeds 4 MiB")
    if isinstance(capture, TextCapture) and _utf8_longer_than(capture.text, MAX_TEXT_BYTES):
        raise PaneSourceError("text capture exceeds 1 MiB")
    viewport = capture.viewport_text if isinstance(capture, VTCapture) else None
    if viewport is not None and _utf8_longer_than(viewport, MAX_TEXT_BYTES):
        raise PaneSourceError("viewport text exceeds 1 MiB")


def _utf8_longer_than(text: str, limit: int) -> bool:
    # A character is at most 4 UTF-8 bytes, so a screenful (thousands of
    # characters) is judged by its length alone, without encoding it per capture.
    return len(text) * 4 > limit and len(text.encode()) > limit
