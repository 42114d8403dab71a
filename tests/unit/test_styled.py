"""Styled-scrollback windows, cuts and the 500 ms cache, with hand-picked numbers."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mirror_host.capture.styled import (
    ArchiveCache,
    ArchiveKey,
    ArchiveWindow,
    Cached,
    build_archive,
    plan_window,
    row_limit,
)
from mirror_host.capture.values import StyledArchive
from mirror_host.limits import MAX_ARCHIVE_BYTES

# ------------------------------------------------------------------ windows


def test_a_buffer_within_the_limits_goes_whole_as_prowl_sends_it() -> None:
    # 300 rows of 80 columns: rowOffset is the viewport's scrollbar offset.
    assert plan_window(
        total_rows=300, columns=80, viewport_top=120, viewport_rows=24
    ) == ArchiveWindow(0, 300, 120)
    assert plan_window(total_rows=25, columns=80, viewport_top=0, viewport_rows=24) == (
        ArchiveWindow(0, 25, 0)
    )


def test_nothing_while_the_viewport_is_at_the_live_bottom() -> None:
    assert plan_window(total_rows=300, columns=80, viewport_top=276, viewport_rows=24) is None
    assert plan_window(total_rows=24, columns=80, viewport_top=0, viewport_rows=24) is None


def test_more_than_5000_rows_keeps_the_newest_5000() -> None:
    window = plan_window(total_rows=9_000, columns=40, viewport_top=8_000, viewport_rows=30)
    assert window == ArchiveWindow(4_000, 9_000, 4_000)
    assert window.rows == 5_000


def test_more_than_250000_cells_keeps_fewer_rows() -> None:
    assert row_limit(120) == 2_083 and row_limit(50) == 5_000 and row_limit(1_000) == 250
    window = plan_window(total_rows=9_000, columns=120, viewport_top=8_500, viewport_rows=40)
    assert window == ArchiveWindow(9_000 - 2_083, 9_000, 8_500 - (9_000 - 2_083))


def test_a_viewport_older_than_the_newest_rows_moves_the_window_up() -> None:
    window = plan_window(total_rows=9_000, columns=80, viewport_top=100, viewport_rows=24)
    assert window == ArchiveWindow(100, 3_225, 0)  # 250,000 // 80 rows from the viewport down


def test_a_viewport_taller_than_the_row_limit_gets_no_archive() -> None:
    assert plan_window(total_rows=2_000, columns=1_000, viewport_top=0, viewport_rows=300) is None


@given(
    columns=st.integers(1, 1_000),
    rows=st.integers(1, 1_000),
    total=st.integers(1, 20_000),
    data=st.data(),
)
def test_windows_always_hold_the_viewport_within_the_limits(
    columns: int, rows: int, total: int, data: st.DataObject
) -> None:
    top = data.draw(st.integers(0, total))
    window = plan_window(total_rows=total, columns=columns, viewport_top=top, viewport_rows=rows)
    if window is None:
        assert top + rows >= total or rows > row_limit(columns)
        return
    assert 0 <= window.start <= top and top + rows <= window.stop <= total
    assert window.rows <= 5_000 and window.rows * columns <= 250_000
    assert window.row_offset == top - window.start and 0 <= window.row_offset <= 5_000
    # Newest first: the window ends at the bottom unless the viewport is older.
    assert window.stop == total or window.start == top


# ------------------------------------------------------------------ bytes


def rows_of(size: int) -> tuple[list[tuple[int, int]], Callable[[int, int], bytes]]:
    """A renderer whose rows are ``size`` bytes each, and the calls it saw."""
    calls: list[tuple[int, int]] = []

    def render(start: int, stop: int) -> bytes:
        calls.append((start, stop))
        return b"".join(b"%07d" % row + b"x" * (size - 7) for row in range(start, stop))

    return calls, render


def test_an_archive_within_2_mib_is_formatted_once() -> None:
    calls, render = rows_of(100)
    archive = build_archive(ArchiveWindow(0, 300, 120), render, viewport_rows=24)
    assert archive == StyledArchive(data=render(0, 300), row_offset=120)
    assert calls[0] == (0, 300)


def test_past_2_mib_the_oldest_rows_go_and_the_offset_follows() -> None:
    calls, render = rows_of(1_000)  # 5,000 rows would be 5 MB
    archive = build_archive(ArchiveWindow(0, 5_000, 4_900), render, viewport_rows=40)
    assert archive is not None and len(archive.data) <= MAX_ARCHIVE_BYTES
    start, stop = calls[-1]
    assert stop == 5_000 and start > 0  # the newest rows kept …
    assert archive.row_offset == 4_900 - start  # … and the viewport found where it was
    assert archive.data.startswith(b"%07d" % start)
    assert len(calls) <= 3


def test_past_2_mib_with_an_old_viewport_the_rows_below_it_go() -> None:
    calls, render = rows_of(1_000)
    archive = build_archive(ArchiveWindow(100, 5_100, 0), render, viewport_rows=40)
    assert archive is not None and archive.row_offset == 0
    start, stop = calls[-1]
    assert start == 100 and 40 <= stop - start < 5_000


def test_nothing_when_the_viewport_alone_exceeds_2_mib_or_nothing_formats() -> None:
    _, huge = rows_of(60_000)  # 40 rows of 60 kB
    assert build_archive(ArchiveWindow(0, 100, 50), huge, viewport_rows=40) is None
    assert build_archive(ArchiveWindow(0, 100, 50), lambda a, b: b"", viewport_rows=40) is None


def test_archive_bounds_are_enforced() -> None:
    with pytest.raises(ValueError):
        StyledArchive(data=b"", row_offset=0)
    with pytest.raises(ValueError):
        StyledArchive(data=b"x" * (MAX_ARCHIVE_BYTES + 1), row_offset=0)
    with pytest.raises(ValueError):
        StyledArchive(data=b"x", row_offset=5_001)
    assert StyledArchive(data=b"x", row_offset=5_000).row_offset == 5_000


# ------------------------------------------------------------------ cache

KEY = ArchiveKey(columns=80, rows=24, viewport_top=120, viewport_text="rows")
VALUE = Cached(StyledArchive(data=b"\x1b[31mred", row_offset=120), "rows")


def test_an_export_is_reused_for_500_ms() -> None:
    cache = ArchiveCache()
    assert cache.lookup(KEY, 10.0) is None
    assert cache.store(KEY, VALUE, 10.0) is VALUE
    assert cache.lookup(KEY, 10.0) is VALUE
    assert cache.lookup(KEY, 10.499) is VALUE
    assert cache.lookup(KEY, 10.5) is None


@pytest.mark.parametrize(
    "other",
    [
        ArchiveKey(columns=81, rows=24, viewport_top=120, viewport_text="rows"),
        ArchiveKey(columns=80, rows=25, viewport_top=120, viewport_text="rows"),
        ArchiveKey(columns=80, rows=24, viewport_top=99, viewport_text="rows"),
        ArchiveKey(columns=80, rows=24, viewport_top=120, viewport_text="other rows"),
    ],
)
def test_a_changed_grid_position_or_text_exports_again(other: ArchiveKey) -> None:
    cache = ArchiveCache()
    cache.store(KEY, VALUE, 10.0)
    assert cache.lookup(other, 10.1) is None


def test_finding_no_archive_is_reused_too() -> None:
    cache = ArchiveCache()
    none = Cached(None, "rows")
    cache.store(KEY, none, 3.0)
    assert cache.lookup(KEY, 3.2) is none
