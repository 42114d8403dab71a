"""Waiting for a local pane's program to be in place before a test looks at it.

A local pane starts through the exec helper (``mirror_host/panes/pty_exec.py``):
``Popen`` returns once the helper (a Python) runs, and the helper then resets
every signal and ``exec``s the pane's program. Until that exec is done, a signal
the host inherited ignored (a host started under ``nohup``) is still ignored,
so a SIGHUP sent then is lost; and while the kernel carries out an exec,
``/proc/PID/environ`` reads empty. A test that signals a pane, or reads its
environment, waits here first.
"""

from __future__ import annotations

import time
from pathlib import Path

import trio

from mirror_host.panes.pty_exec import EXEC_HELPER

__all__ = ["program_in_place", "wait_program_in_place", "wait_program_in_place_sync"]

_HELPER_CODE = EXEC_HELPER.encode()


def program_in_place(pid: int) -> bool:
    """Whether ``pid`` runs its own program now, its environment recorded.

    Where there is no ``/proc`` (macOS), nothing can be looked at: ``True``.
    A process that is gone is in place too (there is nothing left to wait for).
    """
    proc = Path("/proc") / str(pid)
    if not Path("/proc/self/environ").exists():
        return True
    try:
        arguments = (proc / "cmdline").read_bytes().split(b"\0")
        environ = (proc / "environ").read_bytes()
    except OSError:
        return not proc.exists()
    if arguments == [b""] and not environ:  # mid-exec, or a zombie: ended for good
        return _ended(proc)
    # The helper runs as ``python -I -S -c EXEC_HELPER …``.
    return _HELPER_CODE not in arguments and bool(environ)


def _ended(proc: Path) -> bool:
    try:
        status = (proc / "status").read_text()
    except OSError:
        return True
    return "\nState:\tZ" in status


async def wait_program_in_place(pid: int, *, timeout: float = 10.0) -> None:
    """Wait (bounded) until :func:`program_in_place`."""
    with trio.fail_after(timeout):
        while not program_in_place(pid):
            await trio.sleep(0.01)


def wait_program_in_place_sync(pid: int, *, timeout: float = 10.0) -> None:
    """:func:`wait_program_in_place` for tests outside Trio."""
    deadline = time.monotonic() + timeout
    while not program_in_place(pid):
        if time.monotonic() > deadline:
            raise TimeoutError(f"process {pid} did not exec its program in {timeout} s")
        time.sleep(0.01)
