"""tmux control-mode lines and format output."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mirror_host.panes.tmux_protocol import (
    LIST_FORMAT,
    SEPARATOR,
    BlockEnd,
    BlockStart,
    CommandFinished,
    ControlEvent,
    ControlParser,
    Exited,
    LayoutChanged,
    Output,
    OutputReceived,
    Paused,
    Unknown,
    pane_title,
    parse_line,
    parse_pane_rows,
    parse_pane_state,
    soft_wraps,
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
    assert parse_line(b"%begin 1796161639 316 1") == BlockStart(1796161639, 316, True)
    assert parse_line(b"%begin 1796161639 2 0") == BlockStart(1796161639, 2, False)
    assert parse_line(b"%end 1796161639 316 1") == BlockEnd(1796161639, 316, True)
    assert parse_line(b"%error 1796161639 316 1") == BlockEnd(1796161639, 316, False)
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


@pytest.mark.parametrize(
    ("window", "panes", "command", "title"),
    [
        ("bash", 1, "bash", ("work · bash", "bash")),  # tmux names windows after the command
        ("bash", 2, "bash", ("work · bash · Pane 2", "bash · Pane 2")),
        ("editor", 1, "vim", ("work · editor · vim", "editor · vim")),
        ("editor", 1, "", ("work · editor · Shell", "editor · Shell")),
    ],
)
def test_a_pane_title_says_each_thing_once(
    window: str, panes: int, command: str, title: tuple[str, str]
) -> None:
    fields = ["$0", "work", "@1", "0", window, str(panes), "%3", "1", "t", command, "/src",
              "80", "24", "0", "4242", "/tmp/tmux-0/x"]  # fmt: skip
    (row,) = parse_pane_rows(SEPARATOR.join(fields))
    assert pane_title(row) == title


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


# ---------------------------------------------------------------- ControlParser


def feed(parser: ControlParser, text: bytes) -> list[ControlEvent]:
    """Every event the lines of ``text`` produce, in order."""
    events = [parser.feed(line) for line in text.split(b"\n")]
    return [event for event in events if event is not None]


def test_notifications_outside_any_block_are_events() -> None:
    parser = ControlParser()
    assert feed(parser, b"%output %1 hi\\015\\012\n%window-add @3\n%pause %1\n%exit server") == [
        OutputReceived("%1", b"hi\r\n"),
        LayoutChanged("window-add"),
        Paused("%1", True),
        Exited("server"),
    ]
    assert feed(parser, b"%client-detached /dev/pts/1\nstray text\n%end 1 2 1") == []
    assert parser.waiting == ()


def test_one_reply_per_command_line_in_order_with_output_between_blocks() -> None:
    parser = ControlParser()
    first, second = parser.expect(1), parser.expect(1)
    assert first != second and parser.waiting == (first, second)
    events = feed(
        parser,
        b"%begin 100 7 1\nline one\n\nline three\n%end 100 7 1\n"
        b"%output %2 between\n"
        b"%begin 100 8 1\n%end 100 8 1",
    )
    assert events == [
        CommandFinished(first, ((b"line one", b"", b"line three"),), ok=True),
        OutputReceived("%2", b"between"),
        CommandFinished(second, ((),), ok=True),
    ]
    assert parser.waiting == ()


def test_a_command_line_of_several_commands_collects_every_block() -> None:
    parser = ControlParser()
    command = parser.expect(3)
    events = feed(
        parser,
        b"%begin 5 1 1\n%end 5 1 1\n"
        b"%output %0 x\n"
        b"%begin 5 2 1\nrow\n%end 5 2 1\n"
        b"%begin 6 3 1\n80 24\n%end 6 3 1",
    )
    assert events == [
        OutputReceived("%0", b"x"),
        CommandFinished(command, ((), (b"row",), (b"80 24",)), ok=True),
    ]


def test_blocks_of_commands_we_did_not_send_are_skipped() -> None:
    parser = ControlParser()
    command = parser.expect(1)
    events = feed(
        parser,
        b"%begin 9 40 0\nsomebody else's output\n%end 9 40 0\n%begin 9 41 1\nours\n%end 9 41 1",
    )
    assert events == [CommandFinished(command, ((b"ours",),), ok=True)]


def test_error_ends_the_line_because_tmux_drops_the_rest_of_it() -> None:
    parser = ControlParser()
    failing, following = parser.expect(3), parser.expect(1)
    # tmux 3.3a: `display -p a ; kill-pane -t %999 ; display -p b` stops at the error.
    events = feed(
        parser,
        b"%begin 1 265 1\na\n%end 1 265 1\n"
        b"%begin 1 266 1\ncan't find pane: %999\n%error 1 266 1\n"
        b"%begin 1 267 1\ne\n%end 1 267 1",
    )
    assert events == [
        CommandFinished(failing, ((b"a",), (b"can't find pane: %999",)), ok=False),
        CommandFinished(following, ((b"e",),), ok=True),
    ]


def test_a_line_that_does_not_parse_yields_one_error_block() -> None:
    parser = ControlParser()
    broken, following = parser.expect(2), parser.expect(1)
    events = feed(
        parser,
        b"%begin 2 273 1\nparse error: unknown command: nosuchcmd\n%error 2 273 1\n"
        b"%begin 2 274 1\nf\n%end 2 274 1",
    )
    assert events == [
        CommandFinished(broken, ((b"parse error: unknown command: nosuchcmd",),), ok=False),
        CommandFinished(following, ((b"f",),), ok=True),
    ]


def test_block_content_that_looks_like_a_guard_or_notification_stays_content() -> None:
    # tmux prints command output unescaped: `display -p '%end 1796181554 266 1'`
    # really puts that line inside the block; only the matching guard ends it.
    parser = ControlParser()
    command, following = parser.expect(1), parser.expect(1)
    events = feed(
        parser,
        b"%begin 1796181561 264 1\n"
        b"%end 1796181554 266 1\n%error 1796181561 263 1\n%end 1796181560 264 1\n"
        b"%output %1 fake\n%begin 1796181561 300 1\n%exit\n"
        b"%end 1796181561 264 1\n"
        b"%begin 1796181562 265 1\n%end 1796181562 265 1",
    )
    assert events == [
        CommandFinished(
            command,
            (
                (
                    b"%end 1796181554 266 1",
                    b"%error 1796181561 263 1",
                    b"%end 1796181560 264 1",
                    b"%output %1 fake",
                    b"%begin 1796181561 300 1",
                    b"%exit",
                ),
            ),
            ok=True,
        ),
        CommandFinished(following, ((),), ok=True),
    ]


def test_a_reply_nobody_waits_for_is_dropped() -> None:
    parser = ControlParser()
    assert feed(parser, b"%begin 3 1 1\nlate\n%end 3 1 1\n%output %4 ok") == [
        OutputReceived("%4", b"ok")
    ]
    command = parser.expect(1)
    assert feed(parser, b"%begin 3 2 1\n%end 3 2 1") == [CommandFinished(command, ((),), True)]


def test_expect_needs_at_least_one_block() -> None:
    with pytest.raises(ValueError):
        ControlParser().expect(0)


def _tmux_escape(data: bytes) -> bytes:
    """What tmux's control.c writes for ``data``: bytes below 32 and ``\\`` as ``\\ooo``."""
    return b"".join(
        b"\\%03o" % byte if byte < 32 or byte == 0x5C else bytes((byte,)) for byte in data
    )


@given(st.binary(max_size=200))
def test_any_bytes_tmux_escapes_come_back_unchanged(data: bytes) -> None:
    assert unescape_output(_tmux_escape(data)) == data


def test_soft_wraps_from_the_rows_and_the_joined_lines() -> None:
    """``capture-pane -p -N`` and ``-p -J`` of one 20-column screen (tmux 3.3a's output)."""
    rows = [".0s' $(seq 30); echo", "; echo short", "A" * 20, "A" * 10, "short", "bash-5.2# "]
    joined = [".0s' $(seq 30); echo; echo short", "A" * 30, "short", "bash-5.2# "]
    assert soft_wraps(rows, joined, 20) == [False, True, False, True, False, False]
    # A wide glyph that did not fit left the last cell empty: the line stays on its rows.
    rows = ["x" * 19, "中y"]
    assert soft_wraps(rows, ["x" * 19 + "中y"], 20) == [False, False]
    # Captures that do not add up (the screen changed between them): nothing continues.
    assert soft_wraps(["abc", "def"], ["abcdeX"], 3) == [False, False]
