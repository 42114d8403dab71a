"""The observe stream: ``herdr terminal session observe`` feeding a mirror's screen. I/O.

While a pane is subscribed, ``herdr terminal session observe <terminal> --cols C
--rows R`` prints one ``terminal.frame`` line per change, whose ANSI bytes go
into the pane's libghostty screen (a ``full`` frame starts from a reset screen,
or a new one when the size differs). An observer has its own grid: it crops
the pane to C × R and never resizes the pane, so a pane that changed size needs
a new stream at the new size (``Mirror.restart``). The subprocess is stopped by
its pid when the stream ends.

The program must speak the running server's version of Herdr's client
protocol: another one is refused at its handshake, and the program prints
"server rejected handshake (version M): client version N is older than server
version M; please upgrade your herdr client" (or "newer … upgrade the herdr
server") and exits 1 (src/protocol/wire.rs, src/client/mod.rs). That comes back
as :class:`~mirror_host.panes.herdr.mirror.Refused`, so the source can stop
running a program that cannot work.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import re
import shutil
import subprocess
from pathlib import Path

import trio

from mirror_host.errors import PaneSourceError
from mirror_host.panes.backends import stop_process
from mirror_host.panes.herdr.client import LineReader
from mirror_host.panes.herdr.mirror import Mirror, Refused, StreamEnd
from mirror_host.streams import STREAM_GONE
from mirror_host.terminal import Screen

__all__ = ["apply_observe_line", "find_herdr_program", "observe", "version_refusal"]

logger = logging.getLogger(__name__)

_MAX_GRID = 1000
_STOP_GRACE_SECONDS = 2.0
#: What is kept of the program's standard error (the rest is read and dropped).
_STDERR_BYTES = 4096
#: How long a program whose stream ended before any frame gets to finish saying why.
_WHY_SECONDS = 5.0
#: check_client_version's words (src/protocol/wire.rs 0.8.2).
_VERSION_REFUSAL = re.compile(
    r"client version \d+ is (?:older|newer) than server version \d+[^\n]*"
)


def version_refusal(stderr: str) -> str | None:
    """The line in which the program says the server refused its protocol version, if any."""
    for line in stderr.splitlines():
        if _VERSION_REFUSAL.search(line):
            return line.strip().removeprefix("herdr: ")
    return None


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
) -> StreamEnd | Refused:
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
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
    except OSError as exc:
        logger.warning("cannot run %s: %s", program, exc)
        return StreamEnd.FAILED
    end = StreamEnd.FAILED
    stderr = bytearray()
    frames_before = mirror.frames
    try:
        async with trio.open_nursery() as nursery:

            async def restart_on_request() -> None:
                await mirror.restart.wait()
                nursery.cancel_scope.cancel()

            collected = trio.Event()
            nursery.start_soon(restart_on_request)
            nursery.start_soon(_collect, process, stderr, collected)
            end = await _read_frames(mirror, process)
            if end is StreamEnd.FAILED and mirror.frames == frames_before:
                # Ended before any frame: let the program finish saying why (its
                # standard error ends when it exits; a loaded machine may be slow).
                with trio.move_on_after(_WHY_SECONDS):
                    await collected.wait()
            nursery.cancel_scope.cancel()
        if mirror.restart.is_set():
            end = StreamEnd.RESTART
    finally:
        mirror.stream_size = None
        with trio.CancelScope(shield=True):
            await stop_process(process, grace=_STOP_GRACE_SECONDS)
    if end is StreamEnd.FAILED and mirror.frames == frames_before:
        # Herdr's program says this only when the server refused its version, then
        # exits 1; the words are the proof (the exit status may be the stop's).
        refusal = version_refusal(stderr.decode("utf-8", "replace"))
        if refusal is not None:
            return Refused(refusal)
    return end


async def _collect(process: trio.Process, kept: bytearray, done: trio.Event) -> None:
    """Keep the start of the program's standard error; read and drop the rest."""
    assert process.stderr is not None
    try:
        while chunk := await process.stderr.receive_some(_STDERR_BYTES):
            kept += chunk[: max(0, _STDERR_BYTES - len(kept))]
    except STREAM_GONE:
        pass
    done.set()


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
