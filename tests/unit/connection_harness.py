"""A real connection and hub over an in-memory stream, for tests on virtual time.

:func:`hub_with` runs a :class:`~mirror_host.host.hub.Hub` over any source;
:func:`connect` logs a :class:`Peer` in through a real
:class:`~mirror_host.host.connection.Connection` and
:class:`~mirror_host.session.connection.Session` (TLS and the device store are
left out: any proof is accepted). Used with pytest-trio's ``autojump_clock``,
seconds of protocol time cost nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any
from uuid import UUID

import trio
import trio.testing

from mirror_host import control as c
from mirror_host.host.connection import Connection
from mirror_host.host.hub import Hub
from mirror_host.panes.source import PaneSource
from mirror_host.session.connection import Session
from mirror_host.session.events import AuthenticateRequested, ConnectionClosed, Event
from mirror_host.wire import (
    ControlPacket,
    PacketDecoder,
    TextFramePacket,
    VTFramePacket,
    encode_packet,
)

__all__ = [
    "DEVICE",
    "HOST",
    "Owner",
    "Peer",
    "connect",
    "hub_with",
    "subscribe",
    "subscribed_peer",
]

HOST = UUID("00000000-0000-0000-0000-0000000000AA")
DEVICE = UUID("00000000-0000-0000-0000-0000000000D1")

Frame = VTFramePacket | TextFramePacket


class Owner:
    """The host's part, minus TLS and the device store: any proof is accepted."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.closed: list[ConnectionClosed] = []
        #: The host's end of every connection that logged in, in order.
        self.connections: list[Connection] = []

    async def handle_event(self, connection: Connection, event: Event) -> None:
        if isinstance(event, AuthenticateRequested):
            self.connections.append(connection)
            connection.session.accept_authentication(event.device_id, trio.current_time())
        else:
            self.hub.handle_event(connection, event)

    def connection_closed(self, connection: Connection, event: ConnectionClosed) -> None:
        self.closed.append(event)
        self.hub.release(connection)


class Peer:
    """A client on the other end of an in-memory stream; answers pings by itself."""

    def __init__(self, stream: trio.abc.Stream, *, answer_pings: bool = True) -> None:
        self.stream = stream
        self.answer_pings = answer_pings
        self.received: list[tuple[float, Any]] = []
        self.pings = 0
        self.closed = trio.Event()
        self._arrived = trio.Event()
        self._read = 0
        self._sending = trio.Lock()

    async def send(self, message: c.ControlMessage) -> None:
        async with self._sending:  # the reader answers pings from its own task
            await self.stream.send_all(encode_packet(ControlPacket(c.encode_control(message))))

    async def run(self) -> None:
        decoder = PacketDecoder()
        try:
            while data := await self.stream.receive_some(65536):
                decoder.feed(data)
                while (packet := decoder.next_packet()) is not None:
                    item = (
                        c.decode_control(packet.body)
                        if isinstance(packet, ControlPacket)
                        else packet
                    )
                    if isinstance(item, c.Ping):
                        self.pings += 1
                        if self.answer_pings:
                            await self.send(c.Pong())
                    self.received.append((trio.current_time(), item))
                    self._arrived.set()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        self.closed.set()
        self._arrived.set()

    async def next(self, kind: type | tuple[type, ...], *, within: float = 30.0) -> Any:
        """The next message of ``kind`` (skipping pings), received within ``within``."""
        with trio.fail_after(within):
            while True:
                while self._read < len(self.received):
                    _, item = self.received[self._read]
                    self._read += 1
                    if isinstance(item, kind):
                        return item
                    if not isinstance(item, c.Ping | c.Pong | c.ScrollState | c.Viewport):
                        raise AssertionError(f"expected {kind}, got {item!r}")
                if self.closed.is_set():
                    raise AssertionError(f"closed while waiting for {kind}")
                self._arrived = trio.Event()
                await self._arrived.wait()

    async def frame_with(self, sub: UUID, text: str, *, within: float = 30.0) -> Frame:
        """Acknowledge frames until one shows ``text``."""
        with trio.fail_after(within):
            while True:
                frame = await self.next((VTFramePacket, TextFramePacket))
                await self.send(c.Acknowledge(sequence=frame.sequence, subscription_id=sub))
                shown = frame.data.decode() if isinstance(frame, VTFramePacket) else frame.text
                if text in shown:
                    return frame


@asynccontextmanager
async def hub_with(
    source: PaneSource, *, wall_clock: Callable[[], float] = lambda: 1_800_000_000.0
) -> AsyncIterator[tuple[Hub, Owner, trio.Nursery]]:
    hub = Hub(source, wall_clock=wall_clock)
    owner = Owner(hub)
    async with trio.open_nursery() as nursery:
        await nursery.start(hub.run)
        yield hub, owner, nursery
        nursery.cancel_scope.cancel()


async def connect(owner: Owner, nursery: trio.Nursery, *, answer_pings: bool = True) -> Peer:
    client_end, host_end = trio.testing.memory_stream_pair()
    session = Session(
        host_id=HOST, identity=str(DEVICE).upper(), nonce=b"n" * 32, now=trio.current_time()
    )
    connection = Connection(
        number=1, peer="memory", peer_host="memory", stream=host_end, session=session, owner=owner
    )
    nursery.start_soon(connection.run)
    peer = Peer(client_end, answer_pings=answer_pings)
    nursery.start_soon(peer.run)
    await peer.next(c.Challenge)
    await peer.send(c.Authenticate(device_id=DEVICE, proof=b"p" * 32))
    await peer.next(c.Authenticated)
    return peer


async def subscribe(
    peer: Peer,
    pane: UUID,
    representation: c.Representation = c.Representation.VT,
    **opt_ins: bool,
) -> UUID:
    await peer.send(
        c.Subscribe(pane_id=pane, representation=representation, intent=c.Intent.IF_FREE, **opt_ins)
    )
    subscribed = await peer.next(c.Subscribed)
    assert subscribed.pane_id == pane
    return subscribed.subscription_id  # type: ignore[no-any-return]


@asynccontextmanager
async def subscribed_peer(
    source: PaneSource, pane: UUID, **opt_ins: bool
) -> AsyncIterator[tuple[Owner, Peer, UUID]]:
    """A hub over ``source`` and a peer holding ``pane``, its first frame acknowledged."""
    async with hub_with(source) as (_, owner, nursery):
        peer = await connect(owner, nursery)
        sub = await subscribe(peer, pane, **opt_ins)
        await peer.frame_with(sub, "")
        yield owner, peer, sub
