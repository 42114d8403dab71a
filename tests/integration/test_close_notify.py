"""The host ends TLS with ``close_notify`` on every close path (issue 16).

Prowl's Android app (BouncyCastle) reports a connection that ends without
``close_notify`` as "No close_notify", in place of the host's own reason. Over
real TLS on loopback, a client reads until the host closes and records which
of the two it saw (trio returns end-of-stream only after ``close_notify``; a
bare TCP close under TLS is an error). ``test_bouncycastle.py`` checks the
same with BouncyCastle itself.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import trio

from mirror_host import control as c
from mirror_host.client.client import MirrorClient, login, open_client
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


async def test_a_connection_over_the_limit(state_dir: Path) -> None:
    async with running_host(state_dir) as host:
        credential = await paired(host)
        async with login("127.0.0.1", port_of(host), credential) as first:
            await list_panes(first)
            host.max_connections = 1
            key, identity = credential.key, credential.identity
            async with open_client("127.0.0.1", port_of(host), identity, key) as second:
                assert await closed_by_host(second) == []
