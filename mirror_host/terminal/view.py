"""A :class:`~mirror_host.terminal.Screen` as agent detection reads it. Native, no I/O.

The rows come from one plain-text formatting of the active screen (cheap);
styles are read cell by cell only for the few rows a screen reader asks about
(the composer's), because reading every cell of a 215×64 screen takes far
longer than formatting it; so are the rows' soft-wrap flags. Use a view within
one synchronous stretch of code: it reads the screen lazily, so the screen must
not be fed in between.
"""

from __future__ import annotations

from collections.abc import Sequence

from mirror_host.terminal.screen import Screen

__all__ = ["ScreenText"]


class ScreenText:
    """The active screen's rows, its visible cursor, rows with faint text blanked, soft wraps."""

    def __init__(self, screen: Screen) -> None:
        self._screen = screen
        columns, rows = screen.size
        self._columns = columns
        lines = screen.active_text().split("\n")[:rows]
        lines += [""] * (rows - len(lines))
        self.rows: Sequence[str] = tuple(line.rstrip() for line in lines)
        self.cursor: tuple[int, int] | None = screen.cursor if screen.mode(25) else None
        self._solid: dict[int, str] = {}
        self._continues: dict[int, bool] = {}

    def solid_text(self, row: int) -> str:
        """Row ``row`` with every faint (SGR 2) character replaced by a space."""
        cached = self._solid.get(row)
        if cached is not None:
            return cached
        out: list[str] = []
        after_text = False
        for x in range(self._columns):
            text, style = self._screen.cell(x, row)
            if not text:
                # Only a cell right after a character can be its second half.
                if not (after_text and self._screen.is_spacer(x, row)):
                    out.append(" ")
                after_text = False
                continue
            faint = bool(dict(style).get("faint"))
            out.append(" " * len(text) if faint else text)
            after_text = True
        solid = "".join(out).rstrip()
        self._solid[row] = solid
        return solid

    def continues(self, row: int) -> bool:
        """Whether row ``row`` is a soft-wrap continuation of the row above."""
        cached = self._continues.get(row)
        if cached is None:
            cached = self._continues[row] = self._screen.continues(row)
        return cached
