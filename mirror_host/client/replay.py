"""Showing a host's frames in the local terminal: the replica and the crop. Native, no I/O.

Prowl's Mac client resets a replica terminal (RIS), replays each VT frame into
it inside synchronized output, strips the focus/colour/size report modes, and
shows the replica. ``mirror-host attach`` does the same with a libghostty
:class:`Replica` sized to the host pane, then *re-renders* the part that fits
into the user's terminal:

* the user's terminal never sees the host's raw bytes, only what libghostty's
  formatter emits (text, SGR styles, terminal modes, keyboard modes), so a host
  cannot set titles, write the clipboard or leave the alternate screen;
* RIS itself is never sent to the user's terminal (it would leave the
  alternate screen and, in some terminals, wipe the user's scrollback): each
  frame instead undoes exactly the modes the previous frame set, clears and
  redraws;
* a host pane larger than the terminal is cropped to a window that keeps the
  host's cursor in view, with a one-line notice on the last row; a smaller one
  is drawn at the top left as it is.

The pure helpers (:func:`crop_window`, :func:`filter_modes`, :func:`render_text`,
:class:`Presenter`) are unit-tested without a terminal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mirror_host.terminal import Screen
from mirror_host.width import char_width, text_width

__all__ = [
    "SYNC_BEGIN",
    "SYNC_END",
    "ModeSet",
    "Presenter",
    "Replica",
    "Window",
    "crop_window",
    "filter_modes",
    "render_text",
]

SYNC_BEGIN = b"\x1b[?2026h"
SYNC_END = b"\x1b[?2026l"
#: Modes that make a terminal send reports (focus, colour scheme, size) back as input.
REPORT_MODES = frozenset({1004, 2031, 2048})
#: Modes about which screen is shown or its width: attach draws in its own
#: alternate screen and never resizes the user's terminal (DECCOLM).
SCREEN_MODES = frozenset({3, 47, 1047, 1049})
STRIPPED_MODES = REPORT_MODES | SCREEN_MODES
#: Clear and home, styles and scroll region reset: the state a frame is drawn on.
CLEAR = b"\x1b[0m\x1b[r\x1b[H\x1b[2J"
KITTY_RESET = b"\x1b[=0;1u"
MODIFY_OTHER_KEYS_RESET = b"\x1b[>4m"

_MODE = re.compile(rb"\x1b\[(\??)([0-9;]*)([hl])")
_KITTY = re.compile(rb"\x1b\[[=>][0-9;]*u")
_MODIFY_OTHER_KEYS = re.compile(rb"\x1b\[>4(?:;[0-9]*)?m")


@dataclass(frozen=True, slots=True)
class ModeSet:
    """One terminal mode a frame set (``CSI ? n h`` is private, set)."""

    private: bool
    number: int
    on: bool

    def undo(self) -> bytes:
        """The sequence that sets the mode back."""
        prefix = b"?" if self.private else b""
        return b"\x1b[%s%d%s" % (prefix, self.number, b"l" if self.on else b"h")


@dataclass(frozen=True, slots=True)
class Filtered:
    """A frame body with the stripped modes removed, and what it sets."""

    data: bytes
    modes: tuple[ModeSet, ...]
    kitty: bool
    modify_other_keys: bool


def filter_modes(data: bytes) -> Filtered:
    """Remove :data:`STRIPPED_MODES` (private) from ``data``; list the modes it sets."""
    modes: list[ModeSet] = []

    def mode(match: re.Match[bytes]) -> bytes:
        private = match.group(1) == b"?"
        on = match.group(3) == b"h"
        kept: list[bytes] = []
        for param in match.group(2).split(b";"):
            if not param:
                continue
            number = int(param)
            if private and number in STRIPPED_MODES:
                continue
            modes.append(ModeSet(private, number, on))
            kept.append(param)
        if not kept:
            return b""
        return b"\x1b[" + match.group(1) + b";".join(kept) + match.group(3)

    body = _MODE.sub(mode, data)
    return Filtered(
        body,
        tuple(modes),
        kitty=_KITTY.search(body) is not None,
        modify_other_keys=_MODIFY_OTHER_KEYS.search(body) is not None,
    )


@dataclass(frozen=True, slots=True)
class Window:
    """The part of the host pane that is shown (0-based, in host cells)."""

    left: int
    top: int
    columns: int
    rows: int
    cropped: bool


def _follow(position: int, span: int, total: int) -> int:
    """The first shown index so that ``position`` is inside a ``span`` of ``total``."""
    if position < span:
        return 0
    return max(0, min(position - span + 1, total - span))


def crop_window(host: tuple[int, int], local: tuple[int, int], cursor: tuple[int, int]) -> Window:
    """What of a ``host`` (columns, rows) pane fits a ``local`` terminal.

    A pane that fits is shown whole. Otherwise the last local row is kept for
    the notice and the window follows the host's cursor.
    """
    host_columns, host_rows = host
    local_columns, local_rows = max(1, local[0]), max(1, local[1])
    if host_columns <= local_columns and host_rows <= local_rows:
        return Window(0, 0, host_columns, host_rows, cropped=False)
    columns = min(host_columns, local_columns)
    rows = min(host_rows, max(1, local_rows - 1))
    return Window(
        _follow(cursor[0], columns, host_columns),
        _follow(cursor[1], rows, host_rows),
        columns,
        rows,
        cropped=True,
    )


def _safe(text: str) -> str:
    """Text from a host with every control character made visible and harmless."""
    return "".join("\ufffd" if (ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F) else ch for ch in text)


def _clip(text: str, columns: int) -> str:
    out: list[str] = []
    used = 0
    for ch in text:
        width = char_width(ch)
        if used + width > columns:
            break
        out.append(ch)
        used += width
    return "".join(out)


def _cup(row: int, column: int) -> bytes:
    return b"\x1b[%d;%dH" % (row, column)


def _notice_line(text: str, local: tuple[int, int]) -> bytes:
    columns, rows = local
    line = _clip(_safe(text), columns)
    # The row is cleared first: an erase after a line that fills it would take its
    # last character (the cursor stays on the last column).
    return _cup(rows, 1) + b"\x1b[0m\x1b[2K\x1b[7m" + line.encode() + b"\x1b[0m"


def render_text(
    text: str, local: tuple[int, int], host: tuple[int, int], *, detach: str = "Ctrl-]"
) -> tuple[bytes, bool]:
    """A text frame's rows for the local terminal (controls neutralised), above a
    notice on the last row that says the view is read-only and how to leave; and
    whether it was cropped. The newest rows are kept when there are too many.
    ``detach`` names the detach key (Ctrl-C leaves a text view too)."""
    columns, rows = max(1, local[0]), max(1, local[1])
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    lines = [_safe(line) for line in lines]
    room = max(1, rows - 1)
    cropped = len(lines) > room or any(text_width(line) > columns for line in lines)
    shown = lines[-room:] if len(lines) > room else lines
    out = bytearray()
    for index, line in enumerate(shown, start=1):
        out += _cup(index, 1) + _clip(line, columns).encode()
    leave = f"{detach} or Ctrl-C detaches"
    if cropped:
        notice = _fitting(
            columns,
            f" read-only · host pane {host[0]}x{host[1]} does not fit this {columns}x{rows} "
            f"terminal: showing the newest rows · {leave} ",
            f" read-only · pane {host[0]}x{host[1]}, newest rows · {leave} ",
            f" read-only · {leave} ",
            f" read-only · {detach} detaches ",
            *_short_notices(detach),
        )
    else:
        notice = _fitting(
            columns,
            f" read-only text view (keys are not sent) · {leave} ",
            f" read-only · {leave} ",
            f" read-only · {detach} detaches ",
            *_short_notices(detach)[1:],  # not "cropped": it is not
        )
    if rows > 1 or cropped:
        out += _notice_line(notice, (columns, rows))
    return bytes(out), cropped


def crop_notice(
    window: Window, host: tuple[int, int], local: tuple[int, int], *, detach: str = "Ctrl-]"
) -> str:
    """The one-line notice shown under a cropped pane (``detach`` names the detach key),
    as much of it as fits the terminal's width: shorter forms replace it in a narrow
    terminal, the way out kept longest."""
    shown = (
        f"columns {window.left + 1}-{window.left + window.columns}, "
        f"rows {window.top + 1}-{window.top + window.rows}"
    )
    return _fitting(
        local[0],
        f" host pane {host[0]}x{host[1]} is larger than this {local[0]}x{local[1]} terminal: "
        f"{shown} · resize to see all · {detach} detaches ",
        f" pane {host[0]}x{host[1]}: {shown} · {detach} detaches ",
        *_short_notices(detach),
    )


def _short_notices(detach: str) -> tuple[str, ...]:
    """What a notice becomes when little fits: that the pane is cut, and how to leave."""
    return (f" cropped · {detach} detaches ", f" {detach} detaches ", f" {detach} ")


def _fitting(columns: int, *forms: str) -> str:
    """The first of ``forms`` (longest first) that fits ``columns`` cells; else the
    last (clipped when it is shown)."""
    for form in forms:
        if text_width(form) <= columns:
            return form
    return forms[-1]


class Presenter:
    """Turns frames into bytes for the user's terminal, undoing each frame's modes
    before the next one (see the module docstring)."""

    def __init__(self, *, detach: str = "Ctrl-]") -> None:
        #: The detach key's name, for the notices.
        self.detach = detach
        self._modes: tuple[ModeSet, ...] = ()
        self._kitty = False
        self._modify_other_keys = False

    def undo(self) -> bytes:
        """What sets the terminal back from the last frame's modes."""
        out = bytearray()
        seen: set[tuple[bool, int]] = set()
        for mode in reversed(self._modes):
            if (mode.private, mode.number) not in seen:
                seen.add((mode.private, mode.number))
                out += mode.undo()
        if self._kitty:
            out += KITTY_RESET
        if self._modify_other_keys:
            out += MODIFY_OTHER_KEYS_RESET
        self._modes, self._kitty, self._modify_other_keys = (), False, False
        return bytes(out)

    def vt(
        self,
        body: bytes,
        window: Window,
        cursor: tuple[int, int],
        host: tuple[int, int],
        local: tuple[int, int],
    ) -> bytes:
        """A VT window (the replica's formatter output for ``window``) as one update."""
        filtered = filter_modes(body)
        out = bytearray(SYNC_BEGIN)
        out += self.undo() + CLEAR
        if window.cropped:
            notice = crop_notice(window, host, local, detach=self.detach)
            out += _notice_line(notice, local) + _cup(1, 1)
        out += filtered.data
        self._modes = filtered.modes
        self._kitty, self._modify_other_keys = filtered.kitty, filtered.modify_other_keys
        row, column = cursor[1] - window.top + 1, cursor[0] - window.left + 1
        out += _cup(max(1, row), max(1, column)) + SYNC_END
        return bytes(out)

    def text(self, text: str, host: tuple[int, int], local: tuple[int, int]) -> bytes:
        """A text frame as one update (the cursor is hidden: there is nothing to type into)."""
        rows, _ = render_text(text, local, host, detach=self.detach)
        return SYNC_BEGIN + self.undo() + CLEAR + b"\x1b[?25l" + rows + SYNC_END

    def status(self, message: str, local: tuple[int, int]) -> bytes:
        """A status line on the last row, over whatever is shown."""
        return b"\x1b7" + _notice_line(f" {message} ", local) + b"\x1b8"

    def leave(self) -> bytes:
        """Everything a frame set, undone; styles reset and the cursor shown."""
        return self.undo() + b"\x1b[0m\x1b[r\x1b[?25h"


class Replica(Screen):
    """The libghostty terminal a frame is replayed into (RIS, then the frame)."""

    def replay(self, data: bytes) -> None:
        """Reset as RIS would, then feed the frame's VT bytes."""
        self.reset()
        self.feed(data)

    def window_vt(self, window: Window) -> bytes:
        """The ``window`` of the active screen as VT: styles and modes, no cursor
        position (the presenter places the cursor relative to the window)."""
        return self.vt_window(window.left, window.top, window.columns, window.rows)
