"""Pane descriptions and captures, as the host sees them. Pure values.

A source turns a pane into one of two captures: :class:`VTCapture` (the active
screen as VT bytes, for ``vt-v1``) or :class:`TextCapture` (the viewport as
text, for ``text-v1``). Both may carry :class:`ScrollBounds` and are compared by
value, which is how unchanged frames are suppressed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from uuid import UUID

__all__ = [
    "MAX_HISTORY_BYTES",
    "MAX_TEXT_BYTES",
    "MAX_VT_BYTES",
    "Capability",
    "HistoryCapture",
    "PaneInfo",
    "ScrollBounds",
    "TextCapture",
    "VTCapture",
    "Watchers",
]

#: Limits from Prowl's host (docs/protocol.md §11).
MAX_VT_BYTES = 4 * 1024 * 1024
MAX_TEXT_BYTES = 1024 * 1024
MAX_HISTORY_BYTES = 2 * 1024 * 1024


class Capability:
    """Optional features a source may really support (capability strings)."""

    HISTORY = "history"
    REMOTE_SCROLL = "remote-scroll"
    VIEWPORT_TEXT = "viewport-text-v1"
    STYLED_SCROLLBACK = "styled-scrollback-v1"
    SCROLL_STATE = "scroll-state-v1"
    #: In Prowl's advertising order.
    ORDER = (HISTORY, REMOTE_SCROLL, VIEWPORT_TEXT, STYLED_SCROLLBACK, SCROLL_STATE)
    #: What a source that keeps its own screen for each pane supports (local
    #: PTYs, tmux): history, scrolling, the scrolled viewport and its bounds.
    OWN_SCREEN = frozenset({HISTORY, REMOTE_SCROLL, VIEWPORT_TEXT, SCROLL_STATE})


@dataclass(frozen=True, slots=True, kw_only=True)
class PaneInfo:
    """One pane as listed: a stable id and its labels."""

    id: UUID
    title: str
    directory: str
    project_name: str | None = None
    subtitle: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ScrollBounds:
    """Whether the viewport is at the oldest row / at the live bottom.

    ``None`` means unknown (alternate screen, a program that captures the mouse,
    or a source that cannot tell). Only ``True`` disables a scroll direction.
    """

    at_top: bool | None = None
    at_bottom: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class VTCapture:
    """The active screen as VT bytes, plus what opted-in clients also get."""

    columns: int
    rows: int
    data: bytes
    #: The viewport as text while it is scrolled away from the bottom, else None.
    viewport_text: str | None = None
    scroll_bounds: ScrollBounds | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TextCapture:
    """The viewport as plain text (rows joined by ``\\n``)."""

    columns: int
    rows: int
    text: str
    truncated: bool = False
    scroll_bounds: ScrollBounds | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryCapture:
    """Retained text (scrollback and screen), newest part, with a cut flag."""

    text: str
    truncated: bool = False


class Watchers:
    """The change callbacks of one pane's subscribers (every source keeps one per pane)."""

    def __init__(self) -> None:
        self._callbacks: set[Callable[[], None]] = set()

    def add(self, callback: Callable[[], None]) -> None:
        self._callbacks.add(callback)

    def discard(self, callback: Callable[[], None]) -> None:
        self._callbacks.discard(callback)

    def __bool__(self) -> bool:
        return bool(self._callbacks)

    def notify(self) -> None:
        """Tell every subscriber the pane may have changed (a callback may unsubscribe)."""
        for callback in list(self._callbacks):
            callback()
