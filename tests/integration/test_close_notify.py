"""The host ends TLS with ``close_notify`` on every close path (issue 16).

Prowl's Android app (BouncyCastle) reports a connection that ends without
``close_notify`` as "No close_notify", in place of the host's own reason. Over
real TLS on loopback, a client reads until the host closes and records which
of the two it saw (trio returns end-of-stream only after ``close_notify``; a
bare TCP close under TLS is an error). ``test_bouncycastle.py`` checks the
same with BouncyCastle itself.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from mirror_host import control as c
from mirror_host.auth.proofs import device_proof
from mirror_host.client.client import Credential, MirrorClient, login, open_client
from mirror_host.host import handshake as handshake_module
from mirror_host.host.server import Host
from mirror_host.tls.psk import client_context
from mirror_host.wire import VTFramePacket
from tests.fakes.memory_source import MemorySource
from tests.integration.conftest import paired, port_of, running_host
from tests.integration.mirror_helpers import list_panes, next_frame, subscribe

pytestmark = pytest.mark.timeout(60)


async def closed_by_host(client: MirrorClient, *, timeout: float = 15) -> list[object]:
    """Everything until the host closes; the close must carry ``close_notify``."""
    seen = await client.expect_closed(timeout=timeout)
    assert client.close_notify is True, "TCP closed without close_notify"
    return list(seen)


async def test_a_failed_login(state_dir: Path) -> None:
    async with running_host(state_dir) as host:
        credential = await paired(host)
        async with open_client(
            "127.0.0.1", port_of(host), credential.identity, credential.key
        ) as client:
            await client.expect(c.Challenge)
            await client.send(c.Authenticate(device_id=credential.device_id, proof=b"\0" * 32))
            assert await closed_by_host(client) == []


async def test_a_protocol_violation(state_dir: Path) -> None:
    async with running_host(state_dir) as host:
        async with login("127.0.0.1", port_of(host), await paired(host)) as client:
            await client.send(c.History(subscription_id=uuid.uuid4()))  # no lease
            assert await closed_by_host(client) == []


async def test_a_lease_taken_over(state_dir: Path) -> None:
    async with running_host(state_dir) as host:
        port = port_of(host)
        async with login("127.0.0.1", port, await paired(host, "Phone")) as phone:
            pane = (await list_panes(phone)).panes[0].id
            sub = await subscribe(phone, pane)
            await next_frame(phone, sub)
            async with login("127.0.0.1", port, await paired(host, "Mac")) as mac:
                await subscribe(mac, pane, intent=c.Intent.TAKEOVER)
                seen = await closed_by_host(phone)
                assert c.Ended(reason=c.EndReason.TAKEN_OVER) in seen


@pytest.mark.slow
async def test_the_idle_timeout(state_dir: Path) -> None:
    async with running_host(state_dir) as host:
        credential = await paired(host)
        async with login("127.0.0.1", port_of(host), credential, answer_pings=False) as client:
            await closed_by_host(client, timeout=20)  # 8 s without a packet from us


async def test_a_revoked_device(state_dir: Path) -> None:
    async with running_host(state_dir) as host:
        credential = await paired(host)
        async with login("127.0.0.1", port_of(host), credential) as client:
            await list_panes(client)
            await host.book.revoke(credential.device_id)
            await closed_by_host(client)


async def test_the_host_stopping(state_dir: Path) -> None:
    async with running_host(state_dir) as host:
        port = port_of(host)
        async with (
            login("127.0.0.1", port, await paired(host, "Phone")) as phone,
            login("127.0.0.1", port, await paired(host, "Idle")) as idle,
        ):
            sub = await subscribe(phone, (await list_panes(phone)).panes[0].id)
            await next_frame(phone, sub)
            await list_panes(idle)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(host.shutdown)
                seen = await closed_by_host(phone)
                assert c.Ended(reason=c.EndReason.HOST_STOPPED) in seen
                await closed_by_host(idle)


async def test_the_host_stopping_ends_every_logged_in_session(state_dir: Path) -> None:
    """Prowl's host sends ``ended hostStopped`` to every established peer, and Android
    does not reconnect after ``ended``: a phone on its pane list (logged in, no lease)
    and one whose subscribe waits for its first capture get it too, then
    ``close_notify``; a connection that has not logged in just closes."""
    source = MemorySource()
    pane = source.add_pane()
    source.delays["first_capture"] = 60.0
    async with running_host(state_dir, source) as host:
        port, credential = port_of(host), await paired(host)
        key, identity = credential.key, credential.identity
        async with (
            login("127.0.0.1", port, credential) as listing,
            login("127.0.0.1", port, credential) as waiting,
            open_client("127.0.0.1", port, identity, key) as stranger,
        ):
            await list_panes(listing)
            await waiting.send(
                c.Subscribe(
                    pane_id=pane, representation=c.Representation.VT, intent=c.Intent.IF_FREE
                )
            )
            await stranger.expect(c.Challenge)
            with trio.fail_after(10):
                while not source.calls:  # the subscribe's sampler is watching the pane
                    await trio.sleep(0.01)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(host.shutdown)
                stopped = [c.Ended(reason=c.EndReason.HOST_STOPPED)]
                assert await closed_by_host(listing) == stopped
                assert await closed_by_host(waiting) == stopped
                assert await closed_by_host(stranger) == []


async def test_the_host_cancelled_without_a_graceful_shutdown(state_dir: Path) -> None:
    async with trio.open_nursery() as outer:
        cancel = trio.Event()

        async def serve(task_status: trio.TaskStatus[tuple[int, object]]) -> None:
            async with running_host(state_dir) as host:
                task_status.started((port_of(host), host))
                await cancel.wait()  # leaving cancels the host's nursery

        port, host = await outer.start(serve)
        credential = await paired(host)  # type: ignore[arg-type]
        async with login("127.0.0.1", port, credential) as client:
            await list_panes(client)
            cancel.set()
            await closed_by_host(client)


async def test_a_handshake_that_names_no_identity(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A handshake that finished without the PSK callback naming an identity (the
    host offers only PSK ciphers, so none should) is closed at once, gracefully."""
    async with running_host(state_dir) as host:
        credential = await paired(host)
        monkeypatch.setattr(handshake_module, "negotiated_identity", lambda: None)
        key, identity = credential.key, credential.identity
        async with open_client("127.0.0.1", port_of(host), identity, key) as client:
            assert await closed_by_host(client) == []
        assert host.connections == set()


async def test_a_connection_over_the_limit(state_dir: Path) -> None:
    async with running_host(state_dir) as host:
        credential = await paired(host)
        async with login("127.0.0.1", port_of(host), credential) as first:
            await list_panes(first)
            host.max_connections = 1
            key, identity = credential.key, credential.identity
            async with open_client("127.0.0.1", port_of(host), identity, key) as second:
                assert await closed_by_host(second) == []


class Gate(trio.abc.Stream):
    """A client's TCP stream whose reads wait while the gate is shut: a phone that
    stops reading (its app busy, its radio asleep) while the host writes."""

    def __init__(self, inner: trio.SocketStream) -> None:
        self.inner = inner
        self._open = trio.Event()
        self._open.set()

    def shut(self) -> None:
        self._open = trio.Event()

    def reopen(self) -> None:
        self._open.set()

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        await self._open.wait()
        return await self.inner.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self.inner.aclose()


@asynccontextmanager
async def slow_reader(
    host: Host, credential: Credential
) -> AsyncIterator[tuple[MirrorClient, Gate]]:
    """A logged-in client over a 4 KiB receive window whose reading the test holds back."""
    sock = trio.socket.socket()
    # Before connecting, so the window the host sees is small: a few KiB fill it.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    await sock.connect(("127.0.0.1", port_of(host)))
    gate = Gate(trio.SocketStream(sock))
    context = client_context(credential.identity, credential.key)
    stream = trio.SSLStream(gate, context, server_hostname=None)
    try:
        await stream.do_handshake()
        client = MirrorClient(stream, answer_pings=True)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client._read)
            challenge = await client.expect(c.Challenge)
            assert isinstance(challenge, c.Challenge)
            proof = device_proof(
                credential.key, challenge.host_id, credential.device_id, challenge.nonce
            )
            await client.send(c.Authenticate(device_id=credential.device_id, proof=proof))
            await client.expect(c.Authenticated)
            try:
                yield client, gate
            finally:
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:  # the test body's own failure, unwrapped
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
    finally:
        await trio.aclose_forcefully(stream)


#: A 200x60 screen whose every cell has its own colour: a VT frame of about 190 KB.
COLOURFUL = b"".join(b"\x1b[38;5;%dm%c" % (i % 256, 65 + i % 26) for i in range(200 * 60))


@pytest.mark.parametrize("close", ["revoke", "protocol violation"])
async def test_a_silent_close_lets_the_write_under_way_finish_then_close_notify(
    state_dir: Path, close: str
) -> None:
    """The host closes silently while a big frame is half written to a client that
    reads slowly: the frame is finished, then ``close_notify`` (a cut write would
    leave the TLS stream broken, and TCP would close without it)."""
    source = MemorySource()
    pane = source.add_pane(columns=200, rows=60)
    source.output(pane, COLOURFUL)
    subscribe_to_it = c.Subscribe(
        pane_id=pane, representation=c.Representation.VT, intent=c.Intent.IF_FREE
    )
    async with running_host(state_dir, source) as host:
        credential = await paired(host)
        async with slow_reader(host, credential) as (client, gate):
            await list_panes(client)
            gate.shut()
            await client.send(subscribe_to_it)  # `subscribed` and frame 1, about 190 KB
            (connection,) = [
                one for one in host.connections if one.session.device_id == credential.device_id
            ]
            with trio.fail_after(10):
                while connection.session.outbound_bytes == 0:
                    await trio.sleep(0.01)
            await trio.sleep(0.1)
            # Nobody reads: the writer sits in the middle of the frame.
            assert connection.session.outbound_bytes > 100_000
            if close == "revoke":
                await host.book.revoke(credential.device_id)
            else:
                await client.send(subscribe_to_it)  # a second subscribe on one connection
                with trio.fail_after(10):
                    while not connection.session.is_closed:
                        await trio.sleep(0.01)
            assert connection.session.is_closed and not connection.session.flushes_on_close
            gate.reopen()
            seen = await closed_by_host(client)
            assert [type(item) for item in seen] == [c.Subscribed, VTFramePacket]
