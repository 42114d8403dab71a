"""tmux control-mode lines and format output."""

from __future__ import annotations

from mirror_host.panes.tmux_protocol import (
    LIST_FORMAT,
    SEPARATOR,
    BlockEnd,
    BlockStart,
    Exited,
    LayoutChanged,
    Output,
    Paused,
    Unknown,
    parse_line,
    parse_pane_rows,
    parse_pane_state,
    unescape_output,
)
from mirror_host.terminal import Screen


def test_output_is_unescaped() -> None:
    line = rb"%output %3 echo hi\015\012\033[1mbold\033[0m back\134slash \134015"
    assert parse_line(line) == Output("%3", b"echo hi\r\n\x1b[1mbold\x1b[0m back\\slash \\015")
    assert unescape_output(b"plain") == b"plain"
    assert unescape_output(bytes(range(32)).hex().encode()) == bytes(range(32)).hex().encode()
    escaped = b"".join(b"\\%03o" % c for c in range(32)) + b"\\134"
    assert unescape_output(escaped) == bytes(range(32)) + b"\\"


def test_blocks_and_notifications() -> None:
    assert parse_line(b"%begin 1796161639 316 1") == BlockStart(316, True)
    assert parse_line(b"%begin 1796161639 2 0") == BlockStart(2, False)
    assert parse_line(b"%end 1796161639 316 1") == BlockEnd(316, True)
    assert parse_line(b"%error 1796161639 316 1") == BlockEnd(316, False)
    assert parse_line(b"%window-add @4") == LayoutChanged("window-add")
    assert parse_line(b"%layout-change @1 abcd,80x24,0,0,1 abcd,80x24,0,0,1 *") == LayoutChanged(
        "layout-change"
    )
    assert parse_line(b"%pause %2") == Paused("%2", True)
    assert parse_line(b"%continue %2") == Paused("%2", False)
    assert parse_line(b"%exit") == Exited("")
    assert isinstance(parse_line(b"%client-detached /dev/pts/3"), Unknown)
    assert isinstance(parse_line(b"plain output line"), Unknown)
    assert isinstance(parse_line(b"%begin nonsense"), Unknown)


def test_pane_rows() -> None:
    fields = ["$0", "work", "@1", "0", "main", "2", "%3", "1", "title", "vim", "/src", "80", "24",
              "0", "4242", "/tmp/tmux-0/x"]  # fmt: skip
    rows = parse_pane_rows(SEPARATOR.join(fields) + "\nbroken line\n")
    assert len(rows) == 1
    row = rows[0]
    assert (row.pane_id, row.window_panes, row.width, row.height, row.dead) == (
        "%3",
        2,
        80,
        24,
        False,
    )
    assert LIST_FORMAT.count("#{") == len(fields)


def test_state_seed_reproduces_modes_cursor_and_region() -> None:
    values = ["5", "3", "0", "0", "1", "1", "0", "0", "1", "1", "0", "0", "1", "0", "2", "20",
              "80", "24", "0", "", "0"]  # fmt: skip
    state = parse_pane_state(SEPARATOR.join(values))
    assert state is not None
    screen = Screen(80, 24)
    screen.feed(state.seed_modes())
    assert screen.cursor == (5, 3)
    assert screen.mode(1) and screen.mode(1000) and screen.mode(1006)
    assert not screen.mode(25)
    assert parse_pane_state("too" + SEPARATOR + "few") is None
