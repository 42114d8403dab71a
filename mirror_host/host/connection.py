"""Drive one :class:`~mirror_host.session.connection.Session` over a TLS stream. I/O.

Three tasks per connection (and a fourth that only waits for the end, to bound
the last write: "Closing" below), plus whatever work the host starts for it:

* the **reader** feeds received bytes into the session and hands its events to
  the host, in order. The host answers pane requests from other tasks, so the
  reader only ever waits for the peer (and, for a login or a pairing, for the
  device book: :mod:`mirror_host.host.device_book`);
* the **writer** drains the session's outbound bytes to the stream;
* the **timer** sleeps until the session's next deadline (heartbeat, idle,
  authentication) and fires it;
* **work** the host starts with :meth:`Connection.start_soon` (a scroll, a
  history request, input for the pane, the ordered lanes) or
  :meth:`Connection.start` (a subscription's sampler: back once it answered the
  subscribe): it lives in this connection's nursery, so it ends when the
  connection does, by structure; nobody has to remember to cancel it.

The session wakes the writer itself (:meth:`Session.set_waker`): whoever queues
bytes on it or closes it, from any task, never has to tell the connection.

Closing: when the session closes silently (a violation, a timeout, a slow
receiver, a revoked device) the tasks are cancelled at once; when it closes
after a last message (``paired``, ``ended``) the writer flushes it first, for
at most :data:`FLUSH_SECONDS`. Either way the TLS connection then ends with a
``close_notify`` alert before TCP closes (:func:`close_tls`): Prowl's Android
app reports a close without one as the reason for the drop ("No close_notify")
instead of the host's. Only a stream that is already broken (the peer went
away, or a send was cut off half-way) closes without it.

So a write is never cut off by the end: Trio marks an ``SSLStream`` whose
``send_all`` was cancelled as broken, and a broken stream closes without
``close_notify``. The writer's sends are shielded; once the connection is
ending (a silent close, the flush deadline, the host stopping) a write under
way gets :data:`CLOSE_NOTIFY_SECONDS` more to finish, and no new one starts.
Only a peer that reads nothing for that long loses its ``close_notify``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVarTuple, Unpack

import trio

from mirror_host.host.packet_log import PacketLog
from mirror_host.session.connection import Session
from mirror_host.session.events import ConnectionClosed, Event
from mirror_host.streams import STREAM_GONE, receive_or_eof, send_or_gone

__all__ = ["CLOSE_NOTIFY_SECONDS", "FLUSH_SECONDS", "Connection", "ConnectionOwner", "close_tls"]

logger = logging.getLogger(__name__)

FLUSH_SECONDS = 5.0
#: Sending ``close_notify`` at the end, and before it finishing a write that was
#: under way when the connection began to end; past either, TCP closes without it.
CLOSE_NOTIFY_SECONDS = 1.0
_RECEIVE_BYTES = 65_536

Args = TypeVarTuple("Args")


class ConnectionOwner(Protocol):
    """What a connection reports to (the host)."""

    async def handle_event(self, connection: Connection, event: Event) -> None:
        """Act on one session event (never ``ConnectionClosed``); never waits on a pane."""

    def connection_closed(self, connection: Connection, event: ConnectionClosed) -> None:
        """The session ended; release whatever the connection held. Must not block."""


class Connection:
    """One established TLS connection and its session."""

    def __init__(
        self,
        *,
        number: int,
        peer: str,
        peer_host: str,
        stream: trio.abc.Stream,
        session: Session,
        owner: ConnectionOwner,
        log_packets: bool = False,
    ) -> None:
        self.number = number
        self.peer = peer
        #: The address alone, the key for failure accounting.
        self.peer_host = peer_host
        self.stream = stream
        self.session = session
        self.owner = owner
        #: Who this connection logged in as, for logs (set by the host).
        self.device_label = ""
        self._output = trio.Event()
        self._nursery: trio.Nursery | None = None
        #: The writer's send under way (shielded: see the module docstring).
        self._sending: trio.CancelScope | None = None
        self._closed_reported = False
        #: ``--log-packets``: hex of each packet once logged in (host/packet_log.py).
        self._packet_log = PacketLog(lambda: self.label) if log_packets else None
        session.set_waker(self._wake)

    def __repr__(self) -> str:
        return f"<connection {self.label}>"

    @property
    def label(self) -> str:
        """``#12 192.0.2.7:50412 (iPhone 3F2A…)`` for log lines."""
        who = f" ({self.device_label})" if self.device_label else ""
        return f"#{self.number} {self.peer}{who}"

    @property
    def _logged_in(self) -> bool:
        """A device logged in on this connection (a pairing connection never does)."""
        return self.session.device_id is not None

    def _wake(self) -> None:
        """The session queued bytes or closed (called by the session itself)."""
        self._output.set()
        session = self.session
        if session.is_closed and self._nursery is not None:
            scope = self._nursery.cancel_scope
            if session.flushes_on_close:
                scope.deadline = min(scope.deadline, trio.current_time() + FLUSH_SECONDS)
            else:
                scope.cancel()

    def start_soon(self, work: Callable[[Unpack[Args]], Awaitable[object]], *args: *Args) -> None:
        """Run ``work`` beside the reader; it is cancelled when the connection ends."""
        if self._nursery is None or self.session.is_closed:
            return  # not serving (yet, or any more): nothing to do it for
        self._nursery.start_soon(work, *args)

    async def start(self, work: Callable[..., Awaitable[object]], *args: object) -> None:
        """Run ``work`` beside the reader, as :meth:`start_soon` does, and return
        once it calls ``task_status.started()``; until then it runs in the
        caller's task (Trio's ``nursery.start``). Cancelled when the connection ends."""
        if self._nursery is None or self.session.is_closed:
            return  # not serving (yet, or any more): nothing to do it for
        await self._nursery.start(work, *args)

    async def run(self) -> None:
        """Serve until the session closes or the peer goes away."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._reader)
                nursery.start_soon(self._writer)
                nursery.start_soon(self._timer)
                nursery.start_soon(self._bound_last_write)
        finally:
            self._nursery = None
            if not self.session.is_closed:
                self.session.close("transport closed")
            self._report_closed()
            await close_tls(self.stream)

    async def _pump(self) -> None:
        while (event := self.session.next_event()) is not None:
            if isinstance(event, ConnectionClosed):
                self._report_closed(event)
            else:
                await self.owner.handle_event(self, event)

    def _report_closed(self, event: ConnectionClosed | None = None) -> None:
        if self._closed_reported:
            return
        if event is None:
            while (pending := self.session.next_event()) is not None:
                if isinstance(pending, ConnectionClosed):
                    event = pending
        if event is None:
            return
        self._closed_reported = True
        self.owner.connection_closed(self, event)

    async def _reader(self) -> None:
        while not self.session.is_closed:
            data = await receive_or_eof(self.stream, _RECEIVE_BYTES)
            if self._packet_log is not None:
                self._packet_log.received(data, logged_in=self._logged_in)
            self.session.receive_data(data, trio.current_time())
            await self._pump()

    async def _writer(self) -> None:
        session = self.session
        while True:
            self._output = trio.Event()
            data = session.data_to_send()
            if data:
                if self._packet_log is not None:
                    self._packet_log.sent(data, logged_in=self._logged_in)
                # The connection is ending: no new write (the silent close dropped what
                # was queued; the flush deadline has passed).
                await trio.lowlevel.checkpoint_if_cancelled()
                if not await self._send(data):
                    session.close("peer went away while we were sending")
                    break
                session.confirm_sent(len(data))
                continue
            if session.is_closed:
                break
            await self._output.wait()
        await self._pump()
        assert self._nursery is not None
        self._nursery.cancel_scope.cancel()

    async def _send(self, data: bytes) -> bool:
        """Write ``data`` whole, even if the connection begins to end meanwhile
        (:meth:`_bound_last_write` bounds it then); ``False`` when it did not get through."""
        sent = False
        with trio.CancelScope(shield=True) as self._sending:
            try:
                sent = await send_or_gone(self.stream, data)
            finally:
                self._sending = None
        return sent

    async def _bound_last_write(self) -> None:
        """Once the connection is ending (however: its tasks are cancelled), give the
        write under way :data:`CLOSE_NOTIFY_SECONDS` to finish, so ``close_notify``
        can follow it on a stream that is still whole."""
        try:
            await trio.sleep_forever()
        finally:
            if self._sending is not None:
                last = trio.current_time() + CLOSE_NOTIFY_SECONDS
                self._sending.deadline = min(self._sending.deadline, last)

    async def _timer(self) -> None:
        while (deadline := self.session.get_timer()) is not None:
            await trio.sleep_until(deadline)
            self.session.handle_timer(trio.current_time())
            await self._pump()


async def close_tls(stream: trio.abc.Stream) -> None:
    """Close gracefully: ``close_notify`` first (an ``SSLStream``), then the transport.

    Shielded and bounded by :data:`CLOSE_NOTIFY_SECONDS`, so it happens on every
    path, host stop (a cancelled nursery) included, and never hangs on a peer
    that stopped reading.
    """
    with trio.CancelScope(shield=True):
        with trio.move_on_after(CLOSE_NOTIFY_SECONDS):
            try:
                await stream.aclose()
                return
            except (*STREAM_GONE, OSError) as exc:
                logger.debug("closing without close_notify: %r", exc)
        await trio.aclose_forcefully(stream)
