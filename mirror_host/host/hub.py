"""Panes and subscriptions: listing, leases, takeover, sampling, input. I/O.

The hub sits between connections and the pane source. It owns who holds which
pane (at most one lease per pane) and one sampler task per subscription.

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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import trio

from mirror_host.commands.responses import NOT_ALLOWED, rejected, unconfirmed
from mirror_host.control import (
    EndReason,
    Intent,
    PaneDescriptor,
    Subscribe,
)
from mirror_host.errors import (
    CaptureUnstable,
    PaneNotFound,
    PaneSourceError,
    UnsupportedOperation,
)
from mirror_host.host.connection import Connection
from mirror_host.panes.model import (
    MAX_TEXT_BYTES,
    MAX_VT_BYTES,
    POLL_SECONDS,
    Capability,
    Capture,
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
from mirror_host.session.lease import Lease

__all__ = ["BASE_CAPABILITIES", "CommandHandler", "Hub"]

logger = logging.getLogger(__name__)

BASE_CAPABILITIES = ("vt-v1", "text-v1", "takeover", "refresh")
#: At most one frame per subscriber per 16 ms, however fast the pane changes.
MIN_FRAME_SECONDS = 0.016


class CommandHandler:
    """The remote-command service seam; the default refuses everything."""

    @property
    def capabilities(self) -> tuple[str, ...]:
        """Command capabilities to advertise (none by default)."""
        return ()

    async def run(self) -> None:
        """Background work; the default has none."""

    async def handle(self, connection: Connection, event: CommandRequested) -> None:
        """Answer one command (default: not allowed)."""
        request = event.message.command_request
        connection.session.send_command_result(request.request_id, rejected(NOT_ALLOWED))
        connection.kick()

    async def receipt(self, connection: Connection, event: ReceiptRequested) -> None:
        """Answer a receipt query (default: unknown)."""
        connection.session.send_command_result(event.message.command_receipt_id, unconfirmed())
        connection.kick()

    def lease_lost(self, connection: Connection) -> None:
        """The connection lost its lease: cancel its pane-targeted commands."""

    def stop(self) -> None:
        """The host is stopping: cancel everything."""


@dataclass(eq=False)
class _Subscription:
    connection: Connection
    lease: Lease
    pane_id: UUID
    wakeup: trio.Event = field(default_factory=trio.Event)
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    granted: trio.Event = field(default_factory=trio.Event)
    change_count: int = 0
    changes_at_first_capture: int = 0
    refresh_pending: bool = False

    def wake(self) -> None:
        self.wakeup.set()


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
        self._nursery: trio.Nursery | None = None
        self._ready = trio.Event()
        self.frames_sent = 0

    @property
    def capabilities(self) -> tuple[str, ...]:
        """What ``panes.capabilities`` advertises, in Prowl's order."""
        optional = tuple(c for c in Capability.ORDER if c in self.source.capabilities)
        return BASE_CAPABILITIES + tuple(self.commands.capabilities) + optional

    async def run(self) -> None:
        """Run the source and host the sampler tasks until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._ready.set()
            nursery.start_soon(self.source.run)
            nursery.start_soon(self.commands.run)
            await trio.sleep_forever()

    async def status(self) -> dict[str, Any]:
        """Listed and subscribed panes and frames sent, for ``mirror-host status``.

        ``listed`` at 0 is the first sign that a source is not reachable (Herdr keeps
        its last listing through an outage, so there it means "never read").
        """
        status: dict[str, Any] = {
            "listed": len(await self.source.list_panes()),
            "subscribed": len(self._holders),
            "framesSent": self.frames_sent,
        }
        statistics = getattr(self.source, "statistics", None)
        if callable(statistics):
            status["source"] = statistics()
        return status

    # ------------------------------------------------------------ events

    async def handle_event(self, connection: Connection, event: Event) -> None:
        """Handle a pane-related session event."""
        if isinstance(event, ListRequested):
            await self._list(connection)
        elif isinstance(event, SubscribeRequested):
            await self._subscribe(connection, event.request)
        elif isinstance(event, FrameAcknowledged | RefreshRequested):
            sub = self._by_connection.get(connection)
            if sub is not None:
                if isinstance(event, RefreshRequested):
                    sub.refresh_pending = True
                sub.wake()
        elif isinstance(event, InputReceived):
            await self._input(connection, event)
        elif isinstance(event, ScrollRequested):
            await self._scroll(connection, event)
        elif isinstance(event, HistoryRequested):
            await self._history(connection)
        elif isinstance(event, CommandRequested):
            await self.commands.handle(connection, event)
        elif isinstance(event, ReceiptRequested):
            await self.commands.receipt(connection, event)

    async def _list(self, connection: Connection) -> None:
        try:
            panes = await self.source.list_panes()
        except PaneSourceError as exc:
            logger.warning("listing panes failed: %s", exc)
            panes = []
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
        try:
            first: Capture | None = await self._nursery.start(self._sample_task, sub)
        except PaneNotFound:
            session.subscribe_failed("the pane closed before its first frame")
            return
        except PaneSourceError as exc:
            session.subscribe_failed(f"first capture failed: {exc}")
            return
        if session.is_closed:
            sub.scope.cancel()
            return
        previous = self._holders.get(request.pane_id)
        if previous is not None:
            if request.intent is not Intent.TAKEOVER:
                sub.scope.cancel()
                session.send_pane_busy()
                return
            self._end(previous, EndReason.TAKEN_OVER)
            logger.info("%s took over a pane from %s", connection.label, previous.connection.label)
        session.grant_lease(
            lease, host_run_id=self.host_run_id, first_capture=first, now=trio.current_time()
        )
        if lease.gate.outstanding is not None:
            self.frames_sent += 1
        self._holders[request.pane_id] = sub
        self._by_connection[connection] = sub
        if first is None:
            sub.refresh_pending = True  # the first capture raced a resize: sample again
        sub.granted.set()
        connection.kick()

    def _end(self, sub: _Subscription, reason: EndReason) -> None:
        """Send ``ended`` to a holder and forget its lease."""
        self._forget(sub)
        sub.connection.session.send_ended(reason)
        sub.connection.kick()

    def _forget(self, sub: _Subscription) -> None:
        sub.scope.cancel()
        if self._holders.get(sub.pane_id) is sub:
            del self._holders[sub.pane_id]
        if self._by_connection.get(sub.connection) is sub:
            del self._by_connection[sub.connection]
        self.commands.lease_lost(sub.connection)

    def release(self, connection: Connection) -> None:
        """The connection closed: free its pane."""
        sub = self._by_connection.get(connection)
        if sub is not None:
            self._forget(sub)

    def stop_all(self) -> None:
        """The host is stopping: every holder gets ``ended hostStopped``."""
        self.commands.stop()
        for sub in list(self._holders.values()):
            self._end(sub, EndReason.HOST_STOPPED)

    async def _input(self, connection: Connection, event: InputReceived) -> None:
        try:
            await self.source.write(event.pane_id, event.data)
        except PaneNotFound:
            self._pane_closed(connection)
        except PaneSourceError as exc:
            logger.warning("%s input not written: %s", connection.label, exc)

    async def _scroll(self, connection: Connection, event: ScrollRequested) -> None:
        session = connection.session
        try:
            await self.source.scroll(event.pane_id, event.direction)
        except PaneNotFound:
            self._pane_closed(connection)
            return
        except PaneSourceError as exc:
            logger.info("%s scroll failed: %s", connection.label, exc)
            session.scroll_failed(event.request_id)
            return
        session.scroll_applied(event.request_id, trio.current_time())
        sub = self._by_connection.get(connection)
        if sub is not None:
            sub.wake()

    async def _history(self, connection: Connection) -> None:
        session = connection.session
        sub = self._by_connection.get(connection)
        if sub is None or Capability.HISTORY not in self.source.capabilities:
            session.history_unavailable()
            return
        try:
            captured = await self.source.history(sub.pane_id)
        except (UnsupportedOperation, PaneSourceError) as exc:
            logger.info("%s history unavailable: %s", connection.label, exc)
            session.history_unavailable()
            return
        session.history_captured(
            uuid.uuid4(),
            captured.text,
            truncated=captured.truncated,
            captured_at=self._wall_clock(),
        )

    def _pane_closed(self, connection: Connection) -> None:
        sub = self._by_connection.get(connection)
        if sub is not None:
            self._end(sub, EndReason.PANE_CLOSED)

    # ------------------------------------------------------------ sampling

    async def _capture(self, sub: _Subscription) -> Capture:
        lease = sub.lease
        capture = await self.source.capture(
            sub.pane_id,
            lease.representation,
            with_viewport_text=lease.wants_viewport_text,
            with_scroll_bounds=lease.wants_scroll_state,
            with_styled_scrollback=lease.wants_styled_scrollback,
        )
        _check_limits(capture)
        return capture

    async def _sample_task(
        self,
        sub: _Subscription,
        *,
        task_status: trio.TaskStatus[Capture | None],
    ) -> None:
        with sub.scope:

            def changed() -> None:
                sub.change_count += 1
                sub.wakeup.set()

            async with self.source.watch(sub.pane_id, changed):
                first: Capture | None
                sub.changes_at_first_capture = sub.change_count
                try:
                    first = await self._capture(sub)
                except CaptureUnstable:
                    first = None  # subscribed goes out alone; sampling sends the frame
                task_status.started(first)
                await sub.granted.wait()
                try:
                    await self._sample_loop(sub)
                except Exception:
                    # One pane's failure ends its subscriber, never the host.
                    logger.exception("%s sampling failed", sub.connection.label)
                    sub.connection.session.close("host pane is unavailable")
                    sub.connection.kick()

    async def _sample_loop(self, sub: _Subscription) -> None:
        session = sub.connection.session
        lease = sub.lease
        polling = not self.source.pushes_changes
        seen_changes = sub.changes_at_first_capture
        last_frame = trio.current_time()
        next_poll = last_frame + POLL_SECONDS
        while not session.is_closed:
            now = trio.current_time()
            scroll_deadlines = [
                d for d in (lease.scroll.next_deadline(), lease.scroll.force_deadline()) if d
            ]
            deadlines = [*scroll_deadlines, next_poll] if polling else scroll_deadlines
            wake_at = min((d for d in deadlines if d > now), default=float("inf"))
            with trio.move_on_at(wake_at):
                await sub.wakeup.wait()
            sub.wakeup = trio.Event()
            now = trio.current_time()
            if not session.can_take_frame(now):
                # The gate holds back frames, not the end: a pane that went away
                # ends the lease even while a frame waits for its acknowledgement.
                if not self.source.is_listed(sub.pane_id):
                    self._end(sub, EndReason.PANE_CLOSED)
                    return
                continue  # an acknowledgement (or the scroll settling) wakes us
            changed = sub.change_count != seen_changes
            scroll_due = any(d <= now for d in scroll_deadlines)
            poll_due = polling and now >= next_poll
            if not (changed or scroll_due or poll_due or sub.refresh_pending):
                continue
            # Rate limit: a pane printing flat out still costs at most ~60 frames/s.
            gap = last_frame + MIN_FRAME_SECONDS - now
            if gap > 0:
                await trio.sleep(gap)
            seen_changes = sub.change_count
            sub.refresh_pending = False
            if poll_due:
                next_poll = max(next_poll + POLL_SECONDS, trio.current_time())
            try:
                capture = await self._capture(sub)
            except CaptureUnstable:
                session.capture_unstable()
                sub.connection.kick()
                continue
            except PaneNotFound:
                self._end(sub, EndReason.PANE_CLOSED)
                return
            except PaneSourceError as exc:
                logger.warning("%s pane unavailable: %s", sub.connection.label, exc)
                session.close(f"host pane is unavailable: {exc}")
                sub.connection.kick()
                return
            if session.offer_frame(capture, trio.current_time()) is not None:
                self.frames_sent += 1
                last_frame = trio.current_time()
            sub.connection.kick()


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
