"""Every pane of a tmux server, pushed through control mode (``--source tmux``). I/O.

One read-only ``tmux -C`` client per session is attached with ``ignore-size``, so
it never changes anyone's window size. Its ``%output`` notifications feed the
libghostty :class:`~mirror_host.terminal.Screen` of each *subscribed* pane; every
other pane is paused for this client (``refresh-client -A %N:pause``), so no
pane's output is read while nobody watches it. A subscription seeds its screen
from ``capture-pane -e`` plus the cursor, modes and scroll region, in the same
command list that un-pauses the pane, so no output is lost or applied twice.

The pane list is read again (``list-panes -a``) when control mode reports a
window or layout change, not on a timer. Input goes through ``send-keys -H``
(raw bytes), scrolling through copy mode, history through ``capture-pane -S -``.
A pane's grid is its real tmux size; it is never resized for a phone.

With ``sign_marks`` (the host's default while phones may run shell
commands), the source puts a nonce in the tmux server's global environment
(``set-environment -g MIRROR_HOST_MARK_NONCE``, kept if one is there
already), so every shell tmux starts from then on signs its prompt marks with
it (:mod:`mirror_host.shell.nonce`). Each pane's screen takes only signed
marks when its process started with the nonce (its initial environment, read
from ``/proc``); a shell started before has none, and its screen takes
unsigned marks until a signed one arrives. With ``shell_dir`` too, it names
the private directory phones' command lines reach shells through
(:mod:`mirror_host.shell.directory`) in ``MIRROR_HOST_SHELL_DIR`` beside the
nonce (a usable one already there is kept, and used). Panes nobody watches
stay paused either way: a shell that waits at its prompt says so through
that directory, not its output. Both variables stay in tmux's environment
when the host stops, on purpose: the shells started meanwhile hold them, and
a host started again keeps them, so those shells go on signing marks it
takes and reaching it through the same directory.

While a pane is scrolled back, its viewport text is the copy-mode view, read
with its attributes (``capture-pane -e``) when the scroll happens and put on a
libghostty screen, so it reads the way Prowl reads rows. Its styled archive
(``styled-scrollback-v1``) is a ``capture-pane -e`` of the window of history
around that view, formatted by libghostty like a local pane's. tmux keeps the
copy-mode view as it was when the scroll happened while the pane's history
grows, so the window is found from the history size read with the capture, and
checked against the view's text before it goes.
"""

from __future__ import annotations

import logging
import subprocess
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from uuid import UUID

import trio

from mirror_host.capture.styled import (
    ArchiveCache,
    ArchiveKey,
    ArchiveWindow,
    Cached,
    plan_window,
)
from mirror_host.capture.values import (
    SCREEN_ONLY,
    Capability,
    Capture,
    CaptureOptions,
    HistoryCapture,
    ScrollBounds,
    VTCapture,
)
from mirror_host.control import Representation, ScrollDirection
from mirror_host.errors import PaneNotFound, PaneSourceError, PaneSourceUnavailable
from mirror_host.panes.activity import InputActivity
from mirror_host.panes.follow import MAX_BACKOFF_SECONDS, Follower, follow_health
from mirror_host.panes.lines import LineSplitter, LineTooLong
from mirror_host.panes.mirrors import MirrorTable, PaneMirror
from mirror_host.panes.model import PaneInfo
from mirror_host.panes.source import Health
from mirror_host.panes.tmux_protocol import (
    LIST_FORMAT,
    PANE_STATE_FORMAT,
    CommandFinished,
    ControlParser,
    Exited,
    LayoutChanged,
    OutputReceived,
    PaneRow,
    PaneState,
    pane_title,
    parse_pane_rows,
    parse_pane_state,
    soft_wraps,
)
from mirror_host.shell.directory import ShellDirectory, is_private_directory
from mirror_host.shell.environment import SHELL_DIR_VARIABLE
from mirror_host.shell.nonce import NONCE_VARIABLE, is_nonce, new_nonce, started_with_nonce
from mirror_host.streams import STREAM_GONE
from mirror_host.terminal import Screen
from mirror_host.terminal.archive import export_archive, screen_of_rows

__all__ = ["TmuxSource"]

logger = logging.getLogger(__name__)

_PANE_NAMESPACE = uuid.UUID("8c3c6a5e-5bd6-4c35-9d7e-1a1f6a0d2b11")
_RELIST_DEBOUNCE_SECONDS = 0.05
_SEND_CHUNK = 2048
#: How long a command line's write may take (tmux reads its control client's
#: input at once; only a stuck tmux fills the pipe).
_SEND_SECONDS = 5.0
_MAX_LINE = 64 * 1024 * 1024


@dataclass(eq=False)
class _Pane:
    """A listed pane: its id and its row of the last listing."""

    uuid: UUID
    row: PaneRow


@dataclass(eq=False)
class _Mirror(PaneMirror):
    """A watched pane: its screen, seeded and then fed by ``%output``, and its scroll state."""

    pane: _Pane
    #: ``None`` until the first seed is in.
    screen: Screen | None = None
    #: A seed is under way: output meanwhile waits in ``pending``, to follow it.
    seeding: bool = False
    pending: list[bytes] = field(default_factory=list)
    state: PaneState | None = None
    #: The copy-mode view while scrolled back: exactly its rows, as Prowl reads them.
    viewport: str | None = None
    archives: ArchiveCache = field(default_factory=ArchiveCache)

    def label(self) -> str:
        return f"tmux pane {self.pane.row.pane_id}"


#: Blocks of a command line's reply, one tuple of lines per block.
_Blocks = tuple[tuple[bytes, ...], ...]


@dataclass(eq=False)
class _PendingCommand:
    """A command line sent to tmux, waiting for :class:`CommandFinished`."""

    results: _Blocks = ()
    failed: bool = False
    done: trio.Event = field(default_factory=trio.Event)


class _ControlClient:
    """One ``tmux -C`` client attached to one session: bytes in and out.

    What the lines mean (which reply belongs to which command line, what a
    notification says) is :class:`ControlParser`'s business.
    """

    def __init__(self, source: TmuxSource, session_id: str) -> None:
        self.source = source
        self.session_id = session_id
        self.process: trio.Process | None = None
        self.paused: set[str] = set()
        self._parser = ControlParser()
        self._pending: dict[int, _PendingCommand] = {}
        self._send_lock = trio.Lock()
        #: A command line was not written whole: no more are sent on this client.
        self._out_of_step = False
        self.ready = trio.Event()
        self.done = trio.Event()
        #: Why ``tmux -C`` could not be started (``ready`` is set then, ``process`` ``None``).
        self.start_error: str | None = None

    async def run(self) -> None:
        try:
            await self._run()
        except PaneSourceError as exc:
            logger.warning("tmux control client for %s failed: %s", self.session_id, exc)

    async def _run(self) -> None:
        command = [
            *self.source.base_command,
            "-C",
            "attach-session",
            "-f",
            "ignore-size,read-only",
            "-t",
            self.session_id,
        ]
        try:
            process = await trio.lowlevel.open_process(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
            )
        except OSError as exc:  # out of descriptors or processes: the source retries
            self.start_error = f"could not start a tmux control client: {exc}"
            self.done.set()
            self.ready.set()
            return
        self.process = process
        assert process.stdout is not None
        splitter = LineSplitter(_MAX_LINE)
        self.ready.set()
        try:
            while True:
                chunk = await process.stdout.receive_some(65536)
                if not chunk:
                    break
                try:
                    lines = splitter.feed(chunk)
                except LineTooLong as exc:
                    raise PaneSourceError(f"tmux control mode sent {exc}") from exc
                for line in lines:
                    self._handle(line)
        finally:
            self.done.set()
            for pending in self._pending.values():
                pending.failed = True
                pending.done.set()
            self._pending.clear()
            with trio.CancelScope(shield=True):
                if process.returncode is None:
                    process.terminate()
                await process.wait()
            self.source.client_gone(self)

    def _handle(self, line: bytes) -> None:
        event = self._parser.feed(line)
        if isinstance(event, OutputReceived):
            self.source.pane_output(event.pane, event.data)
        elif isinstance(event, CommandFinished):
            pending = self._pending.pop(event.command, None)
            if pending is not None:
                pending.results = event.results
                pending.failed = not event.ok
                pending.done.set()
        elif isinstance(event, LayoutChanged):
            self.source.request_relist()
        elif isinstance(event, Exited):
            logger.debug("tmux control client for %s exited: %s", self.session_id, event.reason)

    async def command(self, line: str, *, blocks: int = 1) -> _Blocks:
        """Run a command line of ``blocks`` ``;``-separated commands; each block's lines.

        Raises:
            PaneSourceError: a command failed or the client is gone.
        """
        process = self.process
        if process is None or process.stdin is None or self.done.is_set():
            raise PaneSourceUnavailable("the tmux control client is not running")
        pending = _PendingCommand()
        async with self._send_lock:
            if self._out_of_step:
                raise PaneSourceUnavailable("the tmux control client is closing")
            # A line is written whole or the client is closed: tmux answers every
            # line it read, in order, and a reply slot for a line it never read (or
            # half a line it joins to the next) would hand each later command the
            # reply of the one before. So the caller's cancellation waits for the
            # write (bounded), and a write that fails or times out part-way ends
            # this client; the source attaches a new one.
            written = False
            try:
                with trio.move_on_after(_SEND_SECONDS) as send_scope:
                    send_scope.shield = True
                    await process.stdin.send_all(line.encode() + b"\n")
                    written = True
            except STREAM_GONE as exc:
                self._abandon()
                raise PaneSourceUnavailable("the tmux control client went away") from exc
            if not written:
                self._abandon()
                raise PaneSourceUnavailable(
                    f"tmux did not read a command line in {_SEND_SECONDS:g} s; reattaching"
                )
            # Numbered in the order the lines are written: tmux answers in that order.
            # No checkpoint since the write ended, so its reply cannot have been read yet.
            self._pending[self._parser.expect(blocks)] = pending
        await pending.done.wait()
        if pending.failed:
            detail = b" ".join(b" ".join(block) for block in pending.results)[:200].decode(
                "utf-8", "replace"
            )
            raise PaneSourceError(f"tmux refused {line.split(' ', 1)[0]}: {detail}")
        return pending.results

    def _abandon(self) -> None:
        """Out of step with tmux (a line not written whole): refuse further commands
        and end the client, whose ``run`` fails what waits and tells the source."""
        self._out_of_step = True
        if self.process is not None and self.process.returncode is None:
            self.process.terminate()

    async def pause(self, tmux_id: str) -> None:
        """Stop receiving a pane's output (for this client only; tmux keeps reading it).

        Raises:
            PaneSourceError: tmux refused, or the client is gone.
        """
        await self.command(f"refresh-client -A '{tmux_id}:pause'")
        self.paused.add(tmux_id)

    async def close(self) -> None:
        if self.process is not None and self.process.stdin is not None:
            await self.process.stdin.aclose()


class TmuxSource:
    """A :class:`~mirror_host.panes.source.PaneSource` over a tmux server."""

    capabilities = Capability.OWN_SCREEN

    def __init__(
        self,
        *,
        socket_name: str | None = None,
        socket_path: str | None = None,
        tmux: str = "tmux",
        sign_marks: bool = True,
        shell_dir: Path | None = None,
    ) -> None:
        self.tmux = tmux
        self._sign_marks = sign_marks
        self._shell_dir = shell_dir if sign_marks else None
        #: The directory phones' command lines reach this server's shells through.
        self.shell_directory: ShellDirectory | None = None
        #: The nonce handed to the server's new shells, and which server (pid) has it.
        self._mark_nonce: str | None = None
        self._nonce_server: int | None = None
        self.base_command = [tmux]
        if socket_path:
            self.base_command += ["-S", socket_path]
        elif socket_name:
            self.base_command += ["-L", socket_name]
        self._where = socket_path or (f"-L {socket_name}" if socket_name else "the default socket")
        self._panes: dict[UUID, _Pane] = {}
        #: Panes nobody watches are paused; a mirror is seeded for the first watcher.
        self.mirrors = MirrorTable(
            "tmux pane", create=self._new_mirror, start=self._seed, stop=self._unwatched
        )
        #: The mirrors ``%output`` goes to, by tmux pane id.
        self._fed: dict[str, _Mirror] = {}
        self._clients: dict[str, _ControlClient] = {}
        self._relist = trio.Event()
        self._nursery: trio.Nursery | None = None
        self._listed = trio.Event()
        #: When each pane last got raw input from a client (agent delivery checks it).
        self.input_activity = InputActivity()
        #: Retries an unreachable server (or tmux refusing to list); knows why.
        self._follower = Follower()

    # ------------------------------------------------------------ running

    async def run(self) -> None:
        """Follow the server: list panes, keep one control client per session."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await self._follower.run(
                self._follow, on_failure=self._unreachable, wake=lambda: self._relist
            )

    async def _follow(self) -> None:
        """List the panes again whenever control mode reports a change."""
        while True:
            self._relist = trio.Event()
            await self._refresh()
            if self._follower.reached():
                logger.info("following tmux on %s; panes listed: %d", self._where, len(self._panes))
            await self._relist.wait()
            await trio.sleep(_RELIST_DEBOUNCE_SECONDS)

    def _unreachable(self) -> None:
        self._forget_all()
        self._listed.set()

    async def wait_listed(self) -> None:
        """Wait for the first pane listing (tests and start-up)."""
        await self._listed.wait()

    def health(self) -> Health:
        """The source's state for ``mirror-host status``: ``kind``, ``state``, ``detail``."""
        return follow_health(
            "tmux",
            self._follower.problem,
            waiting=None if self._listed.is_set() else f"reading {self._where}",
            following=lambda: self._where,
            retrying=f"retrying (up to every {MAX_BACKOFF_SECONDS:g} s)",
        )

    def statistics(self) -> dict[str, Any]:
        """Counters for ``mirror-host status``: the panes mirrored, the control clients."""
        return {**self.mirrors.statistics(), "controlClients": len(self._clients)}

    def request_relist(self) -> None:
        """Something changed: read the pane list again (debounced)."""
        self._relist.set()

    async def run_tmux(self, *args: str, stdin: bytes = b"") -> str:
        """Run one tmux command line against this server; its standard output.

        Raises:
            PaneSourceUnavailable: tmux is missing, could not be started, or its
                server is not running.
            PaneNotFound: tmux no longer knows the pane (or window, session) named.
            PaneSourceError: any other refusal.
        """
        try:
            result = await trio.run_process(
                [*self.base_command, *args],
                stdin=stdin,
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
        except FileNotFoundError as exc:  # asked here, not by a PATH search per keystroke
            raise PaneSourceUnavailable(
                f"tmux is not installed (no {self.tmux!r} on PATH); "
                "install it or choose another --source"
            ) from exc
        except OSError as exc:  # out of descriptors or processes (EMFILE, EAGAIN): retried
            raise PaneSourceUnavailable(f"could not start tmux: {exc}") from exc
        if result.returncode != 0:
            message = result.stderr.decode("utf-8", "replace").strip()
            if "no server running" in message or "error connecting" in message:
                raise PaneSourceUnavailable(
                    f"no tmux server is running on {self._where}; start one with "
                    f"`{' '.join(self.base_command)} new-session -d`"
                )
            if "can't find" in message:
                raise PaneNotFound(f"tmux: {message}")
            raise PaneSourceError(f"tmux {args[0]} failed: {message}")
        return result.stdout.decode("utf-8", "replace")

    async def _refresh(self) -> None:
        rows = parse_pane_rows(await self.run_tmux("list-panes", "-a", "-F", LIST_FORMAT))
        if self._sign_marks and rows:
            await self._hand_out_nonce(rows[0].server_pid)
        seen: set[UUID] = set()
        for row in rows:
            if row.dead:
                continue
            key = uuid.uuid5(_PANE_NAMESPACE, f"{row.socket_path}|{row.server_pid}|{row.pane_id}")
            seen.add(key)
            pane = self._panes.get(key)
            if pane is None:
                self._panes[key] = _Pane(key, row)
            else:
                old_row, pane.row = pane.row, row
                resized = (old_row.width, old_row.height) != (row.width, row.height)
                mirror = self.mirrors.live(key)
                if resized and mirror is not None and mirror.screen is not None:
                    try:
                        await self._seed(mirror)
                    except PaneSourceError as exc:
                        # One pane's failure must not stop the listing; retried next time.
                        pane.row = old_row
                        logger.warning("re-reading resized tmux pane %s: %s", row.pane_id, exc)
        for key in list(self._panes):
            if key not in seen:
                self._drop(self._panes[key])
        sessions = {row.session_id for row in rows if not row.dead}
        assert self._nursery is not None
        for session_id in sessions - set(self._clients):
            client = _ControlClient(self, session_id)
            self._clients[session_id] = client
            self._nursery.start_soon(client.run)
            await client.ready.wait()
            if client.start_error is not None:
                del self._clients[session_id]
                raise PaneSourceUnavailable(client.start_error)
        for session_id, client in list(self._clients.items()):
            if session_id not in sessions:
                await client.close()
        await self._pause_unwatched()
        self._listed.set()

    async def _hand_out_nonce(self, server_pid: int) -> None:
        """Make sure this tmux server gives its new shells a nonce to sign marks with.

        One nonce per server, in its global environment: kept if one is there
        (a host restarted, or another host on the same server), so the shells
        already started with it keep counting.
        """
        if server_pid == self._nonce_server:
            return
        nonce: str | None = None
        try:
            shown = await self.run_tmux("show-environment", "-g", NONCE_VARIABLE)
            name, _, value = shown.strip().partition("=")
            nonce = value if name == NONCE_VARIABLE and is_nonce(value) else None
        except PaneSourceError:
            pass  # not set yet
        try:
            if nonce is None:
                nonce = new_nonce()
                await self.run_tmux("set-environment", "-g", NONCE_VARIABLE, nonce)
                logger.info(
                    "tmux on %s: new shells will sign their prompt marks (set-environment -g %s)",
                    self._where,
                    NONCE_VARIABLE,
                )
        except PaneSourceError as exc:
            logger.warning("could not give tmux's shells a prompt-mark nonce: %s", exc)
            nonce = None
        self._mark_nonce = nonce
        self._nonce_server = server_pid  # once per server: a refusal is not retried
        if self._shell_dir is not None:
            self.shell_directory = await self._hand_out_directory(self._shell_dir)

    async def _hand_out_directory(self, default: Path) -> ShellDirectory | None:
        """Name the private directory to this server's new shells; the one they will use.

        A usable directory already in tmux's global environment (an earlier
        host's, or another's on the same server) is kept and used, so the shells
        started with it can still be reached.
        """
        try:
            shown = await self.run_tmux("show-environment", "-g", SHELL_DIR_VARIABLE)
            name, _, value = shown.strip().partition("=")
            if name == SHELL_DIR_VARIABLE and value.startswith("/"):
                kept = ShellDirectory(Path(value))
                if is_private_directory(kept.path):
                    await trio.to_thread.run_sync(kept.remove_stale, time.time())
                    return kept
        except PaneSourceError:
            pass  # not set yet
        directory = ShellDirectory(default)
        try:
            await trio.to_thread.run_sync(directory.prepare)
            await self.run_tmux("set-environment", "-g", SHELL_DIR_VARIABLE, str(directory.path))
        except (OSError, PaneSourceError) as exc:
            logger.error("phones cannot run commands in tmux's shells: %s", exc)
            return None
        logger.info(
            "tmux on %s: new shells take phones' commands through %s (set-environment -g %s)",
            self._where,
            directory.path,
            SHELL_DIR_VARIABLE,
        )
        return directory

    def _expect_marks(self, screen: Screen, pane_pid: int | None) -> None:
        """Tell the pane's screen which nonce its shell signs marks with (module docstring)."""
        started = started_with_nonce(pane_pid) if pane_pid else None
        if started is not None:
            screen.prompt.expect(started, known=True)
        elif self._mark_nonce is not None:
            screen.prompt.expect(self._mark_nonce, known=False)

    async def _pause_unwatched(self) -> None:
        for pane in list(self._panes.values()):
            client = self._clients.get(pane.row.session_id)
            watched = self.mirrors.get(pane.uuid) is not None
            if client is None or watched or pane.row.pane_id in client.paused:
                continue
            try:
                await client.pause(pane.row.pane_id)
            except PaneSourceError as exc:
                logger.debug("could not pause %s: %s", pane.row.pane_id, exc)

    def client_gone(self, client: _ControlClient) -> None:
        if self._clients.get(client.session_id) is client:
            del self._clients[client.session_id]
        for mirror in self.mirrors:
            if mirror.pane.row.session_id == client.session_id and mirror.screen is not None:
                # Output was lost with the client: what the marks said is stale.
                mirror.screen.prompt.forget()
        self.request_relist()

    def _drop(self, pane: _Pane) -> None:
        self._panes.pop(pane.uuid, None)
        mirror = self.mirrors.get(pane.uuid)
        if mirror is not None:
            self._unfeed(mirror)
            mirror.vanish()  # its watchers find it gone and get `ended paneClosed`

    def _forget_all(self) -> None:
        for pane in list(self._panes.values()):
            self._drop(pane)

    def pane_output(self, tmux_id: str, data: bytes) -> None:
        """Control mode delivered output for ``tmux_id``."""
        mirror = self._fed.get(tmux_id)
        if mirror is None:
            return
        if mirror.seeding:
            mirror.pending.append(data)
            return
        if mirror.screen is not None:
            mirror.screen.feed(data)
            mirror.watchers.notify()

    # ------------------------------------------------------------ watching

    def _new_mirror(self, pane_id: UUID) -> _Mirror:
        pane = self._pane(pane_id)
        mirror = _Mirror(pane, uuid=pane_id)
        self._fed[pane.row.pane_id] = mirror
        return mirror

    def _unfeed(self, mirror: _Mirror) -> None:
        tmux_id = mirror.pane.row.pane_id
        if self._fed.get(tmux_id) is mirror:
            del self._fed[tmux_id]

    async def _unwatched(self, mirror: _Mirror) -> None:
        """The last watcher left: pause the pane again (within 2 s, or left as it is)."""
        self._unfeed(mirror)
        client = self._clients.get(mirror.pane.row.session_id)
        if client is not None and mirror.uuid in self._panes:
            with trio.move_on_after(2):
                try:
                    await client.pause(mirror.pane.row.pane_id)
                except PaneSourceError:
                    pass

    async def _seed(self, mirror: _Mirror) -> None:
        """Read the pane's screen and un-pause it in one command list (module docstring)."""
        row = mirror.pane.row
        client = self._clients.get(row.session_id)
        if client is None:
            raise PaneNotFound(f"tmux session {row.session_id} is gone")
        mirror.seeding = True
        mirror.pending = []
        try:
            await self._seed_from(client, mirror, row.pane_id)
        finally:
            mirror.seeding = False
        mirror.watchers.notify()

    async def _seed_from(self, client: _ControlClient, mirror: _Mirror, target: str) -> None:
        try:
            blocks = await client.command(
                f"refresh-client -A '{target}:continue' ; "
                f"capture-pane -p -e -N -t {target} ; "
                f"display-message -p -t {target} '{PANE_STATE_FORMAT}' ; "
                f"display-message -p -t {target} '#{{pane_pid}}' ; "
                # Plain rows and wrapped lines joined: which rows tmux wrapped, so the
                # seeded screen has libghostty's wrap flags (text frames join them).
                f"capture-pane -p -N -t {target} ; "
                f"capture-pane -p -J -t {target}",
                blocks=6,
            )
        except PaneSourceError as exc:
            raise PaneNotFound(f"tmux pane {target} is gone ({exc})") from exc
        client.paused.discard(target)
        state = parse_pane_state(b"\n".join(blocks[2]).decode("utf-8", "replace"))
        if state is None:
            raise PaneSourceError(f"could not read the state of tmux pane {target}")
        screen = Screen(max(1, state.width), max(1, state.height))
        pid = b"".join(blocks[3]).decode("ascii", "replace").strip()
        self._expect_marks(screen, int(pid) if pid.isdigit() else None)
        seed = bytearray(b"\x1b[?1049h" if state.alternate_on else b"") + b"\x1b[0m"
        plain = [row.decode("utf-8", "replace") for row in blocks[4]]
        joined = [line.decode("utf-8", "replace") for line in blocks[5]]
        wraps = soft_wraps(plain[: state.height], joined, state.width)
        for index, row in enumerate(blocks[1][: state.height]):
            # No reset between rows: capture-pane -e carries attributes across them.
            # A row tmux wrapped onto follows the full row above with no cursor
            # move: the terminal wraps there itself and marks it.
            wrapped = index < len(wraps) and wraps[index]
            seed += row if wrapped else b"\x1b[%d;1H" % (index + 1) + row
        seed += b"\x1b[0m" + state.seed_modes()
        screen.feed(bytes(seed))
        for data in mirror.pending:
            screen.feed(data)
        mirror.pending = []
        mirror.state = state
        mirror.screen = screen

    # ------------------------------------------------------------ PaneSource

    def _pane(self, pane_id: UUID) -> _Pane:
        pane = self._panes.get(pane_id)
        if pane is None:
            raise PaneNotFound(f"tmux pane {pane_id} is gone")
        return pane

    def is_listed(self, pane_id: UUID) -> bool:
        return pane_id in self._panes

    async def list_panes(self) -> list[PaneInfo]:
        """The panes of the last listing (kept fresh by control-mode notifications)."""
        panes = []
        for pane in self._panes.values():
            row = pane.row
            title, subtitle = pane_title(row)
            panes.append(
                PaneInfo(
                    id=pane.uuid,
                    title=title,
                    directory=row.path,
                    project_name=Path(row.path).name or row.path or None,
                    subtitle=subtitle,
                )
            )
        return panes

    def watch(
        self, pane_id: UUID, on_change: Callable[[], None]
    ) -> AbstractAsyncContextManager[None]:
        """Un-pause and seed the pane for the first watcher; pause it after the last."""
        return self.mirrors.watch(pane_id, on_change)

    async def capture(
        self, pane_id: UUID, kind: Representation, *, options: CaptureOptions = SCREEN_ONLY
    ) -> Capture:
        """The pane's screen from its mirror; the copy-mode view while scrolled."""
        mirror = self.mirrors.require(pane_id)
        screen = mirror.screen
        if screen is None:
            raise PaneNotFound(f"{mirror.label()} is not being mirrored")
        bounds = self._bounds(mirror, screen) if options.scroll_bounds else None
        overlay = mirror.viewport
        if kind is Representation.TEXT:
            # A text frame is the view as text, without the empty rows below it.
            overlay = overlay.rstrip("\n") if overlay is not None else None
        elif not options.viewport_text:
            overlay = None
        capture = screen.capture(kind, overlay=overlay, bounds=bounds)
        if options.styled_scrollback and isinstance(capture, VTCapture):
            styled = await self._styled(mirror, capture)
            if styled is not None:
                capture = replace(
                    capture, viewport_text=styled.viewport_text, styled_scrollback=styled.archive
                )
        return capture

    async def _styled(self, mirror: _Mirror, capture: VTCapture) -> Cached | None:
        """The archive around the copy-mode view, reused for 500 ms."""
        state, text = mirror.state, capture.viewport_text
        if state is None or text is None or not state.in_mode or state.scroll_position == 0:
            return None
        top = state.history_size - state.scroll_position
        key = ArchiveKey(capture.columns, capture.rows, top, text)
        now = trio.current_time()
        cached = mirror.archives.lookup(key, now)
        if cached is not None:
            return cached
        window = plan_window(
            total_rows=state.history_size + state.height,
            columns=state.width,
            viewport_top=top,
            viewport_rows=state.height,
        )
        rows = None if window is None else await self._archive_rows(mirror.pane, window, state)
        if window is None or rows is None:
            return mirror.archives.store(key, Cached(None, text), now)
        exported = export_archive(
            screen_of_rows(rows, state.width),
            ArchiveWindow(0, len(rows), window.row_offset),
            rows=state.height,
            viewport_text=text,
            frame=capture.data,
        )
        return mirror.archives.store(key, exported, now)

    async def _archive_rows(
        self, pane: _Pane, window: ArchiveWindow, state: PaneState
    ) -> list[bytes] | None:
        """Rows ``window`` of the history the scroll saw, with their attributes.

        Output since the scroll lengthened the live history under the frozen
        copy-mode view: the same rows now sit that much further up. The
        history size is read in the same tmux command as the rows, so a
        mismatch is seen and the capture made once more from the new size.
        """
        target = pane.row.pane_id
        history = state.history_size
        for _ in range(2):
            output = await self.run_tmux(
                "display-message", "-p", "-t", target, "#{history_size}", ";",
                "capture-pane", "-p", "-e", "-t", target,
                "-S", str(window.start - history), "-E", str(window.stop - 1 - history),
            )  # fmt: skip
            first, _, rest = output.partition("\n")
            try:
                now_history = int(first)
            except ValueError:
                return None
            if now_history == history:
                rows = rest.split("\n")[: window.rows]
                return [row.encode() for row in rows] if len(rows) == window.rows else None
            history = now_history
        return None

    def _bounds(self, mirror: _Mirror, screen: Screen) -> ScrollBounds:
        state = mirror.state
        if state is None or screen.on_alternate_screen or screen.mouse_captured:
            return ScrollBounds()
        if not state.in_mode:
            return ScrollBounds(at_top=state.history_size == 0, at_bottom=True)
        return ScrollBounds(
            at_top=state.scroll_position >= state.history_size,
            at_bottom=state.scroll_position == 0,
        )

    async def write(self, pane_id: UUID, data: bytes) -> None:
        """``send-keys -H``: the bytes reach the program unchanged (copy mode is left first)."""
        pane = self._pane(pane_id)
        self.input_activity.note(pane_id, time.monotonic())
        target = pane.row.pane_id
        mirror = self.mirrors.live(pane_id)
        if mirror is not None and mirror.viewport is not None:
            await self.leave_copy_mode(pane_id)
        for start in range(0, len(data), _SEND_CHUNK):
            chunk = data[start : start + _SEND_CHUNK]
            await self.run_tmux("send-keys", "-H", "-t", target, *(f"{b:02x}" for b in chunk))

    # ------------------------------------------------------------ for commands

    def pane_row(self, pane_id: UUID) -> PaneRow:
        """The pane's row of the last listing.

        Raises:
            PaneNotFound: it is not listed.
        """
        return self._pane(pane_id).row

    def pane_rows(self) -> list[tuple[UUID, PaneRow]]:
        """Every listed pane with its row, in listing order."""
        return [(pane.uuid, pane.row) for pane in self._panes.values()]

    def pane_screen(self, pane_id: UUID) -> Screen | None:
        """The pane's mirrored screen while somebody watches it, else ``None``."""
        self._pane(pane_id)
        mirror = self.mirrors.live(pane_id)
        return mirror.screen if mirror is not None else None

    async def leave_copy_mode(self, pane_id: UUID) -> None:
        """Back to the live pane if it is scrolled back (copy mode would take keys)."""
        pane = self._pane(pane_id)
        await self.run_tmux("send-keys", "-X", "-t", pane.row.pane_id, "cancel")
        await self._scrolled(pane_id)

    async def scroll(self, pane_id: UUID, direction: ScrollDirection) -> None:
        """Page through tmux's history in copy mode by rows − 3 lines."""
        pane = self._pane(pane_id)
        target = pane.row.pane_id
        lines = str(max(1, pane.row.height - 3))
        if direction is ScrollDirection.UP:
            await self.run_tmux(
                "copy-mode", "-e", "-t", target, ";",
                "send-keys", "-X", "-t", target, "-N", lines, "scroll-up",
            )  # fmt: skip
        else:
            mirror = self.mirrors.live(pane_id)
            if mirror is not None and mirror.viewport is not None:
                await self.run_tmux("send-keys", "-X", "-t", target, "-N", lines, "scroll-down")
        await self._scrolled(pane_id)

    async def _scrolled(self, pane_id: UUID) -> None:
        """A watched pane's scroll state and copy-mode view, read again (a scroll or its end)."""
        mirror = self.mirrors.live(pane_id)
        if mirror is None:
            return  # nobody sees it: the next seed reads its state
        await self._update_scroll(mirror)
        mirror.changed()

    async def _update_scroll(self, mirror: _Mirror) -> None:
        target = mirror.pane.row.pane_id
        state = parse_pane_state(
            await self.run_tmux("display-message", "-p", "-t", target, PANE_STATE_FORMAT)
        )
        if state is None:
            return
        mirror.state = state
        if not state.in_mode or state.scroll_position == 0:
            mirror.viewport = None
            return
        top = -state.scroll_position
        bottom = top + state.height - 1
        text = await self.run_tmux(
            "capture-pane", "-p", "-e", "-t", target, "-S", str(top), "-E", str(bottom)
        )
        rows = [row.encode() for row in text.split("\n")[: state.height]]
        rows += [b""] * (state.height - len(rows))
        mirror.viewport = screen_of_rows(rows, max(1, state.width)).viewport_overlay()

    async def history(self, pane_id: UUID) -> HistoryCapture:
        """``capture-pane -J -S -``: all of tmux's history and the screen, styles stripped."""
        pane = self._pane(pane_id)
        text = await self.run_tmux(
            "capture-pane", "-p", "-J", "-S", "-", "-E", "-", "-t", pane.row.pane_id
        )
        return HistoryCapture(text=text.rstrip("\n"))
