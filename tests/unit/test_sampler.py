"""The sampler task as its pacer drives it, through a real connection and hub.

``tests/unit/test_pacer.py`` checks the pacer's decisions with hand-picked
clocks; these check that the Trio sampler acts on them: it sleeps until the
pacer's next wake, keeps the 16 ms floor, only checks a changed pane's listing
while the gate is shut, tries a capture that timed out again a tick later, answers ``refresh`` and a scroll's forced
deadline. All on pytest-trio's ``autojump_clock``: every time below is virtual
and exact.
"""

from __future__ import annotations

import itertools
import uuid
from uuid import UUID

import pytest
import trio
import trio.testing

from mirror_host import control as c
from mirror_host.capture.values import SCREEN_ONLY, CaptureOptions, TextCapture, VTCapture
from mirror_host.errors import PaneNotFound, PaneSourceError
from mirror_host.host.sampler import CAPTURE_SECONDS, FIRST_CAPTURE_SECONDS
from mirror_host.limits import POLL_SECONDS
from mirror_host.session.lease import SCROLL_FORCE_SECONDS
from mirror_host.session.logged_in import PANE_BUSY
from mirror_host.session.pacer import MIN_FRAME_SECONDS
from mirror_host.wire import VTFramePacket
from tests.fakes.memory_source import MemorySource
from tests.unit.connection_harness import Peer, connect, hub_with, subscribe, subscribed_peer


class ListingCounter(MemorySource):
    """Counts the listing checks a sampler makes (``is_listed``)."""

    def __init__(self) -> None:
        super().__init__()
        self.listing_checks = 0

    def is_listed(self, pane_id: UUID) -> bool:
        self.listing_checks += 1
        return super().is_listed(pane_id)


def frame_times(peer: Peer) -> list[float]:
    return [at for at, item in peer.received if isinstance(item, VTFramePacket)]


async def test_a_pane_printing_flat_out_gets_a_frame_every_16_ms_no_sooner(
    autojump_clock: trio.testing.MockClock,
) -> None:
    source = MemorySource()
    pane = source.add_pane()
    async with subscribed_peer(source, pane) as (_owner, peer, sub):
        before = len(frame_times(peer))
        shown: list[bytes] = []

        async def acknowledge_every_frame() -> None:
            while True:
                frame = await peer.next(VTFramePacket)
                shown.append(frame.data)
                await peer.send(c.Acknowledge(sequence=frame.sequence, subscription_id=sub))

        async with trio.open_nursery() as client:
            client.start_soon(acknowledge_every_frame)
            for line in range(300):  # a line every millisecond
                source.output(pane, b"line %d\r\n" % line)
                await trio.sleep(0.001)
            await trio.sleep(MIN_FRAME_SECONDS)
            client.cancel_scope.cancel()
        assert b"line 299" in shown[-1]
        times = frame_times(peer)[before:]
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert len(times) >= 15
        assert min(gaps) >= MIN_FRAME_SECONDS - 1e-9  # the floor
        assert max(gaps) <= MIN_FRAME_SECONDS + 1e-6  # and no slower: acknowledged at once


async def test_behind_a_shut_gate_a_change_only_checks_the_listing_and_a_gone_pane_ends_the_lease(
    autojump_clock: trio.testing.MockClock,
) -> None:
    source = ListingCounter()
    pane = source.add_pane()
    async with hub_with(source) as (_, owner, nursery):
        peer = await connect(owner, nursery)
        sub = await subscribe(peer, pane)
        granted = trio.current_time()
        await peer.next(VTFramePacket)  # and never acknowledged: the gate stays shut
        await trio.sleep(0.05)
        checks, captures = source.listing_checks, source.panes[pane].captures
        source.output(pane, b"unseen")
        await trio.sleep_until(granted + 1.05)
        assert source.listing_checks - checks == 1  # once for the change, no spinning
        assert source.panes[pane].captures == captures  # nothing is read for a shut gate
        source.close_pane(pane)
        closed = trio.current_time()
        ended = await peer.next(c.Ended, within=POLL_SECONDS)
        assert ended == c.Ended(reason=c.EndReason.PANE_CLOSED)
        assert trio.current_time() == pytest.approx(closed)  # the source said so: at once
        assert frame_times(peer) == [granted]  # frame 1, with `subscribed` (of `sub`)
        assert ended and sub


async def test_an_acknowledgement_sends_what_changed_behind_the_gate_and_reads_nothing_else(
    autojump_clock: trio.testing.MockClock,
) -> None:
    source = MemorySource()
    pane = source.add_pane()
    async with hub_with(source) as (_, owner, nursery):
        peer = await connect(owner, nursery)
        sub = await subscribe(peer, pane)
        frame = await peer.next(VTFramePacket)
        await trio.sleep(1.0)
        captures = source.panes[pane].captures
        await peer.send(c.Acknowledge(sequence=frame.sequence, subscription_id=sub))
        await trio.sleep(1.0)
        assert source.panes[pane].captures == captures  # nothing changed: nothing read
        source.output(pane, b"after the ack")
        frame = await peer.next(VTFramePacket, within=0.001)  # at once: the gate is open
        assert b"after the ack" in frame.data
        source.output(pane, b" and behind the gate")
        await trio.sleep(1.0)
        acknowledged = trio.current_time()
        await peer.send(c.Acknowledge(sequence=frame.sequence, subscription_id=sub))
        frame = await peer.next(VTFramePacket, within=0.001)
        assert b"behind the gate" in frame.data
        assert trio.current_time() == pytest.approx(acknowledged)
        assert source.panes[pane].captures == captures + 2


async def test_refresh_sends_the_unchanged_screen_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    source = MemorySource()
    pane = source.add_pane()
    source.output(pane, b"same as before")
    async with subscribed_peer(source, pane) as (_owner, peer, sub):
        await trio.sleep(1.0)
        asked = trio.current_time()
        await peer.send(c.Refresh(subscription_id=sub))
        frame = await peer.next(VTFramePacket, within=0.001)
        assert frame.sequence == 2 and b"same as before" in frame.data
        assert trio.current_time() == asked


async def test_a_capture_past_its_deadline_is_tried_again_a_tick_later(
    autojump_clock: trio.testing.MockClock,
) -> None:
    source = MemorySource()
    pane = source.add_pane()
    async with subscribed_peer(source, pane) as (owner, peer, sub):
        await trio.sleep(1.0)
        source.delays["capture"] = CAPTURE_SECONDS + 1
        source.output(pane, b"late")  # the capture this starts takes 6 s
        changed = trio.current_time()
        await trio.sleep(0.1)
        del source.delays["capture"]  # the retry is quick, and nothing else changes
        await peer.frame_with(sub, "late", within=CAPTURE_SECONDS + POLL_SECONDS + 0.001)
        assert trio.current_time() == pytest.approx(changed + CAPTURE_SECONDS + POLL_SECONDS)
        assert owner.closed == []


async def test_a_scroll_that_changes_nothing_is_completed_by_a_frame_at_its_forced_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    source = MemorySource()
    pane = source.add_pane()  # no scrollback: scrolling up shows the same screen
    async with subscribed_peer(source, pane) as (_owner, peer, sub):
        await trio.sleep(1.0)
        request = uuid.uuid4()
        asked = trio.current_time()
        await peer.send(
            c.Scroll(request_id=request, direction=c.ScrollDirection.UP, subscription_id=sub)
        )
        frame = await peer.next(VTFramePacket, within=SCROLL_FORCE_SECONDS + 0.001)
        assert trio.current_time() == pytest.approx(asked + SCROLL_FORCE_SECONDS)
        result = await peer.next(c.ScrollResult, within=0.001)
        assert result == c.ScrollResult(
            request_id=request, sequence=frame.sequence, subscription_id=sub
        )


# ---------------------------------------------------------------- the subscribe's answer


async def _subscribe_without_waiting(peer: Peer, pane: UUID) -> None:
    await peer.send(
        c.Subscribe(pane_id=pane, representation=c.Representation.VT, intent=c.Intent.IF_FREE)
    )


async def test_a_pane_taken_during_the_first_capture_is_busy_and_the_watch_goes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    source = MemorySource()
    pane = source.add_pane()
    source.delays["first_capture"] = 2.0
    async with hub_with(source) as (hub, owner, nursery):
        late = await connect(owner, nursery)
        asked = trio.current_time()
        await _subscribe_without_waiting(late, pane)  # its first capture takes 2 s
        await trio.sleep(0.5)
        del source.delays["first_capture"]
        early = await connect(owner, nursery)
        await subscribe(early, pane)  # free when asked, and granted first
        assert await late.next(c.Failure, within=2.0) == c.Failure(error=PANE_BUSY)
        assert trio.current_time() == pytest.approx(asked + 2.0)
        await early.stream.aclose()
        await trio.sleep(1.0)
        assert not source.panes[pane].watchers  # the refused sampler's watch went too
        assert (await hub.status())["subscribed"] == 0
        assert not late.closed.is_set()  # paneBusy leaves the connection open


async def test_a_subscribe_refused_at_its_deadline_stops_its_capture_and_watch(
    autojump_clock: trio.testing.MockClock,
) -> None:
    source = MemorySource()
    pane = source.add_pane()
    source.output(pane, b"eventually")
    source.delays["first_capture"] = FIRST_CAPTURE_SECONDS + 3
    async with hub_with(source) as (_, owner, nursery):
        first, second = await connect(owner, nursery), await connect(owner, nursery)
        asked = trio.current_time()
        await _subscribe_without_waiting(first, pane)
        await trio.sleep(1.0)
        await _subscribe_without_waiting(second, pane)  # its first capture is as slow
        sub = (await first.next(c.Subscribed, within=FIRST_CAPTURE_SECONDS)).subscription_id
        assert trio.current_time() == pytest.approx(asked + FIRST_CAPTURE_SECONDS)
        assert await second.next(c.Failure, within=1.001) == c.Failure(error=PANE_BUSY)
        assert trio.current_time() == pytest.approx(asked + 1.0 + FIRST_CAPTURE_SECONDS)
        await first.frame_with(sub, "eventually", within=3.0)  # once its capture is in
        await first.stream.aclose()
        await trio.sleep(1.0)
        assert not source.panes[pane].watchers
        assert [op for op, _ in source.calls].count("first_capture") == 2


async def test_a_first_capture_past_its_deadline_is_itself_frame_1(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Subscribed at the deadline without a frame: the capture under way, once in, goes
    out as frame 1, rather than being dropped for a second one (a second slow read)."""
    source = MemorySource()
    pane = source.add_pane()
    source.output(pane, b"eventually")
    source.delays["first_capture"] = FIRST_CAPTURE_SECONDS + 3
    async with hub_with(source) as (_, owner, nursery):
        peer = await connect(owner, nursery)
        asked = trio.current_time()
        await _subscribe_without_waiting(peer, pane)
        sub = (await peer.next(c.Subscribed, within=FIRST_CAPTURE_SECONDS + 1)).subscription_id
        assert trio.current_time() == pytest.approx(asked + FIRST_CAPTURE_SECONDS)
        frame = await peer.frame_with(sub, "eventually", within=4.0)
        assert frame.sequence == 1
        assert trio.current_time() == pytest.approx(asked + FIRST_CAPTURE_SECONDS + 3)
        assert [op for op, _ in source.calls].count("capture") == 0


class UncancellableCaptures(MemorySource):
    """A source whose captures, once started, finish even when cancelled (a read on a
    worker thread, or a reply that must be read to keep a connection in step); the
    ``failing`` one (by the order captures started) then fails."""

    def __init__(self, failing: int, error: PaneSourceError) -> None:
        super().__init__()
        self.started = 0
        self.failing = failing
        self.error = error

    async def capture(
        self,
        pane_id: UUID,
        representation: c.Representation,
        *,
        options: CaptureOptions = SCREEN_ONLY,
    ) -> VTCapture | TextCapture:
        number, self.started = self.started, self.started + 1
        with trio.CancelScope(shield=True):
            capture = await super().capture(pane_id, representation, options=options)
        if number == self.failing:
            raise self.error
        return capture


@pytest.mark.parametrize(
    "error", [PaneNotFound("the pane is gone"), PaneSourceError("the source hiccupped")]
)
async def test_a_refused_sampler_whose_capture_fails_late_does_nothing_more(
    autojump_clock: trio.testing.MockClock, error: PaneSourceError
) -> None:
    """Told ``PANE_BUSY`` at its deadline, a subscriber stays open and unsubscribed,
    whatever its capture (still under way) ends with: never ``ended`` for a lease it
    never held (a host bug that stopped the whole host), never a silent close."""
    source = UncancellableCaptures(failing=1, error=error)  # the second subscriber's
    pane = source.add_pane()
    source.output(pane, b"eventually")
    source.delays["first_capture"] = FIRST_CAPTURE_SECONDS + 3
    async with hub_with(source) as (hub, owner, nursery):
        first, second = await connect(owner, nursery), await connect(owner, nursery)
        await _subscribe_without_waiting(first, pane)
        await trio.sleep(1.0)
        await _subscribe_without_waiting(second, pane)
        sub = (await first.next(c.Subscribed, within=FIRST_CAPTURE_SECONDS)).subscription_id
        assert await second.next(c.Failure, within=1.001) == c.Failure(error=PANE_BUSY)
        await first.frame_with(sub, "eventually", within=3.0)
        await trio.sleep(2.0)  # the refused capture has failed by now (at 9 s)
        assert source.started >= 2  # the refused one (the second) started, and failed
        await second.send(c.ListPanes())  # still open, still logged in
        assert len((await second.next(c.Panes)).panes) == 1
        assert not second.closed.is_set() and owner.closed == []
        source.output(pane, b"still mirrored")
        await first.frame_with(sub, "still mirrored")
        assert (await hub.status())["subscribed"] == 1
