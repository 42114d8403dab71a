"""The listener's TLS handshake over a socket pair: the alert of a refused handshake.

Trio does not send the alert OpenSSL queues when it refuses a handshake; the
listener gets it from the outgoing BIO that ``trio.SSLStream`` hands to
``SSLContext.wrap_bio``. These fail if Trio ever stops making its TLS object that
way (then there is no BIO to read, and the peer sees a bare end of file).
"""

from __future__ import annotations

import socket
import ssl
import struct

import pytest
import trio
import trio.testing

from mirror_host.host.handshake import Handshake, tls_handshake
from mirror_host.host.tls import PskTable, build_server_context
from mirror_host.tls.psk import client_base_context, set_client_psk

pytestmark = pytest.mark.timeout(10)


def test_trio_makes_its_tls_object_through_the_contexts_wrap_bio() -> None:
    tls = build_server_context()
    left, _right = trio.testing.memory_stream_pair()
    trio.SSLStream(left, tls.context, server_side=True)
    outgoing = tls.take_outgoing()
    assert isinstance(outgoing, ssl.MemoryBIO)
    assert tls.take_outgoing() is None  # once


def _client(identity: str, key: bytes) -> ssl.SSLContext:
    context = client_base_context()
    set_client_psk(context, lambda _hint: (identity, key))
    return context


async def _handshake_pair(
    identity: str, key: bytes
) -> tuple[Handshake | None, BaseException | None]:
    """A host on one end of a socket pair, a TLS-PSK client on the other: how the
    host's handshake ended, and what the client's raised."""
    tls = build_server_context()
    tls.set_table(PskTable({"KNOWN": b"k" * 32}))
    a, b = trio.socket.socketpair()
    server_side, client_side = trio.SocketStream(a), trio.SocketStream(b)
    client = trio.SSLStream(client_side, _client(identity, key), server_hostname=None)
    ended: Handshake | None = None
    raised: BaseException | None = None

    async def serve() -> None:
        nonlocal ended
        ended = handshake = await tls_handshake(server_side, tls, seconds=5)
        if handshake.failure is not None:
            await handshake.send_alert()
        await trio.aclose_forcefully(server_side)

    async def connect() -> None:
        nonlocal raised
        try:
            await client.do_handshake()
        except trio.BrokenResourceError as exc:
            raised = exc.__cause__
        await trio.aclose_forcefully(client)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve)
        nursery.start_soon(connect)
    return ended, raised


async def test_an_unknown_identity_gets_the_alert_not_a_bare_eof() -> None:
    ended, raised = await _handshake_pair("NOBODY", b"x" * 32)
    assert ended is not None and ended.failure == "unknown or revoked device"
    assert ended.peer_at_fault  # counts toward the address's lock-out
    assert raised is not None and "ALERT" in str(raised).upper()


async def test_a_wrong_key_gets_the_alert_too() -> None:
    ended, raised = await _handshake_pair("KNOWN", b"x" * 32)
    assert ended is not None and ended.failure is not None
    assert ended.failure.startswith("wrong key for a paired device")
    assert ended.peer_at_fault
    assert raised is not None and "ALERT" in str(raised).upper()


async def test_the_right_key_binds_the_identity() -> None:
    ended, raised = await _handshake_pair("KNOWN", b"k" * 32)
    assert ended is not None and ended.failure is None and not ended.timed_out
    assert ended.identity == "KNOWN" and raised is None


async def _handshake_with_raw_peer(
    send: bytes, *, reset: bool = False, stay: bool = False
) -> Handshake:
    """How the host's handshake ends when the peer sends ``send`` and then closes
    (with a TCP reset when ``reset``) without waiting for an answer, or, when
    ``stay``, keeps its end open for the answer."""
    tls = build_server_context()
    a, b = socket.socketpair()
    server_side = trio.SocketStream(trio.socket.from_stdlib_socket(a))
    if send:
        b.sendall(send)
    if reset:
        b.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    if not stay:
        b.close()
    try:
        return await tls_handshake(server_side, tls, seconds=5)
    finally:
        b.close()
        await trio.aclose_forcefully(server_side)


def _client_hello() -> bytes:
    """The first flight of a TLS-PSK client like Prowl's: its ClientHello."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = _client("KNOWN", b"k" * 32).wrap_bio(incoming, outgoing)
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


#: A fatal ``internal_error`` alert in a record of version 3.1, as BouncyCastle
#: (Prowl's Android app) sends it when its read times out before the host answered.
GIVE_UP_ALERT = bytes.fromhex("15030100020250")


#: The start of a TLS 1.2 ClientHello record, cut short.
PARTIAL_HELLO = b"\x16\x03\x01\x00\x50\x01\x00\x00\x4c\x03\x03"


@pytest.mark.parametrize(
    ("send", "reset"),
    [(b"", False), (PARTIAL_HELLO, False), (PARTIAL_HELLO, True)],
    ids=["closed-at-once", "closed-mid-hello", "reset-mid-hello"],
)
async def test_a_peer_that_leaves_mid_handshake_is_not_at_fault(send: bytes, reset: bool) -> None:
    # What a client that gave up in the accept queue of a host short of descriptors
    # looks like once it is accepted: it got nothing wrong, so nothing is counted.
    ended = await _handshake_with_raw_peer(send, reset=reset)
    assert ended.failure is not None and not ended.timed_out
    assert not ended.peer_at_fault


@pytest.mark.parametrize(
    "send",
    [b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"\x00" * 64, b"\x16\x03\x01\x00\x05hello"],
    ids=["http", "zeros", "bad-record"],
)
async def test_garbage_instead_of_tls_is_the_peers_fault(send: bytes) -> None:
    ended = await _handshake_with_raw_peer(send, stay=True)
    assert ended.failure is not None
    assert ended.peer_at_fault


async def test_a_phone_that_gave_up_in_the_accept_queue_is_not_at_fault() -> None:
    # Accepted only after it gave up: its ClientHello, its alert and its end of
    # file are all waiting. OpenSSL refuses the alert's record (version 3.1), but
    # the peer left before the host said a word, offering no key: nothing counted.
    ended = await _handshake_with_raw_peer(_client_hello() + GIVE_UP_ALERT)
    assert ended.failure is not None and not ended.timed_out
    assert not ended.peer_at_fault


async def test_garbage_from_a_peer_that_left_at_once_is_not_counted() -> None:
    ended = await _handshake_with_raw_peer(b"\x00" * 64)
    assert ended.failure is not None
    assert not ended.peer_at_fault


async def test_the_same_alert_from_a_peer_still_there_is_at_fault() -> None:
    ended = await _handshake_with_raw_peer(_client_hello() + GIVE_UP_ALERT, stay=True)
    assert ended.failure is not None
    assert ended.peer_at_fault
