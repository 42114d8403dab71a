"""How many grid cells a character takes, the way terminals count. Pure.

agliteterm reports each run's cell extent; when the host lays text out itself
(plain answers of older builds, row text for agent detection) it counts cells
as wcwidth does: combining marks and other zero-width characters take none,
East Asian wide and fullwidth characters two, everything else one.
"""

from __future__ import annotations

import unicodedata

__all__ = ["char_cells", "text_cells"]


def char_cells(char: str) -> int:
    """Cells ``char`` occupies: 0, 1 or 2."""
    if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def text_cells(text: str) -> int:
    """Cells ``text`` occupies."""
    return sum(char_cells(char) for char in text)
