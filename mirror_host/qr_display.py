"""Draw the pairing QR code in a terminal, or save it as a PNG. I/O (qrcode).

The terminal form uses half-block characters in explicit black on white, so a
phone camera reads it whatever the terminal's own colours are. Error correction
is level M, as Prowl's own QR codes use.
"""

from __future__ import annotations

from pathlib import Path

import qrcode
from qrcode.constants import ERROR_CORRECT_M

__all__ = ["qr_matrix", "render_terminal", "write_png"]

_QUIET_ZONE = 2
_BLACK_ON_WHITE = "\x1b[30;47m"
_RESET = "\x1b[0m"


def _code(data: bytes, *, border: int = _QUIET_ZONE, box_size: int = 1) -> qrcode.QRCode:
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


def write_png(data: bytes, path: Path, *, box_size: int = 6) -> None:
    """Save the QR code as a PNG (each module ``box_size`` pixels, as Prowl scales it)."""
    from qrcode.image.pure import PyPNGImage

    image = _code(data, border=4, box_size=box_size).make_image(image_factory=PyPNGImage)
    with path.open("wb") as handle:
        image.save(handle)
