"""A real screen as agent detection reads it: rows, faint text blanked, the cursor."""

from __future__ import annotations

from mirror_host.terminal import Screen
from mirror_host.terminal.view import ScreenText


def test_faint_text_is_blanked_and_wide_characters_keep_their_place() -> None:
    screen = Screen(40, 5)
    screen.feed("top\r\n❯\u00a0日本語 \x1b[2mfaint tail\x1b[0m\r\n\x1b[2mall faint\x1b[0m".encode())
    view = ScreenText(screen)
    assert list(view.rows) == ["top", "❯\u00a0日本語 faint tail", "all faint", "", ""]
    assert view.solid_text(1) == "❯\u00a0日本語"
    assert view.solid_text(2) == ""
    assert view.solid_text(0) == "top"
    # Faint text in the middle keeps the columns of what follows it.
    screen.feed("\r\nab\x1b[2mcd\x1b[0mef 👋 x".encode())
    view = ScreenText(screen)
    assert view.rows[3] == "abcdef 👋 x"
    assert view.solid_text(3) == "ab  ef 👋 x"


def test_cursor_only_while_visible() -> None:
    screen = Screen(20, 4)
    screen.feed(b"\x1b[3;5H")
    assert ScreenText(screen).cursor == (4, 2)
    screen.feed(b"\x1b[?25l")
    assert ScreenText(screen).cursor is None


def test_soft_wrapped_rows_are_told_from_new_lines() -> None:
    screen = Screen(10, 5)
    # 25 characters on one line wrap twice; a full row followed by CR LF does not.
    screen.feed(b"x" * 25 + b"\r\n" + b"y" * 10 + b"\r\nz")
    view = ScreenText(screen)
    assert list(view.rows) == ["x" * 10, "x" * 10, "xxxxx", "y" * 10, "z"]
    assert [view.continues(row) for row in range(5)] == [False, True, True, False, False]
    assert [screen.continues(row) for row in range(5)] == [False, True, True, False, False]


def test_a_cell_widened_by_grapheme_clustering_keeps_its_place() -> None:
    """With DEC mode 2027 on, VS16 makes ``❤`` two cells wide: the grid says so,
    where a width table (one cell for ``❤``) would put a space after it."""
    screen = Screen(20, 2)
    screen.feed("\x1b[?2027h❤\ufe0fx 日y".encode())
    view = ScreenText(screen)
    assert view.solid_text(0) == "❤\ufe0fx 日y"
    assert [screen.is_spacer(x, 0) for x in range(6)] == [False, True, False, False, False, True]
