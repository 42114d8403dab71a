"""Which rows go into a styled-scrollback archive, and when to build it again. Pure.

Prowl's Mac client presents ``viewport.styledScrollback`` by clearing its
replica terminal, writing the archive, then one screenful of ``CR LF`` (the
exporter leaves out trailing empty rows), scrolling to the top and down by
``rowOffset`` rows. ``rowOffset`` therefore counts rows from the **first row of
the archive** to the top of the viewport; then it checks that the replica shows
the ``viewport.text`` it was sent, and falls back to that plain text if not.

Prowl's own host exports its whole buffer (``rowOffset`` = the viewport's
scrollbar offset) and sends nothing when it holds more than 5,000 rows or
250,000 cells, or formats to more than 2 MiB. Because the client positions from
the archive's start, this host cuts instead: it keeps a **window** of at most
those many rows that contains the viewport, the newest such window, so a pane
that fits is sent whole, exactly as Prowl does, and a bigger one still gets its
colours. When the formatted window exceeds 2 MiB, the window shrinks (older rows
first, never the viewport) until it fits or only the viewport is left.

An archive is kept for 500 ms, keyed like Prowl's cache by the grid size, the
viewport's position and its text: a pane that keeps printing while scrolled back
costs at most two exports a second. Time comes in as ``now``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mirror_host.capture.values import StyledArchive
from mirror_host.limits import MAX_ARCHIVE_BYTES, MAX_ARCHIVE_CELLS, MAX_ARCHIVE_ROWS

__all__ = [
    "ARCHIVE_TTL_SECONDS",
    "ArchiveCache",
    "ArchiveKey",
    "ArchiveWindow",
    "Cached",
    "build_archive",
    "plan_window",
    "row_limit",
]

#: How long an exported archive (or the finding that there is none) is reused.
ARCHIVE_TTL_SECONDS = 0.5
#: Formatting attempts before giving up on fitting 2 MiB (each one shrinks).
_MAX_ATTEMPTS = 8


@dataclass(frozen=True, slots=True)
class ArchiveWindow:
    """Rows ``start`` … ``stop - 1`` of the buffer (0 = oldest retained row).

    ``row_offset`` is the viewport's top counted from ``start``.
    """

    start: int
    stop: int
    row_offset: int

    @property
    def rows(self) -> int:
        return self.stop - self.start


def row_limit(columns: int) -> int:
    """The most rows an archive of this width may hold."""
    return min(MAX_ARCHIVE_ROWS, MAX_ARCHIVE_CELLS // max(1, columns))


def _newest(
    lo: int, hi: int, viewport_top: int, viewport_rows: int, rows: int
) -> ArchiveWindow | None:
    """The last ``rows`` rows of ``lo`` … ``hi - 1``, moved up to hold the viewport."""
    rows = min(rows, hi - lo)
    if rows < viewport_rows:
        return None
    start = min(hi - rows, viewport_top)
    return ArchiveWindow(start, start + rows, viewport_top - start)


def plan_window(
    *,
    total_rows: int,
    columns: int,
    viewport_top: int,
    viewport_rows: int,
) -> ArchiveWindow | None:
    """The newest window of at most the allowed rows that holds the viewport.

    ``total_rows`` counts scrollback and screen, ``viewport_top`` is the
    viewport's first row from the oldest one. ``None`` when the viewport is at
    the live bottom (the frame itself is what the client shows) or cannot fit.
    """
    if viewport_rows < 1 or viewport_top < 0 or viewport_top + viewport_rows >= total_rows:
        return None
    return _newest(0, total_rows, viewport_top, viewport_rows, row_limit(columns))


def _shrink(window: ArchiveWindow, *, size: int, viewport_rows: int) -> ArchiveWindow | None:
    """A smaller window expected to format to at most 2 MiB, the viewport kept."""
    # Rows cost about the same on average; aim a little under the limit so one
    # more attempt usually suffices, and always drop at least one row.
    rows = min(window.rows - 1, window.rows * MAX_ARCHIVE_BYTES * 15 // (size * 16))
    viewport_top = window.start + window.row_offset
    return _newest(window.start, window.stop, viewport_top, viewport_rows, rows)


def build_archive(
    window: ArchiveWindow,
    render: Callable[[int, int], bytes],
    *,
    viewport_rows: int,
) -> StyledArchive | None:
    """Format ``window`` with ``render(start, stop)``, shrinking it to fit 2 MiB.

    ``None`` when the rows format to nothing or even the viewport alone is
    too big.
    """
    current: ArchiveWindow | None = window
    for _ in range(_MAX_ATTEMPTS):
        if current is None:
            return None
        data = render(current.start, current.stop)
        if not data:
            return None
        if len(data) <= MAX_ARCHIVE_BYTES:
            return StyledArchive(data=data, row_offset=current.row_offset)
        current = _shrink(current, size=len(data), viewport_rows=viewport_rows)
    return None


@dataclass(frozen=True, slots=True)
class ArchiveKey:
    """What must be unchanged for a kept archive to still fit the viewport."""

    columns: int
    rows: int
    viewport_top: int
    viewport_text: str


@dataclass(frozen=True, slots=True)
class Cached:
    """An export's outcome: the archive (or none) and the viewport text to send.

    The text is the viewport as the Mac client will read it back from the
    archive (see :mod:`mirror_host.terminal.archive`), so its check passes.
    """

    archive: StyledArchive | None
    viewport_text: str


class ArchiveCache:
    """The last export of one pane, reused while fresh and its key unchanged."""

    def __init__(self, ttl: float = ARCHIVE_TTL_SECONDS) -> None:
        self.ttl = ttl
        self._key: ArchiveKey | None = None
        self._value: Cached | None = None
        self._expires = 0.0

    def lookup(self, key: ArchiveKey, now: float) -> Cached | None:
        """The kept outcome for ``key``, or ``None`` when an export is due."""
        if self._value is None or key != self._key or now >= self._expires:
            return None
        return self._value

    def store(self, key: ArchiveKey, value: Cached, now: float) -> Cached:
        """Keep ``value`` for ``key`` until ``now`` + the time to live."""
        self._key, self._value, self._expires = key, value, now + self.ttl
        return value
