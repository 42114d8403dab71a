"""A pairing whose device is being saved, met by ``revoke --all`` or a stop, over real TLS.

The host runs on 127.0.0.1 over a real store whose saves the test holds
(:class:`HeldStore`), so the other change arrives exactly while the pairing (or
the revoke) is on its way to disk. Whatever the order: the devices in memory are
the devices on disk, no device exists that no phone got a key for, and no
connection is logged as failed.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
import trio.testing

from mirror_host.client.client import Credential, PairingRefused, login, pair_device
from mirror_host.config import Endpoint
from mirror_host.control import Ping, Pong
from mirror_host.host.hub import Hub
from mirror_host.host.server import Host
from mirror_host.host.store import DeviceStore
from mirror_host.session.states import Phase
from tests.fakes.held_store import HeldStore
from tests.fakes.memory_source import MemorySource
from tests.integration.conftest import paired, port_of

pytestmark = pytest.mark.timeout(60)


@asynccontextmanager
async def held_host(state_dir: Path) -> AsyncIterator[tuple[Host, HeldStore]]:
    """A host over a store whose saves the test can hold."""
    store = HeldStore(state_dir)
    host = Host(
        listen=Endpoint("127.0.0.1", 0),
        advertise_address="192.0.2.10",
        store=store,
        registry=store.load_or_create(),
        hub=Hub(MemorySource()),
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(host.serve)
        yield host, store
        nursery.cancel_scope.cancel()


def assert_nothing_lost_or_orphaned(host: Host, state_dir: Path) -> None:
    assert DeviceStore(state_dir).load() == host.book.registry


def assert_no_connection_failed(log: pytest.LogCaptureFixture) -> None:
    records = [r for r in log.records if r.name.startswith("mirror_host")]
    assert [r.getMessage() for r in records if "fail" in r.getMessage()] == []
    assert [r.getMessage() for r in records if r.exc_info] == []
    assert all(r.levelno < logging.ERROR for r in records)


async def pairing_is_waiting(host: Host) -> None:
    """Until the host has read a ``pair`` (its session left AUTHENTICATING)."""
    while not any(c.session.phase is Phase.PAIRING for c in host.connections):
        await trio.sleep(0.01)


async def test_revoke_all_during_a_pairing_save_removes_the_paired_device(
    state_dir: Path, host_log: pytest.LogCaptureFixture
) -> None:
    async with held_host(state_dir) as (host, store):
        ticket = await host.open_pairing_window()
        got: list[Credential] = []
        store.hold()
        async with trio.open_nursery() as nursery:

            async def phone() -> None:
                got.append(await pair_device("127.0.0.1", port_of(host), ticket.code, "Phone"))

            nursery.start_soon(phone)
            await store.waiting.wait()  # the new device is on its way to disk
            nursery.start_soon(host.book.revoke, None)
            await trio.testing.wait_all_tasks_blocked()
            store.release()
        # The pairing finished first and the phone got its key; then revoke --all
        # removed that device too, on disk as in memory.
        assert len(got) == 1
        assert host.book.registry.devices == ()
        assert_nothing_lost_or_orphaned(host, state_dir)
    assert_no_connection_failed(host_log)


async def test_a_pairing_during_revoke_all_pairs_nothing(
    state_dir: Path, host_log: pytest.LogCaptureFixture
) -> None:
    # The bug: a device saved by a pairing while revoke --all was saving
    # landed on disk but not in memory, and reappeared after a restart.
    async with held_host(state_dir) as (host, store):
        ticket = await host.open_pairing_window()
        refused: list[Exception] = []
        store.hold()
        async with trio.open_nursery() as nursery:

            async def phone() -> None:
                try:
                    await pair_device("127.0.0.1", port_of(host), ticket.code, "Phone")
                except PairingRefused as exc:
                    refused.append(exc)

            nursery.start_soon(host.book.revoke, None)
            await store.waiting.wait()  # revoke --all is on its way to disk
            nursery.start_soon(phone)
            await pairing_is_waiting(host)
            store.release()
        assert len(refused) == 1
        assert host.book.registry.devices == ()
        assert host.book.window_state(ticket.number) == {"state": "closed"}
        assert_nothing_lost_or_orphaned(host, state_dir)
    assert DeviceStore(state_dir).load() == host.book.registry  # and after the stop
    assert_no_connection_failed(host_log)


async def test_revoking_another_device_during_a_pairing_keeps_both_changes(
    state_dir: Path, host_log: pytest.LogCaptureFixture
) -> None:
    # Before the device book: the revoke swapped in a registry built before its
    # save, so the new phone was lost from memory (its key opened no TLS), and the
    # pairing's save, built before the revoke's, brought the revoked device back
    # on disk (it could log in again after a restart).
    async with held_host(state_dir) as (host, store):
        other = await paired(host, "Other")
        ticket = await host.open_pairing_window()
        got: list[Credential] = []
        store.hold()
        async with trio.open_nursery() as nursery:

            async def phone() -> None:
                got.append(await pair_device("127.0.0.1", port_of(host), ticket.code, "Phone"))

            nursery.start_soon(host.book.revoke, other.device_id)
            await store.waiting.wait()  # the revoke is on its way to disk
            nursery.start_soon(phone)
            await pairing_is_waiting(host)
            store.release()
        [credential] = got
        assert [d.name for d in host.book.registry.devices] == ["Phone"]
        assert_nothing_lost_or_orphaned(host, state_dir)
        async with login("127.0.0.1", port_of(host), credential) as client:
            await client.send(Ping())
            await client.expect(Pong)
    assert_no_connection_failed(host_log)


async def test_a_stop_during_a_pairing_save_lets_the_phone_get_its_key(
    state_dir: Path, host_log: pytest.LogCaptureFixture
) -> None:
    async with held_host(state_dir) as (host, store):
        ticket = await host.open_pairing_window()
        got: list[Credential] = []
        store.hold()
        async with trio.open_nursery() as nursery:

            async def phone() -> None:
                got.append(await pair_device("127.0.0.1", port_of(host), ticket.code, "Phone"))

            nursery.start_soon(phone)
            await store.waiting.wait()
            nursery.start_soon(host.shutdown)  # what SIGTERM does first
            await trio.testing.wait_all_tasks_blocked()
            store.release()
        [credential] = got
        [device] = host.book.registry.devices
        assert device.id == credential.device_id
        assert host.book.window_state(ticket.number) == {"state": "paired", "device": "Phone"}
        assert_nothing_lost_or_orphaned(host, state_dir)
    assert_no_connection_failed(host_log)
    assert any("closed: paired" in r.getMessage() for r in host_log.records)
