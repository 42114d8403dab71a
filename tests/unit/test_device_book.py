"""The device book: changes interleaved at the one await they have (the store's save).

Every test runs real :class:`~mirror_host.session.connection.Session` objects
against a :class:`DeviceBook` over a real store in a temporary directory, whose
writes a test can hold at the disk (:class:`~tests.fakes.held_store.HeldStore`),
to let another change arrive while one is on its way to disk. After each: what is in memory is what is on disk,
and the PSK table is the registry's keys (plus the open window's code).
"""

from __future__ import annotations

import errno
import os
import uuid
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
import trio
import trio.testing

from mirror_host import control as c
from mirror_host.auth.devices import Device, DeviceRegistry
from mirror_host.auth.pairing import PAIR_IDENTITY
from mirror_host.auth.proofs import device_proof, pair_proof
from mirror_host.host.device_book import LAST_SEEN_FLUSH_SECONDS, DeviceBook
from mirror_host.host.store import DeviceStore
from mirror_host.host.tls import PskTable
from mirror_host.session.connection import Session
from mirror_host.session.events import AuthenticateRequested, ConnectionClosed, PairRequested
from mirror_host.session.login import PAIRING_NOT_SAVED
from mirror_host.wire import ControlPacket, PacketDecoder, encode_packet
from tests.fakes.disk_faults import failing_directory_fsync
from tests.fakes.held_store import HeldStore

pytestmark = pytest.mark.timeout(30)

HOST = UUID("00000000-0000-0000-0000-0000000000AA")


class Book:
    """A book, its store, the sessions it may cut and the tables it published."""

    def __init__(self, tmp_path: Path, devices: tuple[Device, ...] = ()) -> None:
        self.store = HeldStore(tmp_path)
        registry = DeviceRegistry(host_id=HOST, devices=devices)
        self.store.save_sync(registry)
        self.sessions: list[Session] = []
        self.tables: list[PskTable] = []
        self.book = DeviceBook(
            store=self.store,
            registry=registry,
            publish=self.tables.append,
            cut=self._cut,
            wall_clock=lambda: 1_700_000_000.0,
        )

    def _cut(self, device_id: UUID | None) -> None:
        for session in self.sessions:
            if device_id is None or session.device_id == device_id:
                session.revoke()

    def session(self, identity: str) -> Session:
        session = Session(
            host_id=HOST, identity=identity, nonce=uuid.uuid4().bytes * 2, now=trio.current_time()
        )
        session.data_to_send()  # the challenge
        self.sessions.append(session)
        return session

    async def pairing(self, name: str = "Phone") -> tuple[Session, PairRequested]:
        """A pairing session that has sent a right ``pair`` for the open window."""
        window = self.book.window
        assert window is not None
        session = self.session(PAIR_IDENTITY)
        proof = pair_proof(window.code, HOST, name, session.nonce)
        event = _send(session, c.Pair(name=name, proof=proof))
        assert isinstance(event, PairRequested)
        return session, event

    async def pair(self, session: Session, event: PairRequested) -> Device | None:
        return await self.book.pair(session, event.name, event.proof, label="#1")

    def login(self, device: Device) -> tuple[Session, AuthenticateRequested]:
        session = self.session(device.identity)
        proof = device_proof(device.key, HOST, device.id, session.nonce)
        event = _send(session, c.Authenticate(device_id=device.id, proof=proof))
        assert isinstance(event, AuthenticateRequested)
        return session, event

    def check_in_step(self) -> None:
        """Memory is disk, and the last table published is the registry's (and window's)."""
        on_disk = DeviceStore(self.store.state_dir).load()
        assert on_disk == self.book.registry
        keys = self.book.registry.psk_keys()
        if self.book.window is not None:
            keys[PAIR_IDENTITY] = self.book.window.code.encode()
        assert dict(self.tables[-1].keys) == keys


def _send(session: Session, message: c.ControlMessage) -> Any:
    session.receive_data(encode_packet(ControlPacket(c.encode_control(message))), 0.0)
    return session.next_event()


def _sent(session: Session) -> list[Any]:
    decoder = PacketDecoder()
    decoder.feed(session.data_to_send())
    out: list[Any] = []
    while (packet := decoder.next_packet()) is not None:
        assert isinstance(packet, ControlPacket)
        out.append(c.decode_control(packet.body))
    return out


def _device(name: str) -> Device:
    return Device(id=uuid.uuid4(), name=name, key=uuid.uuid4().bytes * 2, paired_at=1.0)


async def test_revoke_all_during_a_pairing_save_waits_and_then_removes_that_device_too(
    tmp_path: Path,
) -> None:
    book = Book(tmp_path, (_device("Old"),))
    await book.book.open_window()
    session, pair = await book.pairing()
    book.store.hold()
    revoked: list[list[str]] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(book.pair, session, pair)
        await book.store.waiting.wait()

        async def revoke_all() -> None:
            revoked.append(await book.book.revoke(None))

        nursery.start_soon(revoke_all)
        await trio.testing.wait_all_tasks_blocked()
        book.store.release()
    [paired] = _sent(session)
    assert isinstance(paired, c.Paired)
    # The pairing finished first, then `revoke --all` removed every device, the new one too.
    assert len(revoked[0]) == 2 and str(paired.device_id).upper() in revoked[0]
    assert book.book.registry.devices == ()
    assert book.book.window_state(1) == {"state": "paired", "device": "Phone"}
    book.check_in_step()


async def test_a_pairing_that_arrives_during_revoke_all_pairs_nothing(tmp_path: Path) -> None:
    # The bug: revoke built its registry before its await and assigned it
    # after, so a device a pairing saved in between was on disk but not in memory.
    book = Book(tmp_path, (_device("Old"),))
    await book.book.open_window()
    session, pair = await book.pairing()
    book.store.hold()
    paired: list[Device | None] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(book.book.revoke, None)
        await book.store.waiting.wait()

        async def pair_now() -> None:
            paired.append(await book.pair(session, pair))

        nursery.start_soon(pair_now)
        await trio.testing.wait_all_tasks_blocked()
        book.store.release()
    assert paired == [None]
    assert session.is_closed and _sent(session) == []
    assert book.book.registry.devices == ()
    assert book.book.window is None
    assert book.book.window_state(1) == {"state": "closed"}
    assert book.store.saves == 1  # revoke's: the pairing saved nothing
    book.check_in_step()


async def test_a_pairing_during_a_revoke_of_another_device_keeps_both_changes(
    tmp_path: Path,
) -> None:
    other = _device("Other")
    book = Book(tmp_path, (other,))
    await book.book.open_window()
    session, pair = await book.pairing()
    book.store.hold()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(book.book.revoke, other.id)
        await book.store.waiting.wait()
        nursery.start_soon(book.pair, session, pair)
        await trio.testing.wait_all_tasks_blocked()
        book.store.release()
    [paired] = _sent(session)
    assert isinstance(paired, c.Paired)
    [device] = book.book.registry.devices
    assert device.id == paired.device_id and device.name == "Phone"
    book.check_in_step()


async def test_a_pairing_whose_peer_left_during_the_save_keeps_no_device(
    tmp_path: Path,
) -> None:
    book = Book(tmp_path)
    await book.book.open_window()
    session, pair = await book.pairing()
    book.store.hold()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(book.pair, session, pair)
        await book.store.waiting.wait()
        session.close("peer went away while we were sending")
        book.store.release()
    assert _sent(session) == []
    assert book.book.registry.devices == ()
    assert book.book.window_state(1) == {"state": "failed"}
    book.check_in_step()


async def test_a_session_closed_while_waiting_for_the_book_gets_no_decision(
    tmp_path: Path,
) -> None:
    old, other = _device("Old"), _device("Other")
    book = Book(tmp_path, (old, other))
    await book.book.open_window()
    pairing, pair = await book.pairing()
    login, auth = book.login(old)
    book.store.hold()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(book.book.revoke, other.id)
        await book.store.waiting.wait()
        nursery.start_soon(book.pair, pairing, pair)
        nursery.start_soon(book.book.log_in, login, auth.device_id, auth.proof)
        await trio.testing.wait_all_tasks_blocked()
        pairing.close("host stopped")  # a graceful stop that ran out of patience
        login.close("host stopped")
        book.store.release()
    assert _sent(pairing) == [] and _sent(login) == []
    assert book.book.registry.devices == (old,)  # not touched: that login never happened
    assert book.book.window_state(1)["state"] == "open"  # not taken either
    book.check_in_step()


async def test_a_login_during_a_revoke_keeps_its_last_seen(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    kept, gone = _device("Kept"), _device("Gone")
    book = Book(tmp_path, (kept, gone))
    session, auth = book.login(kept)
    book.store.hold()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(book.book.run)
        nursery.start_soon(book.book.revoke, gone.id)
        await book.store.waiting.wait()
        nursery.start_soon(book.book.log_in, session, auth.device_id, auth.proof)
        await trio.testing.wait_all_tasks_blocked()
        book.store.release()
        await book.store.saved(2)  # revoke's save, then the lastSeen flush's
        nursery.cancel_scope.cancel()
    assert trio.current_time() >= LAST_SEEN_FLUSH_SECONDS
    assert [type(m) for m in _sent(session)] == [c.Authenticated]
    [device] = book.book.registry.devices
    assert device.id == kept.id and device.last_seen == 1_700_000_000.0
    book.check_in_step()


async def test_a_window_opened_during_revoke_all_stays_open(tmp_path: Path) -> None:
    book = Book(tmp_path, (_device("Old"),))
    await book.book.open_window()
    book.store.hold()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(book.book.revoke, None)
        await book.store.waiting.wait()
        nursery.start_soon(book.book.open_window)
        await trio.testing.wait_all_tasks_blocked()
        book.store.release()
    # revoke --all closed window 1; window 2, asked for after it, is open.
    assert book.book.window_state(1) == {"state": "closed"}
    assert book.book.window_state(2)["state"] == "open"
    book.check_in_step()


async def test_a_pairing_the_store_refuses_changes_nothing(tmp_path: Path) -> None:
    book = Book(tmp_path, (_device("Old"),))
    await book.book.open_window()
    session, pair = await book.pairing()
    before = book.book.registry
    book.store.fail = True
    assert await book.pair(session, pair) is None
    # The phone is told why (Prowl's apps show a `failure` before login), and the
    # close is the host's fault: nothing counts toward the address's lock-out.
    assert session.is_closed and _sent(session) == [c.Failure(error=PAIRING_NOT_SAVED)]
    closed = [e for e in iter(session.next_event, None) if isinstance(e, ConnectionClosed)]
    assert [e.is_failure for e in closed] == [False]
    assert book.book.registry == before
    assert book.book.window_state(1) == {"state": "failed"}
    book.store.fail = False
    book.check_in_step()


async def test_the_window_expires_on_time_and_leaves_the_table(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    book = Book(tmp_path)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(book.book.run)
        await book.book.open_window()
        assert PAIR_IDENTITY in book.tables[-1].keys
        await trio.sleep(59)
        assert book.book.window_state(1)["state"] == "open"
        await trio.sleep(2)
        assert book.book.window_state(1) == {"state": "expired"}
        assert PAIR_IDENTITY not in book.tables[-1].keys
        nursery.cancel_scope.cancel()


async def test_a_revoke_whose_directory_fsync_fails_is_done_in_memory_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The rename happened before the directory fsync failed: the device is gone
    # from disk, so it must be gone from memory and its key from the table.
    gone, kept = _device("Gone"), _device("Kept")
    book = Book(tmp_path, (gone, kept))
    session, auth = book.login(gone)
    assert await book.book.log_in(session, auth.device_id, auth.proof) == gone
    monkeypatch.setattr(os, "fsync", failing_directory_fsync(errno.EIO))
    assert await book.book.revoke(gone.id) == [str(gone.id).upper()]
    assert book.book.registry.devices == (kept,)
    assert gone.identity not in book.tables[-1].keys
    assert session.is_closed
    book.check_in_step()


async def test_a_pairing_whose_directory_fsync_fails_is_sent_its_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The device is on disk: a pairing reported failed would leave it an orphan
    # no phone has the key of.
    book = Book(tmp_path)
    await book.book.open_window()
    session, pair = await book.pairing()
    monkeypatch.setattr(os, "fsync", failing_directory_fsync(errno.EIO))
    device = await book.pair(session, pair)
    assert device is not None
    [paired] = _sent(session)
    assert isinstance(paired, c.Paired) and paired.device_id == device.id
    assert book.book.registry.devices == (device,)
    assert book.book.window_state(1) == {"state": "paired", "device": "Phone"}
    book.check_in_step()
