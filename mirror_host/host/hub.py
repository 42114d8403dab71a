"""Panes and leases: who holds which pane, and the events that reach them. I/O.

The hub sits between connections and the pane source. It owns who holds which
pane (at most one lease per pane, one per connection): granting a subscribe,
taking a pane over, ending a lease (``ended``: taken over, pane closed, host
stopping) and freeing it when its connection closes. Each lease has a
:class:`~mirror_host.host.sampler.Sampler` (host/sampler.py), started by the
subscribe in its connection's own nursery: the sampler is the connection's
work, and ends with it. The hub cancels one only when its lease ends while the
connection goes on (:meth:`Hub.end`: taken over, pane closed).

Never waiting where the protocol is read: :meth:`Hub.handle_event` is called by
a connection's reader and returns at once. What needs the source runs in the
connection's own tasks, in the order Prowl's clients rely on
(:class:`~mirror_host.host.requests.SourceRequests`: list, input, scroll,
commands; :class:`~mirror_host.host.history.HistoryReader`: new history
snapshots, whose reads run in the background); a subscribe runs in the same
ordered lane as ``list``, and is answered within the sampler's first-capture
deadline.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import Any, assert_never
from uuid import UUID

import trio

from mirror_host.capture.values import Capture
from mirror_host.commands.handler import CommandHandler
from mirror_host.control import EndReason, Intent, Subscribe
from mirror_host.host.connection import Connection
from mirror_host.host.history import HistoryReader
from mirror_host.host.requests import SourceRequests
from mirror_host.host.sampler import Sampler
from mirror_host.panes.source import PaneSource
from mirror_host.session.events import (
    AuthenticateRequested,
    CommandRequested,
    ConnectionClosed,
    Event,
    FrameAcknowledged,
    HistoryRequested,
    InputReceived,
    ListRequested,
    PairRequested,
    ReceiptRequested,
    RefreshRequested,
    ScrollRequested,
    SubscribeRequested,
)
from mirror_host.session.lease import Lease

__all__ = ["Hub"]

logger = logging.getLogger(__name__)


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
        self.requests = SourceRequests(
            source, self.commands, leases=self, host_run_id=self.host_run_id
        )
        self.history = HistoryReader(source, wall_clock=wall_clock)
        self._holders: dict[UUID, Sampler] = {}
        self._by_connection: dict[Connection, Sampler] = {}
        self.frames_sent = 0

    @property
    def capabilities(self) -> tuple[str, ...]:
        """What ``panes.capabilities`` advertises, in Prowl's order."""
        return self.requests.capabilities

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the source, the command service and the history reads until cancelled;
        reports started once connections may send it events."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.source.run)
            await nursery.start(self.commands.run)
            await nursery.start(self.history.run)
            task_status.started()
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
        status["source"] = self.source.statistics()
        # Why there may be no panes (no tmux server, Herdr away …).
        status["health"] = self.source.health()
        return status

    # ------------------------------------------------------------ events

    def handle_event(self, connection: Connection, event: Event) -> None:
        """Take a session event for the panes; returns at once (module docstring)."""
        requests = self.requests
        match event:
            case FrameAcknowledged():
                if (sampler := self._by_connection.get(connection)) is not None:
                    sampler.acknowledged()  # the gate is open again
            case RefreshRequested():
                if (sampler := self._by_connection.get(connection)) is not None:
                    sampler.refresh()
            case InputReceived():
                requests.input(connection, event)
            case ListRequested():
                requests.in_order(connection, lambda: requests.list(connection))
            case SubscribeRequested(request=request):
                requests.in_order(connection, lambda: self._subscribe(connection, request))
            case ScrollRequested():
                connection.start_soon(requests.scroll, connection, event)
            case HistoryRequested():
                connection.start_soon(self.history.answer, connection, self.pane_of)
            case CommandRequested() | ReceiptRequested():
                connection.start_soon(requests.command, connection, event)
            case AuthenticateRequested() | PairRequested() | ConnectionClosed():
                pass  # not about panes: the host and the connection answer these
            case _:
                assert_never(event)

    # ------------------------------------------------------------ leases

    def is_held(self, pane_id: UUID) -> bool:
        """Somebody holds ``pane_id``."""
        return pane_id in self._holders

    def pane_of(self, connection: Connection) -> UUID | None:
        """The pane ``connection`` holds, if any."""
        sampler = self._by_connection.get(connection)
        return None if sampler is None else sampler.pane_id

    def scrolled(self, connection: Connection) -> None:
        """A scroll was applied on the connection's pane: its sampler has new deadlines."""
        if (sampler := self._by_connection.get(connection)) is not None:
            sampler.wake()

    def pane_closed(self, connection: Connection) -> None:
        """The source no longer has the connection's pane: ``ended paneClosed``."""
        sampler = self._by_connection.get(connection)
        if sampler is not None:
            self.end(sampler, EndReason.PANE_CLOSED)

    def frame_sent(self) -> None:
        """A sampler sent a frame."""
        self.frames_sent += 1

    async def _subscribe(self, connection: Connection, request: Subscribe) -> None:
        session = connection.session
        if not self.source.is_listed(request.pane_id):
            session.subscribe_failed("subscribe to an unknown pane")
            return
        if request.pane_id in self._holders and request.intent is not Intent.TAKEOVER:
            session.send_pane_busy()
            return
        lease = Lease.for_request(
            request, subscription_id=uuid.uuid4(), capabilities=frozenset(self.capabilities)
        )
        sampler = Sampler(self.source, connection, lease, request.intent)
        # Back once the subscribe is answered (within the first-capture deadline); the
        # sampler then lives on in the connection's nursery, and goes (with the
        # source's watch) when the connection does.
        await connection.start(sampler.run, self)

    def grant(self, sampler: Sampler, first: Capture | None) -> bool:
        """Take the pane for ``sampler`` (``subscribed``, and ``first`` as frame 1), or
        refuse: ``paneBusy`` (another holds it and this is no takeover), or a closed session."""
        connection, session = sampler.connection, sampler.connection.session
        if session.is_closed:
            return False
        previous = self._holders.get(sampler.pane_id)
        if previous is not None:
            if sampler.intent is not Intent.TAKEOVER:
                session.send_pane_busy()
                return False
            self.end(previous, EndReason.TAKEN_OVER)
            logger.info("%s took over a pane from %s", connection.label, previous.connection.label)
        now = trio.current_time()
        sequence = session.grant_lease(
            sampler.lease, host_run_id=self.host_run_id, first_capture=first, now=now
        )
        if sequence is not None:
            self.frames_sent += 1
        self._holders[sampler.pane_id] = sampler
        self._by_connection[connection] = sampler
        return True

    def end(self, sampler: Sampler, reason: EndReason) -> None:
        """Send ``ended`` to a holder, stop its sampler and forget its lease.

        The one place a sampler is cancelled from outside: its lease ends while
        its connection may go on (until the ``ended`` is flushed, or, for a
        sampler whose subscribe was refused, for good). A sampler that no
        longer holds its lease (refused, taken over, released: its connection
        may be back in ``authenticated`` or hold another lease) is only
        stopped: a host decision on a session that moved on is a no-op.
        """
        sampler.scope.cancel()
        if self._forget(sampler):
            sampler.connection.session.send_ended(reason)

    def _forget(self, sampler: Sampler) -> bool:
        """Free what ``sampler`` holds; whether it held its lease."""
        if self._by_connection.get(sampler.connection) is not sampler:
            return False
        del self._by_connection[sampler.connection]
        if self._holders.get(sampler.pane_id) is sampler:
            del self._holders[sampler.pane_id]
        self.commands.lease_lost(sampler.connection.session)
        return True

    def release(self, connection: Connection) -> None:
        """The connection closed: free its pane and its lanes (their tasks, the
        sampler among them, end with the connection's nursery)."""
        self.requests.release(connection)
        sampler = self._by_connection.get(connection)
        if sampler is not None:
            self._forget(sampler)

    def stop_all(self) -> None:
        """The host is stopping: every holder gets ``ended hostStopped``."""
        self.commands.stop()
        for sampler in list(self._holders.values()):
            self.end(sampler, EndReason.HOST_STOPPED)
