"""Frames from styled rows: cell-exact on a libghostty replica, text, and the agent view."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mirror_host.agents import Agent, AgentState, Composer, read_screen
from mirror_host.panes.agliteterm.protocol import Row, Run, StyledScreen
from mirror_host.panes.agliteterm.render import (
    RowCache,
    StyledView,
    row_text,
    screen_lines,
    sgr,
    text_frame,
    vt_frame,
)
from mirror_host.panes.agliteterm.scrollback import ScrolledView, scroll_step
from mirror_host.terminal import Screen

COLUMNS, ROWS = 20, 6


def colour(spec: str) -> object:
    if spec.startswith("idx:"):
        return ("palette", int(spec[4:]))
    if spec.startswith("#"):
        return ("rgb", tuple(int(spec[i : i + 2], 16) for i in (1, 3, 5)))
    return None


def expected_cells(
    lines: list[Row], columns: int
) -> dict[tuple[int, int], tuple[str, dict[str, object]]]:
    """What every cell the rows cover must hold on the replica: text and visible style."""
    cells = {}
    for y, runs in enumerate(lines):
        for run in runs:
            x = run.col
            for char in run.text:
                style = {
                    "bold": run.bold, "faint": run.faint, "italic": run.italic,
                    "underline": 1 if run.underline else 0, "inverse": run.inverse,
                    "strikethrough": run.strike, "fg": colour(run.fg), "bg": colour(run.bg),
                }  # fmt: skip
                cells[(x, y)] = (char, style)
                x += 2 if char in "中文字😀" else 1
    return cells


def replay(data: bytes, columns: int, rows: int) -> Screen:
    """A fresh replica fed one frame, as Prowl's Mac client does (RIS, then the bytes)."""
    replica = Screen(columns, rows)
    replica.feed(b"\x1bc" + data)
    return replica


def assert_cell_exact(lines: list[Row], columns: int, replica: Screen) -> None:
    wanted = expected_cells(lines, columns)
    for (x, y), (char, style) in wanted.items():
        text, shown = replica.cell(x, y)
        got = dict(shown)
        assert text == char, f"cell {x},{y}: {text!r} != {char!r}"
        for key, value in style.items():
            assert got[key] == value, f"cell {x},{y} {key}: {got[key]!r} != {value!r}"
    # Cells no run covers stay blank and unstyled.
    for y in range(len(lines)):
        for x in range(columns):
            spacer = (x - 1, y) in wanted and wanted[(x - 1, y)][0] in "中文字😀"
            if (x, y) in wanted or spacer:
                continue
            text, shown = replica.cell(x, y)
            assert text in ("", " ") and dict(shown)["bg"] is None, f"cell {x},{y} is {text!r}"


SAMPLE: list[Row] = [
    (
        Run(col=0, width=3, text="red", bold=True, fg="idx:1"),
        Run(col=3, width=1, text=" "),
        Run(col=4, width=4, text="中文", fg="idx:200", bg="#0a141e"),
        Run(col=8, width=5, text="faint", faint=True, italic=True),
    ),
    (),
    (
        Run(col=2, width=4, text="undl", underline=True, fg="idx:12"),
        Run(col=10, width=3, text="inv", inverse=True, strike=True, bg="idx:4"),
    ),
    (Run(col=0, width=20, text="x" * 20, fg="#ff8000"),),
    (),
    (Run(col=18, width=2, text="字", bg="idx:7"),),
]


def test_sample_is_cell_exact_with_cursor() -> None:
    data = vt_frame(SAMPLE, COLUMNS, cursor=(2, 7))
    replica = replay(data, COLUMNS, ROWS)
    assert_cell_exact(SAMPLE, COLUMNS, replica)
    assert replica.cursor == (7, 2)
    assert replica.mode(7)  # autowrap back on for the replica
    # A full last row did not scroll the replica.
    assert replica.cell(0, 0)[0] == "r"


def test_deferred_wrap_cursor_sits_on_the_last_column() -> None:
    replica = replay(vt_frame(SAMPLE, COLUMNS, cursor=(3, COLUMNS)), COLUMNS, ROWS)
    assert replica.cursor == (COLUMNS - 1, 3)


def test_hidden_cursor_for_a_scrolled_view() -> None:
    replica = replay(vt_frame(SAMPLE, COLUMNS, cursor=None), COLUMNS, ROWS)
    assert not replica.mode(25)


def test_sgr() -> None:
    assert sgr(Run(col=0, width=1, text="x")) == "\x1b[0m"
    run = Run(col=0, width=1, text="x", bold=True, faint=True, italic=True, underline=True,
              inverse=True, strike=True, fg="idx:3", bg="idx:15")  # fmt: skip
    assert sgr(run) == "\x1b[0;1;2;3;4;7;9;33;107m"
    assert sgr(Run(col=0, width=1, text="x", fg="idx:123", bg="#010203")) == (
        "\x1b[0;38;5;123;48;2;1;2;3m"
    )
    # Anything that is not a spec agliteterm documents is left at the default.
    assert sgr(Run(col=0, width=1, text="x", fg="idx:999", bg="#12")) == "\x1b[0m"


def test_a_run_wider_than_counted_cannot_wrap_into_the_next_row() -> None:
    lines: list[Row] = [(Run(col=18, width=2, text="abcdef"),), (Run(col=0, width=2, text="ok"),)]
    replica = replay(vt_frame(lines, COLUMNS, cursor=(0, 0)), COLUMNS, 2)
    assert replica.cell(0, 1)[0] == "o" and replica.cell(0, 0)[0] == ""


runs_strategy = st.builds(
    lambda parts: tuple(parts),
    st.lists(
        st.tuples(
            st.text(st.sampled_from("abcXYZ 中#*"), min_size=1, max_size=5),
            st.booleans(), st.booleans(), st.booleans(), st.booleans(), st.booleans(), st.booleans(),
            st.sampled_from(["default", "idx:0", "idx:7", "idx:8", "idx:15", "idx:16", "idx:255",
                             "#000000", "#ff00aa"]),
            st.sampled_from(["default", "idx:1", "idx:9", "idx:100", "#123456"]),
        ),
        max_size=4,
    ),
)  # fmt: skip


def layout(parts: tuple[tuple[object, ...], ...], columns: int) -> Row:
    """Runs laid out left to right as agliteterm reports them (gaps allowed)."""
    row: list[Run] = []
    x = 0
    for index, part in enumerate(parts):
        text, bold, faint, italic, underline, inverse, strike, fg, bg = part
        assert isinstance(text, str)
        width = sum(2 if c == "中" else 1 for c in text)
        x += index % 2  # every other run leaves a gap
        if x + width > columns:
            break
        row.append(Run(col=x, width=width, text=text, bold=bool(bold), faint=bool(faint),
                       italic=bool(italic), underline=bool(underline), inverse=bool(inverse),
                       strike=bool(strike), fg=str(fg), bg=str(bg)))  # fmt: skip
        x += width
    return tuple(row)


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(st.lists(runs_strategy, min_size=1, max_size=ROWS), st.integers(0, ROWS - 1))
def test_any_rows_are_cell_exact(parts: list[tuple[tuple[object, ...], ...]], row: int) -> None:
    lines = [layout(p, COLUMNS) for p in parts]
    lines += [()] * (ROWS - len(lines))
    replica = replay(vt_frame(lines, COLUMNS, cursor=(row, 3)), COLUMNS, ROWS)
    assert_cell_exact(lines, COLUMNS, replica)


def test_row_cache_formats_only_changed_rows() -> None:
    cache = RowCache()
    first = vt_frame(SAMPLE, COLUMNS, cursor=(0, 0), cache=cache)
    assert cache.formatted == 4
    changed = list(SAMPLE)
    changed[2] = (Run(col=0, width=3, text="new"),)
    second = vt_frame(changed, COLUMNS, cursor=(0, 0), cache=cache)
    assert cache.formatted == 5 and first != second
    assert second == vt_frame(changed, COLUMNS, cursor=(0, 0))  # same bytes as uncached


def test_text_frame_and_rows() -> None:
    assert row_text((Run(col=2, width=2, text="中"), Run(col=5, width=1, text="b"))) == "  中 b"
    lines = screen_lines(StyledScreen(columns=10, rows={1: (Run(col=0, width=2, text="hi"),)}), 4)
    assert lines[0] == () and text_frame(lines) == "\nhi"


CLAUDE_IDLE = [
    "╭────────────╮",
    "│ ✻ Welcome  │",
    "╰────────────╯",
    "",
    "─" * 40,
    '❯ Try "refactor"',
    "─" * 40,
    "  ? for shortcuts",
]


def test_styled_view_reads_like_a_screen() -> None:
    rows: dict[int, Row] = {}
    for y, text in enumerate(CLAUDE_IDLE):
        if y == 5:
            rows[y] = (Run(col=0, width=2, text="❯ "),
                       Run(col=2, width=14, text=text[2:], faint=True))  # fmt: skip
        elif text:
            rows[y] = (Run(col=0, width=len(text), text=text),)
    view = StyledView(StyledScreen(columns=40, rows=rows, cursor=(5, 2)), 12)
    assert view.rows[5] == CLAUDE_IDLE[5] and view.solid_text(5) == "❯"
    assert view.cursor == (2, 5) and len(view.rows) == 12
    assert view.continues(5)  # the rule above reaches the last column
    found = read_screen(Agent.CLAUDE, view)
    assert (found.state, found.composer) == (AgentState.IDLE, Composer.EMPTY)


def test_scrolled_view_bounds_are_exact() -> None:
    rows = {y: (Run(col=0, width=1, text=str(abs(y) % 10)),) for y in range(-10, 4)}
    view = ScrolledView(StyledScreen(columns=5, rows=rows), rows=4)
    assert view.history == 10 and view.bounds().at_bottom
    up = view.moved(scroll_step(4))
    assert up.offset == 1 and up.top == -1 and not up.bounds().at_top
    top = up.moved(100)
    assert top.offset == 10 and top.bounds().at_top and not top.bounds().at_bottom
    assert top.lines()[0] == rows[-10]
    assert top.moved(-100).bounds().at_bottom
