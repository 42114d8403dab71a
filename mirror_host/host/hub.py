"""Panes and subscriptions: listing, leases, takeover, sampling, input. I/O.

The hub sits between connections and the pane source. It owns who holds which
pane (at most one lease per pane) and one sampler task per subscription.

Never waiting where the protocol is read: :meth:`Hub.handle_event` is called by a
connection's reader and returns at once. Work that needs the source runs in the
connection's own tasks (:meth:`Connection.start_soon`), in the order Prowl's
clients rely on:

* ``list`` and ``subscribe`` go through one ordered lane, so a ``panes`` reply
  never overtakes the ``subscribed`` of a subscribe sent before it;
* input bytes go through another, so a pane receives keystrokes in the order
  they were typed, however slow one write is;
* a scroll and a new history snapshot each run in their own task; the session
  already allows only one pending scroll (``SCROLL_BUSY`` for another) and
  queues history requests behind a capture in progress.

History is answered within :data:`HISTORY_SECONDS` of its request, because
Android gives up at 8 s and then treats a late answer as fatal. The source read
itself runs in the hub's own nursery (it must outlive the request, not the
host): past the answer deadline the client gets ``HISTORY_UNAVAILABLE`` while
the read goes on for up to :data:`HISTORY_READ_SECONDS`; a read that finishes
unwanted is kept for :data:`HISTORY_KEEP_SECONDS` and answers the next history
request for that pane at once (:class:`~mirror_host.session.history.HistoryReads`
decides; at most one read under way and one result kept per pane).

Every source call has a deadline, and one that passes it ends in the protocol's
own answer for that request (``SCROLL_UNAVAILABLE``, ``HISTORY_UNAVAILABLE``, a
``subscribed`` whose first frame comes from sampling), never in a closed
connection.

Sampling (docs/performance.md): a sampler reads its pane only while subscribed.
For a push source it wakes when the pane changed, when the client acknowledged
the outstanding frame, on ``refresh`` and on scroll deadlines; for a polling
source it also wakes every 200 ms. It never waits on another subscriber, so a
slow or silent client delays nobody else: its gate simply stays closed, and when
it acknowledges, the latest state goes out (no queue of stale frames).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import trio

from mirror_host.commands.handler import CommandHandler
from mirror_host.control import (
    EndReason,
    Intent,
    PaneDescriptor,
    Subscribe,
)
from mirror_host.errors import (
    PaneNotFound,
    PaneSourceError,
)
from mirror_host.host.connection import Connection
from mirror_host.host.lanes import Lane
from mirror_host.panes.model import (
    MAX_TEXT_BYTES,
    MAX_VT_BYTES,
    POLL_SECONDS,
    Capability,
    Capture,
    HistoryCapture,
    TextCapture,
    VTCapture,
)
from mirror_host.panes.source import PaneSource
from mirror_host.session.events import (
    CommandRequested,
    Event,
    FrameAcknowledged,
    HistoryRequested,
    InputReceived,
    ListRequested,
    ReceiptRequested,
    RefreshRequested,
    ScrollRequested,
    SubscribeRequested,
)
from mirror_host.session.history import HistoryReads, ReadAction
from mirror_host.session.lease import Lease

__all__ = [
    "BASE_CAPABILITIES",
    "CAPTURE_SECONDS",
    "FIRST_CAPTURE_SECONDS",
    "HISTORY_KEEP_SECONDS",
    "HISTORY_READ_SECONDS",
    "HISTORY_SECONDS",
    "INPUT_SECONDS",
    "LIST_SECONDS",
    "MAX_PENDING_INPUT_BYTES",
    "SCROLL_SECONDS",
    "Hub",
]

logger = logging.getLogger(__name__)

BASE_CAPABILITIES = ("vt-v1", "text-v1", "takeover", "refresh")
#: At most one frame per subscriber per 16 ms, however fast the pane changes.
MIN_FRAME_SECONDS = 0.016

# Deadlines for source calls. Each ends in the protocol's own answer to the
# request it serves; none closes the connection.
#: Listing panes (every source keeps its list in memory; this is a safety net).
LIST_SECONDS = 5.0
#: Starting to watch a pane and its first capture; past it, ``subscribed`` goes
#: out alone and the first frame comes from sampling (as after a resize race).
FIRST_CAPTURE_SECONDS = 5.0
#: One capture while sampling; past it, the capture is tried again later.
CAPTURE_SECONDS = 5.0
#: Applying a scroll; past it, ``SCROLL_UNAVAILABLE: Host could not scroll``.
SCROLL_SECONDS = 5.0
#: A new history snapshot is answered within this long of its request; past it,
#: ``HISTORY_UNAVAILABLE`` (Android gives up at 8 s and treats a later answer as
#: fatal), while the read itself goes on in the background.
HISTORY_SECONDS = 6.0
#: The source read behind a snapshot (a big Herdr scrollback can take seconds).
#: Above Herdr's own 15 s per-request limit, so that limit's precise error is
#: what gets logged.
HISTORY_READ_SECONDS = 20.0
#: A read that finished after its askers were answered is kept this long for
#: the next request for the pane (a retry a few seconds later gets it at once).
HISTORY_KEEP_SECONDS = 30.0
#: Writing one input message to the pane; past it, that message is dropped
#: (logged) and the next one is written.
INPUT_SECONDS = 10.0
#: Input waiting for a slow pane; more is dropped (logged) instead of queued.
MAX_PENDING_INPUT_BYTES = 1024 * 1024
#: ``list``/``subscribe`` requests waiting in one connection's lane.
_MAX_PENDING_CONTROL = 64


@dataclass(eq=False)
class _Subscription:
    connection: Connection
    lease: Lease
    pane_id: UUID
    wakeup: trio.Event = field(default_factory=trio.Event)
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    #: Set when the first capture is in (or failed).
    first_ready: trio.Event = field(default_factory=trio.Event)
    first_capture: Capture | None = None
    first_error: PaneSourceError | None = None
    granted: trio.Event = field(default_factory=trio.Event)
    change_count: int = 0
    changes_at_first_capture: int = 0
    refresh_pending: bool = False

    def wake(self) -> None:
        self.wakeup.set()


@dataclass(frozen=True, slots=True)
class _HistoryRead:
    """What one background history read found, and when (the snapshot's ``capturedAt``)."""

    capture: HistoryCapture
    captured_at: float


@dataclass(eq=False)
class _ReadUnderWay:
    done: trio.Event = field(default_factory=trio.Event)
    result: _HistoryRead | None = None


@dataclass(eq=False)
class _Lanes:
    """One connection's ordered work."""

    control: Lane
    input: Lane
    #: Input was dropped since the last message about it (log once per episode).
    input_dropped: bool = False


class Hub:
    """Pane leases and samplers for one host."""

    def __init__(
        self,
        source: PaneSource,
        *,
        commands: CommandHandler | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.source = source
        self.commands = commands or CommandHandler()
        self.host_run_id = uuid.uuid4()
        self._wall_clock = wall_clock
        self._holders: dict[UUID, _Subscription] = {}
        self._by_connection: dict[Connection, _Subscription] = {}
        self._lanes: dict[Connection, _Lanes] = {}
        self._nursery: trio.Nursery | None = None
        self._ready = trio.Event()
        self.frames_sent = 0
        self.history_reads: HistoryReads[_HistoryRead] = HistoryReads(
            keep_seconds=HISTORY_KEEP_SECONDS
        )
        self._reads_under_way: dict[int, _ReadUnderWay] = {}

    @property
    def capabilities(self) -> tuple[str, ...]:
        """What ``panes.capabilities`` advertises, in Prowl's order."""
        optional = tuple(c for c in Capability.ORDER if c in self.source.capabilities)
        return BASE_CAPABILITIES + tuple(self.commands.capabilities) + optional

    async def run(self) -> None:
        """Run the source, the command service and the sampler tasks until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self.source.run)
            await nursery.start(self.commands.run)
            self._ready.set()
            await trio.sleep_forever()

    async def status(self) -> dict[str, Any]:
        """Listed and subscribed panes and frames sent, for ``mirror-host status``.

        ``listed`` at 0 is the first sign that a source is not reachable (Herdr keeps
        its last listing through an outage, so there it means "never read").
        """
        listed = await self.source.list_panes()
        status: dict[str, Any] = {
            "listed": len(listed),
            "subscribed": len(self._holders),
            "framesSent": self.frames_sent,
            # The ids `attach --pane` takes, and which pane a device mirrors.
            "items": [
                {
                    "id": str(pane.id).upper(),
                    "title": pane.title,
                    "directory": pane.directory,
                    "subscribed": pane.id in self._holders,
                }
                for pane in listed
            ],
        }
        statistics = getattr(self.source, "statistics", None)
        if callable(statistics):
            status["source"] = statistics()
        health = getattr(self.source, "health", None)
        if callable(health):  # why there may be no panes (no tmux server, Herdr away …)
            status["health"] = health()
        return status

    # ------------------------------------------------------------ events

    def handle_event(self, connection: Connection, event: Event) -> None:
        """Take a pane-related session event; returns at once (module docstring)."""
        if isinstance(event, FrameAcknowledged | RefreshRequested):
            sub = self._by_connection.get(connection)
            if sub is not None:
                if isinstance(event, RefreshRequested):
                    sub.refresh_pending = True
                sub.wake()
        elif isinstance(event, InputReceived):
            self._queue_input(connection, event)
        elif isinstance(event, ListRequested):
            self._control(connection, lambda: self._list(connection))
        elif isinstance(event, SubscribeRequested):
            request = event.request
            self._control(connection, lambda: self._subscribe(connection, request))
        elif isinstance(event, ScrollRequested):
            connection.start_soon(self._scroll, connection, event)
        elif isinstance(event, HistoryRequested):
            connection.start_soon(self._history, connection)
        elif isinstance(event, CommandRequested | ReceiptRequested):
            connection.start_soon(self._command, connection, event)

    def _lanes_of(self, connection: Connection) -> _Lanes:
        lanes = self._lanes.get(connection)
        if lanes is None:
            lanes = _Lanes(
                control=Lane(connection, max_pending=_MAX_PENDING_CONTROL),
                input=Lane(connection, max_pending=MAX_PENDING_INPUT_BYTES),
            )
            self._lanes[connection] = lanes
        return lanes

    def _control(self, connection: Connection, work: Callable[[], Awaitable[None]]) -> None:
        if not self._lanes_of(connection).control.push(work):
            # Each of these waits for an answer before the next; 64 at once is a flood.
            connection.session.close("too many list/subscribe requests waiting")

    async def _command(
        self, connection: Connection, event: CommandRequested | ReceiptRequested
    ) -> None:
        await self._ready.wait()  # the command service runs once the hub does
        if isinstance(event, CommandRequested):
            self.commands.handle(connection.session, event)
        else:
            self.commands.receipt(connection.session, event)

    async def _list(self, connection: Connection) -> None:
        panes = []
        with trio.move_on_after(LIST_SECONDS) as deadline:
            try:
                panes = await self.source.list_panes()
            except PaneSourceError as exc:
                logger.warning("listing panes failed: %s", exc)
        if deadline.cancelled_caught:
            logger.warning("listing panes took more than %g s; answered with none", LIST_SECONDS)
        descriptors = tuple(
            PaneDescriptor(
                id=pane.id,
                title=pane.title,
                directory=pane.directory,
                busy=pane.id in self._holders,
                project_name=pane.project_name,
                subtitle=pane.subtitle,
            )
            for pane in sorted(panes, key=lambda p: p.title)
        )
        connection.session.send_panes(descriptors, self.capabilities, self.host_run_id)

    async def _subscribe(self, connection: Connection, request: Subscribe) -> None:
        session = connection.session
        if not self.source.is_listed(request.pane_id):
            session.subscribe_failed("subscribe to an unknown pane")
            return
        if request.pane_id in self._holders and request.intent is not Intent.TAKEOVER:
            session.send_pane_busy()
            return
        await self._ready.wait()
        assert self._nursery is not None
        lease = Lease.for_request(
            request, subscription_id=uuid.uuid4(), capabilities=frozenset(self.capabilities)
        )
        sub = _Subscription(connection, lease, request.pane_id)
        self._nursery.start_soon(self._sample_task, sub)
        try:
            await self._grant(sub, request.intent)
        finally:
            if not sub.granted.is_set():
                # Refused, failed, or the connection went away while waiting:
                # the sampler (and the source's watch) goes with it.
                sub.scope.cancel()

    async def _grant(self, sub: _Subscription, intent: Intent) -> None:
        """Wait (bounded) for the first capture, then take the pane for ``sub``."""
        connection, session = sub.connection, sub.connection.session
        with trio.move_on_after(FIRST_CAPTURE_SECONDS):
            await sub.first_ready.wait()
        if isinstance(sub.first_error, PaneNotFound):
            session.subscribe_failed("the pane closed before its first frame")
            return
        if sub.first_error is not None:
            session.subscribe_failed(f"first capture failed: {sub.first_error}")
            return
        if not sub.first_ready.is_set():
            logger.info(
                "%s: the pane's first capture takes more than %g s; subscribed without it",
                connection.label,
                FIRST_CAPTURE_SECONDS,
            )
        if session.is_closed:
            return
        previous = self._holders.get(sub.pane_id)
        if previous is not None:
            if intent is not Intent.TAKEOVER:
                session.send_pane_busy()
                return
            self._end(previous, EndReason.TAKEN_OVER)
            logger.info("%s took over a pane from %s", connection.label, previous.connection.label)
        first = sub.first_capture
        sequence = session.grant_lease(
            sub.lease, host_run_id=self.host_run_id, first_capture=first, now=trio.current_time()
        )
        if sequence is not None:
            self.frames_sent += 1
        self._holders[sub.pane_id] = sub
        self._by_connection[connection] = sub
        if first is None:
            sub.refresh_pending = True  # the first capture is still coming: sample again
        sub.granted.set()

    def _end(self, sub: _Subscription, reason: EndReason) -> None:
        """Send ``ended`` to a holder and forget its lease."""
        self._forget(sub)
        sub.connection.session.send_ended(reason)

    def _forget(self, sub: _Subscription) -> None:
        sub.scope.cancel()
        if self._holders.get(sub.pane_id) is sub:
            del self._holders[sub.pane_id]
        if self._by_connection.get(sub.connection) is sub:
            del self._by_connection[sub.connection]
        self.commands.lease_lost(sub.connection.session)

    def release(self, connection: Connection) -> None:
        """The connection closed: free its pane and its lanes."""
        self._lanes.pop(connection, None)
        sub = self._by_connection.get(connection)
        if sub is not None:
            self._forget(sub)

    def stop_all(self) -> None:
        """The host is stopping: every holder gets ``ended hostStopped``."""
        self.commands.stop()
        for sub in list(self._holders.values()):
            self._end(sub, EndReason.HOST_STOPPED)

    def _pane_closed(self, connection: Connection) -> None:
        sub = self._by_connection.get(connection)
        if sub is not None:
            self._end(sub, EndReason.PANE_CLOSED)

    # ------------------------------------------------------------ source-bound requests

    def _queue_input(self, connection: Connection, event: InputReceived) -> None:
        lanes = self._lanes_of(connection)

        async def write() -> None:
            await self._write_input(connection, event)

        if lanes.input.push(write, cost=len(event.data)):
            lanes.input_dropped = False
        elif not lanes.input_dropped:
            lanes.input_dropped = True
            logger.warning(
                "%s: the pane is not taking input (%d bytes waiting); dropping input",
                connection.label,
                lanes.input.pending,
            )

    async def _write_input(self, connection: Connection, event: InputReceived) -> None:
        with trio.move_on_after(INPUT_SECONDS) as deadline:
            try:
                await self.source.write(event.pane_id, event.data)
            except PaneNotFound:
                self._pane_closed(connection)
            except PaneSourceError as exc:
                logger.warning("%s input not written: %s", connection.label, exc)
        if deadline.cancelled_caught:
            logger.warning(
                "%s input not written within %g s; dropped", connection.label, INPUT_SECONDS
            )

    async def _scroll(self, connection: Connection, event: ScrollRequested) -> None:
        session = connection.session
        problem: str | None = None
        with trio.move_on_after(SCROLL_SECONDS) as deadline:
            try:
                await self.source.scroll(event.pane_id, event.direction)
            except PaneNotFound:
                self._pane_closed(connection)
                return
            except PaneSourceError as exc:
                problem = str(exc)
        if deadline.cancelled_caught:
            problem = f"no answer within {SCROLL_SECONDS:g} s"
        if problem is not None:
            logger.info("%s scroll failed: %s", connection.label, problem)
            session.scroll_failed(event.request_id)
            return
        session.scroll_applied(event.request_id, trio.current_time())
        sub = self._by_connection.get(connection)
        if sub is not None:
            sub.wake()  # the settle and force deadlines start now

    async def _history(self, connection: Connection) -> None:
        """Capture snapshots until no request waits for another (session order)."""
        session = connection.session
        another = True
        while another:
            sub = self._by_connection.get(connection)
            read = None
            if sub is not None and Capability.HISTORY in self.source.capabilities:
                asked = session.history_asked_at
                answer_by = (asked if asked is not None else trio.current_time()) + HISTORY_SECONDS
                read = await self._read_history(connection, sub.pane_id, answer_by)
            if read is None:
                another = session.history_unavailable()
            else:
                another = session.history_captured(
                    uuid.uuid4(),
                    read.capture.text,
                    truncated=read.capture.truncated,
                    captured_at=read.captured_at,
                )

    async def _read_history(
        self, connection: Connection, pane_id: UUID, answer_by: float
    ) -> _HistoryRead | None:
        """The pane's history by ``answer_by``, or ``None`` (the read may go on without us)."""
        plan = self.history_reads.ask(pane_id, trio.current_time())
        if plan.action is ReadAction.READY:
            return plan.result
        if plan.action is ReadAction.START:
            assert self._nursery is not None  # subscribed, so the hub runs
            under_way = self._reads_under_way[plan.read] = _ReadUnderWay()
            self._nursery.start_soon(self._background_history, pane_id, plan.read, under_way)
        else:
            under_way = self._reads_under_way[plan.read]
        try:
            with trio.move_on_at(answer_by):
                await under_way.done.wait()
        finally:
            if not under_way.done.is_set():  # late, or this connection went away
                self.history_reads.give_up(pane_id, plan.read)
        if not under_way.done.is_set():
            logger.info(
                "%s history unavailable: no answer within %g s; the read goes on for the next"
                " request",
                connection.label,
                HISTORY_SECONDS,
            )
            return None
        return under_way.result

    async def _background_history(
        self, pane_id: UUID, read_number: int, under_way: _ReadUnderWay
    ) -> None:
        """One source read, in the hub's nursery; its result is kept a while if nobody waits."""
        with trio.move_on_after(HISTORY_READ_SECONDS) as deadline:
            try:
                capture = await self.source.history(pane_id)
                under_way.result = _HistoryRead(capture, self._wall_clock())
            except PaneSourceError as exc:
                logger.info("history of pane %s unavailable: %s", pane_id, exc)
            except Exception:
                # This task belongs to the hub: a source bug must not take the host down.
                logger.exception("reading the history of pane %s failed", pane_id)
        if deadline.cancelled_caught:
            logger.info(
                "history of pane %s unavailable: no answer within %g s",
                pane_id,
                HISTORY_READ_SECONDS,
            )
        del self._reads_under_way[read_number]
        kept_until = self.history_reads.finish(
            pane_id, read_number, under_way.result, trio.current_time()
        )
        under_way.done.set()
        if kept_until is not None:
            # Bounded: whatever nobody takes is dropped when its time is up.
            await trio.sleep_until(kept_until)
            self.history_reads.expire(trio.current_time())

    # ------------------------------------------------------------ sampling

    async def _capture(self, sub: _Subscription) -> Capture:
        lease = sub.lease
        capture = await self.source.capture(
            sub.pane_id,
            lease.representation,
            with_viewport_text=lease.opt_ins.viewport_text,
            with_scroll_bounds=lease.opt_ins.scroll_state,
            with_styled_scrollback=lease.opt_ins.styled_scrollback,
        )
        _check_limits(capture)
        return capture

    async def _sample_task(self, sub: _Subscription) -> None:
        with sub.scope:

            def changed() -> None:
                sub.change_count += 1
                sub.wakeup.set()

            try:
                async with self.source.watch(sub.pane_id, changed):
                    sub.changes_at_first_capture = sub.change_count
                    sub.first_capture = await self._capture(sub)
                    sub.first_ready.set()
                    await sub.granted.wait()
                    await self._sample_loop(sub)
            except PaneSourceError as exc:
                if not sub.granted.is_set():
                    sub.first_error = exc  # the subscribe is still waiting: it decides
                    sub.first_ready.set()
                elif isinstance(exc, PaneNotFound):
                    self._end(sub, EndReason.PANE_CLOSED)
                else:
                    self._unavailable(sub, exc)
            except Exception as exc:
                # One pane's failure ends its subscriber, never the host.
                logger.exception("%s sampling failed", sub.connection.label)
                if not sub.granted.is_set():
                    sub.first_error = PaneSourceError(f"sampling failed: {exc!r}")
                    sub.first_ready.set()
                sub.connection.session.close("host pane is unavailable")

    def _unavailable(self, sub: _Subscription, exc: PaneSourceError) -> None:
        logger.warning("%s pane unavailable: %s", sub.connection.label, exc)
        sub.connection.session.close(f"host pane is unavailable: {exc}")

    async def _sample_loop(self, sub: _Subscription) -> None:
        session = sub.connection.session
        polling = not self.source.pushes_changes
        seen_changes = sub.changes_at_first_capture
        last_frame = trio.current_time()
        next_poll = last_frame + POLL_SECONDS
        #: After a capture that did not finish, when to try again even if nothing wakes us.
        retry_at = float("inf")
        if sub.refresh_pending:
            sub.wake()  # subscribed without a first frame: sample at once
        while not session.is_closed:
            deadlines = [retry_at]
            scroll_deadline = session.frame_schedule(trio.current_time()).wake_at
            if scroll_deadline is not None:
                deadlines.append(scroll_deadline)
            if polling:
                deadlines.append(next_poll)
            with trio.move_on_at(min(deadlines)):
                await sub.wakeup.wait()
            sub.wakeup = trio.Event()
            now = trio.current_time()
            schedule = session.frame_schedule(now)
            if not schedule.open:
                # The gate holds back frames, not the end: a pane that went away
                # ends the lease even while a frame waits for its acknowledgement.
                if not self.source.is_listed(sub.pane_id):
                    self._end(sub, EndReason.PANE_CLOSED)
                    return
                continue  # an acknowledgement (or the scroll settling) wakes us
            changed = sub.change_count != seen_changes
            poll_due = polling and now >= next_poll
            retry_due = now >= retry_at
            if not (changed or schedule.due or poll_due or retry_due or sub.refresh_pending):
                continue
            # Rate limit: a pane printing flat out still costs at most ~60 frames/s.
            gap = last_frame + MIN_FRAME_SECONDS - now
            if gap > 0:
                await trio.sleep(gap)
            seen_changes = sub.change_count
            sub.refresh_pending = False
            retry_at = float("inf")
            if poll_due:
                next_poll = max(next_poll + POLL_SECONDS, trio.current_time())
            capture: Capture | None = None
            with trio.move_on_after(CAPTURE_SECONDS):
                try:
                    capture = await self._capture(sub)
                except PaneNotFound:
                    self._end(sub, EndReason.PANE_CLOSED)
                    return
                except PaneSourceError as exc:
                    self._unavailable(sub, exc)
                    return
            if capture is None:
                # Every source here captures from memory, so this is a safety net:
                # try again on the next change or poll tick, never close for it.
                logger.warning(
                    "%s: a capture took more than %g s; trying again",
                    sub.connection.label,
                    CAPTURE_SECONDS,
                )
                retry_at = trio.current_time() + POLL_SECONDS
                continue
            if session.offer_frame(capture, trio.current_time()) is not None:
                self.frames_sent += 1
                last_frame = trio.current_time()


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
