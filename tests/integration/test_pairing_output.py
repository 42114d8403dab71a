"""How the pairing code is shown never stops a host nor leaves a window open nobody saw.

``serve --pair`` and ``pair`` draw the QR code in ASCII where standard output
cannot carry the half blocks (``PYTHONIOENCODING=ascii``, ``LC_ALL=C`` with
UTF-8 mode off, Latin-1), and always show the code; an output that cannot take
the banner at all (a closed pipe) is logged and the window closed, and the
host runs on.
"""

from __future__ import annotations

import json
import os
import re
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_cli_admin import cli, stop, wait_until_serving

pytestmark = [pytest.mark.timeout(60), pytest.mark.slow]

_CODE_LINE = re.compile(rb"^    [A-Z0-9]{4}-[A-Z0-9]{4}$", re.MULTILINE)

#: Standard outputs that have no half blocks, as a user gets them.
NON_UTF8 = {
    "PYTHONIOENCODING=ascii": {"PYTHONIOENCODING": "ascii"},
    "LC_ALL=C PYTHONUTF8=0": {"LC_ALL": "C", "PYTHONUTF8": "0"},
    "latin-1": {"PYTHONIOENCODING": "latin-1"},
}


def _environment(extra: dict[str, str]) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("PYTHONIOENCODING", "PYTHONUTF8", "LANG", "LC_ALL", "LC_CTYPE")
    }
    return {**env, **extra}


def _serve(state_dir: Path, env: dict[str, str], stdout: int) -> subprocess.Popen[str]:
    """``serve --pair``, its log in ``serve.log`` of the state directory."""
    with (state_dir / "serve.log").open("w") as log:
        return subprocess.Popen(
            [
                sys.executable, "-m", "mirror_host", "serve", "--pair", "--local-command", "cat",
                "--listen", "127.0.0.1:0", "--advertise-address", "192.0.2.10",
                "--state-dir", str(state_dir),
            ],
            stdout=stdout,
            stderr=log,
            text=True,
            env=env,
        )  # fmt: skip


def _read_until(stream: int, pattern: re.Pattern[bytes], seconds: float = 30) -> bytes:
    """What a pipe delivers until ``pattern`` is in it."""
    seen = b""
    deadline = time.monotonic() + seconds
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        while not pattern.search(seen):
            left = deadline - time.monotonic()
            if left <= 0 or not selector.select(left):
                raise AssertionError(f"not shown within {seconds:g} s: {seen[-500:]!r}")
            chunk = os.read(stream, 65536)
            if not chunk:
                raise AssertionError(f"standard output closed: {seen[-500:]!r}")
            seen += chunk
    return seen


def _pairing_open(state_dir: Path) -> bool:
    """Whether the running host has a pairing window open (``status --json``)."""
    result = cli(state_dir, "status", "--json")
    assert result.returncode == 0, result.stderr
    return bool(json.loads(result.stdout)["pairing"]["open"])


@pytest.mark.parametrize("extra", NON_UTF8.values(), ids=NON_UTF8.keys())
def test_serve_pair_with_a_non_utf8_output_keeps_running_and_shows_the_code(
    state_dir: Path, extra: dict[str, str]
) -> None:
    process = _serve(state_dir, _environment(extra), subprocess.PIPE)
    try:
        assert process.stdout is not None
        shown = _read_until(process.stdout.fileno(), _CODE_LINE)
        assert shown.isascii()
        assert b"##" in shown  # the ASCII QR code (a pipe has no width to keep to)
        assert b"Scan this with Prowl (Add a Device)" in shown
        wait_until_serving(state_dir, process)
        assert process.poll() is None
        assert _pairing_open(state_dir)
    finally:
        assert stop(process) == 0
    log = (state_dir / "serve.log").read_text()
    assert "Traceback" not in log and "UnicodeEncodeError" not in log


def test_serve_pair_whose_output_is_gone_logs_it_closes_the_window_and_runs_on(
    state_dir: Path,
) -> None:
    reader, writer = os.pipe()
    os.close(reader)  # nobody reads: every write fails with EPIPE
    try:
        process = _serve(state_dir, _environment({}), writer)
    finally:
        os.close(writer)
    try:
        wait_until_serving(state_dir, process)
        log = state_dir / "serve.log"
        deadline = time.monotonic() + 20
        while "could not show the pairing code" not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        assert process.poll() is None
        assert not _pairing_open(state_dir)
    finally:
        assert stop(process) == 0  # a clean stop, whatever standard output became
    text = log.read_text()
    assert "its window is closed: `mirror-host pair` opens a new one" in text
    assert "pairing window closed" in text
    assert "Traceback" not in text and "Exception ignored" not in text


@pytest.fixture
def host(state_dir: Path) -> Iterator[Path]:
    process = _serve(state_dir, _environment({}), subprocess.DEVNULL)
    try:
        wait_until_serving(state_dir, process)
        yield state_dir
    finally:
        stop(process)


@pytest.mark.parametrize("extra", NON_UTF8.values(), ids=NON_UTF8.keys())
def test_pair_no_wait_with_a_non_utf8_output_shows_the_code(
    host: Path, extra: dict[str, str]
) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mirror_host", "pair", "--no-wait", "--state-dir", str(host)],
        capture_output=True,
        env=_environment(extra),
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.isascii() and b"##" in result.stdout
    assert _CODE_LINE.search(result.stdout)
    assert _pairing_open(host)


@pytest.mark.parametrize("flags", [["--no-wait"], ["--json"], []], ids=["no-wait", "json", "wait"])
def test_pair_whose_output_is_gone_closes_its_window(host: Path, flags: list[str]) -> None:
    reader, writer = os.pipe()
    os.close(reader)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "mirror_host", "pair", *flags, "--state-dir", str(host)],
            stdout=writer,
            stderr=subprocess.PIPE,
            text=True,
            timeout=30,
        )
    finally:
        os.close(writer)
    assert result.returncode == 1, result.stderr
    assert "mirror-host pair: cannot show the code (BrokenPipeError" in result.stderr
    assert result.stderr.rstrip().endswith("closed the pairing window")
    assert "Traceback" not in result.stderr and "Exception ignored" not in result.stderr
    assert not _pairing_open(host)


def test_the_status_of_a_pair_interrupted_by_sigint_is_unchanged(host: Path) -> None:
    """The window of an interrupted ``pair`` is still closed (exit 130), as before."""
    process = subprocess.Popen(
        [sys.executable, "-m", "mirror_host", "pair", "--state-dir", str(host)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None
    _read_until(process.stdout.fileno(), _CODE_LINE)
    process.send_signal(signal.SIGINT)
    out, _ = process.communicate(timeout=20)
    assert process.returncode == 130
    assert b"Interrupted: closed the pairing window." in out
    assert not _pairing_open(host)
