"""``mirror-host wire decode`` as a user runs it: a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def run(hex_text: str, *args: str) -> tuple[int, list[dict[str, object]]]:
    result = subprocess.run(
        [sys.executable, "-m", "mirror_host", "wire", "decode", *args],
        input=hex_text,
        capture_output=True,
        text=True,
        timeout=30,
    )
    return result.returncode, [json.loads(line) for line in result.stdout.splitlines()]


def test_decodes_packets_one_line_each() -> None:
    code, lines = run("0000000c 007b226c697374223a7b7d7d\n0000000c007b2270696e67223a7b7d7d")
    assert code == 0
    assert lines == [{"kind": 0, "message": {"list": {}}}, {"kind": 0, "message": {"ping": {}}}]


def test_first_invalid_packet_stops_with_error_and_exit_1() -> None:
    code, lines = run("0000000c007b226c697374223a7b7d7d 00000002 0300")
    assert code == 1
    assert lines[0] == {"kind": 0, "message": {"list": {}}}
    assert lines[1] == {"error": "unknown packet kind 3 (expected 0, 1 or 2)"}


@pytest.mark.slow
def test_payload_mode() -> None:
    code, lines = run(
        "02000102030405060708090a0b0c0d0e0f000000000000000100000050000000180141", "--payload"
    )
    assert code == 0
    assert lines == [
        {
            "kind": 2,
            "subscriptionID": "00010203-0405-0607-0809-0A0B0C0D0E0F",
            "sequence": 1,
            "columns": 80,
            "rows": 24,
            "truncated": True,
            "text": "A",
        }
    ]


@pytest.mark.slow
def test_vt_frame_bytes_are_base64() -> None:
    code, lines = run(
        "00000038011111111122223333444455555555555500000000000000010000005100000019"
        "1b5b324ae6809de88083e4b8ad0de7bb93e8aeba1b5b48"
    )
    assert code == 0
    assert lines[0]["bytes"] == "G1sySuaAneiAg+S4rQ3nu5PorrobW0g="
    assert lines[0]["columns"] == 81


def test_not_hex_is_an_error() -> None:
    code, lines = run("zz")
    assert code == 1
    assert "not hex" in str(lines[0]["error"])


@pytest.mark.slow
def test_help_explains_the_input_kinds() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mirror_host", "wire", "decode", "--help"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert "--payload" in result.stdout and "pairing-code" in result.stdout


@pytest.mark.slow
def test_the_text_kinds_take_text_and_still_their_hex() -> None:
    pane = '{"id":"3F2A9C1B-6E0D-4C1A-9B7E-2D5F8A6C4E10","title":"sh","directory":"/","busy":false}'
    for given in (pane, pane.encode().hex()):
        code, lines = run(given, "--as", "pane")
        assert code == 0 and lines[0]["pane"]["title"] == "sh"  # type: ignore[index]
    # ABCD2345 is also hex (4 bytes, not printable): taken as the code it reads as.
    for given in ("ABCD-2345\n", "abcd2345", b"ABCD2345".hex()):
        code, lines = run(given, "--as", "pairing-code")
        assert (code, lines) == (0, [{"code": "ABCD2345"}])
    code, lines = run("ABCD-234", "--as", "pairing-code")
    assert code == 1 and "8 symbols" in str(lines[0]["error"])


@pytest.mark.slow
def test_help_says_how_to_capture_packets() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mirror_host", "wire", "decode", "--help"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert "--log-packets" in result.stdout and "docs/security.md" in result.stdout


def test_slashes_are_shown_as_they_are() -> None:
    """Not as Swift's encoder escapes them (``"\\/"``): the output is for people."""
    pane = '{"id":"3F2A9C1B-6E0D-4C1A-9B7E-2D5F8A6C4E10","title":"a/b","directory":"/srv/x","busy":false}'
    result = subprocess.run(
        [sys.executable, "-m", "mirror_host", "wire", "decode", "--as", "pane"],
        input=pane, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert result.returncode == 0
    assert '"directory":"/srv/x"' in result.stdout and '"title":"a/b"' in result.stdout
    assert "\\/" not in result.stdout
