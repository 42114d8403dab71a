"""The listener's TLS handshake over a socket pair: the alert of a refused handshake.

Trio does not send the alert OpenSSL queues when it refuses a handshake; the
listener gets it from the outgoing BIO that ``trio.SSLStream`` hands to
``SSLContext.wrap_bio``. These fail if Trio ever stops making its TLS object that
way (then there is no BIO to read, and the peer sees a bare end of file).
"""

from __future__ import annotations

import ssl

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
    assert raised is not None and "ALERT" in str(raised).upper()


async def test_a_wrong_key_gets_the_alert_too() -> None:
    ended, raised = await _handshake_pair("KNOWN", b"x" * 32)
    assert ended is not None and ended.failure is not None
    assert ended.failure.startswith("wrong key for a paired device")
    assert raised is not None and "ALERT" in str(raised).upper()


async def test_the_right_key_binds_the_identity() -> None:
    ended, raised = await _handshake_pair("KNOWN", b"k" * 32)
    assert ended is not None and ended.failure is None and not ended.timed_out
    assert ended.identity == "KNOWN" and raised is None
