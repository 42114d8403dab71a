"""Every table a peer can grow, filled past its bound: it stays bounded (issue 29).

The host-side tables that live as long as the host (connections, pending
handshakes, lanes, leases, command tasks) are filled over real TLS in
``tests/integration/test_bounded_tables.py``; the receipts' contents in
``tests/unit/test_commands_pure.py``; the descriptors in
``tests/integration/test_descriptor_shortage.py``. Here, the pure ones.
"""

from __future__ import annotations

import uuid

import pytest

from mirror_host import control as c
from mirror_host.auth.failures import FailureLog
from mirror_host.auth.window import PairingWindows
from mirror_host.commands.receipts import MAX_RECEIPTS, Admission, ReceiptBook
from mirror_host.errors import PacketLengthError
from mirror_host.session.history import MAX_WAITING_HISTORY_REQUESTS, HistoryDesk, HistoryReads
from mirror_host.wire import PacketDecoder
from mirror_host.wire.constants import MAX_PAYLOAD_BYTES


def test_the_failure_log_keeps_256_addresses_of_12_failures_each() -> None:
    log = FailureLog()
    for number in range(10_000):  # as many peers as 127.0.0.0/8 lends a fuzz
        address = f"127.{number >> 16 & 255}.{number >> 8 & 255}.{number & 255}"
        for second in range(20):
            log.record(address, float(second))
    assert len(log) == 256
    assert all(len(times) == 12 for times in log._by_address.values())
    # The newest addresses are the ones kept, and they are locked out.
    assert log.is_locked("127.0.39.15", 20.0)  # number 9999
    assert not log.is_locked("127.0.0.1", 20.0)  # evicted long ago


def test_recent_pairing_windows_are_remembered_sixteen_at_a_time() -> None:
    windows = PairingWindows(seconds=60.0)
    numbers = []
    for second in range(1000):
        _, number = windows.open(now=float(second), now_unix=0.0, token_bytes=bytes)
        numbers.append(number)
    assert len(windows._fates._fates) <= 16
    assert windows.state_of(numbers[-2], 1000.0) == {"state": "replaced"}
    assert windows.state_of(numbers[0], 1000.0)["state"] != "replaced"  # forgotten


def test_history_requests_waiting_behind_a_capture_are_bounded() -> None:
    sub = uuid.uuid4()
    desk = HistoryDesk(sub)
    desk.request(c.History(subscription_id=sub), 0.0)  # starts a capture
    for _ in range(MAX_WAITING_HISTORY_REQUESTS):
        desk.request(c.History(subscription_id=sub), 0.0)
    with pytest.raises(Exception, match="too many history requests"):
        desk.request(c.History(subscription_id=sub), 0.0)
    assert len(desk._waiting) == MAX_WAITING_HISTORY_REQUESTS


def test_history_reads_keep_one_result_per_pane_and_forget_it() -> None:
    reads: HistoryReads[str] = HistoryReads(keep_seconds=30.0)
    for number in range(1000):  # reads whose askers all gave up, pane after pane
        pane = uuid.uuid4()
        plan = reads.ask(pane, float(number))
        reads.give_up(pane, plan.read)
        reads.finish(pane, plan.read, "text", float(number))
    assert len(reads._kept) <= 31  # the last 30 s of them
    assert not reads._pending


def test_the_packet_decoder_holds_at_most_one_packet() -> None:
    decoder = PacketDecoder()
    with pytest.raises(PacketLengthError):  # refused at the length prefix
        decoder.feed((MAX_PAYLOAD_BYTES + 1).to_bytes(4, "big") + b"\x00")
    decoder = PacketDecoder()
    body = b"\x00" + b"x" * (MAX_PAYLOAD_BYTES - 1)
    decoder.feed(len(body).to_bytes(4, "big") + body[: len(body) // 2])
    assert decoder.next_packet() is None  # waits for the rest, never more than 8 MiB


def test_receipts_stop_at_1024_and_refuse_more() -> None:
    book = ReceiptBook()
    pane = uuid.uuid4()
    for number in range(MAX_RECEIPTS + 500):
        command = c.AgentsInputCommand(pane=str(pane), prompt=f"prompt {number}")
        admission, _ = book.admit(uuid.uuid4(), command, pane)
        assert admission is (Admission.NEW if number < MAX_RECEIPTS else Admission.FULL)
    assert len(book) == MAX_RECEIPTS
