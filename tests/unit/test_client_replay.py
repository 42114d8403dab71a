"""Attach's replay: mode filtering, the crop window, text rendering, the replica."""

from __future__ import annotations

import pytest

from mirror_host.client.replay import (
    SYNC_BEGIN,
    SYNC_END,
    ModeSet,
    Presenter,
    Replica,
    Window,
    crop_window,
    filter_modes,
    render_text,
)
from mirror_host.terminal import Screen
from mirror_host.width import text_width


def test_report_and_screen_modes_are_stripped_others_kept() -> None:
    data = b"\x1b[?1004h\x1b[?2004h\x1b[?2031h\x1b[?2048h\x1b[?1049h\x1b[?3hX\x1b[4h"
    filtered = filter_modes(data)
    assert filtered.data == b"\x1b[?2004hX\x1b[4h"
    assert filtered.modes == (ModeSet(True, 2004, True), ModeSet(False, 4, True))


def test_combined_parameters_keep_only_the_allowed_modes() -> None:
    filtered = filter_modes(b"\x1b[?1;1004;2004h")
    assert filtered.data == b"\x1b[?1;2004h"
    assert [m.number for m in filtered.modes] == [1, 2004]


def test_keyboard_protocols_are_noticed() -> None:
    filtered = filter_modes(b"\x1b[=5;1u\x1b[>4;2m")
    assert filtered.kitty and filtered.modify_other_keys


def test_mode_undo_is_the_inverse() -> None:
    assert ModeSet(True, 2004, True).undo() == b"\x1b[?2004l"
    assert ModeSet(True, 7, False).undo() == b"\x1b[?7h"
    assert ModeSet(False, 4, True).undo() == b"\x1b[4l"


@pytest.mark.parametrize(
    ("host", "local", "cursor", "expected"),
    [
        ((80, 24), (80, 24), (5, 23), Window(0, 0, 80, 24, cropped=False)),
        ((80, 24), (120, 40), (5, 23), Window(0, 0, 80, 24, cropped=False)),
        # One row is kept for the notice; the cursor at the top needs no scrolling.
        ((120, 40), (100, 30), (0, 0), Window(0, 0, 100, 29, cropped=True)),
        # The window follows the cursor to the bottom right.
        ((120, 40), (100, 30), (119, 39), Window(20, 11, 100, 29, cropped=True)),
        ((120, 40), (100, 30), (100, 29), Window(1, 1, 100, 29, cropped=True)),
        # Only one row too many: cropped by two (the notice takes one).
        ((80, 25), (80, 24), (0, 24), Window(0, 2, 80, 23, cropped=True)),
        ((80, 24), (1, 1), (3, 3), Window(3, 3, 1, 1, cropped=True)),
    ],
)
def test_crop_window(
    host: tuple[int, int], local: tuple[int, int], cursor: tuple[int, int], expected: Window
) -> None:
    assert crop_window(host, local, cursor) == expected


def test_text_keeps_the_newest_rows_clips_wide_text_and_neutralises_controls() -> None:
    text = "".join(f"line {i}\n" for i in range(10)) + "日本語テキスト\x1b]52;c;evil\x07\n"
    rows, cropped = render_text(text, (10, 5), (40, 11))
    assert cropped
    assert b"\x1b]52" not in rows  # the host's escape cannot reach the terminal
    assert b"line 7" in rows and b"line 6" not in rows  # 4 rows + the notice
    assert "日本語テキ".encode() in rows and "日本語テキス".encode() not in rows
    assert text_width("日本") == 4


def test_small_text_is_shown_whole() -> None:
    rows, cropped = render_text("a\nb\n", (80, 24), (40, 10))
    assert not cropped
    assert rows.startswith(b"\x1b[1;1Ha\x1b[2;1Hb\x1b[24;1H")  # then the notice


def test_a_text_view_says_it_is_read_only_and_how_to_leave() -> None:
    """``attach --text`` ignored keys without a word, Ctrl-C too (issue 28 item 23)."""
    shown = _shown(render_text("a\nb\n", (80, 24), (40, 10))[0], (80, 24))
    assert shown[:2] == ["a", "b"]
    assert shown[-1] == " read-only text view (keys are not sent) · Ctrl-] or Ctrl-C detaches"
    narrow = _shown(render_text("a\n", (30, 5), (40, 10))[0], (30, 5))
    assert narrow[-1] == " read-only · Ctrl-] detaches"
    full = _shown(render_text("x\n" * 24, (80, 24), (80, 24))[0], (80, 24))
    assert full[-1] == " read-only · pane 80x24, newest rows · Ctrl-] or Ctrl-C detaches"


def _shown(data: bytes, local: tuple[int, int]) -> list[str]:
    screen = Screen(*local)
    try:
        screen.feed(data)
        return [line.rstrip() for line in screen.active_text().split("\n")]
    finally:
        screen.close()


def test_a_cropped_frame_shows_exactly_the_window_of_the_host_screen() -> None:
    host = Screen(30, 8)
    for row in range(8):
        host.feed(b"".join(b"%d" % ((row + col) % 10) for col in range(30)))
        if row < 7:
            host.feed(b"\r\n")
    host.feed(b"\x1b[8;25H")  # cursor at column 24, row 7 (0-based)
    frame = host.vt_frame()
    replica = Replica(30, 8, scrollback_lines=0)
    replica.replay(frame)
    local = (20, 5)
    window = crop_window((30, 8), local, replica.cursor)
    assert window == Window(5, 4, 20, 4, cropped=True)
    presenter = Presenter()
    data = presenter.vt(replica.window_vt(window), window, replica.cursor, (30, 8), local)
    assert data.startswith(SYNC_BEGIN) and data.endswith(SYNC_END)
    shown = _shown(data, local)
    for row in range(4):
        expected = "".join(str((row + 4 + col) % 10) for col in range(5, 25))
        assert shown[row] == expected
    assert shown[4] == " Ctrl-] detaches"  # all of the notice that fits 20 columns
    check = Screen(*local)
    check.feed(data)
    assert check.cursor == (24 - 5, 7 - 4)
    check.close()
    host.close()
    replica.close()


def test_frames_undo_the_previous_frames_modes_and_strip_reports() -> None:
    host = Screen(20, 4)
    host.feed(b"\x1b[?2004h\x1b[?1004h\x1b[?1hhi")
    replica = Replica(20, 4, scrollback_lines=0)
    replica.replay(host.vt_frame())
    presenter = Presenter()
    window = crop_window((20, 4), (80, 24), replica.cursor)
    first = presenter.vt(replica.window_vt(window), window, replica.cursor, (20, 4), (80, 24))
    assert b"\x1b[?2004h" in first and b"\x1b[?1h" in first and b"1004" not in first
    replica.replay(b"plain")
    second = presenter.vt(replica.window_vt(window), window, replica.cursor, (20, 4), (80, 24))
    assert b"\x1b[?2004l" in second and b"\x1b[?1l" in second
    assert b"\x1b[?2004l" not in presenter.leave()  # already undone
    host.close()
    replica.close()


def test_replay_resets_like_ris() -> None:
    replica = Replica(10, 2, scrollback_lines=0)
    replica.replay(b"\x1b[31mred")
    replica.replay(b"x")
    assert replica.active_text().startswith("x")
    assert replica.cell(0, 0)[1] == Screen(10, 2).cell(0, 0)[1]  # no red pen carried over
    replica.close()


@pytest.mark.parametrize(
    ("columns", "shown"),
    [
        (
            120,
            " host pane 44x25 is larger than this 120x5 terminal: columns 1-44, rows 22-25 "
            "· resize to see all · Ctrl-] detaches",
        ),
        (60, " pane 44x25: columns 1-44, rows 22-25 · Ctrl-] detaches"),
        (30, " cropped · Ctrl-] detaches"),
        (20, " Ctrl-] detaches"),
        (12, " Ctrl-]"),
        (5, " Ctrl"),
    ],
)
def test_a_crop_notice_is_shortened_to_fit_never_cut_mid_word(columns: int, shown: str) -> None:
    """A 20x5 terminal once showed ` host pane 44x25 is` (issue 28 item 9)."""
    host, local = (44, 25), (columns, 5)
    window = crop_window(host, local, (0, 24))
    line = _shown(Presenter().vt(b"", window, (0, 24), host, local), local)[-1]
    assert line == shown.replace("1-44", f"1-{min(44, columns)}")
    text_line = _shown(render_text("x\n" * 30, local, host)[0], local)[-1]
    assert "Ctrl" in text_line and text_width(text_line) <= columns
