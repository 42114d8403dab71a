"""A replica fed the styled archive, as Prowl's Mac client feeds it, shows the host's rows.

The host is a libghostty screen with coloured history; the replica is a fresh
one that gets the frame, the clear, the archive and a screenful of CR LF, then
scrolls to the top and down by ``rowOffset`` (``present``). Its viewport must
show the host's viewport cell by cell: text, colours, attributes, wide glyphs.
"""

from __future__ import annotations

import pytest

from mirror_host.capture.styled import ArchiveWindow, plan_window
from mirror_host.limits import MAX_ARCHIVE_BYTES
from mirror_host.terminal import Cell, Screen
from mirror_host.terminal.archive import export_archive, present, screen_of_rows


def coloured_line(number: int, columns: int) -> bytes:
    """One line of output as colourful programs write it."""
    line = (
        b"\x1b[38;5;%dm%05d\x1b[0m \x1b[1;31merror\x1b[0m \x1b[4munder\x1b[0m "
        b"\x1b[4:3m\x1b[58;5;9mcurly\x1b[0m \x1b[38;2;80;190;240mtrue\x1b[0m "
        b"\x1b[48;5;22m bg \x1b[0m \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x99\x82"
        % (number % 256, number)
    )
    if number % 7 == 0:  # a long line that soft-wraps
        line += b" \x1b[3mitalic tail\x1b[0m" + b"-" * columns
    return line + b"\r\n"


def host(columns: int, rows: int, lines: int) -> Screen:
    screen = Screen(columns, rows)
    screen.feed(b"".join(coloured_line(n, columns) for n in range(lines)))
    return screen


def visible(cells: list[list[Cell]]) -> list[list[Cell]]:
    # A never-written cell and a written space look the same.
    return [[(text or " ", style) for text, style in row] for row in cells]


def export(screen: Screen, window: ArchiveWindow | None = None) -> tuple[Screen, int]:
    """Export around the current viewport; the presented replica and the window's start."""
    columns, rows = screen.size
    total, top, _ = screen.scrollbar
    window = window or plan_window(
        total_rows=total, columns=columns, viewport_top=top, viewport_rows=rows
    )
    assert window is not None
    frame = screen.vt_frame()
    cached = export_archive(
        screen, window, rows=rows, viewport_text=screen.viewport_overlay(), frame=frame
    )
    assert cached.archive is not None
    assert cached.viewport_text == screen.viewport_overlay()
    replica = present(cached.archive, columns=columns, rows=rows, frame=frame)
    assert replica.viewport_overlay() == screen.viewport_overlay()
    assert visible(replica.cells(area="viewport")) == visible(screen.cells(area="viewport"))
    return replica, top - cached.archive.row_offset


def test_the_whole_buffer_goes_and_the_replica_shows_the_styled_viewport() -> None:
    screen = host(80, 24, 400)
    screen.scroll_viewport(-150)
    total = screen.scrollbar[0]
    assert total <= 5_000 and total * 80 <= 250_000
    _, start = export(screen)
    assert start == 0  # rowOffset is the scrollbar offset, as Prowl sends it
    styles = {dict(style)["fg"] for _, style in screen.cells(area="viewport")[0]}
    assert ("palette", 1) in styles and ("rgb", (80, 190, 240)) in styles


def test_the_oldest_page_and_the_page_above_the_screen() -> None:
    for back in (10_000, 24):  # clamped to the top, and one page up
        screen = host(80, 24, 400)
        screen.scroll_viewport(-back)
        export(screen)


@pytest.mark.slow
def test_more_cells_than_allowed_cuts_the_oldest_rows() -> None:
    screen = host(250, 30, 3_000)  # 1,000 rows of 250 columns make 250,000 cells
    screen.scroll_viewport(-200)
    total = screen.scrollbar[0]
    assert total > 1_000
    _, start = export(screen)
    assert start == total - 1_000


@pytest.mark.slow
def test_a_viewport_older_than_the_kept_rows_starts_the_window() -> None:
    screen = host(250, 30, 3_000)
    screen.scroll_viewport(-(10**6))
    screen.scroll_viewport(100)
    top = screen.scrollbar[1]
    _, start = export(screen)
    assert start == top == 100


def test_more_than_2_mib_keeps_the_newest_rows_that_fit() -> None:
    # Every cell its own true colour: about 20 bytes a cell, 1.6 kB a row.
    screen = Screen(80, 24)
    for n in range(3_000):
        screen.feed(
            b"".join(b"\x1b[38;2;%d;%d;%dm#" % (n % 256, x * 3, (n * x) % 256) for x in range(80))
            + b"\x1b[0m\r\n"
        )
    screen.scroll_viewport(-300)
    total, top, rows = screen.scrollbar
    window = plan_window(total_rows=total, columns=80, viewport_top=top, viewport_rows=rows)
    assert window is not None and len(screen.archive(window.start, window.stop)) > MAX_ARCHIVE_BYTES
    replica, start = export(screen, window)
    assert window.start < start < top  # older rows went, the viewport stayed
    assert replica.scrollbar[0] < window.rows


def test_wrapped_rows_come_back_wrapped_even_with_autowrap_off() -> None:
    screen = host(40, 10, 120)
    screen.feed(b"\x1b[?7l")  # the live program turns autowrap off; the frame says so
    screen.scroll_viewport(-40)
    assert b"\x1b[?7l" in screen.vt_frame()
    assert "-" * 10 in screen.viewport_overlay()  # wrapped rows are in view
    export(screen)


def test_an_archive_that_would_not_show_the_viewport_is_not_sent() -> None:
    screen = host(80, 24, 300)
    screen.scroll_viewport(-100)
    total, top, rows = screen.scrollbar
    window = plan_window(total_rows=total, columns=80, viewport_top=top, viewport_rows=rows)
    assert window is not None
    misplaced = ArchiveWindow(window.start, window.stop, window.row_offset + 5)
    text = screen.viewport_overlay()
    cached = export_archive(screen, misplaced, rows=24, viewport_text=text, frame=screen.vt_frame())
    assert cached.archive is None and cached.viewport_text == text


def test_tmux_rows_keep_attributes_that_carry_across_rows() -> None:
    # capture-pane -e states an attribute where it changes, not on every row.
    screen = screen_of_rows([b"\x1b[31mred1", b"red2\x1b[39m plain", b"\x1b[44m"], 20)
    assert screen.size == (20, 3)
    assert dict(screen.cell(0, 1)[1])["fg"] == ("palette", 1)
    assert dict(screen.cell(6, 1)[1])["fg"] is None
    assert dict(screen.cell(5, 2)[1])["bg"] is None  # no colour leaked into a new line
