"""One subscription's bookkeeping: the frame gate and remote scroll. Pure.

Theory of operation
-------------------

A connection holds at most one lease. The lease owns:

* the **frame gate** (:class:`FrameGate`): sequences start at 1 and grow by one
  per frame sent; at most one frame is unacknowledged; a frame equal to the last
  one sent is suppressed unless ``refresh`` cleared the baseline; an ACK that
  does not name the outstanding sequence is a protocol violation;
* the **scroll tracker** (:class:`ScrollTracker`): one pending scroll at a time,
  the most recent request id remembered so a duplicate is replayed and never
  re-applied, and the 200 ms / 800 ms timing after the scroll is applied.

Time comes in as ``now`` (monotonic seconds). Nothing here sends bytes; the
session asks the lease what to do and encodes the messages.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from uuid import UUID

from mirror_host.control import Representation, ScrollDirection, Subscribe
from mirror_host.errors import ProtocolViolation
from mirror_host.panes.model import Capability, Capture, ScrollBounds, VTCapture

__all__ = [
    "SCROLL_FORCE_SECONDS",
    "SCROLL_SETTLE_SECONDS",
    "FrameGate",
    "Lease",
    "ScrollOutcome",
    "ScrollTracker",
    "frame_key",
]

#: After a scroll is applied, frames wait this long so the pane can redraw.
SCROLL_SETTLE_SECONDS = 0.2
#: If no changed frame completed the scroll by then, an unchanged one does.
SCROLL_FORCE_SECONDS = 0.8


class FrameGate:
    """At most one unacknowledged frame, no unchanged frames (protocol.md §4.3)."""

    def __init__(self) -> None:
        self.next_sequence = 1
        self.outstanding: int | None = None
        self._last_key: object | None = None
        self._has_last = False

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
        return force or not self._has_last or key != self._last_key

    def commit(self, key: object) -> int:
        """Assign the next sequence to a frame :meth:`would_send` just allowed."""
        assert self.outstanding is None, "commit() only after would_send()"
        sequence = self.next_sequence
        self.next_sequence += 1
        self.outstanding = sequence
        self._last_key = key
        self._has_last = True
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
        self._has_last = False
        self._last_key = None


class ScrollOutcome(enum.Enum):
    """What the lease says about a ``scroll`` message."""

    APPLY = "apply"  # new request: the host must scroll the pane
    REPLAY_RESULT = "replay-result"  # duplicate of a completed request
    REPLAY_FAILURE = "replay-failure"  # duplicate of a failed request
    IGNORE = "ignore"  # duplicate of the pending request
    BUSY = "busy"  # another request is pending
    UNAVAILABLE = "unavailable"  # the source cannot scroll


@dataclass(slots=True)
class _ScrollRequest:
    request_id: UUID
    direction: ScrollDirection
    applied_at: float | None = None
    result_sequence: int | None = None
    failed: bool = False


class ScrollTracker:
    """One pending scroll; the latest request id remembered for replays."""

    def __init__(self, *, can_scroll: bool) -> None:
        self.can_scroll = can_scroll
        self._latest: _ScrollRequest | None = None

    @property
    def pending(self) -> _ScrollRequest | None:
        """The request still waiting for its frame, if any."""
        latest = self._latest
        if latest is None or latest.failed or latest.result_sequence is not None:
            return None
        return latest

    def request(self, request_id: UUID, direction: ScrollDirection) -> ScrollOutcome:
        """Classify a ``scroll`` message.

        Raises:
            ProtocolViolation: the latest request id came back with another direction.
        """
        latest = self._latest
        if latest is not None and latest.request_id == request_id:
            if latest.direction is not direction:
                raise ProtocolViolation("scroll request id reused with another direction")
            if latest.failed:
                return ScrollOutcome.REPLAY_FAILURE
            if latest.result_sequence is not None:
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
        if latest is None or latest.result_sequence is None:
            return None
        return latest.request_id, latest.result_sequence

    def applied(self, request_id: UUID, now: float) -> None:
        """The host scrolled the pane at ``now``: start the settle timer."""
        pending = self.pending
        if pending is not None and pending.request_id == request_id:
            pending.applied_at = now

    def failed(self, request_id: UUID) -> None:
        """The scroll could not be applied; duplicates replay the failure."""
        pending = self.pending
        if pending is not None and pending.request_id == request_id:
            pending.failed = True

    def frame_policy(self, now: float) -> tuple[bool, bool]:
        """``(may_send, force)`` for a frame sampled at ``now``.

        While the host is still applying a scroll, frames go out as usual (the
        pane keeps changing under typed input, and a slow source must not freeze
        the mirror); none of them completes the scroll. Once it is applied, no
        frame goes out while it settles (first 200 ms); after that the next frame
        completes it, and from 800 ms on even an unchanged one does.
        """
        pending = self.pending
        if pending is None or pending.applied_at is None:
            return True, False
        elapsed = now - pending.applied_at
        if elapsed < SCROLL_SETTLE_SECONDS:
            return False, False
        return True, elapsed >= SCROLL_FORCE_SECONDS

    def completes_with(self, sequence: int) -> UUID | None:
        """Mark the pending, settled request complete by frame ``sequence``."""
        pending = self.pending
        if pending is None or pending.applied_at is None:
            return None
        pending.result_sequence = sequence
        return pending.request_id

    def deadlines(self) -> tuple[float, ...]:
        """When the host must sample for the pending, applied scroll: settled, forced."""
        pending = self.pending
        if pending is None or pending.applied_at is None:
            return ()
        return (
            pending.applied_at + SCROLL_SETTLE_SECONDS,
            pending.applied_at + SCROLL_FORCE_SECONDS,
        )


def frame_key(
    capture: Capture, *, with_viewport: bool, with_bounds: bool, with_styled: bool = False
) -> object:
    """What the gate compares: only the parts this subscriber opted into."""
    bounds: ScrollBounds | None = capture.scroll_bounds if with_bounds else None
    if isinstance(capture, VTCapture):
        viewport = capture.viewport_text if with_viewport else None
        styled = capture.styled_scrollback if with_styled else None
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
        wants_viewport_text: bool,
        wants_scroll_state: bool,
        can_scroll: bool,
        wants_styled_scrollback: bool = False,
    ) -> None:
        self.subscription_id = subscription_id
        self.pane_id = pane_id
        self.representation = representation
        self.wants_viewport_text = wants_viewport_text
        self.wants_scroll_state = wants_scroll_state
        #: Only together with viewport text (so only on ``vt-v1``).
        self.wants_styled_scrollback = wants_styled_scrollback and wants_viewport_text
        self.gate = FrameGate()
        self.scroll = ScrollTracker(can_scroll=can_scroll)

    @classmethod
    def for_request(
        cls, request: Subscribe, *, subscription_id: UUID, capabilities: frozenset[str]
    ) -> Lease:
        """The lease a ``subscribe`` gets, given what the host advertises.

        Opt-ins the host does not support are ignored (protocol.md §4.3):
        viewport text only for ``vt-v1``, styled scrollback only with viewport
        text, scroll state for both representations.
        """
        is_vt = request.representation is Representation.VT
        return cls(
            subscription_id=subscription_id,
            pane_id=request.pane_id,
            representation=request.representation,
            wants_viewport_text=bool(request.include_viewport_text)
            and is_vt
            and Capability.VIEWPORT_TEXT in capabilities,
            wants_scroll_state=bool(request.include_scroll_state)
            and Capability.SCROLL_STATE in capabilities,
            can_scroll=Capability.REMOTE_SCROLL in capabilities,
            wants_styled_scrollback=bool(request.include_styled_scrollback)
            and Capability.STYLED_SCROLLBACK in capabilities,
        )
