"""How many terminal cells text takes, as libghostty-vt lays it out. Pure.

Every place that measures text without an emulator to ask (the widest row of
a Herdr ``pane.read``, agliteterm's plain answers, which tmux rows reach the
last column, ``attach``'s crop of a text frame) measures it here, the way the
host's own emulator (``terminal/``, libghostty-vt) and Prowl's clients lay it
out: ``tests/unit/test_width.py`` feeds text to a
:class:`~mirror_host.terminal.Screen` and checks that the cursor lands where
this module says.

libghostty lays a line out one code point at a time (unless a program asks
for grapheme clustering with DEC mode 2027, which nothing here follows): each
code point takes 0, 1 or 2 cells of its own, so the width of a text is the sum
of its code points' widths, and text measured in pieces adds up. A code point
takes

* **0**: controls (C0, DEL, C1; they act, they are not drawn), the line and
  paragraph separators, surrogates, every Default_Ignorable_Code_Point but the
  soft hyphen (zero-width space and joiners, variation selectors, bidi
  controls, tag characters, Hangul fillers …), nonspacing and enclosing marks
  (Mn, Me: a combining accent joins the cell before it), and the Hangul (and
  Kirat Rai) vowels and trailing consonants that join a syllable;
* **2**: East Asian Wide and Fullwidth (CJK, most emoji, skin-tone modifiers),
  regional indicators, the two- and three-em dashes;
* **1**: everything else (ambiguous-width characters too).

Where Unicode's own account of a character and libghostty part, this follows
libghostty, because its cells are what Prowl's clients show:

* an emoji ZWJ sequence is its emoji side by side: ``👨‍👩`` takes 4 (2 + 0 + 2),
  not the 2 of one grapheme cluster;
* VS16 does not widen and VS15 does not narrow: ``❤️`` takes 1 (its base's
  own width), ``⌚︎`` 2; the selector itself takes none;
* a flag is two regional indicators, 2 each: ``🇯🇵`` takes 4; a skin-tone
  modifier after an emoji adds its own 2 (``👍🏽`` takes 4); a keycap ``1️⃣``
  takes 1;
* the soft hyphen takes 1 (Unicode calls it default-ignorable; terminals show
  it as a hyphen), while the zero-width space takes 0;
* the prepended concatenation marks (U+0600–0605, U+06DD …: format
  characters, but not default-ignorable) take 1;
* the three-em dash takes 2, not 3 (a cell is at most two wide).

libghostty's tables are Unicode 17, and this Python's :mod:`unicodedata` may be
as old as 14.0 (Python 3.11). The differences for characters both know are
written out below (``_WIDENED_IN_16``, ``_SPACING_SINCE_16``); a character this
Python does not know yet (category ``Cn``) is measured by Unicode's defaults
for unassigned code points: 2 in the blocks reserved for ideographs, 0 where it
is default-ignorable, 1 elsewhere (a character assigned since may differ).
"""

from __future__ import annotations

import unicodedata
from bisect import bisect_right
from functools import lru_cache

__all__ = ["char_width", "text_width"]


def _ranges(*spans: tuple[int, int]) -> tuple[int, ...]:
    """Inclusive ``(first, last)`` spans as a sorted list of boundaries for :func:`_within`."""
    bounds: list[int] = []
    for first, last in spans:
        bounds += [first, last + 1]
    return tuple(bounds)


def _within(code: int, bounds: tuple[int, ...]) -> bool:
    return bisect_right(bounds, code) % 2 == 1


#: Default_Ignorable_Code_Point (Unicode's DerivedCoreProperties.txt), reserved
#: code points in it included; the soft hyphen (U+00AD) is taken out before.
_IGNORABLE = _ranges(
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)
#: Vowels and trailing consonants that join the syllable before them
#: (Grapheme_Cluster_Break V and T): Hangul Jamo, Jamo Extended-B, Kirat Rai.
_JOINING_JAMO = _ranges(
    (0x1160, 0x11FF), (0xD7B0, 0xD7C6), (0xD7CB, 0xD7FB), (0x16D63, 0x16D63), (0x16D67, 0x16D6A)
)
#: Made East Asian Wide in Unicode 16.0 (Yijing trigrams and hexagrams, Tai Xuan
#: Jing monograms to tetragrams, counting rods), Neutral in older tables.
_WIDENED_IN_16 = _ranges(
    (0x2630, 0x2637), (0x268A, 0x268F), (0x4DC0, 0x4DFF), (0x1D300, 0x1D356), (0x1D360, 0x1D376)
)
#: A nonspacing mark in older tables, a spacing one (one cell) since Unicode 16.0.
_SPACING_SINCE_16 = frozenset({0x1171E})
#: Where Unicode gives unassigned code points East Asian Width W: the blocks
#: and planes reserved for ideographs.
_WIDE_WHEN_UNASSIGNED = _ranges(
    (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x2FFFD), (0x30000, 0x3FFFD)
)
_REGIONAL_INDICATORS = _ranges((0x1F1E6, 0x1F1FF))
_EM_DASHES = frozenset({0x2E3A, 0x2E3B})


@lru_cache(maxsize=8192)
def char_width(char: str) -> int:
    """Cells the code point ``char`` takes where libghostty lays it out: 0 (it joins
    the cell before it, or is not drawn), 1 or 2."""
    code = ord(char)
    if 0x20 <= code < 0x7F:
        return 1
    category = unicodedata.category(char)
    if category in ("Cc", "Cs", "Zl", "Zp"):
        return 0
    if code == 0x00AD:
        return 1
    if _within(code, _IGNORABLE) or _within(code, _JOINING_JAMO):
        return 0
    if category in ("Mn", "Me") and code not in _SPACING_SINCE_16:
        return 0
    if code in _EM_DASHES or _within(code, _REGIONAL_INDICATORS) or _within(code, _WIDENED_IN_16):
        return 2
    if category == "Cn":
        # Not asked: Python 3.11 answers "F" for every unassigned code point.
        return 2 if _within(code, _WIDE_WHEN_UNASSIGNED) else 1
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def text_width(text: str) -> int:
    """Cells ``text`` takes on one line of libghostty (each code point's own width, summed)."""
    if text.isascii() and text.isprintable():
        return len(text)
    return sum(char_width(char) for char in text)
