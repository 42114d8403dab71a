"""One subscribed Herdr pane as the source keeps it: record, screen, how it is fed. I/O (Trio).

The observe stream (``observe.py``) and the poller (``polling.py``) both feed a
:class:`Mirror`; the source (``source.py``) reads it for captures and scrolls it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import trio

from mirror_host.panes.herdr.protocol import HerdrPane
from mirror_host.panes.mirrors import PaneMirror
from mirror_host.terminal import Screen

__all__ = ["Mirror", "MirrorMode", "Refused", "StreamEnd"]


class MirrorMode(enum.StrEnum):
    """How a mirror is fed; the values are what ``statistics`` and status show."""

    STARTING = "starting"
    OBSERVE = "observe"
    POLL = "poll"


class StreamEnd(enum.Enum):
    """Why one observe stream ended."""

    #: Herdr says the terminal is not found (it may only have moved: check a snapshot).
    GONE = "gone"
    #: Asked for (new size or pane id) or a Herdr handoff/reconnect: start again at once.
    RESTART = "restart"
    #: The program failed or the stream broke: back off, and poll after a few.
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class Refused:
    """The observe program could not work with this Herdr server at all: it speaks
    another version of Herdr's client protocol. ``message`` is what it said."""

    message: str


@dataclass(eq=False)
class Mirror(PaneMirror):
    """One subscribed pane: its latest record and screen (watchers: :class:`PaneMirror`)."""

    pane: HerdrPane
    screen: Screen
    #: The last ``pane.read`` text drawn (polling detects change by content).
    last_text: str | None = None
    restart: trio.Event = field(default_factory=trio.Event)
    mode: MirrorMode = MirrorMode.STARTING
    #: ``(columns, rows)`` the running observe stream was started with, if any.
    stream_size: tuple[int, int] | None = None
    #: Observe frames applied so far, and an event set (then renewed) by each.
    frames: int = 0
    frame_arrived: trio.Event = field(default_factory=trio.Event)
    #: Scrolls applied so far: a poll read begun before one is stale.
    scrolls: int = 0
    #: When ``pane``'s scroll fields were last read fresh from Herdr (``pane.get``
    #: or ``pane.scroll``); a snapshot read begun before then must not undo them.
    scroll_read_at: float = float("-inf")

    def label(self) -> str:
        return f"Herdr pane {self.pane.pane_id}"

    def frame_applied(self) -> None:
        """An observe frame reached the screen: count it and wake its waiters."""
        self.frames += 1
        self.frame_arrived.set()
        self.frame_arrived = trio.Event()
        if self.failing:
            self.fed()
