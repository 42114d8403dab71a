"""The sampler's timing, decided by the pure pacer with hand-picked clocks."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mirror_host.limits import POLL_SECONDS
from mirror_host.session.lease import FrameSchedule
from mirror_host.session.pacer import MIN_FRAME_SECONDS, FramePacer, Pace


@dataclass
class Gate:
    """Stands in for ``Session.frame_schedule``: open or shut, scroll deadlines."""

    open: bool = True
    deadlines: tuple[float, ...] = ()
    #: A scroll settles until then: the gate is shut meanwhile.
    settles_until: float = -math.inf

    def __call__(self, now: float) -> FrameSchedule:
        return FrameSchedule(
            open=self.open and now >= self.settles_until,
            passed_at=max((d for d in self.deadlines if d <= now), default=None),
            wake_at=min((d for d in self.deadlines if d > now), default=None),
        )


def pacer(gate: Gate | None = None, *, start: float = 10.0) -> FramePacer:
    made = FramePacer(gate or Gate())
    made.start(start)
    return made


def capture(p: FramePacer, now: float, *, sent: bool = True) -> None:
    assert p.due(now) is Pace.CAPTURE
    p.capture_started(now)
    if sent:
        p.frame_sent(now)


def test_a_push_source_that_does_not_change_is_never_read() -> None:
    p = pacer()
    assert p.due(11.0) is Pace.WAIT
    assert p.next_wake(11.0) == math.inf  # only a wakeup


def test_a_change_is_captured_but_not_within_16_ms_of_the_last_frame() -> None:
    p = pacer()
    p.changed()
    assert p.due(10.005) is Pace.WAIT  # sampling started at 10.0: the floor runs from there
    assert p.next_wake(10.005) == pytest.approx(10.0 + MIN_FRAME_SECONDS)
    capture(p, 10.016)
    assert p.due(10.02) is Pace.WAIT and p.next_wake(10.02) == math.inf
    p.changed()
    p.changed()  # two changes, one capture
    assert p.due(10.03) is Pace.WAIT
    assert p.next_wake(10.03) == pytest.approx(10.032)
    capture(p, 10.032)
    assert p.due(10.1) is Pace.WAIT


def test_a_change_long_after_the_last_frame_is_captured_at_once() -> None:
    p = pacer()
    p.changed()
    assert p.next_wake(12.0) <= 12.0  # already due: no sleep
    assert p.due(12.0) is Pace.CAPTURE


def test_a_change_during_a_capture_asks_for_another() -> None:
    p = pacer()
    p.changed()
    p.capture_started(11.0)
    p.changed()  # the pane moved while it was being read
    p.frame_sent(11.01)
    assert p.due(11.02) is Pace.WAIT
    assert p.due(11.026) is Pace.CAPTURE


def test_a_capture_that_was_not_sent_does_not_move_the_floor() -> None:
    p = pacer()
    p.changed()
    capture(p, 11.0, sent=False)  # unchanged: the session suppressed it
    p.changed()
    assert p.due(11.001) is Pace.CAPTURE


def test_while_the_gate_is_shut_only_the_listing_is_checked() -> None:
    gate = Gate(open=False)
    p = pacer(gate)
    p.changed()
    p.refresh()
    assert p.due(11.0) is Pace.CHECK_LISTED
    assert p.next_wake(11.0) == math.inf  # the acknowledgement wakes the sampler
    gate.open = True  # acknowledged: the latest state goes out, once
    capture(p, 11.5)
    assert p.due(11.6) is Pace.WAIT


def test_refresh_captures_an_unchanged_pane() -> None:
    p = pacer()
    p.refresh()
    capture(p, 10.5)
    assert p.due(10.6) is Pace.WAIT


def test_subscribed_without_a_first_frame_samples_16_ms_after_the_grant() -> None:
    p = pacer()
    p.refresh()
    assert p.next_wake(10.0) == pytest.approx(10.016)
    assert p.due(10.0) is Pace.WAIT
    assert p.due(10.016) is Pace.CAPTURE


def test_scroll_deadlines_wake_the_sampler_and_make_a_capture_due() -> None:
    gate = Gate(deadlines=(12.2, 12.8))
    p = pacer(gate)
    assert p.next_wake(12.0) == pytest.approx(12.2)
    assert p.due(12.1) is Pace.WAIT
    capture(p, 12.2)  # settled: the next frame completes the scroll
    assert p.next_wake(12.3) == pytest.approx(12.8)
    gate.deadlines = ()  # completed
    assert p.due(12.3) is Pace.WAIT and p.next_wake(12.3) == math.inf


def test_an_unchanged_pane_after_settling_waits_for_the_forced_deadline() -> None:
    gate = Gate(deadlines=(12.2, 12.8))
    p = pacer(gate)
    capture(p, 12.2, sent=False)  # unchanged: it cannot complete the scroll yet
    assert p.due(12.25) is Pace.WAIT
    assert p.next_wake(12.25) == pytest.approx(12.8)  # not every 16 ms until then
    assert p.due(12.8) is Pace.CAPTURE  # forced out


def test_a_scroll_deadline_that_passed_behind_a_shut_gate_is_answered_when_it_opens() -> None:
    gate = Gate(open=False, deadlines=(12.2, 12.8))
    p = pacer(gate)
    assert p.due(12.3) is Pace.CHECK_LISTED
    gate.open = True  # the outstanding frame is acknowledged
    assert p.due(12.3) is Pace.CAPTURE


def test_scroll_settling_shuts_the_gate_but_its_deadline_still_wakes() -> None:
    gate = Gate(open=False, deadlines=(12.2, 12.8))
    p = pacer(gate)
    assert p.due(12.1) is Pace.CHECK_LISTED
    assert p.next_wake(12.1) == pytest.approx(12.2)


def test_a_capture_that_timed_out_is_tried_again_a_tick_later() -> None:
    p = pacer()
    p.changed()
    p.capture_started(11.0)
    p.capture_timed_out(16.0)  # five seconds without an answer
    assert p.next_wake(16.0) == pytest.approx(16.0 + POLL_SECONDS)
    assert p.due(16.1) is Pace.WAIT
    capture(p, 16.2)
    assert p.next_wake(16.3) == math.inf  # the retry was answered


def test_a_retry_waits_for_the_gate() -> None:
    gate = Gate()
    p = pacer(gate)
    p.capture_started(11.0)
    p.capture_timed_out(11.0)
    gate.open = False
    assert p.next_wake(11.5) == math.inf  # past its time, but nothing may be sent
    gate.open = True
    assert p.due(11.5) is Pace.CAPTURE


def test_an_acknowledgement_wakes_the_sampler_only_for_what_waited_for_the_gate() -> None:
    gate = Gate()
    p = pacer(gate)
    p.changed()
    capture(p, 10.5)
    gate.open = False  # the frame waits for its acknowledgement
    assert p.due(10.55) is Pace.CHECK_LISTED
    gate.open = True  # acknowledged
    assert not p.wants_gate(10.6)  # nothing changed meanwhile: nothing to do
    assert p.due(10.6) is Pace.WAIT and p.next_wake(10.6) == math.inf
    gate.open = False
    p.changed()  # behind the shut gate
    gate.open = True
    assert p.wants_gate(10.7)
    assert p.due(10.7) is Pace.CAPTURE


def test_a_retry_or_a_passed_scroll_deadline_behind_the_gate_wakes_the_sampler() -> None:
    gate = Gate(open=False)
    p = pacer(gate)
    p.capture_started(11.0)
    p.capture_timed_out(11.0)
    gate.open = True
    assert p.wants_gate(11.1)  # before its time, but the shut gate's sleep left it out
    assert p.next_wake(11.1) == pytest.approx(11.0 + POLL_SECONDS)
    capture(p, 11.2)
    gate.open, gate.deadlines = False, (12.2, 12.8)
    assert p.next_wake(12.0) == pytest.approx(12.2)
    gate.open = True
    assert not p.wants_gate(12.1)  # its deadline still wakes the sampler by itself
    assert p.wants_gate(12.3)  # passed behind the gate: answered as it opens


# ---------------------------------------------------------------- any history


events = st.lists(
    st.tuples(
        st.floats(min_value=0.0, max_value=0.5),
        st.sampled_from(["change", "refresh", "shut", "open", "timeout", "scroll", "nothing"]),
    ),
    max_size=30,
)


@settings(max_examples=50)
@given(events=events)
def test_a_sampler_driven_by_the_pacer_never_spins_and_keeps_the_floor(
    events: list[tuple[float, str]],
) -> None:
    """Run a sampler the way the hub does, against outside events at given delays:
    frames are at least 16 ms apart, every wanted capture happens, the loop
    never wakes twice at the same moment without doing something, and an
    acknowledgement (the gate opening) that does not wake the sampler
    (``wants_gate``) leaves nothing for it to do."""
    gate = Gate()
    p = FramePacer(gate)
    now = 0.0
    p.start(now)
    frames: list[float] = []

    def run_until(until: float) -> None:
        nonlocal now
        while (wake := p.next_wake(now)) <= until:
            at_once = wake <= now
            now = max(now, wake)
            pace = p.due(now)
            if pace is Pace.CAPTURE:
                p.capture_started(now)
                p.frame_sent(now)
                frames.append(now)
                if gate.deadlines and now >= gate.deadlines[0]:
                    gate.deadlines = ()  # this frame completed the scroll
            else:
                assert not at_once, f"woken at once at {now} for nothing ({pace}): a spin"
        now = until

    for delay, what in events:
        run_until(now + delay)
        if what == "change":
            p.changed()
        elif what == "refresh":
            p.refresh()
        elif what == "shut":
            gate.open = False
        elif what == "open":
            asleep_until = p.next_wake(now)  # what the sampler sleeps on, gate shut or not
            gate.open = True
            if not p.wants_gate(now):
                assert p.due(now) is not Pace.CAPTURE
                assert p.next_wake(now) == asleep_until
        elif what == "timeout":
            p.capture_timed_out(now)
        elif what == "scroll" and not gate.deadlines:  # applied now: settle, then force
            gate.deadlines = (now + 0.2, now + 0.8)
            gate.settles_until = now + 0.2
    gate.open = True
    run_until(now + 1.0)
    assert not gate.deadlines  # every scroll was completed by a frame
    assert all(b - a >= MIN_FRAME_SECONDS - 1e-9 for a, b in itertools.pairwise(frames))
    assert p.due(now) is Pace.WAIT  # nothing wanted is left behind
