"""Panes the host spawns itself, each command in its own PTY (``--source local``). I/O.

The zero-setup way to try mirror-host: ``mirror-host serve --source local
--pair`` mirrors your login shell. Every byte a program writes is fed into a
libghostty :class:`~mirror_host.terminal.Screen` as it arrives, so this source
pushes changes (frames follow output within milliseconds) and supports history,
remote scroll, viewport text (plain and styled) and scroll state. A pane whose
process exits leaves the list, and its subscriber gets ``ended paneClosed``.

With ``shell_integration`` (the default), a pane that runs bash, zsh or fish
starts it with mirror-host's integration added after the user's own start-up
files (:mod:`mirror_host.shell.inject`): prompt marks, and the binding that
takes a phone's command line into the line editor. Every pane starts with a
nonce of its own in ``MIRROR_HOST_MARK_NONCE``, and its screen takes only
marks signed with it (:mod:`mirror_host.shell.nonce`): what a program prints
cannot draw a prompt. With ``shell_dir`` the source makes that private
directory (:mod:`mirror_host.shell.directory`) and names it to every pane in
``MIRROR_HOST_SHELL_DIR``. Without ``shell_integration`` (``--no-shell-send``)
panes get neither. The host's own ``MIRROR_HOST_SERVICE`` and the
integration's variables it may have inherited are never passed on to a pane.
"""

from __future__ import annotations

import fcntl
import logging
import os
import signal
import struct
import subprocess
import termios
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from uuid import UUID

import trio

from mirror_host.capture.styled import ArchiveCache, ArchiveKey, Cached, plan_window
from mirror_host.capture.values import (
    SCREEN_ONLY,
    Capability,
    Capture,
    CaptureOptions,
    HistoryCapture,
    VTCapture,
)
from mirror_host.control import Representation, ScrollDirection
from mirror_host.errors import PaneNotFound, PaneSourceError
from mirror_host.panes.activity import InputActivity
from mirror_host.panes.mirrors import MirrorTable, PaneMirror
from mirror_host.panes.model import PaneInfo, Watchers
from mirror_host.panes.pty_exec import pane_argv
from mirror_host.panes.source import Health
from mirror_host.shell.directory import ShellDirectory
from mirror_host.shell.environment import (
    INJECTED_VARIABLES,
    NONCE_VARIABLE,
    SERVICE_MARKER,
    SHELL_DIR_VARIABLE,
)
from mirror_host.shell.inject import ShellIntegration
from mirror_host.shell.login import default_shell_command
from mirror_host.shell.nonce import new_nonce
from mirror_host.streams import STREAM_GONE
from mirror_host.terminal import Screen
from mirror_host.terminal.archive import export_archive

__all__ = ["LocalPane", "LocalSource"]

logger = logging.getLogger(__name__)

_READ_BYTES = 65_536
_REPLY_QUEUE = 256
#: ``--local-respawn``: the first wait before starting the panes again; it doubles
#: (up to the maximum) while they keep exiting within the stable time.
RESPAWN_FIRST_SECONDS = 1.0
RESPAWN_MAX_SECONDS = 60.0
#: Panes open at once: ``create`` is refused past it (``CREATE_FAILED``).
MAX_PANES = 64
RESPAWN_STABLE_SECONDS = 10.0
#: Said (once per time it happens) when the last pane exits without ``--local-respawn``.
EMPTY_HINT = (
    "every local pane has exited, so there is nothing to mirror: open a new one from "
    "Prowl (New Pane), restart the host, or run it with --local-respawn"
)


def _start_directory() -> str:
    """Where panes start: the current directory, or home when it was removed."""
    try:
        return os.getcwd()
    except OSError:
        home = os.path.expanduser("~")
        logger.warning("the current directory no longer exists; local panes start in %s", home)
        return home


@dataclass(eq=False)
class LocalPane:
    """One spawned program, its PTY and its screen."""

    id: UUID
    command: str
    process: subprocess.Popen[bytes]
    master: trio.lowlevel.FdStream
    screen: Screen
    start_dir: str
    #: Answers to terminal queries (DSR, DA …), written back to the program in order.
    reply_send: trio.MemorySendChannel[bytes]
    reply_receive: trio.MemoryReceiveChannel[bytes]
    watchers: Watchers = field(default_factory=Watchers)
    write_lock: trio.Lock = field(default_factory=trio.Lock)
    alive: bool = True
    archives: ArchiveCache = field(default_factory=ArchiveCache)

    @property
    def title(self) -> str:
        return self.screen.title or self.command

    @property
    def pid(self) -> int:
        """The program the host started in the PTY (a phone's ``send`` needs it in front)."""
        return self.process.pid

    def directory(self) -> str:
        # Linux exposes the live working directory; elsewhere keep where it started.
        try:
            return os.readlink(f"/proc/{self.process.pid}/cwd")
        except OSError:
            return self.start_dir


#: The shell's own exit statuses for a command it could not start.
_SHELL_FAILURES = {
    126: "the command is not executable (status 126)",
    127: "command not found (status 127)",
}


class LocalSource:
    """A :class:`~mirror_host.panes.source.PaneSource` of spawned PTYs."""

    capabilities = Capability.OWN_SCREEN

    def __init__(
        self,
        commands: list[str] | tuple[str, ...],
        *,
        columns: int = 120,
        rows: int = 40,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        respawn: bool = False,
        shell_integration: bool = True,
        shell_dir: Path | None = None,
    ) -> None:
        self._commands = list(commands)
        #: Start the panes again when the last one exits (``--local-respawn``).
        self.respawn = respawn
        self._started = 0.0
        self._respawn_delay = RESPAWN_FIRST_SECONDS
        self._respawning = False
        self._shell_integration = shell_integration
        self._integration: ShellIntegration | None = None
        self._shell_dir = shell_dir if shell_integration else None
        #: The directory phones' command lines reach this source's shells through, once made.
        self.shell_directory: ShellDirectory | None = None
        self._columns = columns
        self._rows = rows
        self._cwd = cwd or _start_directory()
        self._env = env
        self._panes: dict[UUID, LocalPane] = {}
        #: The watched panes: their output is read whether watched or not, so a
        #: mirror here is just the watchers it tells.
        self.mirrors = MirrorTable("local pane", create=self._mirror_of)
        self._nursery: trio.Nursery | None = None
        #: When each pane last got raw input from a client (agent delivery checks it).
        self.input_activity = InputActivity()

    # ------------------------------------------------------------ lifecycle

    async def run(self) -> None:
        """Spawn every command and pump its output until cancelled.

        Raises:
            PaneSourceError: a pane could not be started at all (the message says which).
        """
        try:
            if self._shell_integration:
                try:
                    self._integration = ShellIntegration.create()
                except OSError as exc:
                    logger.warning("shells start without prompt marks: %s", exc)
            if self._shell_dir is not None:
                directory = ShellDirectory(self._shell_dir)
                try:
                    directory.prepare()
                    self.shell_directory = directory
                except OSError as exc:
                    logger.error("phones cannot run commands in shells: %s", exc)
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                self._spawn_all()
                await trio.sleep_forever()
        finally:
            self._nursery = None
            for pane in list(self._panes.values()):
                self._terminate(pane)
            self._panes.clear()
            if self._integration is not None:
                self._integration.remove()
                self._integration = None

    def _spawn_all(self) -> None:
        if self._commands:
            programs = [(command, ["/bin/sh", "-c", command]) for command in self._commands]
        else:
            shell = default_shell_command()
            programs = [(Path(shell[0]).name, shell)]
        self._started = time.monotonic()
        for command, argv in programs:
            self.spawn(argv, label=command)

    def health(self) -> Health:
        """The source's state for ``mirror-host status``: ``kind``, ``state``, ``detail``."""
        live = len(self.live_panes())
        if live:
            panes = "1 pane" if live == 1 else f"{live} panes"
            return {"kind": "local", "state": "running", "detail": f"{panes} running"}
        if self._respawning:
            detail = "every pane has exited; starting them again (--local-respawn)"
            return {"kind": "local", "state": "respawning", "detail": detail}
        return {"kind": "local", "state": "empty", "detail": EMPTY_HINT}

    def _last_pane_exited(self) -> None:
        """Every pane is gone: start them again (``respawn``), or say what to do."""
        if self._nursery is None or self.live_panes():
            return
        if not self.respawn:
            logger.warning("%s", EMPTY_HINT)
            return
        if time.monotonic() - self._started < RESPAWN_STABLE_SECONDS:
            self._respawn_delay = min(self._respawn_delay * 2, RESPAWN_MAX_SECONDS)
        else:
            self._respawn_delay = RESPAWN_FIRST_SECONDS
        logger.info("every pane has exited; starting them again in %g s", self._respawn_delay)
        self._respawning = True
        self._nursery.start_soon(self._respawn, self._respawn_delay)

    async def _respawn(self, delay: float) -> None:
        await trio.sleep(delay)
        self._respawning = False
        if self.live_panes():  # `create` opened one meanwhile
            return
        try:
            self._spawn_all()
        except PaneSourceError as exc:
            logger.error("cannot start the panes again: %s", exc)

    def spawn(self, argv: list[str], *, label: str, cwd: str | None = None) -> UUID:
        """Start one more pane running ``argv`` (the ``create`` command); its id.

        Raises:
            PaneSourceError: the source is not running, :data:`MAX_PANES` are open,
                or the program cannot start.
        """
        if self._nursery is None:
            raise PaneSourceError("the local source is not running")
        if len(self._panes) >= MAX_PANES:
            # Each pane is a process, a PTY and a screen with its scrollback: a
            # phone's `create`s must not grow them without end.
            raise PaneSourceError(f"{MAX_PANES} panes are open already; close one first")
        pane = self._spawn(label, argv, cwd=cwd)
        self._panes[pane.id] = pane
        self._nursery.start_soon(self._pump, pane)
        self._nursery.start_soon(self._write_replies, pane)
        return pane.id

    def _spawn(self, command: str, argv: list[str], *, cwd: str | None = None) -> LocalPane:
        master_fd, slave_fd = os.openpty()
        fcntl.ioctl(
            slave_fd, termios.TIOCSWINSZ, struct.pack("HHHH", self._rows, self._columns, 0, 0)
        )
        env = dict(os.environ if self._env is None else self._env)
        env["TERM"] = "xterm-256color"
        env.pop("LINES", None)
        env.pop("COLUMNS", None)
        # Not the host's to pass on: a service's marker would make a `serve` run
        # in the pane refuse --log-packets as "the service", and a nonce or start-up
        # variable the host inherited belongs to the shell it was started from.
        env.pop(SERVICE_MARKER, None)
        for name in INJECTED_VARIABLES:
            env.pop(name, None)
        nonce: str | None = None
        if self._shell_integration:
            nonce = new_nonce()
            env[NONCE_VARIABLE] = nonce
        if self.shell_directory is not None:
            env[SHELL_DIR_VARIABLE] = str(self.shell_directory.path)
        if self._integration is not None:
            argv, env = self._integration.wrap(argv, env)
        try:
            # Through the exec helper (pty_exec.py says why): the PTY becomes the
            # controlling terminal and every signal starts at its default, even when
            # the host was started with SIGINT ignored (`serve … &` in a script).
            process = subprocess.Popen(
                pane_argv(argv, env=env, cwd=cwd or self._cwd, label=command),
                stdin=slave_fd,
                stdout=slave_fd,
                stderr=slave_fd,
                cwd=cwd or self._cwd,
                env=env,
                start_new_session=True,
                close_fds=True,
            )
        except PaneSourceError:
            os.close(master_fd)
            os.close(slave_fd)
            raise
        except OSError as exc:
            os.close(master_fd)
            os.close(slave_fd)
            where = cwd or self._cwd
            if not os.path.isdir(where):
                raise PaneSourceError(f"cannot start {command!r}: no directory {where}") from exc
            raise PaneSourceError(f"cannot start {command!r}: {exc.strerror}") from exc
        os.close(slave_fd)
        pane_id = uuid.uuid4()
        reply_send, reply_receive = trio.open_memory_channel[bytes](_REPLY_QUEUE)

        def reply(data: bytes) -> None:
            try:
                reply_send.send_nowait(data)
            except trio.WouldBlock:
                logger.warning("pane %s: dropped a terminal reply (queue full)", pane_id)

        screen = Screen(self._columns, self._rows, on_reply=reply)
        if nonce is not None:
            screen.prompt.expect(nonce, known=True)
        pane = LocalPane(
            id=pane_id,
            command=command,
            process=process,
            master=trio.lowlevel.FdStream(master_fd),
            screen=screen,
            start_dir=cwd or self._cwd,
            reply_send=reply_send,
            reply_receive=reply_receive,
        )
        logger.info(
            "started %r (pid %d) in a %dx%d PTY", command, process.pid, self._columns, self._rows
        )
        return pane

    async def _pump(self, pane: LocalPane) -> None:
        exited = False  # the program ended (not the host stopping)
        try:
            while True:
                try:
                    data = await pane.master.receive_some(_READ_BYTES)
                except (*STREAM_GONE, OSError):
                    exited = True  # EIO: the last process holding the PTY is gone
                    break
                if not data:
                    exited = True
                    break
                pane.screen.feed(data)
                pane.watchers.notify()
        finally:
            await self._retire(pane, stopping=not exited)
        if exited:
            self._last_pane_exited()

    async def _write_replies(self, pane: LocalPane) -> None:
        async for data in pane.reply_receive:
            try:
                await self._write_raw(pane, data)
            except PaneSourceError:
                return

    async def _retire(self, pane: LocalPane, *, stopping: bool) -> None:
        pane.alive = False
        self._panes.pop(pane.id, None)
        mirror = self.mirrors.get(pane.id)
        if mirror is not None:
            mirror.vanish()  # its watchers find it gone and get `ended paneClosed`
        with trio.CancelScope(shield=True):
            code = await self._reap(pane)
            await pane.master.aclose()
        pane.reply_send.close()
        if code in _SHELL_FAILURES:
            # The shell could not run it at all: worth a warning, not a shrug.
            logger.warning("pane %r exited at once: %s", pane.command, _SHELL_FAILURES[code])
        elif stopping:  # hung up by the host itself: the end of every clean stop
            logger.info("pane %r closed: the host is stopping", pane.command)
        elif code < 0:  # Popen's way of saying "ended by a signal"
            logger.info("pane %r ended by %s", pane.command, _signal_name(-code))
        else:
            logger.info("pane %r exited (status %d)", pane.command, code)

    async def _reap(self, pane: LocalPane) -> int:
        """Wait for the process; hang it up, then kill it, if it lingers."""
        process = pane.process
        for sig, grace in ((None, 0.5), (signal.SIGHUP, 2.0), (signal.SIGKILL, 5.0)):
            if sig is not None:
                self._signal(pane, sig)
            code = await trio.to_thread.run_sync(_wait_for, process, grace)
            if code is not None:
                return code
        # Not even SIGKILL within 5 s (a process stuck in the kernel): wait on in a
        # thread, never on the event loop.
        return await trio.to_thread.run_sync(process.wait)

    def _signal(self, pane: LocalPane, sig: signal.Signals) -> None:
        if pane.process.poll() is None:
            try:
                os.killpg(pane.process.pid, sig)
            except OSError:
                pass

    def _terminate(self, pane: LocalPane) -> None:
        self._signal(pane, signal.SIGHUP)

    # ------------------------------------------------------------ PaneSource

    def pane(self, pane_id: UUID) -> LocalPane:
        """One live pane.

        Raises:
            PaneNotFound: it has exited.
        """
        pane = self._panes.get(pane_id)
        if pane is None or not pane.alive:
            raise PaneNotFound(f"pane {pane_id} has exited")
        return pane

    def is_listed(self, pane_id: UUID) -> bool:
        pane = self._panes.get(pane_id)
        return pane is not None and pane.alive

    async def list_panes(self) -> list[PaneInfo]:
        """Live panes; reads no terminal contents."""
        panes = []
        for pane in self._panes.values():
            if not pane.alive:
                continue
            directory = pane.directory()
            panes.append(
                PaneInfo(
                    id=pane.id,
                    title=pane.title,
                    directory=directory,
                    project_name=Path(directory).name or directory,
                    subtitle=pane.command,
                )
            )
        return panes

    def watch(
        self, pane_id: UUID, on_change: Callable[[], None]
    ) -> AbstractAsyncContextManager[None]:
        """Call ``on_change`` after every chunk of output (and when it exits)."""
        return self.mirrors.watch(pane_id, on_change)

    def _mirror_of(self, pane_id: UUID) -> PaneMirror:
        # The pump tells the pane's own watchers; the mirror shares them.
        return PaneMirror(uuid=pane_id, watchers=self.pane(pane_id).watchers)

    def statistics(self) -> dict[str, Any]:
        """Counters for ``mirror-host status``."""
        return self.mirrors.statistics()

    async def capture(
        self, pane_id: UUID, kind: Representation, *, options: CaptureOptions = SCREEN_ONLY
    ) -> Capture:
        """Format the pane's screen now (no awaiting: the screen is in memory)."""
        pane = self.pane(pane_id)
        screen = pane.screen
        wants_overlay = options.viewport_text and kind is Representation.VT
        overlay = screen.viewport_overlay() if wants_overlay and screen.is_scrolled_back else None
        bounds = screen.scroll_bounds() if options.scroll_bounds else None
        capture = screen.capture(kind, overlay=overlay, bounds=bounds)
        if options.styled_scrollback and isinstance(capture, VTCapture) and overlay is not None:
            styled = _styled(pane, capture, overlay, trio.current_time())
            capture = replace(
                capture, viewport_text=styled.viewport_text, styled_scrollback=styled.archive
            )
        return capture

    async def write(self, pane_id: UUID, data: bytes) -> None:
        """Write input to the PTY unchanged."""
        pane = self.pane(pane_id)
        self.input_activity.note(pane_id, time.monotonic())
        await self._write_raw(pane, data)

    # ------------------------------------------------------------ for commands

    def live_panes(self) -> list[LocalPane]:
        """The panes whose programs still run, in start order."""
        return [pane for pane in self._panes.values() if pane.alive]

    def foreground_group(self, pane_id: UUID) -> int | None:
        """The PTY's foreground process group (``tcgetpgrp`` on the master), if any."""
        pane = self.pane(pane_id)
        try:
            return os.tcgetpgrp(pane.master.fileno())
        except OSError:
            return None

    async def write_for_host(self, pane_id: UUID, data: bytes) -> None:
        """Write bytes on the host's own behalf (agent delivery): not a client's raw input."""
        await self._write_raw(self.pane(pane_id), data)

    async def _write_raw(self, pane: LocalPane, data: bytes) -> None:
        async with pane.write_lock:
            try:
                await pane.master.send_all(data)
            except (*STREAM_GONE, OSError) as exc:
                raise PaneNotFound(f"pane {pane.id} is gone") from exc

    async def scroll(self, pane_id: UUID, direction: ScrollDirection) -> None:
        """Page the viewport through native scrollback by ``rows - 3`` rows.

        A full-screen program that reads the mouse gets wheel events instead.
        """
        pane = self.pane(pane_id)
        screen = pane.screen
        _, rows = screen.size
        step = max(1, rows - 3)
        if screen.on_alternate_screen:
            if screen.mouse_captured:
                await self._write_raw(pane, _wheel(screen, direction, count=3))
            return
        screen.scroll_viewport(-step if direction is ScrollDirection.UP else step)
        pane.watchers.notify()

    async def history(self, pane_id: UUID) -> HistoryCapture:
        """Scrollback and screen, styles stripped (the session keeps the newest 2 MiB)."""
        pane = self.pane(pane_id)
        return HistoryCapture(text=pane.screen.history_text())


def _styled(pane: LocalPane, capture: VTCapture, overlay: str, now: float) -> Cached:
    """The pane's styled archive around its scrolled viewport, reused for 500 ms."""
    screen = pane.screen
    total, top, rows = screen.scrollbar
    key = ArchiveKey(capture.columns, capture.rows, top, overlay)
    cached = pane.archives.lookup(key, now)
    if cached is not None:
        return cached
    window = plan_window(
        total_rows=total, columns=capture.columns, viewport_top=top, viewport_rows=rows
    )
    if window is None:
        return pane.archives.store(key, Cached(None, overlay), now)
    exported = export_archive(screen, window, rows=rows, viewport_text=overlay, frame=capture.data)
    return pane.archives.store(key, exported, now)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _wait_for(process: subprocess.Popen[bytes], seconds: float) -> int | None:
    try:
        return process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        return None


def _wheel(screen: Screen, direction: ScrollDirection, *, count: int) -> bytes:
    columns, rows = screen.size
    x, y = max(1, columns // 2), max(1, rows // 2)
    button = 64 if direction is ScrollDirection.UP else 65
    if screen.mode(1006):
        event = f"\x1b[<{button};{x};{y}M".encode()
    else:
        event = bytes((0x1B, 0x5B, 0x4D, 32 + button, 32 + min(x, 223), 32 + min(y, 223)))
    return event * count
