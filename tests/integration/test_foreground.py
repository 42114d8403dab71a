"""A real terminal's foreground process group, through /proc and through ps."""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import trio

from mirror_host.agents import Agent, identify_group
from mirror_host.panes.foreground import (
    parse_ps_table,
    parse_stat,
    process_group,
    terminal_foreground,
    terminal_group,
)
from mirror_host.shell.verdict import PaneForeground

pytestmark = pytest.mark.timeout(60)

MODES = [
    pytest.param(True, id="proc", marks=pytest.mark.skipif(
        not os.path.exists("/proc/self/stat"), reason="no /proc")),
    pytest.param(False, id="ps", marks=pytest.mark.skipif(
        shutil.which("ps") is None, reason="no ps")),
]  # fmt: skip


def test_parse_stat_counts_from_the_last_parenthesis() -> None:
    line = "4242 (odd ) name) S 1 4240 4240 34816 4245 4194560 0 0"
    assert parse_stat(line) == (4240, 4245)
    assert parse_stat("garbage") is None
    assert parse_stat("1 (x) S 1") is None


def test_parse_ps_table() -> None:
    assert parse_ps_table("  10   10\n 11 10\nPID PGID\n\n12") == [(10, 10), (11, 10)]


def _ctty() -> None:  # pragma: no cover - runs in the child
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


@contextmanager
def pty_shell(command: str) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """``sh -c command`` on its own PTY; the whole group is killed afterwards."""
    master, slave = os.openpty()
    process = subprocess.Popen(
        ["/bin/sh", "-c", command],
        stdin=slave, stdout=slave, stderr=slave,
        start_new_session=True, preexec_fn=_ctty,
    )  # fmt: skip
    os.close(slave)
    try:
        yield master, process
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait(timeout=10)
        os.close(master)


@pytest.fixture
def pty_job() -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """A shell running a program that waits (``; true`` keeps the shell from exec'ing)."""
    with pty_shell(f"{sys.executable} -c 'import sys; sys.stdin.read()' claude ; true") as job:
        yield job


@pytest.mark.parametrize("use_proc", MODES)
async def test_the_foreground_group_of_a_pty(
    pty_job: tuple[int, subprocess.Popen[bytes]], use_proc: bool
) -> None:
    master, process = pty_job
    with trio.fail_after(20):
        while True:
            members = await process_group(os.tcgetpgrp(master), use_proc=use_proc)
            # Until the shell's child has exec'd python (it is named `sh` until then,
            # on a loaded machine for a while).
            if any(m.pid != process.pid and "python" in m.name for m in members):
                break
            await trio.sleep(0.05)
    assert members[0].pid == process.pid  # the leader first: the shell
    assert members[0].name in ("sh", "dash", "bash")
    child = next(m for m in members if m.pid != process.pid)
    assert child.argv[0].endswith(("python", "python3")) or "python" in child.name
    assert await terminal_foreground(process.pid, use_proc=use_proc) == members
    # `python -c … claude` runs inline code, which names no agent.
    assert identify_group(members) is None


async def test_an_agent_script_in_the_group_is_recognised(tmp_path: Path) -> None:
    script = tmp_path / "claude"
    script.write_text("import sys\nsys.stdin.read()\n")
    with pty_shell(f"{sys.executable} {script}; true") as (master, process):
        with trio.fail_after(20):
            while True:
                found = identify_group(await process_group(os.tcgetpgrp(master)))
                if found is not None:
                    break
                await trio.sleep(0.05)
        agent, pid = found
        assert agent is Agent.CLAUDE and pid != process.pid  # the child, not the shell
    assert await process_group(999_999_999) == ()
    assert await process_group(0) == ()


@contextmanager
def group_with_an_exited_leader() -> Iterator[subprocess.Popen[bytes]]:
    """A process group whose leader (``sh``) has exited, unreaped, leaving two ``sleep``."""
    leader = subprocess.Popen(
        ["/bin/sh", "-c", "sleep 30 & sleep 30 & exit 0"], start_new_session=True
    )
    try:
        if hasattr(os, "waitid"):  # exited, and left a zombie (WNOWAIT)
            os.waitid(os.P_PID, leader.pid, os.WEXITED | os.WNOWAIT)
        else:  # pragma: no cover - macOS
            time.sleep(1)
        yield leader
    finally:
        os.killpg(leader.pid, signal.SIGKILL)
        leader.wait(timeout=10)


@pytest.mark.parametrize("use_proc", MODES)
async def test_a_group_whose_leader_exited_is_listed_without_it(use_proc: bool) -> None:
    """The leader first only while it runs: not as a zombie still named ``sh``, not reaped."""
    with group_with_an_exited_leader() as leader:
        for _ in ("zombie", "reaped"):
            with trio.fail_after(20):
                # Until both children have exec'd `sleep` (a child forked by the
                # leader is named `sh` until then, on a loaded machine for a while).
                while True:
                    members = await process_group(leader.pid, use_proc=use_proc)
                    children = [m.name for m in members if m.pid != leader.pid]
                    if children == ["sleep", "sleep"]:
                        break
                    await trio.sleep(0.05)
            assert [m.name for m in members] == ["sleep", "sleep"]
            assert all(m.pid != leader.pid for m in members)
            leader.wait(timeout=10)


@pytest.mark.parametrize("use_proc", MODES)
async def test_the_terminal_group_says_whether_the_shell_or_a_job_leads(use_proc: bool) -> None:
    """A phone's ``send`` needs the group's id: the shell's own pid while the shell reads
    (a builtin ``read``), a job's own while job control runs it (``set -m``)."""
    with pty_shell("read line; set -m; sleep 30; true") as (master, process):
        with trio.fail_after(20):
            while (found := await terminal_group(process.pid, use_proc=use_proc))[0] is None:
                await trio.sleep(0.05)
        group, members = found
        assert group == process.pid and members[0].pid == process.pid
        foreground = PaneForeground(shell_pid=process.pid, group=group, processes=members)
        assert foreground.own_process == members[0] and not foreground.job

        os.write(master, b"\n")  # the shell starts `sleep` in a group of its own
        with trio.fail_after(20):
            while (found := await terminal_group(process.pid, use_proc=use_proc))[0] in (
                None,
                process.pid,
            ) or not found[1]:
                await trio.sleep(0.05)
        group, members = found
        try:
            assert [m.name for m in members] == ["sleep"] and members[0].pid == group
            foreground = PaneForeground(shell_pid=process.pid, group=group, processes=members)
            assert foreground.own_process is None and foreground.job
        finally:
            os.killpg(group, signal.SIGKILL)  # the job's group is not the shell's
    assert await terminal_group(999_999_999, use_proc=use_proc) == (None, ())
