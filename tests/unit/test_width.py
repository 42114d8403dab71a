"""One display width, pinned to libghostty's own cell layout.

Each check feeds text to a :class:`~mirror_host.terminal.Screen` wide enough
that nothing wraps and reads where the cursor landed: that is how many cells
libghostty gave the text, and :func:`mirror_host.width.text_width` must say the
same. Code points this Python's ``unicodedata`` does not know (``Cn``) are left
out: libghostty's Unicode is newer, and for those the module can only follow
Unicode's defaults (see its docstring).
"""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mirror_host.terminal import Screen
from mirror_host.width import char_width, text_width

COLUMNS = 400


def ghostty_cells(text: str) -> int:
    """Cells libghostty used for ``text`` on a fresh line of a wide screen."""
    screen = Screen(COLUMNS, 3)
    try:
        screen.feed(text.encode("utf-8"))
        column, row = screen.cursor
        assert row == 0, "the text wrapped: the screen is too narrow for it"
        return column
    finally:
        screen.close()


ZWJ, VS15, VS16, ZWSP, SHY = "\u200d", "\ufe0e", "\ufe0f", "\u200b", "\u00ad"

#: The cases where Unicode's account and libghostty's part, and the width
#: libghostty gives (the module's docstring says why it follows it).
DECIDED = [
    pytest.param("👨" + ZWJ + "👩", 4, id="ZWJ sequence: each emoji its own 2"),
    pytest.param("👨" + ZWJ + "👩" + ZWJ + "👧" + ZWJ + "👦", 8, id="family of four"),
    pytest.param("❤" + VS16, 1, id="VS16 does not widen"),
    pytest.param("⌚" + VS15, 2, id="VS15 does not narrow"),
    pytest.param("1" + VS16 + "\u20e3", 1, id="keycap"),
    pytest.param(ZWSP, 0, id="zero-width space"),
    pytest.param(SHY, 1, id="soft hyphen shows as a hyphen"),
    pytest.param("e\u0301", 1, id="combining acute joins its base"),
    pytest.param("\u0301", 0, id="a combining mark with no base"),
    pytest.param("a\u20dd", 1, id="enclosing mark"),
    pytest.param("日本", 4, id="wide CJK"),
    pytest.param("Ａ", 2, id="fullwidth Latin"),
    pytest.param("ｱ", 1, id="halfwidth katakana"),
    pytest.param("👍🏽", 4, id="emoji modifier adds its own 2"),
    pytest.param("🏽", 2, id="emoji modifier alone"),
    pytest.param("🇯🇵", 4, id="flag: two regional indicators"),
    pytest.param("🇯", 2, id="one regional indicator"),
    pytest.param("\u1100\u1161\u11a8", 2, id="conjoining Hangul jamo"),
    pytest.param("\u0600", 1, id="prepended concatenation mark"),
    pytest.param("\u2e3b", 2, id="three-em dash, at most two cells"),
    pytest.param("\u4dc0", 2, id="hexagram, wide since Unicode 16"),
    pytest.param("\U0001171e", 1, id="Ahom medial ra, spacing since Unicode 16"),
    pytest.param("\u2028", 0, id="line separator"),
    pytest.param("§", 1, id="ambiguous width is narrow"),
    pytest.param("\ue000", 1, id="private use"),
    pytest.param("\U000e0001", 0, id="language tag"),
]


@pytest.mark.parametrize(("text", "cells"), DECIDED)
def test_decided_cases_follow_libghostty(text: str, cells: int) -> None:
    assert ghostty_cells(text) == cells
    assert text_width(text) == cells


#: Pieces the property draws from besides any character: the sequences where
#: width rules usually go wrong.
PIECES = [
    ZWJ,
    VS15,
    VS16,
    ZWSP,
    SHY,
    "\u200c",
    "\u2060",
    "\ufeff",
    "\u0301",
    "\u0308",
    "\u20e3",
    "\u0e33",
    "\u094d",
    "日",
    "本",
    "한",
    "\u1100",
    "\u1161",
    "\u11a8",
    "👨",
    "👩",
    "❤",
    "⌚",
    "☺",
    "👍",
    "🏻",
    "🏽",
    "🏿",
    "🇯",
    "🇵",
    "🏴",
    "\U000e0067",
    "\U000e007f",
    "a",
    "1",
    " ",
    "\u00a7",
]

_known = st.characters(exclude_categories=("Cc", "Cs", "Cn"))


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(PIECES), _known), max_size=60).map("".join))
@example("👨" + ZWJ + "👩")
@example("❤" + VS16 + "❤" + VS15)
@example(ZWSP + SHY + "e\u0301")
@example("🇯🇵🇺")
def test_text_width_is_where_libghostty_puts_the_cursor(text: str) -> None:
    assert text_width(text) == ghostty_cells(text)


@given(st.text(st.one_of(st.sampled_from(PIECES), _known), max_size=30), st.integers(0, 30))
def test_widths_of_pieces_add_up(text: str, cut: int) -> None:
    assert text_width(text) == text_width(text[:cut]) + text_width(text[cut:])


@pytest.mark.parametrize("control", ["\x00", "\x07", "\x1b", "\x7f", "\x85", "\x9b"])
def test_controls_take_no_cell(control: str) -> None:
    assert char_width(control) == 0
    assert text_width("a" + control + "b") == 2


@pytest.mark.slow
def test_every_known_code_point_as_libghostty_lays_it_out() -> None:
    """Every code point this Python knows, after a base character (so that a
    mark has one to join), in one screen reused: the cursor moves as far as
    ``char_width`` says."""
    screen = Screen(8, 3)
    wrong = []
    try:
        for code in range(0x20, 0x110000):
            char = chr(code)
            if unicodedata.category(char) in ("Cc", "Cs", "Cn"):
                continue
            screen.feed(b"\x1b[H\x1b[2KA" + char.encode("utf-8"))
            cells = screen.cursor[0] - 1
            if cells != char_width(char):
                wrong.append(f"U+{code:04X} libghostty {cells}, char_width {char_width(char)}")
    finally:
        screen.close()
    assert wrong == []
