"""A Prowl-compatible mirror client on Trio, built on the pure codecs. I/O.

It pairs, logs in, lists, subscribes and acknowledges the way Prowl's clients
do, and answers the host's pings in the background (as every Prowl client
must, or the host closes it after 8 s). The tests, the benchmarks and
``tools/probe_client.py`` use it; it is also the shortest description of what a
client has to do.
"""

from __future__ import annotations

import math
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from uuid import UUID

import trio

from mirror_host.auth.pairing import PAIR_IDENTITY
from mirror_host.auth.proofs import device_proof, pair_proof
from mirror_host.client.tls import client_context
from mirror_host.control import (
    Authenticate,
    Authenticated,
    Challenge,
    ControlMessage,
    Pair,
    Paired,
    Ping,
    Pong,
    decode_control,
    encode_control,
)
from mirror_host.errors import ClientClosed, MirrorHostError
from mirror_host.wire import (
    ControlPacket,
    PacketDecoder,
    TextFramePacket,
    VTFramePacket,
    encode_packet,
)

__all__ = [
    "ClientClosed",
    "Credential",
    "HandshakeFailed",
    "HostIdentityChanged",
    "Incoming",
    "MirrorClient",
    "login",
    "open_client",
    "pair_device",
]

Incoming = ControlMessage | VTFramePacket | TextFramePacket


class HandshakeFailed(ClientClosed):
    """TLS did not come up; ``reason`` is OpenSSL's (``TLSV1_ALERT_UNKNOWN_PSK_IDENTITY`` …)."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason

    @property
    def unknown_identity(self) -> bool:
        """The host said it does not know our PSK identity (revoked or never paired)."""
        return "UNKNOWN_PSK_IDENTITY" in self.reason.upper().replace(" ", "_")


class HostIdentityChanged(ClientClosed):
    """The host's challenge names another hostID than the one this device paired with."""


@dataclass(frozen=True, slots=True)
class Credential:
    """What a client keeps after pairing."""

    host_id: UUID
    device_id: UUID
    key: bytes = field(repr=False)

    @property
    def identity(self) -> str:
        """The TLS-PSK identity (upper-case UUID)."""
        return str(self.device_id).upper()


class MirrorClient:
    """One connection. Use :func:`open_client` to create it."""

    def __init__(self, stream: trio.SSLStream[trio.SocketStream], *, answer_pings: bool) -> None:
        self.stream = stream
        self.answer_pings = answer_pings
        self.challenge: Challenge | None = None
        self.pings_received = 0
        #: ``trio.current_time()`` of every ``ping`` the host sent.
        self.ping_times: list[float] = []
        #: When the last packet of any kind arrived (``None`` before the first).
        self.last_received: float | None = None
        #: The kind of the first packet that is not a heartbeat (``"challenge"``,
        #: ``"frame"`` …): ``ping``/``pong`` never reach the application layer.
        self.first_kind: str | None = None
        #: Why the reader stopped on an undecodable packet, if it did.
        self.decode_error: str | None = None
        #: How the host ended TLS, once it did: True after its ``close_notify``,
        #: False when TCP closed without one (what Android reports as the reason).
        self.close_notify: bool | None = None
        self._send_lock = trio.Lock()
        self._inbox_send, self._inbox = trio.open_memory_channel[Incoming | None](math.inf)
        self._closed = False

    async def send(self, message: ControlMessage) -> None:
        """Send one control message."""
        await self.send_raw(encode_packet(ControlPacket(encode_control(message))))

    async def send_raw(self, data: bytes) -> None:
        """Send bytes as they are (for tests of malformed input)."""
        async with self._send_lock:
            try:
                await self.stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise ClientClosed("connection closed while sending") from exc

    async def receive(self, *, timeout: float = 10.0) -> Incoming:
        """The next message or frame (pings are answered and skipped).

        Raises:
            ClientClosed: the host closed the connection.
            trio.TooSlowError: nothing arrived within ``timeout`` seconds.
        """
        with trio.fail_after(timeout):
            item = await self._inbox.receive()
        if item is None:
            self._closed = True
            raise ClientClosed("the host closed the connection")
        return item

    async def expect(self, kind: type, *, timeout: float = 10.0) -> Incoming:
        """Receive, and fail unless the item is a ``kind``."""
        item = await self.receive(timeout=timeout)
        if not isinstance(item, kind):
            raise AssertionError(f"expected {kind.__name__}, got {item!r}"[:500])
        return item

    async def expect_closed(self, *, timeout: float = 10.0) -> list[Incoming]:
        """Read until the host closes; return what arrived before."""
        seen: list[Incoming] = []
        with trio.fail_after(timeout):
            while True:
                try:
                    seen.append(await self.receive(timeout=timeout))
                except ClientClosed:
                    return seen

    async def aclose(self) -> None:
        """Close the connection."""
        await trio.aclose_forcefully(self.stream)

    async def _read(self) -> None:
        decoder = PacketDecoder()
        #: False once a pong could not be sent: the host is closing, but what it
        #: sent before (an ``ended`` …) is still read and delivered.
        can_answer = True
        try:
            while True:
                try:
                    data = await self.stream.receive_some(65536)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    self.close_notify = False  # TCP ended under TLS (or we closed)
                    return
                if not data:
                    self.close_notify = True  # trio returns b"" only after close_notify
                    return
                decoder.feed(data)
                while (packet := decoder.next_packet()) is not None:
                    self.last_received = trio.current_time()
                    if isinstance(packet, ControlPacket):
                        message = decode_control(packet.body)
                        if self.first_kind is None and not isinstance(message, Ping | Pong):
                            self.first_kind = message.CASE
                        if isinstance(message, Ping):
                            self.pings_received += 1
                            self.ping_times.append(self.last_received)
                            if self.answer_pings and can_answer:
                                try:
                                    await self.send(Pong())
                                except ClientClosed:
                                    can_answer = False
                            continue
                        if isinstance(message, Challenge) and self.challenge is None:
                            self.challenge = message
                        await self._inbox_send.send(message)
                    else:
                        if self.first_kind is None:
                            self.first_kind = (
                                "frame" if isinstance(packet, VTFramePacket) else "textFrame"
                            )
                        await self._inbox_send.send(packet)
        except MirrorHostError as exc:
            self.decode_error = str(exc)
            return
        finally:
            self._inbox_send.send_nowait(None)


@asynccontextmanager
async def open_client(
    host: str,
    port: int,
    identity: str,
    key: bytes,
    *,
    answer_pings: bool = True,
    context: ssl.SSLContext | None = None,
    handshake_timeout: float = 10.0,
) -> AsyncIterator[MirrorClient]:
    """Connect with TLS-PSK and yield a client whose pings are answered.

    Raises:
        ClientClosed: the TLS handshake failed.
    """
    context = context or client_context(identity, key)  # before the socket: it may raise
    tcp = await trio.open_tcp_stream(host, port)
    stream = trio.SSLStream(tcp, context, server_hostname=None)
    try:
        with trio.fail_after(handshake_timeout):
            await stream.do_handshake()
    except trio.BrokenResourceError as exc:
        await trio.aclose_forcefully(stream)
        cause = exc.__cause__
        reason = str(getattr(cause, "reason", None) or cause or "closed during the handshake")
        raise HandshakeFailed(f"TLS handshake failed: {cause!r}", reason) from exc
    except BaseException:
        # A timeout or a cancellation mid-handshake must not leave the socket
        # for the garbage collector to find.
        await trio.aclose_forcefully(stream)
        raise
    client = MirrorClient(stream, answer_pings=answer_pings)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client._read)
            try:
                yield client
            finally:
                # No await here: a checkpoint inside the cancelled nursery would
                # raise Cancelled and replace the exception the body raised.
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        # The reader task never raises, so a group holds only the body's error:
        # hand it back unwrapped, as a plain context manager would.
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
    finally:
        await trio.aclose_forcefully(stream)


async def pair_device(
    host: str, port: int, code: str, name: str, *, expected_host_id: UUID | None = None
) -> Credential:
    """Pair as Prowl's clients do: identity ``pair``, proof over the challenge.

    ``expected_host_id``, when known (a device re-pairing), must match the
    challenge before anything is sent.

    Raises:
        HostIdentityChanged: the challenge names another host.
        ClientClosed: the host refused (or the code was wrong).
    """
    async with open_client(host, port, PAIR_IDENTITY, code.encode()) as client:
        challenge = await client.expect(Challenge)
        assert isinstance(challenge, Challenge)
        if expected_host_id is not None and challenge.host_id != expected_host_id:
            raise HostIdentityChanged("host identity changed")
        proof = pair_proof(code, challenge.host_id, name, challenge.nonce)
        await client.send(Pair(name=name, proof=proof))
        paired = await client.expect(Paired)
        assert isinstance(paired, Paired)
        if paired.host_id != challenge.host_id or len(paired.key) != 32:
            raise ClientClosed("the host sent an inconsistent credential")
        return Credential(paired.host_id, paired.device_id, paired.key)


@asynccontextmanager
async def login(
    host: str, port: int, credential: Credential, *, answer_pings: bool = True
) -> AsyncIterator[MirrorClient]:
    """Connect and authenticate; yield the logged-in client.

    Raises:
        HostIdentityChanged: the challenge names another host than the credential's.
        ClientClosed: the host refused the credential.
    """
    async with open_client(
        host, port, credential.identity, credential.key, answer_pings=answer_pings
    ) as client:
        challenge = await client.expect(Challenge)
        assert isinstance(challenge, Challenge)
        if challenge.host_id != credential.host_id:
            raise HostIdentityChanged("host identity changed")
        proof = device_proof(
            credential.key, challenge.host_id, credential.device_id, challenge.nonce
        )
        await client.send(Authenticate(device_id=credential.device_id, proof=proof))
        done = await client.expect(Authenticated)
        assert isinstance(done, Authenticated)
        if done.host_id != credential.host_id:
            raise HostIdentityChanged("host identity changed")
        yield client
