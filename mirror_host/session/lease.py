"""One subscription's bookkeeping: opt-ins, the frame gate and remote scroll. Pure.

Theory of operation
-------------------

A connection holds at most one lease. The lease owns:

* the **opt-ins** (a :class:`~mirror_host.capture.values.CaptureOptions`): what
  the subscriber asked for beyond the frame itself and the host supports,
  decided once when the lease is made, and what each capture for it carries;
* the **frame gate** (:class:`FrameGate`): sequences start at 1 and grow by one
  per frame sent; at most one frame is unacknowledged; a frame equal to the last
  one sent is suppressed unless ``refresh`` cleared the baseline; an ACK that
  does not name the outstanding sequence is a protocol violation;
* the **scroll tracker** (:class:`ScrollTracker`): one pending scroll at a time,
  the most recent request id remembered so a duplicate is replayed and never
  re-applied, and the 200 ms / 800 ms timing after the scroll is applied;
* the **history desk** (:class:`~mirror_host.session.history.HistoryDesk`): the
  lease's snapshot and the requests waiting for a capture.

Time comes in as ``now`` (monotonic seconds). Nothing here queues bytes: the
session asks the lease what to send and sends it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from uuid import UUID

from mirror_host.capture.values import (
    Capability,
    Capture,
    CaptureOptions,
    ScrollBounds,
    VTCapture,
)
from mirror_host.control import (
    ControlMessage,
    Representation,
    ScrollDirection,
    ScrollState,
    StyledScrollback,
    Subscribe,
    Viewport,
)
from mirror_host.errors import LocalProtocolError, ProtocolViolation
from mirror_host.session.history import HistoryDesk
from mirror_host.wire import TextFramePacket, VTFramePacket, encode_packet

__all__ = [
    "SCROLL_FORCE_SECONDS",
    "SCROLL_SETTLE_SECONDS",
    "FrameGate",
    "FrameSchedule",
    "Lease",
    "ScrollOutcome",
    "ScrollStage",
    "ScrollTracker",
    "frame_key",
    "granted_opt_ins",
]

#: After a scroll is applied, frames wait this long so the pane can redraw.
SCROLL_SETTLE_SECONDS = 0.2
#: If no changed frame completed the scroll by then, an unchanged one does.
SCROLL_FORCE_SECONDS = 0.8


def granted_opt_ins(request: Subscribe, capabilities: frozenset[str]) -> CaptureOptions:
    """What ``request`` asked for beyond the frame itself, less what the host does
    not advertise: what each capture for its lease carries.

    Unsupported opt-ins are ignored (protocol.md §4.3): viewport text only for
    ``vt-v1``, styled scrollback only with viewport text, scroll state for both
    representations.
    """
    return CaptureOptions(
        viewport_text=bool(request.include_viewport_text)
        and request.representation is Representation.VT
        and Capability.VIEWPORT_TEXT in capabilities,
        scroll_bounds=bool(request.include_scroll_state)
        and Capability.SCROLL_STATE in capabilities,
        styled_scrollback=bool(request.include_styled_scrollback)
        and Capability.STYLED_SCROLLBACK in capabilities,
    )


#: The gate's baseline before any frame (and after ``refresh``): equal to no key.
_NO_FRAME = object()


class FrameGate:
    """At most one unacknowledged frame, no unchanged frames (protocol.md §4.3).

    Two states: *open* (``outstanding`` is ``None``) and *waiting* for the
    acknowledgement of frame ``outstanding``.
    """

    def __init__(self) -> None:
        self.next_sequence = 1
        self.outstanding: int | None = None
        self._last_key: object = _NO_FRAME

    @property
    def is_open(self) -> bool:
        """True when no frame awaits its acknowledgement."""
        return self.outstanding is None

    def would_send(self, key: object, *, force: bool = False) -> bool:
        """Whether a frame with this comparison key may go now.

        ``force`` sends an unchanged frame (a scroll that must complete), but
        never bypasses an outstanding frame.
        """
        if self.outstanding is not None:
            return False
        return force or self._last_key is _NO_FRAME or key != self._last_key

    def commit(self, key: object) -> int:
        """Assign the next sequence to a frame :meth:`would_send` just allowed."""
        assert self.outstanding is None, "commit() only after would_send()"
        sequence = self.next_sequence
        self.next_sequence += 1
        self.outstanding = sequence
        self._last_key = key
        return sequence

    def acknowledge(self, sequence: int) -> None:
        """Open the gate.

        Raises:
            ProtocolViolation: nothing is outstanding, or ``sequence`` is not it.
        """
        if self.outstanding is None:
            raise ProtocolViolation(f"acknowledge {sequence} while no frame is outstanding")
        if sequence != self.outstanding:
            raise ProtocolViolation(
                f"acknowledge {sequence} does not match outstanding frame {self.outstanding}"
            )
        self.outstanding = None

    def refresh(self) -> None:
        """Forget the last frame so an unchanged screen is sent again."""
        self._last_key = _NO_FRAME


class ScrollOutcome(enum.Enum):
    """What the lease says about a ``scroll`` message."""

    APPLY = "apply"  # new request: the host must scroll the pane
    REPLAY_RESULT = "replay-result"  # duplicate of a completed request
    REPLAY_FAILURE = "replay-failure"  # duplicate of a failed request
    IGNORE = "ignore"  # duplicate of the pending request
    BUSY = "busy"  # another request is pending
    UNAVAILABLE = "unavailable"  # the source cannot scroll


class ScrollStage(enum.Enum):
    """Where one scroll request is; the first two are *pending*."""

    #: The host is scrolling the pane; frames flow but none completes it.
    APPLYING = "applying"
    #: Scrolled at ``applied_at``: settling for 200 ms, then the next frame completes it.
    APPLIED = "applied"
    #: Frame ``result_sequence`` completed it; a duplicate replays ``scrollResult``.
    COMPLETED = "completed"
    #: The host could not scroll; a duplicate replays the failure.
    FAILED = "failed"


_PENDING = (ScrollStage.APPLYING, ScrollStage.APPLIED)


@dataclass(slots=True)
class _ScrollRequest:
    request_id: UUID
    direction: ScrollDirection
    stage: ScrollStage = ScrollStage.APPLYING
    applied_at: float = 0.0
    result_sequence: int = 0


class ScrollTracker:
    """One pending scroll; the latest request id remembered for replays."""

    def __init__(self, *, can_scroll: bool) -> None:
        self.can_scroll = can_scroll
        self._latest: _ScrollRequest | None = None

    @property
    def pending(self) -> _ScrollRequest | None:
        """The request still waiting for its frame, if any."""
        latest = self._latest
        return latest if latest is not None and latest.stage in _PENDING else None

    @property
    def settled(self) -> bool:
        """No applied scroll waits for its frame: frames go as the gate allows."""
        latest = self._latest
        return latest is None or latest.stage is not ScrollStage.APPLIED

    def _applied(self) -> _ScrollRequest | None:
        latest = self._latest
        return latest if latest is not None and latest.stage is ScrollStage.APPLIED else None

    def request(self, request_id: UUID, direction: ScrollDirection) -> ScrollOutcome:
        """Classify a ``scroll`` message.

        Raises:
            ProtocolViolation: the latest request id came back with another direction.
        """
        latest = self._latest
        if latest is not None and latest.request_id == request_id:
            if latest.direction is not direction:
                raise ProtocolViolation("scroll request id reused with another direction")
            if latest.stage is ScrollStage.FAILED:
                return ScrollOutcome.REPLAY_FAILURE
            if latest.stage is ScrollStage.COMPLETED:
                return ScrollOutcome.REPLAY_RESULT
            return ScrollOutcome.IGNORE
        if self.pending is not None:
            return ScrollOutcome.BUSY
        if not self.can_scroll:
            return ScrollOutcome.UNAVAILABLE
        self._latest = _ScrollRequest(request_id, direction)
        return ScrollOutcome.APPLY

    @property
    def latest_result(self) -> tuple[UUID, int] | None:
        """``(request id, sequence)`` of the latest completed request."""
        latest = self._latest
        if latest is None or latest.stage is not ScrollStage.COMPLETED:
            return None
        return latest.request_id, latest.result_sequence

    def applied(self, request_id: UUID, now: float) -> None:
        """The host scrolled the pane at ``now``: start the settle timer."""
        pending = self.pending
        if pending is not None and pending.request_id == request_id:
            pending.stage, pending.applied_at = ScrollStage.APPLIED, now

    def failed(self, request_id: UUID) -> None:
        """The scroll could not be applied; duplicates replay the failure."""
        pending = self.pending
        if pending is not None and pending.request_id == request_id:
            pending.stage = ScrollStage.FAILED

    def frame_policy(self, now: float) -> tuple[bool, bool]:
        """``(may_send, force)`` for a frame sampled at ``now``.

        While the host is still applying a scroll, frames go out as usual (the
        pane keeps changing under typed input, and a slow source must not freeze
        the mirror); none of them completes the scroll. Once it is applied, no
        frame goes out while it settles (first 200 ms); after that the next frame
        completes it, and from 800 ms on even an unchanged one does.
        """
        applied = self._applied()
        if applied is None:
            return True, False
        elapsed = now - applied.applied_at
        if elapsed < SCROLL_SETTLE_SECONDS:
            return False, False
        return True, elapsed >= SCROLL_FORCE_SECONDS

    def completes_with(self, sequence: int) -> UUID | None:
        """Mark the pending, settled request complete by frame ``sequence``."""
        applied = self._applied()
        if applied is None:
            return None
        applied.stage, applied.result_sequence = ScrollStage.COMPLETED, sequence
        return applied.request_id

    def deadlines(self) -> tuple[float, ...]:
        """When the host must sample for the pending, applied scroll: settled, forced."""
        applied = self._applied()
        if applied is None:
            return ()
        return (
            applied.applied_at + SCROLL_SETTLE_SECONDS,
            applied.applied_at + SCROLL_FORCE_SECONDS,
        )


@dataclass(frozen=True, slots=True)
class FrameSchedule:
    """What the sampler of a lease should do at ``now``.

    ``open``: a capture taken now could be sent (a lease, the gate open, no
    scroll settling). ``passed_at``: the latest deadline of a pending scroll
    that has already passed (sample then, even if the pane did not change).
    ``wake_at``: the next scroll deadline still ahead, if any.
    """

    open: bool
    passed_at: float | None
    wake_at: float | None

    @property
    def due(self) -> bool:
        """A pending scroll's deadline has passed."""
        return self.passed_at is not None


#: The schedule of a connection that holds no lease (or has closed), or whose
#: gate is shut with no scroll pending.
NO_FRAMES = FrameSchedule(open=False, passed_at=None, wake_at=None)
#: The gate is open and no scroll is pending.
_GATE_OPEN = FrameSchedule(open=True, passed_at=None, wake_at=None)


def frame_key(capture: Capture, opt_ins: CaptureOptions) -> object:
    """What the gate compares: only the parts this subscriber opted into."""
    bounds: ScrollBounds | None = capture.scroll_bounds if opt_ins.scroll_bounds else None
    if isinstance(capture, VTCapture):
        viewport = capture.viewport_text if opt_ins.viewport_text else None
        styled = capture.styled_scrollback if opt_ins.styled_scrollback else None
        return ("vt", capture.columns, capture.rows, capture.data, viewport, bounds, styled)
    return ("text", capture.columns, capture.rows, capture.truncated, capture.text, bounds)


class Lease:
    """The one subscription a connection may hold."""

    def __init__(
        self,
        *,
        subscription_id: UUID,
        pane_id: UUID,
        representation: Representation,
        opt_ins: CaptureOptions,
        can_scroll: bool,
    ) -> None:
        self.subscription_id = subscription_id
        self.pane_id = pane_id
        self.representation = representation
        self.opt_ins = opt_ins
        self.gate = FrameGate()
        self.scroll = ScrollTracker(can_scroll=can_scroll)
        self.history = HistoryDesk(subscription_id)

    @classmethod
    def for_request(
        cls, request: Subscribe, *, subscription_id: UUID, capabilities: frozenset[str]
    ) -> Lease:
        """The lease a ``subscribe`` gets, given what the host advertises."""
        return cls(
            subscription_id=subscription_id,
            pane_id=request.pane_id,
            representation=request.representation,
            opt_ins=granted_opt_ins(request, capabilities),
            can_scroll=Capability.REMOTE_SCROLL in capabilities,
        )

    def frame_schedule(self, now: float) -> FrameSchedule:
        """What this lease's sampler should do at ``now`` (see :class:`FrameSchedule`)."""
        if self.scroll.settled:
            # The common case, asked several times per frame: no scroll in the
            # way, so the gate alone decides, and the answer needs no new value.
            return _GATE_OPEN if self.gate.is_open else NO_FRAMES
        may_send, _ = self.scroll.frame_policy(now)
        deadlines = self.scroll.deadlines()
        return FrameSchedule(
            open=self.gate.is_open and may_send,
            passed_at=max((d for d in deadlines if d <= now), default=None),
            wake_at=min((d for d in deadlines if d > now), default=None),
        )

    def frame_packet(self, capture: Capture, sequence: int) -> bytes:
        """The binary frame ``sequence`` for ``capture``.

        Raises:
            LocalProtocolError: a VT capture for a text lease, or a capture the
                wire cannot carry (too large).
        """
        if isinstance(capture, VTCapture):
            if self.representation is not Representation.VT:
                raise LocalProtocolError("a VT capture for a text lease")
            return encode_packet(
                VTFramePacket(
                    self.subscription_id, sequence, capture.columns, capture.rows, capture.data
                )
            )
        return encode_packet(
            TextFramePacket(
                self.subscription_id,
                sequence,
                capture.columns,
                capture.rows,
                capture.truncated,
                capture.text,
            )
        )

    def companions(self, capture: Capture, sequence: int) -> list[ControlMessage]:
        """What goes just before frame ``sequence``, as opted in and in this order:
        ``viewport`` (VT only; with the styled archive when that is on too), then
        ``scrollState``."""
        opt_ins, subscription_id = self.opt_ins, self.subscription_id
        messages: list[ControlMessage] = []
        if opt_ins.viewport_text and isinstance(capture, VTCapture):
            archive, styled = capture.styled_scrollback, None
            if archive is not None and opt_ins.styled_scrollback:
                styled = StyledScrollback(data=archive.data, row_offset=archive.row_offset)
            messages.append(
                Viewport(
                    styled_scrollback=styled,
                    text=capture.viewport_text,
                    sequence=sequence,
                    subscription_id=subscription_id,
                )
            )
        if opt_ins.scroll_bounds:
            bounds = capture.scroll_bounds or ScrollBounds()
            messages.append(
                ScrollState(
                    at_top=bounds.at_top,
                    at_bottom=bounds.at_bottom,
                    sequence=sequence,
                    subscription_id=subscription_id,
                )
            )
        return messages
