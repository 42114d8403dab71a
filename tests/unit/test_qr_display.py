"""The terminal QR codes draw exactly the modules of the code, and a terminal shows them
as a code a reader decodes: half blocks, and ASCII where the output has no half blocks."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
import qrcode
from qrcode.constants import ERROR_CORRECT_M

from mirror_host.cli.ticket import show_ticket
from mirror_host.qr_display import (
    QUIET_ZONE,
    qr_matrix,
    render_ascii,
    render_terminal,
    terminal_qr,
    write_png,
)
from mirror_host.terminal import Screen

PAYLOAD = (
    b'{"type":"prowl-mirror-pairing","version":1,"address":"192.168.1.20","port":7880,'
    b'"code":"ABCDEFGH","expiresAt":1800000060}'
)
_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


def _qrcode_own_matrix(border: int) -> list[list[bool]]:
    """The modules as the qrcode library itself lays them out, with ``border`` light modules."""
    code = qrcode.QRCode(error_correction=ERROR_CORRECT_M, border=border)
    code.add_data(PAYLOAD)
    code.make(fit=True)
    return [list(row) for row in code.get_matrix()]


def test_half_blocks_encode_two_module_rows_per_line() -> None:
    matrix = qr_matrix(PAYLOAD)
    lines = render_terminal(PAYLOAD).split("\n")
    decoded: list[list[bool]] = []
    for line in lines:
        body = line.removeprefix("\x1b[30;47m").removesuffix("\x1b[0m")
        decoded.append([ch in "█▀" for ch in body])
        decoded.append([ch in "█▄" for ch in body])
    assert decoded[: len(matrix)] == matrix
    for padding in decoded[len(matrix) :]:  # an odd row count is padded with a light row
        assert not any(padding)
    # A quiet zone surrounds the code, so readers find its edges.
    assert not any(matrix[0]) and not any(row[0] for row in matrix)


def test_the_terminal_code_has_the_standards_four_module_quiet_zone() -> None:
    matrix = qr_matrix(PAYLOAD)
    assert QUIET_ZONE == 4
    assert matrix == _qrcode_own_matrix(border=4)
    assert not any(any(row) for row in [*matrix[:4], *matrix[-4:]])
    assert not any(any(row[:4]) or any(row[-4:]) for row in matrix)
    assert any(matrix[4]) and any(row[4] for row in matrix)  # the code starts right after


def test_ascii_is_ascii_and_draws_every_module_two_cells_wide() -> None:
    art = render_ascii(PAYLOAD)
    assert art.isascii()
    decoded = []
    for line in art.split("\n"):
        cells = _ESCAPE.sub("", line)
        assert len(cells) % 2 == 0
        pairs = [cells[i : i + 2] for i in range(0, len(cells), 2)]
        assert set(pairs) <= {"##", "  "}
        decoded.append([pair == "##" for pair in pairs])
    assert decoded == _qrcode_own_matrix(border=4)


# ------------------------------------------------------------ as a terminal shows it

_CELL_WIDTH, _CELL_HEIGHT = 8, 16  # pixels of one character cell, 1:2 as most fonts


def _shown_by_a_terminal(art: str) -> tuple[int, int, bytes]:
    """``art`` fed to a real terminal emulator (libghostty) and painted as a grey
    image from each cell's colours and block glyph: (width, height, pixels)."""
    lines = art.split("\n")
    columns = max(len(_ESCAPE.sub("", line)) for line in lines) + 2
    screen = Screen(columns, len(lines) + 2)
    screen.feed(("\r\n".join(lines) + "\r\n").encode())
    width, height = columns * _CELL_WIDTH, (len(lines) + 2) * _CELL_HEIGHT
    pixels = bytearray(b"\xff" * (width * height))
    for y in range(len(lines)):
        for x in range(columns):
            text, style = screen.cell(x, y)
            styles = dict(style)
            fg = _grey(styles.get("fg"), default=0)
            bg = _grey(styles.get("bg"), default=255)
            top = fg if text in ("█", "▀") else bg
            bottom = fg if text in ("█", "▄") else bg
            for dy in range(_CELL_HEIGHT):
                shade = top if dy < _CELL_HEIGHT // 2 else bottom
                start = (y * _CELL_HEIGHT + dy) * width + x * _CELL_WIDTH
                pixels[start : start + _CELL_WIDTH] = bytes([shade]) * _CELL_WIDTH
    screen.close()
    return width, height, bytes(pixels)


def _grey(colour: object, *, default: int) -> int:
    if colour is None:
        return default
    assert colour in (("palette", 0), ("palette", 7)), colour  # black or white, said outright
    return 0 if colour == ("palette", 0) else 255


@pytest.mark.parametrize("draw", [render_terminal, render_ascii], ids=["half-blocks", "ascii"])
def test_a_terminal_shows_a_code_a_reader_decodes(draw: object) -> None:
    zxingcpp = pytest.importorskip("zxingcpp", reason="zxing-cpp (the test extra) decodes it")
    width, height, pixels = _shown_by_a_terminal(draw(PAYLOAD))  # type: ignore[operator]
    found = zxingcpp.read_barcodes(memoryview(pixels).cast("B", (height, width)))
    assert [barcode.text.encode() for barcode in found] == [PAYLOAD]


# ------------------------------------------------------------ which form, where


def test_the_form_follows_the_outputs_encoding_and_width() -> None:
    wide = len(qr_matrix(PAYLOAD)[0])
    for encoding in ("utf-8", "cp437", None):  # cp437 has the half blocks too
        assert terminal_qr(PAYLOAD, encoding=encoding, columns=None).art == render_terminal(PAYLOAD)
    for encoding in ("ascii", "latin-1", "ANSI_X3.4-1968"):
        assert terminal_qr(PAYLOAD, encoding=encoding, columns=2 * wide).art == render_ascii(
            PAYLOAD
        )
    narrow = terminal_qr(PAYLOAD, encoding="ascii", columns=80)
    assert narrow.art is None and narrow.problem is not None
    assert f"is {2 * wide} columns wide and this terminal has 80" in narrow.problem
    assert "UTF-8" in narrow.problem and "--qr-png" in narrow.problem
    tiny = terminal_qr(PAYLOAD, encoding="utf-8", columns=wide - 1)
    assert tiny.art is None and f"is {wide} columns wide" in str(tiny.problem)


def _reply() -> dict[str, object]:
    payload = {"type": "prowl-mirror-pairing", "version": 1, "address": "192.0.2.10"}
    return {"code": "ABCD2345", "payload": {**payload, "port": 7880}, "port": 7880}


def test_show_ticket_on_an_ascii_output_draws_ascii_and_the_code() -> None:
    out = io.TextIOWrapper(io.BytesIO(), encoding="ascii")  # strict: any other character fails
    show_ticket(_reply(), out)
    out.flush()
    text = out.buffer.getvalue().decode("ascii")  # type: ignore[attr-defined]
    assert "##" in text and "Scan this with Prowl" in text and "\n    ABCD-2345\n" in text


def test_show_ticket_where_the_code_does_not_fit_says_so_in_one_line() -> None:
    class Narrow(io.StringIO):
        encoding = "ascii"  # type: ignore[assignment]

        def isatty(self) -> bool:
            return True

    out = Narrow()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("os.get_terminal_size", lambda fd: __import__("os").terminal_size((80, 24)))
        patch.setattr(Narrow, "fileno", lambda self: 1)
        show_ticket(_reply(), out)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("No QR code here: with ascii output, the QR code is drawn in ASCII")
    assert (
        lines[1] == "Enter this code in Prowl (Add a Device) by hand (host 192.0.2.10, port 7880):"
    )
    assert "    ABCD-2345" in lines


def test_without_a_qr_payload_the_code_says_who_can_use_it() -> None:
    """Loopback only: ``attach`` on this machine, not Prowl; otherwise Prowl by hand,
    and ``attach`` here too."""
    loopback = {
        "code": "ABCD2345",
        "payload": None,
        "payloadError": "the host listens on 127.0.0.1 only (loopback), which phones cannot reach",
        "port": 7884,
        "attach": "127.0.0.1:7884",
        "loopback": True,
    }
    out = io.StringIO()
    show_ticket(loopback, out)
    assert out.getvalue() == (
        "No QR code: the host listens on 127.0.0.1 only (loopback), which phones cannot reach\n"
        "Only a client on this machine reaches it: "
        "`mirror-host attach 127.0.0.1:7884 --code ABCD-2345`, with this code:\n"
        "\n    ABCD-2345\n\n"
    )
    no_address = {
        **loopback,
        "payloadError": "no network interface has a non-loopback IPv4 address",
        "loopback": False,
    }
    out = io.StringIO()
    show_ticket(no_address, out)
    assert out.getvalue().splitlines()[1] == (
        "Enter this code in Prowl by hand, with this machine's address and port 7884 "
        "(on this machine: `mirror-host attach 127.0.0.1:7884 --code ABCD-2345`):"
    )


def test_png_is_written(tmp_path: Path) -> None:
    path = tmp_path / "qr.png"
    write_png(PAYLOAD, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
