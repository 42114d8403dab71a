"""One connection's conduit: packets in, bytes and events out, its clocks and its end. Pure.

Theory of operation
-------------------

A :class:`Link` is what every state of a session shares (docs/protocol.md §8):

* the packet decoder the peer's bytes are fed into;
* the outbound queue, bounded at 16 MiB queued or handed to the transport and
  not yet confirmed sent: a receiver that falls that far behind is closed;
* the events for the host, in order;
* the heartbeat (a ``ping`` every 2 s, missed beats skipped rather than sent in
  a burst) and the idle deadline (8 s without any inbound packet);
* the state of the table (:attr:`Link.phase`), the one record of where the
  connection is in its life: the session moves it by the table
  (:mod:`mirror_host.session.states`), and everyone who must know asks it;
* the end (:meth:`Link.close`, from any state: ``CLOSED``): once closed, nothing
  more is queued, no event but the one ``ConnectionClosed`` is reported, and
  unless the close flushes a last message (``paired``, ``ended``) what was
  queued is dropped: a silent close.

A *waker* registered by whoever drives the connection is called whenever bytes
are queued or the link closes, from whatever decision caused it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from mirror_host.control import ControlMessage, Ping, encode_control
from mirror_host.limits import HEARTBEAT_SECONDS, IDLE_TIMEOUT_SECONDS
from mirror_host.session.events import ConnectionClosed, Event
from mirror_host.session.states import Phase
from mirror_host.wire import ControlPacket, Packet, PacketDecoder, encode_packet

__all__ = [
    "MAX_OUTBOUND_BYTES",
    "Link",
]

MAX_OUTBOUND_BYTES = 16 * 1024 * 1024

_CLOSED = Phase.CLOSED


class Link:
    """The shared conduit of one connection. See the module docstring."""

    def __init__(self, now: float) -> None:
        self._decoder = PacketDecoder()
        self._events: deque[Event] = deque()
        self._outbound: list[bytes] = []
        self._queued_bytes = 0
        self._in_flight_bytes = 0
        self._waker: Callable[[], None] | None = None
        #: THE state of the connection (module docstring). Only the session moves
        #: it, by the table, and :meth:`close` ends it; nothing leaves ``CLOSED``.
        self.phase = Phase.AUTHENTICATING
        #: The close kept the last message queued (``paired``, ``ended``): it is
        #: still sent. Says how the ``CLOSED`` state was entered, nothing more.
        self.flushes_on_close = False
        self._next_ping = now + HEARTBEAT_SECONDS
        self.idle_deadline = now + IDLE_TIMEOUT_SECONDS

    @property
    def is_closed(self) -> bool:
        """True once the link ended (bytes to flush may still be queued)."""
        return self.phase is _CLOSED

    @property
    def outbound_bytes(self) -> int:
        """Bytes queued or handed to the transport but not yet confirmed sent."""
        return self._queued_bytes + self._in_flight_bytes

    def set_waker(self, waker: Callable[[], None] | None) -> None:
        """Call ``waker`` whenever bytes are queued or the link closes."""
        self._waker = waker

    def _wake(self) -> None:
        if self._waker is not None:
            self._waker()

    # ------------------------------------------------------------ in

    def feed(self, data: bytes, now: float) -> None:
        """Take bytes from the peer (any packet, even a partial one, is traffic).

        Raises:
            RemoteProtocolError: the bytes cannot be the start of a packet.
        """
        self.idle_deadline = now + IDLE_TIMEOUT_SECONDS
        self._decoder.feed(data)

    def next_packet(self) -> Packet | None:
        """The next complete packet, or ``None``.

        Raises:
            RemoteProtocolError: the next packet is malformed.
        """
        return self._decoder.next_packet()

    # ------------------------------------------------------------ out

    def send(self, message: ControlMessage) -> None:
        """Queue a control message."""
        self.send_bytes(encode_packet(ControlPacket(encode_control(message))))

    def send_bytes(self, data: bytes) -> None:
        """Queue an encoded packet; past the outbound bound, close instead."""
        if self.phase is _CLOSED:
            return  # nothing follows the last word
        if self.outbound_bytes + len(data) > MAX_OUTBOUND_BYTES:
            self.close("receiver too slow: more than 16 MiB queued")
            return
        self._outbound.append(data)
        self._queued_bytes += len(data)
        self._wake()

    def emit(self, event: Event) -> None:
        """Report ``event`` to the host (nothing after the close)."""
        if self.phase is not _CLOSED:
            self._events.append(event)

    def next_event(self) -> Event | None:
        """The next event for the host, or ``None``."""
        return self._events.popleft() if self._events else None

    def data_to_send(self) -> bytes:
        """Drain the outbound queue. Call :meth:`confirm_sent` once it is written."""
        if not self._outbound:
            return b""
        data = b"".join(self._outbound)
        self._outbound.clear()
        self._queued_bytes = 0
        self._in_flight_bytes += len(data)
        return data

    def confirm_sent(self, count: int) -> None:
        """The transport wrote ``count`` bytes previously taken from :meth:`data_to_send`."""
        self._in_flight_bytes = max(0, self._in_flight_bytes - count)

    # ------------------------------------------------------------ time

    def deadline(self) -> float:
        """The next heartbeat or the idle deadline, whichever comes first."""
        return min(self._next_ping, self.idle_deadline)

    def heartbeat(self, now: float) -> None:
        """Send a ``ping`` if one is due at ``now``."""
        if now >= self._next_ping:
            self.send(Ping())
            # Skip missed beats rather than sending a burst after a stall.
            while self._next_ping <= now:
                self._next_ping += HEARTBEAT_SECONDS

    # ------------------------------------------------------------ the end

    def close(self, reason: str, *, is_failure: bool = False, flush: bool = False) -> None:
        """End the link: ``CLOSED``, from any state; a second close changes nothing.

        ``reason`` is for logs only, never sent; ``is_failure`` counts toward the
        address's lockout (a failure before login). Events not yet taken are
        dropped for the one ``ConnectionClosed``; without ``flush`` so are the
        queued bytes.
        """
        if self.phase is _CLOSED:
            return
        self.phase = _CLOSED
        self.flushes_on_close = flush
        self._events.clear()
        self._events.append(ConnectionClosed(reason, is_failure))
        if not flush:
            self._outbound.clear()
            self._queued_bytes = 0
        self._wake()
