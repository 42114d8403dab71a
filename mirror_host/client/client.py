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
from mirror_host.control import (
    Authenticate,
    Authenticated,
    Challenge,
    ControlMessage,
    Failure,
    Pair,
    Paired,
    Ping,
    Pong,
    decode_control,
    encode_control,
)
from mirror_host.errors import ClientClosed, MirrorHostError
from mirror_host.streams import STREAM_GONE
from mirror_host.tls.psk import client_context
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
    "PairingRefused",
    "Incoming",
    "MirrorClient",
    "connect_failure",
    "login",
    "open_client",
    "pair_device",
]

Incoming = ControlMessage | VTFramePacket | TextFramePacket


class HandshakeFailed(ClientClosed):
    """TLS did not come up; ``reason`` is OpenSSL's (``TLSV1_ALERT_UNKNOWN_PSK_IDENTITY`` …).

    ``before_tls``: the host closed the connection without sending a single TLS
    byte. Prowl hosts do that to an address they lock out (12 failed handshakes
    or logins within 60 s), so it is not a verdict on the key or code.
    """

    def __init__(self, message: str, reason: str, *, before_tls: bool = False) -> None:
        super().__init__(message)
        self.reason = reason
        self.before_tls = before_tls

    @property
    def not_prowl(self) -> bool:
        """The other end does not speak Prowl's TLS at all (no PSK suite in common, or
        not TLS 1.2, or not TLS): most likely no mirror host listens on that port."""
        reason = self.reason.upper().replace(" ", "_")
        return any(
            name in reason
            for name in ("HANDSHAKE_FAILURE", "WRONG_VERSION_NUMBER", "PROTOCOL_VERSION")
        )

    @property
    def unknown_identity(self) -> bool:
        """The host said it does not know our PSK identity (revoked or never paired)."""
        return "UNKNOWN_PSK_IDENTITY" in self.reason.upper().replace(" ", "_")


class HostIdentityChanged(ClientClosed):
    """The host's challenge names another hostID than the one this device paired with."""


class PairingRefused(ClientClosed):
    """The code opened TLS, but the host closed the connection instead of sending ``paired``.

    ``reason``: the host's ``failure`` before it closed, if it sent one (mirror-host
    does when it cannot save the device: a full disk, a read-only state directory).
    """

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason


class _CountingStream(trio.abc.Stream):
    """A transport that counts the bytes the host sent, to tell a close before TLS."""

    def __init__(self, inner: trio.SocketStream) -> None:
        self.inner = inner
        self.received = 0

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        data = await self.inner.receive_some(max_bytes)
        self.received += len(data)
        return data

    async def aclose(self) -> None:
        await self.inner.aclose()


def connect_failure(exc: OSError) -> str:
    """Why a connection failed, in the system's words ("Connection refused").

    Trio reports a failed connect as one ``OSError`` whose cause groups the
    attempts; the first attempt's own reason is the useful part.
    """
    if exc.strerror:
        return exc.strerror
    cause = exc.__cause__
    if isinstance(cause, BaseExceptionGroup):
        for attempt in cause.exceptions:
            if isinstance(attempt, OSError) and attempt.strerror:
                return attempt.strerror.rsplit("): ", 1)[-1]
    return str(exc)


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

    def __init__(self, stream: trio.SSLStream[trio.abc.Stream], *, answer_pings: bool) -> None:
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
            except STREAM_GONE as exc:
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
                except STREAM_GONE:
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
    local_address: str | None = None,
) -> AsyncIterator[MirrorClient]:
    """Connect with TLS-PSK and yield a client whose pings are answered.

    ``local_address``: the source address to connect from (tests and benchmarks
    use many of 127.0.0.0/8 to stand for many peers).

    Raises:
        ClientClosed: the TLS handshake failed.
        trio.TooSlowError: it did not finish within ``handshake_timeout`` seconds.
    """
    context = context or client_context(identity, key)  # before the socket: it may raise
    tcp = _CountingStream(await trio.open_tcp_stream(host, port, local_address=local_address))
    stream: trio.SSLStream[trio.abc.Stream] = trio.SSLStream(tcp, context, server_hostname=None)
    try:
        with trio.fail_after(handshake_timeout):
            await stream.do_handshake()
    except trio.BrokenResourceError as exc:
        await trio.aclose_forcefully(stream)
        cause = exc.__cause__
        reason = str(getattr(cause, "reason", None) or cause or "closed during the handshake")
        raise HandshakeFailed(
            f"TLS handshake failed: {cause!r}", reason, before_tls=tcp.received == 0
        ) from exc
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
    host: str,
    port: int,
    code: str,
    name: str,
    *,
    expected_host_id: UUID | None = None,
    local_address: str | None = None,
) -> Credential:
    """Pair as Prowl's clients do: identity ``pair``, proof over the challenge.

    ``expected_host_id``, when known (a device re-pairing), must match the
    challenge before anything is sent.

    Raises:
        HostIdentityChanged: the challenge names another host.
        HandshakeFailed: the code did not open TLS (wrong, expired, or refused before TLS).
        PairingRefused: the code opened TLS but the host closed without ``paired``.
        ClientClosed: the host sent an inconsistent credential.
    """
    async with open_client(
        host, port, PAIR_IDENTITY, code.encode(), local_address=local_address
    ) as client:
        try:
            challenge = await client.expect(Challenge)
            assert isinstance(challenge, Challenge)
            if expected_host_id is not None and challenge.host_id != expected_host_id:
                raise HostIdentityChanged("host identity changed")
            proof = pair_proof(code, challenge.host_id, name, challenge.nonce)
            await client.send(Pair(name=name, proof=proof))
            paired = await client.receive()
        except HostIdentityChanged:
            raise
        except ClientClosed as exc:
            raise PairingRefused("the host accepted the code but closed without pairing") from exc
        if isinstance(paired, Failure):
            raise PairingRefused(f"the host refused the pairing: {paired.error}", paired.error)
        if not isinstance(paired, Paired):
            raise ClientClosed(f"the host answered `pair` with {paired!r}"[:200])
        if paired.host_id != challenge.host_id or len(paired.key) != 32:
            raise ClientClosed("the host sent an inconsistent credential")
        return Credential(paired.host_id, paired.device_id, paired.key)


@asynccontextmanager
async def login(
    host: str,
    port: int,
    credential: Credential,
    *,
    answer_pings: bool = True,
    handshake_timeout: float = 10.0,
    local_address: str | None = None,
) -> AsyncIterator[MirrorClient]:
    """Connect and authenticate; yield the logged-in client (see :func:`open_client`).

    Raises:
        HostIdentityChanged: the challenge names another host than the credential's.
        ClientClosed: the host refused the credential.
    """
    async with open_client(
        host,
        port,
        credential.identity,
        credential.key,
        answer_pings=answer_pings,
        handshake_timeout=handshake_timeout,
        local_address=local_address,
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
