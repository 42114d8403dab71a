"""Heartbeats, the idle close and the login deadline, on virtual time.

A real connection over an in-memory stream (``connection_harness``) and
pytest-trio's ``autojump_clock``: the 8 s idle rule and the 5 s login deadline
are checked exactly, without a test sleeping for real.
"""

from __future__ import annotations

import itertools

import trio
import trio.testing

from mirror_host import control as c
from mirror_host.host.connection import Connection
from mirror_host.limits import AUTH_TIMEOUT_SECONDS, HEARTBEAT_SECONDS, IDLE_TIMEOUT_SECONDS
from mirror_host.session.connection import Session
from tests.fakes.memory_source import MemorySource
from tests.unit.connection_harness import HOST, Peer, connect, hub_with


async def test_a_silent_authenticated_peer_is_closed_after_8_s_of_pings(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with hub_with(MemorySource()) as (_, owner, nursery):
        peer = await connect(owner, nursery, answer_pings=False)
        last_heard = trio.current_time()  # the authenticate message
        with trio.fail_after(30):
            await peer.closed.wait()
        assert trio.current_time() - last_heard == IDLE_TIMEOUT_SECONDS
        pings = [t for t, item in peer.received if isinstance(item, c.Ping)]
        assert len(pings) >= 3
        assert {round(b - a, 6) for a, b in itertools.pairwise(pings)} == {HEARTBEAT_SECONDS}
        assert owner.closed and "no packet" in owner.closed[0].reason


async def test_answering_pings_keeps_a_connection_alive(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with hub_with(MemorySource()) as (_, owner, nursery):
        peer = await connect(owner, nursery)
        await trio.sleep(60)
        await peer.send(c.ListPanes())
        assert isinstance(await peer.next(c.Panes), c.Panes)
        assert peer.pings >= 29 and owner.closed == []


async def test_a_peer_that_never_logs_in_is_closed_after_5_s(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with hub_with(MemorySource()) as (_, owner, nursery):
        client_end, host_end = trio.testing.memory_stream_pair()
        session = Session(host_id=HOST, identity="pair", nonce=b"n" * 32, now=trio.current_time())
        connection = Connection(
            number=1, peer="m", peer_host="m", stream=host_end, session=session, owner=owner
        )
        opened = trio.current_time()
        nursery.start_soon(connection.run)
        peer = Peer(client_end)
        nursery.start_soon(peer.run)
        await peer.next(c.Challenge)
        with trio.fail_after(30):
            await peer.closed.wait()
        assert trio.current_time() - opened == AUTH_TIMEOUT_SECONDS
        assert owner.closed and "not authenticated" in owner.closed[0].reason
