"""The host's tables that peers can grow, over real TLS: bounded while connections
come, empty once they have gone (issue 29).

The pure tables (the lock-out, pairing windows, history requests and reads, the
packet decoder, receipts) are filled past their bounds in
``tests/unit/test_bounded_tables.py``.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import trio

from mirror_host import control as c
from mirror_host.client.client import ClientClosed, Credential, login, open_client
from mirror_host.commands.local import LocalCommands
from mirror_host.commands.service import CommandService
from mirror_host.errors import PaneSourceError
from mirror_host.host.server import MAX_CONNECTIONS, MAX_PENDING_HANDSHAKES, Host
from mirror_host.panes.local import MAX_PANES, LocalSource
from tests.integration.conftest import paired, port_of, running_host
from tests.integration.mirror_helpers import list_panes, next_frame, subscribe

pytestmark = pytest.mark.timeout(120)


def per_connection_tables(host: Host, commands: CommandService) -> dict[str, int]:
    """Every table of the host keyed by a connection, a session or a request in flight."""
    hub = host.hub
    return {
        "connections": len(host.connections),
        "pending handshakes": len(host._pending),
        "leases by pane": len(hub._holders),
        "leases by connection": len(hub._by_connection),
        "request lanes": len(hub.requests._lanes),
        "history reads under way": len(hub.history._under_way),
        "commands by session": len(commands._targeted),
        "commands finishing": len(commands._finished),
        "command tasks": len(commands._all),
    }


async def busy_phone(host: Host, credential: Credential, address: str) -> None:
    """A phone that does a little of everything, then leaves (or is taken over)."""
    port = port_of(host)
    try:
        async with login("127.0.0.1", port, credential, local_address=address) as phone:
            panes = await list_panes(phone)
            pane = panes.panes[0].id
            sub = await subscribe(phone, pane, c.Representation.TEXT, c.Intent.TAKEOVER)
            await phone.send(c.History(subscription_id=sub))
            scroll = c.Scroll(
                request_id=uuid.uuid4(), direction=c.ScrollDirection.DOWN, subscription_id=sub
            )
            await phone.send(scroll)
            request = c.CommandRequest(
                request_id=uuid.uuid4(),
                request=c.CommandEnvelope(output="json", command=c.ListCommand()),
            )
            await phone.send(c.Command(subscription_id=sub, command_request=request))
            with trio.move_on_after(2):
                await next_frame(phone, sub)
    except ClientClosed:
        pass  # taken over by the next phone: its lease ended


async def test_per_connection_tables_stay_bounded_and_empty_after(state_dir: Path) -> None:
    source = LocalSource(["seq 1 500; exec cat"], columns=80, rows=24)
    commands = CommandService(LocalCommands(source))
    async with running_host(state_dir, source, commands=commands) as host:
        credential = await paired(host)
        port = port_of(host)
        # Many phones from many addresses, several at once (takeovers among them).
        for round_ in range(6):
            async with trio.open_nursery() as nursery:
                for number in range(8):
                    nursery.start_soon(
                        busy_phone, host, credential, f"127.0.1.{round_ * 8 + number + 1}"
                    )
            assert len(host.connections) <= MAX_CONNECTIONS
        # More connections than the host serves at once: the extra ones are refused.
        async with trio.open_nursery() as nursery:
            held = trio.Event()
            logged_in: list[bool] = []

            async def hold(number: int) -> None:
                try:
                    async with login("127.0.0.1", port, credential,
                                     local_address=f"127.0.2.{number + 1}"):  # fmt: skip
                        logged_in.append(True)
                        await held.wait()
                except ClientClosed:
                    logged_in.append(False)

            for number in range(MAX_CONNECTIONS + 4):
                nursery.start_soon(hold, number)
            with trio.fail_after(20):
                while len(logged_in) < MAX_CONNECTIONS + 4:
                    await trio.sleep(0.05)
            assert logged_in.count(True) == MAX_CONNECTIONS
            assert len(host.connections) == MAX_CONNECTIONS
            held.set()
        # Hostile peers from 400 addresses: the lock-out keeps 256 of them.
        for number in range(400):
            with pytest.raises(ClientClosed):
                async with open_client(
                    "127.0.0.1", port, "NOBODY", b"x" * 32,
                    local_address=f"127.3.{number // 250}.{number % 250 + 1}",
                ):  # fmt: skip
                    pass
            assert len(host._pending) <= MAX_PENDING_HANDSHAKES
        assert len(host.failures) == 256
        with trio.fail_after(10):  # closing connections finish their last writes
            while any(per_connection_tables(host, commands).values()):
                await trio.sleep(0.05)
        assert per_connection_tables(host, commands) == dict.fromkeys(
            per_connection_tables(host, commands), 0
        )


async def test_local_panes_stop_at_their_bound(state_dir: Path) -> None:
    source = LocalSource(["exec sleep 600"], columns=80, rows=24)
    async with running_host(state_dir, source):
        for _ in range(MAX_PANES - 1):  # the source started with one
            source.spawn(["sleep", "600"], label="sleep")
        assert len(source.live_panes()) == MAX_PANES
        for _ in range(10):
            with pytest.raises(PaneSourceError, match=f"{MAX_PANES} panes are open already"):
                source.spawn(["sleep", "600"], label="sleep")
        assert len(source.live_panes()) == MAX_PANES
