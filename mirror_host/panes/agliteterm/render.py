"""Frames from agliteterm's styled rows in pure Python: VT, text, a screen for agents. Pure.

agliteterm already emulates the terminal, so the host needs no emulator of its
own: each row's runs become SGR-styled text placed by cursor moves, which
Prowl's Mac client replays into a freshly reset replica of the frame's size
(``docs/protocol.md``, VT frames). For every row that holds text:

* ``CSI row;col H`` at the start of the row and wherever a run does not follow
  on from the one before (a wide glyph takes two cells and one character, so
  the next run's column, not a count of characters, places it);
* ``CSI 0;… m``: the six flags (bold 1, faint 2, italic 3, underline 4,
  inverse 7, strike 9) and the colours, ``idx:N`` as 30–37/90–97 or
  ``38;5;N`` (48 for backgrounds), ``#rrggbb`` as ``38;2;r;g;b``, ``default``
  as nothing after the reset;
* the run's text.

Autowrap is off while rows are drawn, so a run that is wider on the replica
than agliteterm counted cannot wrap onto the next row or scroll the replica;
it is turned back on before the cursor is placed. The cursor goes where
agliteterm reported it (a deferred wrap, column = width, on the last column).

:class:`RowCache` keeps each row's bytes keyed by its runs, so a poll that
changed three rows formats three rows. :class:`StyledView` is the same rows as
agent detection reads a screen (:class:`~mirror_host.agents.ScreenView`).
"""

from __future__ import annotations

from collections.abc import Sequence

from mirror_host.panes.agliteterm.protocol import Row, Run, StyledScreen

__all__ = [
    "RowCache",
    "StyledView",
    "row_text",
    "screen_lines",
    "sgr",
    "text_frame",
    "vt_frame",
]

_CSI = "\x1b["
_FLAGS = (("bold", "1"), ("faint", "2"), ("italic", "3"), ("underline", "4"),
          ("inverse", "7"), ("strike", "9"))  # fmt: skip
_HEX = frozenset("0123456789abcdefABCDEF")


def _colour(spec: str, *, background: bool) -> str | None:
    """SGR parameters for one colour spec; ``None`` for ``default`` or anything unknown."""
    if spec.startswith("idx:"):
        digits = spec[4:]
        if not digits.isdigit() or int(digits) > 255:
            return None
        index = int(digits)
        if index < 8:
            return str((40 if background else 30) + index)
        if index < 16:
            return str((100 if background else 90) + index - 8)
        return f"{48 if background else 38};5;{index}"
    if len(spec) == 7 and spec[0] == "#" and all(c in _HEX for c in spec[1:]):
        red, green, blue = (int(spec[i : i + 2], 16) for i in (1, 3, 5))
        return f"{48 if background else 38};2;{red};{green};{blue}"
    return None


def sgr(run: Run) -> str:
    """``CSI 0;… m`` for the run's style (always from a reset pen)."""
    params = ["0"]
    params += [code for name, code in _FLAGS if getattr(run, name)]
    for spec, background in ((run.fg, False), (run.bg, True)):
        colour = _colour(spec, background=background)
        if colour is not None:
            params.append(colour)
    return f"{_CSI}{';'.join(params)}m"


def _row_vt(y: int, runs: Row) -> bytes:
    out = [f"{_CSI}{y + 1};1H"]
    x = 0
    for run in runs:
        if run.col != x:
            out.append(f"{_CSI}{y + 1};{run.col + 1}H")
        out.append(sgr(run))
        out.append(run.text)
        x = run.col + run.width
    out.append(f"{_CSI}0m")
    return "".join(out).encode("utf-8", "replace")


class RowCache:
    """Formatted rows of one pane, reused while a row's runs stay the same."""

    def __init__(self) -> None:
        self._rows: dict[int, tuple[Row, bytes]] = {}
        self.formatted = 0

    def row(self, y: int, runs: Row) -> bytes:
        """The VT bytes drawing ``runs`` on screen row ``y``."""
        kept = self._rows.get(y)
        if kept is not None and kept[0] == runs:
            return kept[1]
        data = _row_vt(y, runs)
        self._rows[y] = (runs, data)
        self.formatted += 1
        return data

    def forget_below(self, rows: int) -> None:
        """Drop rows at or below ``rows`` (the grid shrank)."""
        for y in [y for y in self._rows if y >= rows]:
            del self._rows[y]


def vt_frame(
    lines: Sequence[Row],
    columns: int,
    *,
    cursor: tuple[int, int] | None,
    cache: RowCache | None = None,
) -> bytes:
    """A full frame of ``lines`` (row 0 first) on a replica ``columns`` wide.

    ``cursor`` is ``(row, col)``, or ``None`` to hide it (a scrolled-back view).
    """
    out = bytearray(f"{_CSI}0m{_CSI}?7l".encode())
    for y, runs in enumerate(lines):
        if runs:
            out += cache.row(y, runs) if cache is not None else _row_vt(y, runs)
    out += f"{_CSI}?7h".encode()
    if cursor is None:
        out += f"{_CSI}?25l{_CSI}1;1H".encode()
    else:
        row = max(0, min(cursor[0], max(0, len(lines) - 1)))
        col = max(0, min(cursor[1], columns - 1))
        out += f"{_CSI}{row + 1};{col + 1}H".encode()
    return bytes(out)


def screen_lines(screen: StyledScreen, rows: int) -> list[Row]:
    """Screen rows ``0 … rows - 1`` of ``screen`` (missing ones blank)."""
    return [screen.rows.get(y, ()) for y in range(rows)]


def row_text(runs: Row) -> str:
    """The row as text: each run's text at its column, gaps as spaces, trailing blanks trimmed."""
    out: list[str] = []
    x = 0
    for run in runs:
        if run.col > x:
            out.append(" " * (run.col - x))
        out.append(run.text)
        x = run.col + run.width
    return "".join(out).rstrip()


def text_frame(lines: Sequence[Row]) -> str:
    """Rows joined by ``\\n``, trailing blank rows left out (as a screen's viewport text)."""
    return "\n".join(row_text(runs) for runs in lines).rstrip("\n")


class StyledView:
    """Rows as agent detection reads a screen (:class:`~mirror_host.agents.ScreenView`).

    ``continues(row)`` cannot be known (agliteterm reports no soft wraps): a
    row counts as a continuation when the row above reaches the last column,
    which is where a terminal wraps.
    """

    def __init__(self, screen: StyledScreen, rows: int) -> None:
        self._lines = screen_lines(screen, rows)
        self._columns = screen.columns
        self.rows: Sequence[str] = tuple(row_text(runs) for runs in self._lines)
        cursor = screen.cursor
        self.cursor: tuple[int, int] | None = (
            (min(cursor[1], self._columns - 1), cursor[0])
            if cursor is not None and 0 <= cursor[0] < rows
            else None
        )

    def solid_text(self, row: int) -> str:
        """Row ``row`` with every faint character blanked (one space per character)."""
        out: list[str] = []
        x = 0
        for run in self._lines[row]:
            if run.col > x:
                out.append(" " * (run.col - x))
            out.append(" " * len(run.text) if run.faint else run.text)
            x = run.col + run.width
        return "".join(out).rstrip()

    def continues(self, row: int) -> bool:
        if row <= 0 or row >= len(self._lines):
            return False
        above = self._lines[row - 1]
        return bool(above) and above[-1].col + above[-1].width >= self._columns
