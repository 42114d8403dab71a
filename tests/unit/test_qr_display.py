"""The terminal QR code draws exactly the modules of the code."""

from __future__ import annotations

from pathlib import Path

from mirror_host.qr_display import qr_matrix, render_terminal, write_png

PAYLOAD = (
    b'{"type":"prowl-mirror-pairing","version":1,"address":"192.168.1.20","port":7880,'
    b'"code":"ABCDEFGH","expiresAt":1800000060}'
)


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


def test_png_is_written(tmp_path: Path) -> None:
    path = tmp_path / "qr.png"
    write_png(PAYLOAD, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
