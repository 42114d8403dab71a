"""The libghostty screen: scrollback bounds, the viewport overlay, the styled archive."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from pyghostty import lib
from pyghostty.core import init_sized

from mirror_host.terminal import Screen


def _lines(screen: Screen) -> list[str]:
    return screen.history_text().split("\n")


def test_scrollback_keeps_over_ten_thousand_lines_of_a_usual_pane() -> None:
    screen = Screen(80, 24)
    screen.feed(b"".join(b"line %d\r\n" % i for i in range(20_000)))
    kept = _lines(screen)
    # 10 MB of pages, dropped whole from the oldest end: about 13,700 rows of 80.
    assert 10_000 <= len(kept) <= 16_000
    assert kept[-1] == "line 19999" and "line 0" not in kept


def test_the_line_limit_is_only_a_backstop() -> None:
    narrow = Screen(80, 24, scrollback_lines=1_000)
    narrow.feed(b"".join(b"line %d\r\n" % i for i in range(3_000)))
    # Trimmed in whole pages too: somewhat under the limit (plus the screen), never over.
    assert 500 <= len(_lines(narrow)) <= 1_000 + 24


def test_scrollback_of_a_very_wide_pane_is_bounded_by_memory() -> None:
    screen = Screen(1000, 24)
    row = b"\x1b[31m" + b"x" * 999 + b"\x1b[0m\r\n"
    screen.feed(row * 12_000)
    assert 500 < len(_lines(screen)) < 5_000


# ------------------------------------------------------------------ viewport overlay


def prowl_row_reads(screen: Screen) -> str:
    """The viewport as Prowl reads it: each row a rectangle, untrimmed, joined by LF."""
    columns, rows = screen.size
    lines = []
    for y in range(rows):
        selection = init_sized("GhosttySelection")
        selection.start = screen._terminal.ref(0, y, "viewport")[0]
        selection.end = screen._terminal.ref(columns - 1, y, "viewport")[0]
        selection.rectangle = True
        options = init_sized("GhosttyFormatterTerminalOptions")
        options.emit = lib.GHOSTTY_FORMATTER_FORMAT_PLAIN
        options.unwrap = True
        options.trim = False
        options.selection = selection
        lines.append(screen._format(options).decode())
    return "\n".join(lines)


PIECES = ["abc", " ", "   ", "\x1b[31m", "\x1b[44m", "\x1b[0m", "中文", "🙂", "e\u0301", "\r\n",
          "\r\n\r\n", "\t", "\x1b[K", "x" * 50, "\x1b[1;4m", "\x1b[2J"]  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(
    size=st.sampled_from([(10, 4), (20, 6), (80, 24), (7, 3)]),
    pieces=st.lists(st.sampled_from(PIECES), min_size=1, max_size=300),
    back=st.integers(0, 400),
)
def test_viewport_overlay_reads_rows_the_way_prowl_does(
    size: tuple[int, int], pieces: list[str], back: int
) -> None:
    screen = Screen(*size, scrollback_lines=500)
    screen.feed("".join(pieces).encode())
    screen.scroll_viewport(-back)
    overlay = screen.viewport_overlay()
    assert overlay == prowl_row_reads(screen)
    assert overlay.count("\n") == size[1] - 1
