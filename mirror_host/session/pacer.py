"""When a lease's sampler reads its pane: the sampler's timing as a pure pacer. Pure.

Theory of operation
-------------------

A subscription's sampler (host/sampler.py) captures its pane and offers the capture
to the session. When to do so is decided here, in the shape of aioquic's
``QuicPacketPacer``: the pacer never sleeps, captures or reads a clock; whoever
does asks it two questions at ``now`` and tells it what happened.

* :meth:`FramePacer.due` says what to do now (:class:`Pace`): nothing, only
  make sure the pane is still listed (the gate is shut), or capture and offer.
* :meth:`FramePacer.next_wake` says when to ask again if nothing wakes the
  sampler first (a change, an acknowledgement, a ``refresh``, a scroll applied).
* :meth:`FramePacer.wants_gate` says whether an acknowledgement (the gate
  opening) gives the sampler anything to do: only if a capture waits for the
  gate. Most acknowledgements come before the pane changes again, and
  waking the sampler for them would only have it decide to wait.

A capture is wanted when the pane changed, a ``refresh`` (or a subscribe without
a first frame) asks for one, a pending scroll's deadline passed since the last
capture (settled at 200 ms, forced at 800 ms), or an earlier
capture timed out and its retry is due. It is taken only while the session's gate
is open (:class:`~mirror_host.session.lease.FrameSchedule`: no unacknowledged
frame, no scroll settling), and never sooner than 16 ms after the last frame
sent, so a pane printing flat out costs at most about 60 frames a second. While
the gate is shut nothing is captured: the latest state goes out once the client
acknowledges, never a queue of stale frames.

Every source reports its own changes (``PaneSource.watch``): one that has to
poll its program (Herdr without an observe stream, agliteterm) polls itself, at
the rate its program affords, so nothing here keeps a poll tick.

No wake is ever in the past unless a capture is due, so a sampler driven by
this pacer cannot spin.

A sampler then reads::

    pacer.start(now)                       # the lease is granted
    while not session.is_closed:
        sleep until pacer.next_wake(now), or until woken
        match pacer.due(now):
            case Pace.WAIT: continue
            case Pace.CHECK_LISTED: end the lease if the pane is gone
            case Pace.CAPTURE:
                pacer.capture_started(now); capture (bounded)
                timed out: pacer.capture_timed_out(now)
                offered and sent: pacer.frame_sent(now)
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable

from mirror_host.limits import POLL_SECONDS
from mirror_host.session.lease import FrameSchedule

__all__ = ["MIN_FRAME_SECONDS", "FramePacer", "Pace"]

#: At most one frame per subscriber per 16 ms, however fast the pane changes.
MIN_FRAME_SECONDS = 0.016

_NEVER = math.inf


class Pace(enum.Enum):
    """What a sampler should do at a given moment."""

    #: Nothing: sleep until :meth:`FramePacer.next_wake` or a wakeup.
    WAIT = "wait"
    #: The gate is shut: capture nothing, only end the lease if the pane is gone
    #: (so a pane that closes ends its lease even if the client never acknowledges).
    CHECK_LISTED = "check-listed"
    #: Capture the pane now and offer it to the session.
    CAPTURE = "capture"


class FramePacer:
    """The timing of one subscription's sampler. See the module docstring."""

    def __init__(self, schedule: Callable[[float], FrameSchedule]) -> None:
        """``schedule`` is the session's :meth:`Session.frame_schedule`."""
        self._schedule = schedule
        #: The pane changed since the last capture started.
        self._changed = False
        #: A capture is wanted even if nothing changed.
        self._refresh = False
        #: When the last capture started: a scroll deadline passed since wants one.
        self._captured_at = -_NEVER
        self._last_frame = -_NEVER
        #: After a capture that did not finish: try again at this time.
        self._retry_at = _NEVER

    # ------------------------------------------------------------ what happened

    def start(self, now: float) -> None:
        """The lease is granted: sampling starts, and the 16 ms floor counts from ``now``."""
        self._last_frame = now
        self._retry_at = _NEVER

    def changed(self) -> None:
        """The source reported that the pane may have changed."""
        self._changed = True

    def refresh(self) -> None:
        """Capture even if nothing changed (``refresh``, or subscribed without a
        first frame)."""
        self._refresh = True

    def capture_started(self, now: float) -> None:
        """A capture starts at ``now``: it answers every reason wanted so far."""
        self._changed = self._refresh = False
        self._captured_at = now
        self._retry_at = _NEVER

    def capture_timed_out(self, now: float) -> None:
        """The capture did not finish in time: try again Prowl's 200 ms tick
        later, even if nothing wakes the sampler (never a reason to close)."""
        self._retry_at = now + POLL_SECONDS

    def frame_sent(self, now: float) -> None:
        """The session sent the capture as a frame at ``now``."""
        self._last_frame = now

    # ------------------------------------------------------------ decisions

    def due(self, now: float) -> Pace:
        """What to do at ``now``."""
        schedule = self._schedule(now)
        if not schedule.open:
            return Pace.CHECK_LISTED
        if self._wanted(now, schedule) and now >= self._last_frame + MIN_FRAME_SECONDS:
            return Pace.CAPTURE
        return Pace.WAIT

    def wants_gate(self, now: float) -> bool:
        """Whether the gate opening at ``now`` gives the sampler something to do: a
        capture is wanted, or a retry waits for the gate (which :meth:`next_wake`
        leaves out while the gate is shut)."""
        return self._retry_at != _NEVER or self._wanted(now, self._schedule(now))

    def next_wake(self, now: float) -> float:
        """When to ask :meth:`due` again if nothing wakes the sampler first
        (``math.inf``: only a wakeup). Never before ``now`` unless a capture is due."""
        schedule = self._schedule(now)
        wakes = [] if schedule.wake_at is None else [schedule.wake_at]
        if schedule.open:  # captures wait for the gate
            if self._wanted(now, schedule):
                return self._last_frame + MIN_FRAME_SECONDS
            wakes.append(self._retry_at)
        return min(wakes, default=_NEVER)

    def _wanted(self, now: float, schedule: FrameSchedule) -> bool:
        passed_at = schedule.passed_at
        return (
            self._changed
            or self._refresh
            or (passed_at is not None and passed_at > self._captured_at)
            or now >= self._retry_at
        )
