"""The hub never waits on a pane source where the protocol is read.

A real :class:`~mirror_host.host.connection.Connection` and :class:`Hub` over an
in-memory stream (``connection_harness``) and an in-memory source whose calls
can be made slow. Each test asks for pytest-trio's ``autojump_clock``, so a 10 s
history read costs no real time and every "within a second" below is virtual,
deterministic time.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import trio
import trio.testing

from mirror_host import control as c
from mirror_host.capture.values import TextCapture
from mirror_host.errors import PaneSourceError
from mirror_host.host.history import HISTORY_KEEP_SECONDS, HISTORY_READ_SECONDS, HISTORY_SECONDS
from mirror_host.host.requests import SCROLL_SECONDS
from mirror_host.host.sampler import FIRST_CAPTURE_SECONDS, Sampler
from mirror_host.limits import MAX_TEXT_BYTES
from mirror_host.session.lease import Lease
from mirror_host.session.logged_in import HISTORY_UNAVAILABLE, SCROLL_BUSY, SCROLL_COULD_NOT
from mirror_host.wire import TextFramePacket, VTFramePacket
from tests.fakes.memory_source import MemorySource
from tests.unit.connection_harness import connect, hub_with, subscribe, subscribed_peer


async def test_a_10_s_history_read_leaves_pings_acks_and_typed_input_flowing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    source = MemorySource()
    pane = source.add_pane()
    source.output(pane, b"line one\r\nline two\r\n")
    source.delays["history"] = 10.0
    async with hub_with(source) as (_, owner, nursery):
        peer = await connect(owner, nursery)
        sub = await subscribe(peer, pane)
        await peer.frame_with(sub, "line two")
        asked = trio.current_time()
        await peer.send(c.History(subscription_id=sub))
        pings_before = peer.pings
        await peer.send(c.Input(data=b"typed", subscription_id=sub))
        await peer.frame_with(sub, "typed", within=1.0)
        assert trio.current_time() - asked < 1.0
        # Answered within 6 s (Android gives up at 8): unavailable, for now.
        failure = await peer.next(c.Failure, within=HISTORY_SECONDS + 0.001)
        assert failure == c.Failure(error=HISTORY_UNAVAILABLE, subscription_id=sub)
        assert trio.current_time() - asked == HISTORY_SECONDS
        await trio.sleep_until(asked + 10.5)  # the read went on and finished meanwhile
        arrived = [m for _, m in peer.received if isinstance(m, c.HistoryPage | c.Failure)]
        assert arrived == [failure]  # nothing unasked when it finished: pages answer requests
        retried = trio.current_time()
        await peer.send(c.History(subscription_id=sub))
        page = await peer.next(c.HistoryPage, within=0.001)  # at once
        assert page.lines[:2] == ("line one", "line two")
        assert trio.current_time() == retried
        assert [op for op, _ in source.calls].count("history") == 1  # one read in all
        assert peer.pings - pings_before >= 4  # the host kept its heartbeat going
        assert not peer.closed.is_set() and owner.closed == []


async def test_a_history_read_past_its_deadline_is_history_unavailable_not_a_close(
    autojump_clock: trio.testing.MockClock,
) -> None:
    source = MemorySource()
    pane = source.add_pane()
    source.delays["history"] = HISTORY_SECONDS + 30
    async with subscribed_peer(source, pane) as (owner, peer, sub):
        await peer.send(c.History(subscription_id=sub))
        failure = await peer.next(c.Failure, within=HISTORY_SECONDS + 1)
        assert failure == c.Failure(error=HISTORY_UNAVAILABLE, subscription_id=sub)
        await peer.send(c.Input(data=b"still here", subscription_id=sub))
        await peer.frame_with(sub, "still here", within=1.0)
        assert owner.closed == []


async def test_two_new_snapshots_in_a_row_come_back_in_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    source = MemorySource()
    pane = source.add_pane()
    source.output(pane, b"before")
    source.delays["history"] = 3.0
    async with hub_with(source) as (_, owner, nursery):
        peer = await connect(owner, nursery)
        sub = await subscribe(peer, pane)
        await peer.frame_with(sub, "before")
        await peer.send(c.History(subscription_id=sub))
        await trio.sleep(1.0)
        source.output(pane, b"\r\nafter")
        await peer.send(c.History(subscription_id=sub))
        pages = []
        while len(pages) < 2:
            item = await peer.next((c.HistoryPage, VTFramePacket), within=10.0)
            if isinstance(item, VTFramePacket):
                await peer.send(c.Acknowledge(sequence=item.sequence, subscription_id=sub))
            else:
                pages.append(item)
        assert [p.lines for p in pages] == [("before",), ("before", "after")]
        assert pages[0].history_id != pages[1].history_id
        assert [op for op, _ in source.calls].count("history") == 2


async def test_a_2_s_first_capture_keeps_pings_answered_and_other_subscribers_moving(
    autojump_clock: trio.testing.MockClock,
) -> None:
    source = MemorySource()
    busy, slow = source.add_pane("busy"), source.add_pane("slow")
    async with hub_with(source) as (_, owner, nursery):
        typist = await connect(owner, nursery)
        typist_sub = await subscribe(typist, busy)
        await typist.frame_with(typist_sub, "")
        source.delays["first_capture"] = 2.0
        newcomer = await connect(owner, nursery)
        await newcomer.send(
            c.Subscribe(pane_id=slow, representation=c.Representation.TEXT, intent=c.Intent.IF_FREE)
        )
        started = trio.current_time()
        await newcomer.send(c.Ping())
        await newcomer.next(c.Pong, within=0.5)  # answered while the capture runs
        await typist.send(c.Input(data=b"hello", subscription_id=typist_sub))
        await typist.frame_with(typist_sub, "hello", within=1.0)
        assert trio.current_time() - started < 2.0
        subscribed = await newcomer.next(c.Subscribed)
        first = await newcomer.next(TextFramePacket, within=1.0)
        assert first.sequence == 1 and subscribed.pane_id == slow
        assert trio.current_time() - started >= 2.0


async def test_a_first_capture_past_its_deadline_subscribes_and_sends_the_frame_later(
    autojump_clock: trio.testing.MockClock,
) -> None:
    source = MemorySource()
    pane = source.add_pane()
    source.output(pane, b"eventually")
    source.delays["first_capture"] = FIRST_CAPTURE_SECONDS + 3
    async with hub_with(source) as (_, owner, nursery):
        peer = await connect(owner, nursery)
        sub = await subscribe(peer, pane)  # `subscribed` alone, at the deadline
        frame = await peer.frame_with(sub, "eventually", within=5.0)
        assert frame.sequence == 1
        assert owner.closed == []


async def test_a_1_s_scroll_leaves_acks_and_typed_input_flowing_then_completes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    source = MemorySource()
    pane = source.add_pane(rows=5)
    source.output(pane, b"".join(b"row %d\r\n" % i for i in range(40)))
    source.delays["scroll"] = 1.0
    async with hub_with(source) as (_, owner, nursery):
        peer = await connect(owner, nursery)
        sub = await subscribe(peer, pane, include_scroll_state=True)
        await peer.frame_with(sub, "row 39")
        request = uuid.uuid4()
        asked = trio.current_time()
        await peer.send(
            c.Scroll(request_id=request, direction=c.ScrollDirection.UP, subscription_id=sub)
        )
        await peer.send(c.Input(data=b"typed", subscription_id=sub))
        typed = await peer.frame_with(sub, "typed", within=0.5)
        other = uuid.uuid4()
        await peer.send(
            c.Scroll(request_id=other, direction=c.ScrollDirection.UP, subscription_id=sub)
        )
        assert await peer.next(c.Failure) == c.Failure(
            error=SCROLL_BUSY, subscription_id=sub, request_id=other
        )
        # The scroll completes with a frame after it was applied, then its result.
        while True:
            item = await peer.next((VTFramePacket, c.ScrollState, c.ScrollResult), within=3.0)
            if isinstance(item, c.ScrollResult):
                break
            if isinstance(item, VTFramePacket):
                last = item
                await peer.send(c.Acknowledge(sequence=item.sequence, subscription_id=sub))
        assert item == c.ScrollResult(
            request_id=request, sequence=last.sequence, subscription_id=sub
        )
        assert last.sequence > typed.sequence
        assert trio.current_time() - asked >= 1.2  # applied at 1 s, settled 200 ms
        assert source.panes[pane].scrolls == [c.ScrollDirection.UP]
        # A duplicate replays; the pane is not scrolled twice.
        await peer.send(
            c.Scroll(request_id=request, direction=c.ScrollDirection.UP, subscription_id=sub)
        )
        assert await peer.next(c.ScrollResult) == item
        assert source.panes[pane].scrolls == [c.ScrollDirection.UP]


async def test_a_scroll_past_its_deadline_is_scroll_unavailable_and_remembered(
    autojump_clock: trio.testing.MockClock,
) -> None:
    source = MemorySource()
    pane = source.add_pane()
    source.delays["scroll"] = SCROLL_SECONDS + 10
    async with subscribed_peer(source, pane) as (owner, peer, sub):
        request = uuid.uuid4()
        scroll = c.Scroll(request_id=request, direction=c.ScrollDirection.UP, subscription_id=sub)
        await peer.send(scroll)
        expected = c.Failure(error=SCROLL_COULD_NOT, subscription_id=sub, request_id=request)
        assert await peer.next(c.Failure, within=SCROLL_SECONDS + 1) == expected
        await peer.send(scroll)
        assert await peer.next(c.Failure, within=1.0) == expected
        assert owner.closed == []


async def test_input_reaches_a_slow_pane_in_the_order_it_was_typed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    source = MemorySource()
    pane = source.add_pane()
    source.delays["write"] = 0.5
    async with subscribed_peer(source, pane) as (_owner, peer, sub):
        for key in (b"a", b"b", b"c", b"d"):
            await peer.send(c.Input(data=key, subscription_id=sub))
        await peer.send(c.Ping())
        await peer.next(c.Pong, within=0.1)  # not behind the writes
        await peer.frame_with(sub, "abcd", within=5.0)
        assert bytes(source.panes[pane].written) == b"abcd"


async def test_a_failing_source_write_is_logged_and_the_connection_stays(
    autojump_clock: trio.testing.MockClock,
) -> None:
    source = MemorySource()
    pane = source.add_pane()
    async with subscribed_peer(source, pane) as (owner, peer, sub):
        source.failures["write"] = PaneSourceError("the pane refused")
        await peer.send(c.Input(data=b"lost", subscription_id=sub))
        await peer.send(c.Ping())
        await peer.next(c.Pong)
        del source.failures["write"]
        await peer.send(c.Input(data=b"kept", subscription_id=sub))
        await peer.frame_with(sub, "kept")
        assert owner.closed == []


async def test_a_pane_that_goes_away_while_a_scroll_is_applied_ends_the_lease(
    autojump_clock: trio.testing.MockClock,
) -> None:
    source = MemorySource()
    pane = source.add_pane()
    source.delays["scroll"] = 1.0
    async with subscribed_peer(source, pane) as (_owner, peer, sub):
        await peer.send(
            c.Scroll(request_id=uuid.uuid4(), direction=c.ScrollDirection.UP, subscription_id=sub)
        )
        source.close_pane(pane)
        assert await peer.next(c.Ended, within=2.0) == c.Ended(reason=c.EndReason.PANE_CLOSED)
        with trio.fail_after(1):
            await peer.closed.wait()


async def test_a_connection_gone_during_a_slow_first_capture_leaves_no_watcher(
    autojump_clock: trio.testing.MockClock,
) -> None:
    source = MemorySource()
    pane = source.add_pane()
    source.delays["first_capture"] = 3.0
    async with hub_with(source) as (hub, owner, nursery):
        peer = await connect(owner, nursery)
        await peer.send(
            c.Subscribe(pane_id=pane, representation=c.Representation.VT, intent=c.Intent.IF_FREE)
        )
        await trio.sleep(1.0)
        assert source.panes[pane].watchers  # the sampler is watching, capture under way
        await peer.stream.aclose()
        await trio.sleep(5.0)
        assert owner.closed
        assert not source.panes[pane].watchers  # the abandoned sampler went with it
        status = await hub.status()
        assert status["subscribed"] == 0


async def test_a_connection_that_ends_takes_its_sampler_with_it_without_being_released(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The sampler is the connection's own work (its nursery): it ends with the
    connection by structure, not because somebody remembered to cancel it."""
    source = MemorySource()
    pane = source.add_pane()
    async with hub_with(source) as (hub, owner, nursery):
        owner.connection_closed = lambda connection, event: owner.closed.append(event)  # type: ignore[method-assign]
        peer = await connect(owner, nursery)
        sub = await subscribe(peer, pane)
        await peer.frame_with(sub, "")
        assert source.panes[pane].watchers
        await peer.stream.aclose()
        await trio.sleep(1.0)
        assert owner.closed  # reported, and the hub never told: nothing released
        assert (await hub.status())["subscribed"] == 1
        assert not source.panes[pane].watchers  # yet the sampler and its watch are gone


async def test_a_retry_while_the_read_is_still_under_way_joins_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    source = MemorySource()
    pane = source.add_pane()
    source.output(pane, b"old output")
    source.delays["history"] = 10.0
    async with subscribed_peer(source, pane) as (owner, peer, sub):
        asked = trio.current_time()
        await peer.send(c.History(subscription_id=sub))
        assert (await peer.next(c.Failure, within=HISTORY_SECONDS + 0.001)).error == (
            HISTORY_UNAVAILABLE
        )
        await trio.sleep(1.0)
        await peer.send(c.History(subscription_id=sub))  # at 7 s: the read ends at 10 s
        page = await peer.next(c.HistoryPage, within=HISTORY_SECONDS)
        assert trio.current_time() == asked + 10.0
        assert page.lines == ("old output",)
        assert [op for op, _ in source.calls].count("history") == 1
        assert owner.closed == []


async def test_a_kept_snapshot_is_stamped_when_read_and_dropped_after_its_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    source = MemorySource()
    pane = source.add_pane()
    source.delays["history"] = 10.0
    async with hub_with(source, wall_clock=lambda: 1_800_000_000.0 + trio.current_time()) as (
        hub,
        owner,
        nursery,
    ):
        peer = await connect(owner, nursery)
        sub = await subscribe(peer, pane)
        await peer.frame_with(sub, "")
        asked = trio.current_time()
        await peer.send(c.History(subscription_id=sub))
        await peer.next(c.Failure, within=HISTORY_SECONDS + 0.001)
        await trio.sleep_until(asked + 10.0 + 1.0)
        assert hub.history.reads.kept(pane)
        await peer.send(c.History(subscription_id=sub))
        page = await peer.next(c.HistoryPage, within=0.001)
        assert page.captured_at == 1_800_000_000.0 + asked + 10.0  # when it was read
        # Nobody takes the next one: it is dropped when its time is up.
        await peer.send(c.History(subscription_id=sub))
        await peer.next(c.Failure, within=HISTORY_SECONDS + 0.001)
        read_ends = trio.current_time() + 10.0 - HISTORY_SECONDS
        await trio.sleep_until(read_ends + 1.0)
        assert hub.history.reads.kept(pane)
        await trio.sleep_until(read_ends + HISTORY_KEEP_SECONDS + 0.001)
        assert not hub.history.reads.kept(pane) and not hub.history.reads.pending(pane)
        await peer.send(c.History(subscription_id=sub))  # so this one reads again
        await peer.next(c.Failure, within=HISTORY_SECONDS + 0.001)
        assert [op for op, _ in source.calls].count("history") == 3
        assert owner.closed == []


async def test_a_read_outlives_the_connection_that_asked_and_answers_the_next_holder(
    autojump_clock: trio.testing.MockClock,
) -> None:
    source = MemorySource()
    pane = source.add_pane()
    source.output(pane, b"scrollback")
    source.delays["history"] = 10.0
    async with hub_with(source) as (hub, owner, nursery):
        phone = await connect(owner, nursery)
        sub = await subscribe(phone, pane)
        await phone.frame_with(sub, "scrollback")
        asked = trio.current_time()
        await phone.send(c.History(subscription_id=sub))
        await phone.next(c.Failure, within=HISTORY_SECONDS + 0.001)
        await phone.stream.aclose()  # Android drops and reconnects
        with trio.fail_after(1):
            await phone.closed.wait()
        again = await connect(owner, nursery)
        sub_again = await subscribe(again, pane)
        await again.frame_with(sub_again, "scrollback")
        await trio.sleep_until(asked + 10.0)
        await again.send(c.History(subscription_id=sub_again))
        page = await again.next(c.HistoryPage, within=0.001)
        assert page.lines == ("scrollback",)
        assert [op for op, _ in source.calls].count("history") == 1
        assert not hub.history.reads.kept(pane)


async def test_a_read_past_the_source_deadline_keeps_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    source = MemorySource()
    pane = source.add_pane()
    source.delays["history"] = HISTORY_READ_SECONDS + 30
    async with hub_with(source) as (hub, owner, nursery):
        peer = await connect(owner, nursery)
        sub = await subscribe(peer, pane)
        await peer.frame_with(sub, "")
        asked = trio.current_time()
        await peer.send(c.History(subscription_id=sub))
        await peer.next(c.Failure, within=HISTORY_SECONDS + 0.001)
        await trio.sleep_until(asked + HISTORY_READ_SECONDS + 0.001)
        assert not hub.history.reads.pending(pane) and not hub.history.reads.kept(pane)
        # Android takes HISTORY_UNAVAILABLE as recoverable only while a load is pending:
        # the read giving up later sends nothing.
        assert [m for _, m in peer.received if isinstance(m, c.Failure)] == [
            c.Failure(error=HISTORY_UNAVAILABLE, subscription_id=sub)
        ]
        del source.delays["history"]
        await peer.send(c.History(subscription_id=sub))
        page = await peer.next(c.HistoryPage, within=0.001)
        assert page.total == 1
        assert [op for op, _ in source.calls].count("history") == 2


async def test_the_first_frame_follows_subscribed_at_once_even_for_a_pane_that_printed_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """iOS stays "subscribing" (no Send, no refresh, no list) until its first frame."""
    source = MemorySource()
    pane = source.add_pane()  # nothing was ever written to it
    async with hub_with(source) as (_, owner, nursery):
        for representation in (c.Representation.TEXT, c.Representation.VT):
            peer = await connect(owner, nursery)
            sub = await subscribe(peer, pane, representation, include_scroll_state=True)
            granted = trio.current_time()
            frame = await peer.next((TextFramePacket, VTFramePacket), within=0.001)
            assert frame.sequence == 1 and frame.subscription_id == sub
            assert trio.current_time() == granted
            if isinstance(frame, TextFramePacket):
                assert frame.text == ""  # an empty frame, not none
            await peer.stream.aclose()
            with trio.fail_after(1):
                await peer.closed.wait()
            await trio.sleep(0.1)  # the host notices and frees the pane


async def test_panes_go_only_to_the_connection_that_listed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """iOS re-subscribes on an unasked `panes`, and a second subscribe closes it."""
    source = MemorySource()
    watched, other = source.add_pane("watched"), source.add_pane("other")
    async with hub_with(source) as (_, owner, nursery):
        phone = await connect(owner, nursery)
        await phone.send(c.ListPanes())
        await phone.next(c.Panes)
        sub = await subscribe(phone, watched)
        await phone.frame_with(sub, "")
        # Everything that changes the list: another device lists, takes a pane and
        # leaves; a pane appears; a pane goes away.
        mac = await connect(owner, nursery)
        await mac.send(c.ListPanes())
        await mac.next(c.Panes)
        await subscribe(mac, other)
        await mac.stream.aclose()
        source.add_pane("new")
        source.close_pane(other)
        await trio.sleep(5.0)
        assert len([m for _, m in phone.received if isinstance(m, c.Panes)]) == 1  # its own
        await phone.send(c.ListPanes())
        listing = await phone.next(c.Panes)
        assert {p.title for p in listing.panes} == {"watched", "new"}
        assert len(owner.closed) == 1 and not phone.closed.is_set()  # only the Mac left


class _OversizedText(MemorySource):
    """Captures a text screen of ``size`` UTF-8 bytes."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    async def capture(self, pane_id: Any, representation: Any, **options: Any) -> Any:
        capture = await super().capture(pane_id, representation, **options)
        if isinstance(capture, TextCapture):
            return dataclasses.replace(capture, text="é" * (self.size // 2))
        return capture


async def test_a_text_frame_over_1_mib_is_never_sent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """iOS refuses text over 1 MiB: as Prowl's host does, the connection closes instead."""
    at_limit = _OversizedText(MAX_TEXT_BYTES)
    pane = at_limit.add_pane()
    async with hub_with(at_limit) as (_, owner, nursery):
        peer = await connect(owner, nursery)
        sub = await subscribe(peer, pane, c.Representation.TEXT)
        frame = await peer.next(TextFramePacket)
        assert frame.subscription_id == sub and len(frame.text.encode()) == MAX_TEXT_BYTES
    over = _OversizedText(MAX_TEXT_BYTES + 2)
    pane = over.add_pane()
    async with hub_with(over) as (_, owner, nursery):
        peer = await connect(owner, nursery)
        await peer.send(
            c.Subscribe(pane_id=pane, representation=c.Representation.TEXT, intent=c.Intent.IF_FREE)
        )
        with trio.fail_after(FIRST_CAPTURE_SECONDS + 1):
            await peer.closed.wait()
        assert not [m for _, m in peer.received if isinstance(m, TextFramePacket)]
        assert owner.closed


async def test_a_history_read_that_crashes_is_unavailable_and_the_host_goes_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    source = MemorySource()
    pane = source.add_pane()
    source.failures["history"] = RuntimeError("a bug in the source")  # type: ignore[assignment]
    async with subscribed_peer(source, pane) as (owner, peer, sub):
        await peer.send(c.History(subscription_id=sub))
        failure = await peer.next(c.Failure, within=1.0)
        assert failure == c.Failure(error=HISTORY_UNAVAILABLE, subscription_id=sub)
        await peer.send(c.Input(data=b"still up", subscription_id=sub))
        await peer.frame_with(sub, "still up", within=1.0)
        assert owner.closed == []


async def test_ending_a_lease_its_sampler_no_longer_holds_changes_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """``Hub.end`` for a sampler that does not hold its lease (refused, or its
    connection moved on) only stops it: no ``ended`` to a session back in
    ``authenticated`` (a host bug there: it raised), none that ends the lease the
    connection holds now."""
    source = MemorySource()
    pane, other = source.add_pane(), source.add_pane()
    async with hub_with(source) as (hub, owner, nursery):
        peer = await connect(owner, nursery)
        (connection,) = owner.connections
        request = c.Subscribe(
            pane_id=pane, representation=c.Representation.VT, intent=c.Intent.IF_FREE
        )
        lease = Lease.for_request(request, subscription_id=uuid.uuid4(), capabilities=frozenset())
        stale = Sampler(source, connection, lease, c.Intent.IF_FREE)
        hub.end(stale, c.EndReason.PANE_CLOSED)  # logged in, holding nothing
        sub = await subscribe(peer, other)
        await peer.frame_with(sub, "")
        hub.end(stale, c.EndReason.PANE_CLOSED)  # holding another pane now
        await peer.send(c.Ping())
        await peer.next(c.Pong)
        source.output(other, b"still mirrored")
        await peer.frame_with(sub, "still mirrored")
        assert hub.pane_of(connection) == other
        assert not peer.closed.is_set() and owner.closed == []
