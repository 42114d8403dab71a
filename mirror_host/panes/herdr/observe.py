"""The observe stream: ``herdr terminal session observe`` feeding a mirror's screen. I/O.

While a pane is subscribed, ``herdr terminal session observe <terminal> --cols C
--rows R`` prints one ``terminal.frame`` line per change, whose ANSI bytes go
into the pane's libghostty screen (a ``full`` frame starts from a reset screen,
or a new one when the size differs). An observer has its own grid: it crops
the pane to C × R and never resizes the pane, so a pane that changed size needs
a new stream at the new size (``Mirror.restart``). The subprocess is stopped by
its pid when the stream ends.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import shutil
import subprocess
from pathlib import Path

import trio

from mirror_host.errors import PaneSourceError
from mirror_host.panes.herdr.client import LineReader
from mirror_host.panes.herdr.mirror import Mirror, StreamEnd
from mirror_host.streams import STREAM_GONE
from mirror_host.terminal import Screen

__all__ = ["apply_observe_line", "find_herdr_program", "observe"]

logger = logging.getLogger(__name__)

_MAX_GRID = 1000
_STOP_GRACE_SECONDS = 2.0


def find_herdr_program(configured: str | None) -> str | None:
    """The ``herdr`` program to run: ``configured`` (``--herdr-bin``/``herdr.bin``,
    a name on ``PATH`` or a path to an executable file), else ``herdr`` on ``PATH``;
    ``None`` when there is none (the source then polls)."""
    if not configured:
        return shutil.which("herdr")
    found = shutil.which(configured)
    if found is not None:
        return found
    # A bare name of an executable file in the current directory, which
    # shutil.which does not look at.
    runnable = os.path.isfile(configured) and os.access(configured, os.X_OK)
    return configured if runnable else None


async def observe(
    mirror: Mirror, program: str, socket_path: Path, size: tuple[int, int]
) -> StreamEnd:
    """Run one observe stream of ``size`` into ``mirror``; say why it ended."""
    columns, rows = size
    command = [
        program, "terminal", "session", "observe", mirror.pane.terminal_id,
        "--cols", str(columns), "--rows", str(rows),
    ]  # fmt: skip
    env = {**os.environ, "HERDR_SOCKET_PATH": str(socket_path)}
    mirror.restart = trio.Event()
    mirror.stream_size = size
    try:
        process = await trio.lowlevel.open_process(
            command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
        )
    except OSError as exc:
        logger.warning("cannot run %s: %s", program, exc)
        return StreamEnd.FAILED
    end = StreamEnd.FAILED
    try:
        async with trio.open_nursery() as nursery:

            async def restart_on_request() -> None:
                await mirror.restart.wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(restart_on_request)
            end = await _read_frames(mirror, process)
            nursery.cancel_scope.cancel()
        if mirror.restart.is_set():
            end = StreamEnd.RESTART
    finally:
        mirror.stream_size = None
        with trio.CancelScope(shield=True):
            await _stop(process)
    return end


async def _stop(process: trio.Process) -> None:
    if process.returncode is not None:
        return
    process.terminate()
    with trio.move_on_after(_STOP_GRACE_SECONDS):
        await process.wait()
    if process.returncode is None:
        process.kill()
        await process.wait()


async def _read_frames(mirror: Mirror, process: trio.Process) -> StreamEnd:
    assert process.stdout is not None
    reader = LineReader(process.stdout)
    while True:
        try:
            line = await reader.next()
        except (*STREAM_GONE, PaneSourceError):
            return StreamEnd.FAILED  # including a line past the size limit
        if line is None:
            return StreamEnd.FAILED  # EOF without terminal.closed: Herdr went away
        end = apply_observe_line(mirror, line)
        if end is not None:
            return end


def apply_observe_line(mirror: Mirror, line: bytes) -> StreamEnd | None:
    """Apply one line of the observe program's output; ``None`` while it goes on."""
    try:
        record = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(record, dict):
        return None
    kind = record.get("type")
    if kind == "terminal.frame":
        try:
            data = base64.b64decode(str(record.get("bytes", "")), validate=True)
        except (binascii.Error, ValueError):
            return None
        width, height = record.get("width"), record.get("height")
        if record.get("full") is True:
            if (
                isinstance(width, int)
                and isinstance(height, int)
                and (width, height) != mirror.screen.size
            ):
                mirror.screen = Screen(
                    max(1, min(width, _MAX_GRID)), max(1, min(height, _MAX_GRID))
                )
            else:
                mirror.screen.reset()
        mirror.screen.feed(data)
        mirror.frame_applied()
        mirror.watchers.notify()
        return None
    if kind == "terminal.closed":
        reason = str(record.get("reason") or "")
        if "not found" in reason:
            return StreamEnd.GONE
        logger.info(
            "Herdr ended the observe stream of %s: %s",
            mirror.pane.pane_id,
            reason or "no reason",
        )
        handed_over = "reconnect" in reason or "handoff" in reason
        return StreamEnd.RESTART if handed_over else StreamEnd.FAILED
    return None
