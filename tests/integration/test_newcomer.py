"""A new user's second first hour (issue 28): the command line's smaller edges, as run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.test_cli_admin import _rest, _waiting_pair, cli, stop, wait_until_serving

pytestmark = [pytest.mark.timeout(60), pytest.mark.slow]


def _serve(
    state_dir: Path, *flags: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable, "-m", "mirror_host", "serve", "--state-dir", str(state_dir),
            *flags,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )  # fmt: skip


def test_a_home_that_is_empty_or_missing_is_refused_naming_state_dir(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-home"
    for home in ("", str(missing)):
        env = {**os.environ, "HOME": home}
        env.pop("XDG_STATE_HOME", None)
        for command in (["pair"], ["devices"], ["serve", "--local-command", "cat"]):
            result = subprocess.run(
                [sys.executable, "-m", "mirror_host", *command],
                capture_output=True, text=True, env=env, timeout=30,
            )  # fmt: skip
            assert result.returncode == 2, (home, command, result.stderr)
            assert result.stderr.count("\n") == 1 and "give --state-dir DIR" in result.stderr
    assert not missing.exists()  # never created


def test_listen_localhost_listens_on_127_0_0_1(state_dir: Path) -> None:
    process = _serve(state_dir, "--local-command", "cat", "--listen", "localhost:0")
    try:
        wait_until_serving(state_dir, process)
        listen = json.loads((state_dir / "serve.json").read_text())["listen"]
        assert listen.startswith("127.0.0.1:")
        # With a host running, `pair` is the way to pair (without one, `serve --pair`).
        devices = cli(state_dir, "devices")
        assert devices.stdout == "No paired devices. Pair one with `mirror-host pair`.\n"
    finally:
        stop(process)


def test_conformance_list_into_head_ends_quietly() -> None:
    result = subprocess.run(
        f"{sys.executable} -m mirror_host conformance --list | head -5",
        shell=True, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert len(result.stdout.splitlines()) == 5
    assert result.stderr == ""  # no BrokenPipeError, no "Exception ignored"


def test_a_waiting_pair_hears_that_a_host_stopped_by_sigterm_stopped(state_dir: Path) -> None:
    """Not that it "may have crashed": its pane ignores the hang-up, so the host takes
    seconds to stop, and the admin socket is gone from the first of them."""
    process = _serve(
        state_dir, "--listen", "127.0.0.1:0", "--local-command", "trap '' HUP; exec sleep 600"
    )
    try:
        wait_until_serving(state_dir, process)
        waiting, _ = _waiting_pair(state_dir)
        process.send_signal(signal.SIGTERM)
        out, err = _rest(waiting)
        assert process.wait(timeout=30) == 0
    finally:
        stop(process)
    assert waiting.returncode == 1
    assert "The host stopped: " in out, (out, err)
    assert "crashed" not in out + err


def test_service_install_with_an_unknown_serve_flag_shows_its_own_usage() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mirror_host", "service", "install", "--dry-run",
         "--source", "tmux", "--bogus"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.startswith("usage: mirror-host service install ")
    assert "mirror-host service install: error: unrecognized arguments: --bogus" in result.stderr
