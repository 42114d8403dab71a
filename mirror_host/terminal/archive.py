"""Styled-scrollback archives from a libghostty screen, checked before they go. Native, no I/O.

The archive is libghostty's VT formatting of a window of retained rows (see
:meth:`Screen.archive`), cut to Prowl's limits by :mod:`mirror_host.capture.styled`.

Before an archive is sent it is presented the way Prowl's Mac client presents
it (:func:`present`): a fresh replica gets the frame, a clear, the archive and a
screenful of ``CR LF``, is scrolled to the top and down by ``rowOffset``. The
rows it then shows must be the host's viewport rows; otherwise no archive goes
(the client keeps the plain viewport text). libghostty's VT formatter writes
some never-written cells as spaces (a gap inside a soft-wrapped line, a cell
holding only a background colour), and the Mac client compares its replica with
``viewport.text`` character for character, so the text sent with an archive is
the replica's own reading: the host's rows, give or take trailing spaces.
"""

from __future__ import annotations

from collections.abc import Sequence

from mirror_host.capture.styled import ArchiveWindow, Cached, build_archive
from mirror_host.capture.values import StyledArchive
from mirror_host.limits import MAX_ARCHIVE_ROWS
from mirror_host.terminal.screen import Screen

__all__ = ["export_archive", "present", "screen_of_rows"]

#: What Prowl's Mac client writes between the frame and the archive.
_CLEAR = b"\x1b[H\x1b[2J\x1b[3J\x1b[0m"
#: Soft-wrapped rows are joined in the archive and wrap again on the replica,
#: so autowrap must be on there even if the live program turned it off.
_AUTOWRAP = b"\x1b[?7h"


def present(archive: StyledArchive, *, columns: int, rows: int, frame: bytes = b"") -> Screen:
    """A fresh replica showing ``archive`` as Prowl's Mac client shows it."""
    replica = Screen(columns, rows, scrollback_lines=MAX_ARCHIVE_ROWS + 2 * rows)
    replica.feed(b"\x1bc" + frame + _CLEAR + archive.data + b"\r\n" * rows + b"\x1b[?25l")
    replica.scroll_to_top()
    replica.scroll_viewport(archive.row_offset)
    return replica


def _same_rows(shown: str, expected: str) -> bool:
    """Equal row by row once trailing spaces are set aside."""
    left, right = shown.split("\n"), expected.split("\n")
    return len(left) == len(right) and all(
        a.rstrip(" ") == b.rstrip(" ") for a, b in zip(left, right, strict=True)
    )


def export_archive(
    screen: Screen, window: ArchiveWindow, *, rows: int, viewport_text: str, frame: bytes
) -> Cached:
    """The archive of ``window`` (rows of ``screen``'s buffer) and the text to send with it.

    ``rows`` is the pane's height, ``viewport_text`` its viewport as
    :meth:`Screen.viewport_overlay` reads it, ``frame`` the VT frame the archive
    travels with. No archive when it cannot be made within the limits or does
    not present that viewport.
    """
    columns, _ = screen.size

    def render(start: int, stop: int) -> bytes:
        body = screen.archive(start, stop)
        return _AUTOWRAP + body if body else b""

    archive = build_archive(window, render, viewport_rows=rows)
    if archive is None:
        return Cached(None, viewport_text)
    shown = present(archive, columns=columns, rows=rows, frame=frame).viewport_overlay()
    if not _same_rows(shown, viewport_text):
        return Cached(None, viewport_text)
    return Cached(archive, shown)


def screen_of_rows(rows: Sequence[bytes], columns: int) -> Screen:
    """A screen of exactly ``rows``, each put on its own line.

    For ``capture-pane -e`` output: tmux states an attribute only where it
    changes, so one row's colours carry into the next; rows are placed by
    cursor position, never by a line feed, so nothing scrolls and no
    background colour leaks into a new line.
    """
    screen = Screen(columns, max(1, len(rows)), scrollback_lines=0)
    screen.feed(
        b"\x1b[0m" + b"".join(b"\x1b[%d;1H" % (index + 1) + row for index, row in enumerate(rows))
    )
    return screen
