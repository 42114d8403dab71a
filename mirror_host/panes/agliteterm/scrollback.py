"""Remote scroll over the host's own copy of a pane's scrollback. Pure.

agliteterm cannot scroll its view through the API, so the host scrolls its own
copy: the first scroll up reads the pane's styled scrollback and screen in one
answer (``session.text {styles:true, all:true}``, rows ``-H … -1`` of history
above screen rows ``0 …``), and pages through that copy by ``rows − 3``.
Like tmux's copy mode, the copy is **frozen** at that moment: the scrolled
view shows exactly what was retained then, and its bounds are exact for it
(at the top when its first row shows, at the bottom when the view is back on
the live screen, which ends the scroll). Output that arrives meanwhile shows
once the view returns to the bottom.
"""

from __future__ import annotations

from dataclasses import dataclass

from mirror_host.capture.values import ScrollBounds
from mirror_host.panes.agliteterm.protocol import Row, StyledScreen

__all__ = ["ScrolledView", "scroll_step"]


def scroll_step(rows: int) -> int:
    """A page: ``rows − 3`` rows, at least one (Prowl's step)."""
    return max(1, rows - 3)


@dataclass(frozen=True, slots=True)
class ScrolledView:
    """A frozen copy of scrollback and screen, and how far above the bottom the view is."""

    snapshot: StyledScreen
    rows: int
    #: Rows between the view's bottom and the copy's bottom (0 = live).
    offset: int = 0

    @property
    def history(self) -> int:
        """Scrollback rows in the copy: the most the view can move up."""
        return self.snapshot.history_rows

    def moved(self, rows: int) -> ScrolledView:
        """The view ``rows`` further up (negative: down), clamped to the copy."""
        offset = max(0, min(self.history, self.offset + rows))
        return ScrolledView(self.snapshot, self.rows, offset)

    @property
    def top(self) -> int:
        """The screen-relative index of the view's first row (negative: scrollback)."""
        return -self.offset

    def lines(self) -> list[Row]:
        """The rows in view, top first (missing ones blank)."""
        return [self.snapshot.rows.get(y, ()) for y in range(self.top, self.top + self.rows)]

    def bounds(self) -> ScrollBounds:
        """Exact for the copy: at the top when its oldest row is the view's first."""
        return ScrollBounds(at_top=self.offset >= self.history, at_bottom=self.offset == 0)
