"""Local panes start with every signal at its default, whatever the host inherited.

A host a script starts in the background (``mirror-host serve … &``) inherits
SIGINT and SIGQUIT ignored; before panes started through the exec helper
(mirror_host/panes/pty_exec.py) their shells handed that on, and Ctrl-C typed
into a pane showed ``^C`` and interrupted nothing. Linux only: the dispositions
are read from ``/proc/PID/status``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import trio

from mirror_host import control as c
from mirror_host.client.client import login, pair_device
from mirror_host.errors import PaneSourceError
from mirror_host.panes.local import LocalSource
from tests.integration.mirror_helpers import list_panes, subscribe
from tests.integration.test_cli_admin import cli, wait_until_serving

pytestmark = [
    pytest.mark.timeout(90),
    pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux's /proc"),
]


def _status(pid: int) -> dict[str, str]:
    """``/proc/PID/status`` as a dict (empty once the process is gone or a zombie)."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    fields = dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)
    fields = {key: value.strip() for key, value in fields.items()}
    return {} if fields.get("State", "").startswith("Z") else fields


def _mask(pid: int, field: str) -> int:
    return int(_status(pid)[field], 16)


def _bit(sig: signal.Signals) -> int:
    return 1 << (sig - 1)


def _children(pid: int, name: str) -> list[int]:
    """Live processes whose parent is ``pid`` and whose command name is ``name``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            status = _status(int(entry.name))
            if status.get("PPid") == str(pid) and status.get("Name") == name:
                found.append(int(entry.name))
    return found


def _wait_for(what: str, check: Callable[[], object], seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {seconds:g} s")
        time.sleep(0.05)


async def test_a_pane_starts_with_default_signals_an_empty_mask_and_its_own_terminal(
    tmp_path: Path,
) -> None:
    """In-process: the host ignores SIGINT and SIGQUIT and blocks SIGUSR2 in the
    thread that spawns; the pane's program still starts with none of it, leads its
    own session and has the PTY as its controlling terminal."""
    ignored = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGQUIT)}
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2})
    try:
        source = LocalSource(["exec sleep 600"], columns=80, rows=24, cwd=str(tmp_path))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(source.run)
            with trio.fail_after(20):
                while (
                    not source.live_panes()
                    or _status(source.live_panes()[0].pid).get("Name") != "sleep"
                ):
                    await trio.sleep(0.05)
            pane = source.live_panes()[0]
            assert _mask(pane.pid, "SigIgn") == 0
            assert _mask(pane.pid, "SigBlk") == 0
            assert _mask(pane.pid, "SigCgt") == 0
            stat = Path(f"/proc/{pane.pid}/stat").read_text().rsplit(")", 1)[1].split()
            session, tty = int(stat[3]), int(stat[4])
            assert session == pane.pid  # a session of its own
            terminal = os.readlink(f"/proc/{pane.pid}/fd/0")  # the PTY's slave
            assert tty == os.stat(terminal).st_rdev  # ... is its controlling terminal
            assert os.tcgetpgrp(pane.master.fileno()) == pane.pid  # its terminal's foreground
            nursery.cancel_scope.cancel()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        for sig, handler in ignored.items():
            signal.signal(sig, handler)


async def test_a_program_that_is_not_there_is_refused_before_anything_starts(
    tmp_path: Path,
) -> None:
    source = LocalSource(["cat"], columns=80, rows=24, cwd=str(tmp_path))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(source.run)
        with trio.fail_after(20):
            while not source.live_panes():
                await trio.sleep(0.05)
        descriptors = len(os.listdir("/proc/self/fd"))
        for argv, said in (
            (["/nonexistent/ghost"], "cannot start 'ghost': no program '/nonexistent/ghost'$"),
            (["no-such-program-here"], "no program 'no-such-program-here' on PATH$"),
        ):
            with pytest.raises(PaneSourceError, match=said):
                source.spawn(argv, label="ghost")
        assert len(os.listdir("/proc/self/fd")) == descriptors  # the PTY's ends closed
        assert len(source.live_panes()) == 1
        nursery.cancel_scope.cancel()


@pytest.fixture
def host_from_a_script(state_dir: Path, tmp_path: Path) -> Iterator[tuple[int, int]]:
    """``serve`` started the way a script starts it, ``… &`` under ``sh -c`` (no job
    control: SIGINT and SIGQUIT ignored in it); its pid and port."""
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "SHELL": "/bin/bash"}
    script = (
        '"$0" -m mirror_host serve --listen 127.0.0.1:0 --advertise-address 192.0.2.10 '
        '--state-dir "$1" >"$1/serve.log" 2>&1 & echo $!; wait'
    )
    shell = subprocess.Popen(
        ["sh", "-c", script, sys.executable, str(state_dir)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=home,
    )
    assert shell.stdout is not None
    host = int(shell.stdout.readline())
    try:
        wait_until_serving(state_dir, shell)  # type: ignore[arg-type]
        port = int(json.loads((state_dir / "serve.json").read_text())["listen"].rsplit(":", 1)[1])
        yield host, port
    finally:
        os.kill(host, signal.SIGTERM)
        try:
            shell.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.kill(host, signal.SIGKILL)
            shell.wait(timeout=10)
        shell.stdout.close()


@pytest.mark.slow
@pytest.mark.skipif(not Path("/bin/bash").exists(), reason="needs bash")
async def test_ctrl_c_interrupts_sleep_in_a_pane_of_a_host_a_script_started(
    host_from_a_script: tuple[int, int], state_dir: Path
) -> None:
    host, port = host_from_a_script
    # The premise: the host itself inherited SIGQUIT ignored (SIGINT it catches, to stop).
    assert _mask(host, "SigIgn") & _bit(signal.SIGQUIT)
    ticket = json.loads(
        (await trio.to_thread.run_sync(lambda: cli(state_dir, "pair", "--json"))).stdout
    )
    credential = await pair_device("127.0.0.1", port, ticket["code"], "Signal Phone")
    async with login("127.0.0.1", port, credential) as client:
        panes = await list_panes(client)
        sub = await subscribe(client, panes.panes[0].id)
        await trio.to_thread.run_sync(_wait_for, "the pane's bash", lambda: _children(host, "bash"))
        (shell,) = _children(host, "bash")
        await client.send(c.Input(data=b"sleep 100\r", subscription_id=sub))
        await trio.to_thread.run_sync(_wait_for, "sleep started", lambda: _children(shell, "sleep"))
        (sleeper,) = _children(shell, "sleep")
        assert _mask(sleeper, "SigIgn") == 0, _status(sleeper)["SigIgn"]
        assert _mask(sleeper, "SigBlk") == 0, _status(sleeper)["SigBlk"]
        await client.send(c.Input(data=b"\x03", subscription_id=sub))
        await trio.to_thread.run_sync(_wait_for, "sleep interrupted", lambda: not _status(sleeper))
        assert _status(shell), "Ctrl-C ended the shell, not only its command"


async def test_how_a_pane_ended_is_logged_in_words(
    tmp_path: Path, host_log: pytest.LogCaptureFixture
) -> None:
    """Not ``exited (status -1)`` at every clean stop, which reads as an error."""
    source = LocalSource(
        ["exit 3", "kill -KILL $$", "exec sleep 600"], columns=80, rows=24, cwd=str(tmp_path)
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(source.run)
        with trio.fail_after(20):
            while not any("ended by" in m for m in host_log.messages) or not any(
                "status 3" in m for m in host_log.messages
            ):
                await trio.sleep(0.05)
        nursery.cancel_scope.cancel()
    said = [m for m in host_log.messages if m.startswith("pane ")]
    assert sorted(said) == [
        "pane 'exec sleep 600' closed: the host is stopping",
        "pane 'exit 3' exited (status 3)",
        "pane 'kill -KILL $$' ended by SIGKILL",
    ]
