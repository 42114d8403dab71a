"""Draw the pairing QR code in a terminal, or save it as a PNG. I/O (qrcode).

The terminal forms draw in explicit black on white, so a phone camera reads
them whatever the terminal's own colours are, inside the 4-module quiet zone
the QR standard asks for (readers find the code's edges by it). Error
correction is level M, as Prowl's own QR codes use.

Where standard output can carry the half-block characters (UTF-8, and legacy
code pages that have them), two module rows share a text line. Where it cannot
(``LC_ALL=C``, ``PYTHONIOENCODING=ascii``, a Latin-1 locale), the code is drawn
in ASCII alone: each module two cells wide (``##`` dark, two spaces light, the
colours set by escape sequences, which are ASCII too), so the modules stay
square. That is twice as wide. A code that does not fit the terminal's width
(either form) is not drawn at all, since a wrapped code reads as nothing:
:func:`terminal_qr` says why in one line instead.
"""

from __future__ import annotations

import codecs
from pathlib import Path
from typing import NamedTuple

import qrcode
from qrcode.constants import ERROR_CORRECT_M

__all__ = ["TerminalQR", "qr_matrix", "render_ascii", "render_terminal", "terminal_qr", "write_png"]

#: Modules of light margin around the code: the QR standard's 4, in the PNG too.
QUIET_ZONE = 4
_BLACK_ON_WHITE = "\x1b[30;47m"
_BLACK_ON_BLACK = "\x1b[30;40m"
_RESET = "\x1b[0m"
_HALF_BLOCKS = "█▀▄"


def _code(data: bytes, *, border: int = QUIET_ZONE, box_size: int = 1) -> qrcode.QRCode:
    code = qrcode.QRCode(error_correction=ERROR_CORRECT_M, border=border, box_size=box_size)
    code.add_data(data)
    code.make(fit=True)
    return code


def qr_matrix(data: bytes) -> list[list[bool]]:
    """Modules (``True`` = dark), quiet zone included."""
    return [list(row) for row in _code(data).get_matrix()]


def render_terminal(data: bytes) -> str:
    """The QR code as lines of half blocks, two module rows per text line."""
    matrix = qr_matrix(data)
    if len(matrix) % 2:
        matrix.append([False] * len(matrix[0]))
    lines = []
    for top, bottom in zip(matrix[0::2], matrix[1::2], strict=True):
        cells = []
        for upper, lower in zip(top, bottom, strict=True):
            cells.append("█" if upper and lower else "▀" if upper else "▄" if lower else " ")
        lines.append(_BLACK_ON_WHITE + "".join(cells) + _RESET)
    return "\n".join(lines)


def render_ascii(data: bytes) -> str:
    """The QR code in ASCII alone: one text line per module row, two cells per module."""
    lines = []
    for row in qr_matrix(data):
        parts = []
        shade: bool | None = None
        for dark in row:
            if dark is not shade:
                parts.append(_BLACK_ON_BLACK if dark else _BLACK_ON_WHITE)
                shade = dark
            parts.append("##" if dark else "  ")
        lines.append("".join(parts) + _RESET)
    return "\n".join(lines)


class TerminalQR(NamedTuple):
    """The code as a terminal can show it (``art``), or why it cannot (``problem``)."""

    art: str | None
    problem: str | None = None


def terminal_qr(data: bytes, *, encoding: str | None, columns: int | None) -> TerminalQR:
    """The QR code for an output of ``encoding`` (``None``: any text) that is
    ``columns`` wide (``None``: not a terminal, so no limit)."""
    wide = len(qr_matrix(data)[0])
    if _can_encode(_HALF_BLOCKS, encoding):
        art, width, form, remedy = render_terminal, wide, "the QR code", ""
    else:
        name = codecs.lookup(encoding or "ascii").name
        art, width = render_ascii, 2 * wide
        form = f"with {name} output, the QR code is drawn in ASCII, which"
        remedy = " (a UTF-8 locale draws it half as wide)"
    if columns is not None and columns < width:
        return TerminalQR(
            None,
            f"{form} is {width} columns wide and this terminal has {columns}: widen it"
            f"{remedy}, or use `mirror-host pair --qr-png PATH`",
        )
    return TerminalQR(art(data))


def _can_encode(text: str, encoding: str | None) -> bool:
    if encoding is None:
        return True
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def write_png(data: bytes, path: Path, *, box_size: int = 6) -> None:
    """Save the QR code as a PNG (each module ``box_size`` pixels, as Prowl scales it)."""
    from qrcode.image.pure import PyPNGImage

    image = _code(data, box_size=box_size).make_image(image_factory=PyPNGImage)
    with path.open("wb") as handle:
        image.save(handle)
