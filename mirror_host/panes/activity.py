"""When each pane last got raw input from a Mac client. Pure (the caller tells the time).

Prowl refuses to type a phone's prompt into a pane somebody is typing into on a
Mac: the two would interleave in the composer. A source notes every raw
``input`` it writes (:meth:`InputActivity.note`); agent delivery asks how long
ago that was before it pastes and again before it presses Enter.
"""

from __future__ import annotations

from uuid import UUID

__all__ = ["InputActivity"]


class InputActivity:
    """Last raw-input time per pane, on the caller's monotonic clock."""

    def __init__(self) -> None:
        self._last: dict[UUID, float] = {}

    def note(self, pane_id: UUID, now: float) -> None:
        """Raw input was written to ``pane_id`` at ``now``."""
        self._last[pane_id] = now

    def last(self, pane_id: UUID) -> float | None:
        """When ``pane_id`` last got raw input, or ``None`` if never."""
        return self._last.get(pane_id)
