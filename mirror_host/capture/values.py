"""Captures: what a pane source hands over for one frame or a history snapshot. Pure values.

A source turns a pane into one of two captures: :class:`VTCapture` (the active
screen as VT bytes, for ``vt-v1``) or :class:`TextCapture` (the viewport as
text, for ``text-v1``). Both may carry :class:`ScrollBounds` and are compared by
value, which is how unchanged frames are suppressed. A VT capture of a
scrolled-back pane may also carry a :class:`StyledArchive` (styled-scrollback-v1).

They sit below the rooms that make them (the sources in ``panes/``, the
terminal that formats a screen) and the one that frames them (``session/``),
so none of those has to import another.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mirror_host.errors import InvalidArgument
from mirror_host.limits import MAX_ARCHIVE_BYTES, MAX_ARCHIVE_ROWS

__all__ = [
    "SCREEN_ONLY",
    "Capability",
    "Capture",
    "CaptureOptions",
    "HistoryCapture",
    "ScrollBounds",
    "StyledArchive",
    "TextCapture",
    "VTCapture",
    "utf8_text",
]

_SURROGATE = re.compile("[\ud800-\udfff]")


def utf8_text(text: str) -> str:
    """``text`` as valid UTF-8 can carry it: a lone surrogate (a ``\\ud800`` escape
    in a source's JSON, which Python keeps) becomes U+FFFD. Every Prowl app drops
    its connection on text that is not UTF-8."""
    return text if text.isascii() else _SURROGATE.sub("\ufffd", text)


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
    #: PTYs, tmux): history, scrolling, the scrolled viewport (plain and styled)
    #: and its bounds.
    OWN_SCREEN = frozenset({HISTORY, REMOTE_SCROLL, VIEWPORT_TEXT, STYLED_SCROLLBACK, SCROLL_STATE})


@dataclass(frozen=True, slots=True, kw_only=True)
class ScrollBounds:
    """Whether the viewport is at the oldest row / at the live bottom.

    ``None`` means unknown (alternate screen, a program that captures the mouse,
    or a source that cannot tell). Only ``True`` disables a scroll direction.
    """

    at_top: bool | None = None
    at_bottom: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class StyledArchive:
    """Retained rows as VT (``viewport.styledScrollback``), for a scrolled viewport.

    ``data`` replays, after Prowl's Mac client clears its replica, the rows of a
    window of the pane's scrollback and screen, oldest first; ``row_offset`` is
    how many of those rows lie above the top of the viewport. The Mac client
    scrolls its replica to the top, then down by ``row_offset``.
    """

    data: bytes
    row_offset: int

    def __post_init__(self) -> None:
        if not 1 <= len(self.data) <= MAX_ARCHIVE_BYTES:
            raise InvalidArgument(f"an archive of {len(self.data)} bytes (1 … 2 MiB allowed)")
        if not 0 <= self.row_offset <= MAX_ARCHIVE_ROWS:
            raise InvalidArgument(f"row offset {self.row_offset} (0 … {MAX_ARCHIVE_ROWS} allowed)")


@dataclass(frozen=True, slots=True, kw_only=True)
class CaptureOptions:
    """What a capture carries besides the screen: each flag asks for the capture's
    field of the same name. A lease's are the subscriber's opt-ins (protocol.md
    §4.3), less what the source does not advertise.

    The styled archive rides inside the viewport text's message, so it is only
    ever on together with viewport text: options that ask for it alone have it off.
    """

    #: The viewport's text while it is scrolled away from the bottom (VT only).
    viewport_text: bool = False
    #: The scroll bounds (``scrollState``).
    scroll_bounds: bool = False
    #: The styled archive around that viewport.
    styled_scrollback: bool = False

    def __post_init__(self) -> None:
        if self.styled_scrollback and not self.viewport_text:
            object.__setattr__(self, "styled_scrollback", False)


#: A capture of the screen and nothing else (what a source is asked by default).
SCREEN_ONLY = CaptureOptions()


@dataclass(frozen=True, slots=True, kw_only=True)
class VTCapture:
    """The active screen as VT bytes, plus what opted-in clients also get."""

    columns: int
    rows: int
    data: bytes
    #: The viewport as text while it is scrolled away from the bottom, else None.
    viewport_text: str | None = None
    scroll_bounds: ScrollBounds | None = None
    #: The styled archive around that viewport, when asked for and exportable.
    styled_scrollback: StyledArchive | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TextCapture:
    """The viewport as plain text (rows joined by ``\\n``)."""

    columns: int
    rows: int
    text: str
    truncated: bool = False
    scroll_bounds: ScrollBounds | None = None


#: What a source hands the host for one frame.
Capture = VTCapture | TextCapture


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryCapture:
    """Retained text (scrollback and screen); ``truncated`` when the source itself
    kept less than it had. The session keeps the newest 2 MiB of it (the one cut,
    :class:`~mirror_host.session.history.HistorySnapshot`)."""

    text: str
    truncated: bool = False
