"""A terminal's foreground process group, read from the operating system. I/O.

Agent detection needs to know what runs in the foreground of a pane's
terminal: for tmux, the terminal of the pane's first process (``pane_pid``);
for local PTYs, the group ``tcgetpgrp`` reports on the master. On Linux the
answer comes from ``/proc`` (``stat`` gives a process's group and its
terminal's foreground group, ``comm`` and ``cmdline`` its names); elsewhere
(macOS) from ``ps``, whose ``args`` column loses the boundaries between
arguments that contain spaces, which name matching can live with.

The group leader comes first, if it is alive and still in the group: it is
usually the program the shell started. Zombies (exited, not yet reaped) are
left out: they run nothing. A phone's ``send`` needs the group's id too
(:func:`terminal_group`): the pane's own shell must be the group's leader.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import trio

from mirror_host.agents import ForegroundProcess

__all__ = [
    "parse_ps_table",
    "parse_stat",
    "process_group",
    "process_start_time",
    "stat_state",
    "terminal_foreground",
    "terminal_group",
]

logger = logging.getLogger(__name__)

_PROC = Path("/proc")
#: Members of one group looked at, at most (a build farm in the foreground).
_MAX_MEMBERS = 64


def parse_stat(text: str) -> tuple[int, int] | None:
    """``(process group, terminal foreground group)`` from a ``/proc/<pid>/stat`` line.

    The command name in parentheses may itself contain spaces and parentheses,
    so the fields are counted from the *last* closing parenthesis.
    """
    end = text.rfind(")")
    if end < 0:
        return None
    fields = text[end + 1 :].split()
    try:
        return int(fields[2]), int(fields[5])
    except (IndexError, ValueError):
        return None


def stat_state(text: str) -> str | None:
    """The state letter (``R``, ``S``, ``Z`` …) of a ``/proc/<pid>/stat`` line."""
    end = text.rfind(")")
    fields = text[end + 1 :].split() if end >= 0 else []
    return fields[0] if fields else None


def parse_ps_table(text: str) -> list[tuple[int, int]]:
    """``(pid, pgid)`` pairs from ``ps -A -o pid=,pgid=`` output."""
    pairs = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            pairs.append((int(parts[0]), int(parts[1])))
    return pairs


def _read(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8", "replace")
    except OSError:
        return None


def _describe_proc(pid: int, pgid: int | None = None) -> ForegroundProcess | None:
    """Process ``pid``, if it is alive (not a zombie) and, given ``pgid``, in that group."""
    stat = _read(_PROC / str(pid) / "stat")
    parsed = parse_stat(stat) if stat else None
    if stat is None or parsed is None or stat_state(stat) in (None, "Z", "X"):
        return None
    if pgid is not None and parsed[0] != pgid:
        return None
    comm = _read(_PROC / str(pid) / "comm")
    if comm is None:
        return None
    cmdline = _read(_PROC / str(pid) / "cmdline") or ""
    argv = tuple(part for part in cmdline.split("\0") if part) if cmdline else ()
    return ForegroundProcess(pid=pid, name=comm.strip(), argv=argv)


def _members_proc(pgid: int) -> tuple[ForegroundProcess, ...]:
    leader = _describe_proc(pgid, pgid)
    found = [leader] if leader is not None else []
    try:
        entries = os.listdir(_PROC)
    except OSError:
        return tuple(found)
    for entry in entries:
        if len(found) >= _MAX_MEMBERS:
            break
        if not entry.isdigit() or int(entry) == pgid:
            continue
        member = _describe_proc(int(entry), pgid)
        if member is not None:
            found.append(member)
    return tuple(found)


async def _ps(*args: str) -> str | None:
    try:
        result = await trio.run_process(
            ["ps", *args],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            # lstart in English whatever the user's locale, as strptime reads it.
            env={**os.environ, "LC_ALL": "C"},
        )
    except OSError as exc:
        logger.debug("ps failed: %s", exc)
        return None
    if result.returncode != 0:
        return None
    return result.stdout.decode("utf-8", "replace")


async def _describe_ps(pid: int) -> ForegroundProcess | None:
    head = await _ps("-o", "stat=,comm=", "-p", str(pid))
    state, _, comm = (head or "").strip().partition(" ")
    comm = comm.strip()
    if not comm or state.startswith("Z"):
        return None
    args = await _ps("-o", "args=", "-p", str(pid))
    name = comm.rsplit("/", 1)[-1]
    return ForegroundProcess(pid=pid, name=name, argv=tuple((args or "").split()))


async def _members_ps(pgid: int) -> tuple[ForegroundProcess, ...]:
    table = await _ps("-A", "-o", "pid=,pgid=")
    members = [pid for pid, group in parse_ps_table(table or "") if group == pgid]
    # The leader first, and only if it is still in the group.
    pids = ([pgid] if pgid in members else []) + [pid for pid in members if pid != pgid]
    found: list[ForegroundProcess] = []
    for pid in pids:
        if len(found) >= _MAX_MEMBERS:
            break
        process = await _describe_ps(pid)
        if process is not None:
            found.append(process)
    return tuple(found)


def _use_proc(use_proc: bool | None) -> bool:
    return (_PROC / "self" / "stat").exists() if use_proc is None else use_proc


async def process_group(
    pgid: int, *, use_proc: bool | None = None
) -> tuple[ForegroundProcess, ...]:
    """The processes of group ``pgid``, leader first (empty if it is gone)."""
    if pgid <= 0:
        return ()
    if _use_proc(use_proc):
        return _members_proc(pgid)
    return await _members_ps(pgid)


def _start_proc(pid: int) -> float | None:
    """Process ``pid``'s start, wall clock, from ``/proc/PID/stat`` (clock ticks since boot).

    The ticks count boot time (``CLOCK_BOOTTIME``), so the wall-clock start is
    now less the process's age: precise to a tick (10 ms) or two.
    """
    stat = _read(_PROC / str(pid) / "stat")
    end = stat.rfind(")") if stat else -1
    if stat is None or end < 0:
        return None
    fields = stat[end + 1 :].split()
    try:
        ticks = int(fields[19])
    except (IndexError, ValueError):
        return None
    age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    return time.time() - age


async def process_start_time(
    pid: int, *, use_proc: bool | None = None
) -> tuple[float, float] | None:
    """When process ``pid`` started (wall clock) and how precise that is, in seconds.

    Linux reads ``/proc``; elsewhere ``ps -o lstart=`` says it to the second.
    ``None`` if the process is gone or the OS would not say.
    """
    if pid <= 0:
        return None
    if _use_proc(use_proc):
        started = _start_proc(pid)
        return None if started is None else (started, 0.05)
    text = await _ps("-o", "lstart=", "-p", str(pid))
    if not text or not text.strip():
        return None
    try:
        parsed = time.strptime(" ".join(text.split()), "%a %b %d %H:%M:%S %Y")
    except ValueError:
        return None
    return time.mktime(parsed), 1.0


async def terminal_group(
    pid: int, *, use_proc: bool | None = None
) -> tuple[int | None, tuple[ForegroundProcess, ...]]:
    """The foreground process group of the terminal ``pid`` runs on: its id and members.

    ``(None, ())`` when the OS would not say (``pid`` is gone, or has no terminal).
    """
    tpgid: int | None = None
    if _use_proc(use_proc):
        stat = _read(_PROC / str(pid) / "stat")
        parsed = parse_stat(stat) if stat else None
        tpgid = parsed[1] if parsed else None
    else:
        text = await _ps("-o", "tpgid=", "-p", str(pid))
        tpgid = int(text.strip()) if text and text.strip().lstrip("-").isdigit() else None
    if tpgid is None or tpgid <= 0:
        return None, ()
    return tpgid, await process_group(tpgid, use_proc=use_proc)


async def terminal_foreground(
    pid: int, *, use_proc: bool | None = None
) -> tuple[ForegroundProcess, ...]:
    """The foreground process group of the terminal ``pid`` runs on, leader first."""
    return (await terminal_group(pid, use_proc=use_proc))[1]
