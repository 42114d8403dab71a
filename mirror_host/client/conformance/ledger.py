"""What the protocol lets a host send on one subscription: the frame rules. Pure.

A :class:`FrameLedger` is told what the client sent (acknowledgements,
refreshes, scrolls) and judges each frame the host sends:

* every frame carries the subscription's lease and its representation's kind;
* sequences start at 1 and grow by exactly one;
* at most one frame is unacknowledged: a frame that arrives while the previous
  one still waits for its ACK breaks the frame gate;
* a frame equal to the previous one is sent only after a ``refresh`` or a
  ``scroll`` (both force one unchanged frame);
* on a lease that opted in to scroll state, exactly one ``scrollState`` with
  the frame's sequence comes before every frame, and never one without its
  frame (Prowl's Android and Mac clients close the connection otherwise).

The ledger never reads a clock: ordering is enough, because TCP delivers the
client's ACK to the host before anything the host sends in reply to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from uuid import UUID

from mirror_host.control import Representation

__all__ = ["FrameLedger", "FrameView"]


@dataclass(frozen=True, slots=True)
class FrameView:
    """The parts of a VT or text frame the rules look at."""

    subscription_id: UUID
    sequence: int
    representation: Representation
    #: Everything that makes two frames "the same screen".
    content: tuple[object, ...]


@dataclass(slots=True)
class FrameLedger:
    """The frame rules for one lease. See the module docstring."""

    subscription_id: UUID
    representation: Representation
    last_sequence: int = 0
    outstanding: int | None = None
    frames: int = 0
    #: The lease sent ``includeScrollState: true`` (and the host advertises it).
    scroll_state: bool = False
    #: The sequence of a ``scrollState`` waiting for its frame, if one is.
    staged: int | None = None
    _last_content: tuple[object, ...] | None = field(default=None, repr=False)
    _forced: bool = False

    def scroll_state_message(self, sequence: int, subscription_id: UUID) -> list[str]:
        """Record a ``scrollState``; return the rules it broke."""
        problems: list[str] = []
        if not self.scroll_state:
            problems.append("a `scrollState` on a lease that did not opt in to scroll state")
        if subscription_id != self.subscription_id:
            problems.append(f"a `scrollState` names subscription {subscription_id}, not the lease")
        if self.staged is not None:
            problems.append(
                f"two `scrollState`s ({self.staged}, then {sequence}) before one frame "
                "(Prowl's Android and Mac clients close the connection on it)"
            )
        self.staged = sequence
        return problems

    def acknowledged(self, sequence: int) -> None:
        """The client acknowledged ``sequence`` (only call it for the right one)."""
        if self.outstanding == sequence:
            self.outstanding = None

    def forced(self) -> None:
        """The client sent ``refresh`` or ``scroll``: one unchanged frame may follow."""
        self._forced = True

    def frame(self, frame: FrameView) -> list[str]:
        """Record a frame from the host; return the rules it broke (empty when none)."""
        problems: list[str] = []
        if frame.subscription_id != self.subscription_id:
            problems.append(
                f"frame {frame.sequence} names subscription {frame.subscription_id}, "
                f"not the lease {self.subscription_id}"
            )
        if frame.representation is not self.representation:
            problems.append(
                f"a {frame.representation.value} frame on a {self.representation.value} lease"
            )
        expected = self.last_sequence + 1
        if frame.sequence != expected:
            last = self.last_sequence
            where = "on the first frame" if last == 0 else f"after {last}"
            problems.append(f"sequence {frame.sequence} {where} (expected {expected})")
        if self.outstanding is not None:
            problems.append(
                f"frame {frame.sequence} arrived while frame {self.outstanding} was "
                "still unacknowledged (at most one frame may be outstanding)"
            )
        if self.scroll_state:
            if self.staged is None:
                problems.append(
                    f"frame {frame.sequence} came without its `scrollState` (the lease opted "
                    "in: Prowl's Android and Mac clients close the connection on it)"
                )
            elif self.staged != frame.sequence:
                problems.append(
                    f"the `scrollState` before frame {frame.sequence} carries sequence "
                    f"{self.staged}"
                )
            self.staged = None
        if self._last_content is not None and frame.content == self._last_content:
            if self._forced:
                self._forced = False
            else:
                problems.append(
                    f"frame {frame.sequence} repeats frame {self.last_sequence} unchanged "
                    "without a refresh or scroll"
                )
        self.last_sequence = max(self.last_sequence, frame.sequence)
        self.outstanding = frame.sequence
        self._last_content = frame.content
        self.frames += 1
        return problems
