"""A faithful fake agliteterm (or agwinterm) control API on a Unix socket, for tests. I/O.

agliteterm is Windows-only; this fake speaks its control API as
``/work/shared/spec/agliteterm.md`` and ``spec/sources/agliteterm-control-api.txt``
record it, quirks included, over a Unix socket (how a WSL host reaches it
through npiperelay and socat):

* newline-delimited JSON, several requests per connection answered strictly in
  turn, no ids; empty lines skipped, a trailing ``\\r`` dropped; replies are
  compact ASCII JSON ending in ``\\n`` (``dialect="lite"``) or ``\\r\\n``
  (``dialect="full"``, .NET's ``WriteLineAsync``);
* **lite's request parser**, ported: one nesting level flattened into
  ``args.<key>``, scalars kept as raw text (``true``, ``1``), arrays skipped,
  only spaces and tabs skipped as whitespace; ``allow-control`` counts only as
  ``true`` or ``1``; the full app reads real JSON;
* the error texts: lite ``invalid JSON``, ``unknown command 'x' (lite
  subset)``, ``session not found``; full ``invalid json: …``, ``unknown
  command 'x'``, ``no session``;
* ``tree`` (lite nodes carry ``cols``/``rows``; full nodes do not and the full
  app answers ``session.metrics`` instead), ``events {since, limit}`` over a
  1000-entry ring whose cursor restarts at 0 with :meth:`restart`;
* ``session.text``: plain (lite's bare form is the whole buffer, the full
  app's the screen) or ``styles:true`` rows of runs with grid ``col``/``width``
  (a wide glyph: two cells, one character), six flags, ``default``/``idx:N``/
  ``#rrggbb`` colours, trailing spaces trimmed, trailing blank rows omitted,
  scrollback rows negative, ``lines:N``/``all:true``;
* ``session.type`` (``\\n`` → ``\\r``, control bytes refused without
  ``allow-control``) and ``session.paste`` (CRLF/LF → CR, bracketed when the
  program turned bracketed paste on, and **an empty or missing text pastes
  the clipboard**, counted in :attr:`FakeAgliteterm.clipboard_pastes`);
  :meth:`refuse_input` makes the next input refused the way lite's bounded
  writer refuses (busy or reserved, ``N of M bytes written``, in flight);
* :meth:`drop_reply`: the next request of a verb is carried out, then its
  connection is cut before the answer (agliteterm, or the relay in between,
  dying at that moment), so a client cannot know whether it was done.

**Releases.** By default the fake is the newer, unreleased code the control
API page describes (agliteterm about 0.17.14, agwinterm about 0.17.12).
``release="0.17.7"`` (lite) is the agliteterm release users have, and
``release="0.17.5"`` (full) the agwinterm release; each differs as its source
does (``yeroo/agliteterm:src/main.cpp`` at v0.17.7 ``ctlDispatch``;
``yeroo/agwinterm:src/Agwinterm.Pty/ControlServer.cs``,
``src/Agwinterm.Win32/Program.ControlHost.cs`` and ``Program.Sessions.cs`` at
de6fdb9):

* ``ping``: ``agliteterm 0.1`` (0.17.7), ``agwinterm 0.17.5``;
* ``tree``: no ``cols``, ``rows`` nor ``statusChangedAt`` in either release;
  agwinterm's workspace ids are GUIDs and its statuses
  ``idle|active|blocked|completed`` (``HandleStatus`` maps every other word to
  ``idle``);
* ``session.text`` ignores its arguments: 0.17.7 answers the whole buffer as
  plain text (``dumpBufferText``: each row's trailing spaces trimmed, a run of
  trailing empty rows cut to one line break), agwinterm 0.17.5 the screen
  (``HandleText``: rows trimmed, trailing empty rows dropped); no styles;
* no ``surface.cursor`` and no ``session.metrics`` (``unknown command``);
* ``session.type`` refuses nothing (no ``allow-control`` check, no bounded
  writer); agwinterm 0.17.5 pastes the clipboard only for a missing text;
* ``session.new``: see **Creating a session** below.

**Creating a session** (``session.new``), as each release does it:

* agliteterm (every version) selects the new session in the window's focused
  pane (0.17.7: ``g_pane[g_focus] = new``); 0.17.7 puts it in the window's
  active workspace whatever ``workspace`` says (``attachSession``), newer
  builds honour ``workspace``; a ``command`` runs as
  ``powershell.exe -NoExit -Command <command>`` (newer: ``-NoLogo`` too), read
  as PowerShell reads it (``tests/fakes/launch_words.py``);
* agwinterm answers the new id at once and creates the session a moment later
  on its UI thread (``NewSession`` posts it); it selects the session unless
  ``no-select`` is sent (``CreateSession(makeActive: !noSelect)``) or nothing
  was selected; 0.17.5 runs a ``command`` as an argv split by ``ParseArgv``,
  newer builds like agliteterm through PowerShell.

What each created session ran is kept in :attr:`FakeAgliteterm.launched`.

Every session is a real program in a real PTY whose output feeds a libghostty
:class:`~mirror_host.terminal.Screen` (which answers the program's terminal
queries); the styled rows are read back from that screen's VT formatter.

Tests drive it from Python::

    fake = FakeAgliteterm(socket_path, dialect="lite")
    await nursery.start(fake.serve)
    workspace = fake.add_workspace("work")
    session = await fake.add_session(workspace, "bash --norc", name="api")
    fake.set_status(session, "idle")
    fake.requests_for("session.text", target=session)   # what clients sent
    fake.delay("session.text", 10.0)                    # a slow agliteterm
    await fake.restart()                                # cursor back to 0, clients cut off
    await fake.stop()

Run by hand: ``python -m tests.fakes.agliteterm_fake --socket /tmp/a.sock --session bash``.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import logging
import os
import re
import shlex
import signal
import struct
import subprocess
import sys
import termios
import time
import uuid
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import trio
from pyghostty.core import init_sized

from mirror_host.panes.lines import LineSplitter
from mirror_host.terminal import Screen
from mirror_host.width import char_width
from tests.fakes.launch_words import Unsupported, agwinterm_argv, powershell_argvs

__all__ = ["FakeAgliteterm", "main", "parse_lite_request"]

logger = logging.getLogger(__name__)

_EVENT_RING = 1000
_READ_BYTES = 65_536
_MAX_REQUEST = 8 * 1024 * 1024
_REPLY_QUEUE = 256
_ESC_SGR = re.compile(rb"\x1b\[([0-9;:]*)m")
_ESC_OTHER = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
_PASTE_START, _PASTE_END = "\x1b[200~", "\x1b[201~"

INPUT_REFUSALS = ("busy", "partial", "in_flight", "unknown")
#: The releases modelled beside the newer code (module docstring).
RELEASES = {"lite": "0.17.7", "full": "0.17.5"}
#: Verbs the releases do not have (0.17.7 ctlDispatch; agwinterm 0.17.5 ControlServer).
_MISSING_IN_RELEASE = frozenset({"surface.cursor", "session.metrics"})


# ---------------------------------------------------------------- lite's parser


class _NotJson(Exception):
    pass


def _lite_string(text: str, i: int) -> tuple[str, int]:
    if i >= len(text) or text[i] != '"':
        raise _NotJson
    i += 1
    out: list[str] = []
    while i < len(text) and text[i] != '"':
        char = text[i]
        i += 1
        if char == "\\" and i < len(text):
            escape = text[i]
            i += 1
            if escape == "u":
                if i + 4 > len(text):
                    raise _NotJson
                code = int(text[i : i + 4], 16)
                i += 4
                if 0xD800 <= code <= 0xDBFF and text[i : i + 2] == "\\u":
                    low = int(text[i + 2 : i + 6], 16)
                    i += 6
                    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                out.append(chr(code))
            else:
                out.append(
                    {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f"}.get(escape, escape)
                )
        else:
            out.append(char)
    if i >= len(text):
        raise _NotJson
    return "".join(out), i + 1


def _lite_skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t":
        i += 1
    return i


def _lite_object(text: str, i: int, prefix: str, fields: dict[str, str]) -> int:
    i = _lite_skip(text, i)
    if i >= len(text) or text[i] != "{":
        raise _NotJson
    i += 1
    while True:
        i = _lite_skip(text, i)
        if i < len(text) and text[i] == "}":
            return i + 1
        key, i = _lite_string(text, i)
        i = _lite_skip(text, i)
        if i >= len(text) or text[i] != ":":
            raise _NotJson
        i = _lite_skip(text, i + 1)
        if i >= len(text):
            raise _NotJson
        if text[i] == '"':
            fields[prefix + key], i = _lite_string(text, i)
        elif text[i] == "{":
            i = _lite_object(text, i, f"{prefix}{key}.", fields)
        elif text[i] == "[":
            depth = 0
            while True:
                if text[i] == "[":
                    depth += 1
                elif text[i] == "]":
                    depth -= 1
                elif text[i] == '"':
                    _, i = _lite_string(text, i)
                    continue
                i += 1
                if i >= len(text) or depth == 0:
                    break
        else:
            start = i
            while i < len(text) and text[i] not in ",}":
                i += 1
            fields[prefix + key] = text[start:i].rstrip(" \t")
        i = _lite_skip(text, i)
        if i < len(text) and text[i] == ",":
            i += 1


def parse_lite_request(line: str) -> dict[str, str] | None:
    """lite's reading of a request line: flat fields, scalars as raw text; ``None`` if invalid."""
    fields: dict[str, str] = {}
    try:
        _lite_object(line, 0, "", fields)
    except (_NotJson, ValueError, IndexError):
        return None
    return fields


# ---------------------------------------------------------------- styled rows


@dataclass
class _Pen:
    bold: bool = False
    faint: bool = False
    italic: bool = False
    underline: bool = False
    inverse: bool = False
    strike: bool = False
    fg: str = "default"
    bg: str = "default"

    def copy(self) -> _Pen:
        return _Pen(**self.__dict__)


def _take_colour(params: list[str], index: int) -> tuple[str | None, int]:
    """A ``38;5;N`` / ``38;2;R;G;B`` colour starting at ``params[index]`` (the 5 or 2)."""
    if index < len(params) and params[index] == "5" and index + 1 < len(params):
        return f"idx:{int(params[index + 1] or 0)}", index + 2
    if index < len(params) and params[index] == "2" and index + 3 < len(params):
        red, green, blue = (int(p or 0) for p in params[index + 1 : index + 4])
        return f"#{red:02x}{green:02x}{blue:02x}", index + 4
    return None, len(params)


def _sgr(pen: _Pen, raw: str) -> None:
    params = [p.split(":")[0] for p in raw.split(";")] if raw else ["0"]
    index = 0
    while index < len(params):
        code = int(params[index] or 0)
        index += 1
        if code == 0:
            pen.__init__()  # type: ignore[misc]
        elif code in (1, 2, 3, 4, 7, 9):
            setattr(pen, {1: "bold", 2: "faint", 3: "italic", 4: "underline",
                          7: "inverse", 9: "strike"}[code], True)  # fmt: skip
        elif code == 22:
            pen.bold = pen.faint = False
        elif code in (23, 24, 27, 29):
            setattr(pen, {23: "italic", 24: "underline", 27: "inverse", 29: "strike"}[code], False)
        elif 30 <= code <= 37 or 90 <= code <= 97:
            pen.fg = f"idx:{code - 30 if code < 90 else code - 82}"
        elif 40 <= code <= 47 or 100 <= code <= 107:
            pen.bg = f"idx:{code - 40 if code < 100 else code - 92}"
        elif code in (38, 48):
            colour, index = _take_colour(params, index)
            if colour is not None:
                setattr(pen, "fg" if code == 38 else "bg", colour)
        elif code == 39:
            pen.fg = "default"
        elif code == 49:
            pen.bg = "default"


Cell = tuple[str, int, _Pen]


def _cells_of(line: bytes) -> list[Cell]:
    """One formatted row as cells ``(char, width, pen)`` (a wide glyph: width 2)."""
    cells: list[Cell] = []
    pen = _Pen()
    position = 0
    for match in _ESC_SGR.finditer(line):
        cells += _text_cells(line[position : match.start()], pen)
        _sgr(pen, match.group(1).decode())
        position = match.end()
    cells += _text_cells(line[position:], pen)
    return cells


def _text_cells(chunk: bytes, pen: _Pen) -> list[Cell]:
    text = _ESC_OTHER.sub(b"", chunk).decode("utf-8", "replace")
    out: list[Cell] = []
    for char in text:
        width = char_width(char)
        if width == 0:
            continue
        out.append((char, width, pen.copy()))
    return out


def _runs(cells: list[Cell]) -> list[dict[str, Any]]:
    """lite's runs: trimmed after the last non-space cell, equal styles merged."""
    limit = 0
    for index, (char, _, _) in enumerate(cells):
        if char != " ":
            limit = index + 1
    runs: list[dict[str, Any]] = []
    col = 0
    for char, width, pen in cells[:limit]:
        style = pen.__dict__
        last = runs[-1] if runs else None
        if last is not None and all(last[k] == v for k, v in style.items()):
            last["text"] += char
            last["width"] += width
        else:
            runs.append({"col": col, "width": width, "text": char, **_ordered(style)})
        col += width
    return runs


def _ordered(style: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("faint", "bold", "italic", "underline", "inverse", "strike", "fg", "bg")
    return {key: style[key] for key in keys}


# ---------------------------------------------------------------- model


def _set_controlling_tty() -> None:  # pragma: no cover - runs in the child
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


@dataclass(eq=False)
class _Session:
    id: str
    name: str
    workspace: int
    columns: int
    rows: int
    process: subprocess.Popen[bytes]
    master_fd: int
    master: trio.lowlevel.FdStream
    screen: Screen
    replies: tuple[trio.MemorySendChannel[bytes], trio.MemoryReceiveChannel[bytes]]
    status: str = ""
    status_changed_at: int = field(default_factory=lambda: int(time.time()))
    exited: bool = False
    received: bytearray = field(default_factory=bytearray)
    write_lock: trio.Lock = field(default_factory=trio.Lock)
    refusals: deque[str] = field(default_factory=deque)
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)

    def rows_of(self, first: int, last: int) -> list[bytes]:
        """Buffer rows ``first … last`` (0 = the oldest retained), as the VT formatter writes them."""
        if last < first:
            return []
        terminal = self.screen._terminal
        selection = init_sized("GhosttySelection")
        selection.start = terminal.ref(0, first, "screen")[0]
        selection.end = terminal.ref(self.columns - 1, last, "screen")[0]
        data: bytes = self.screen._vt(selection, cursor=False, hyperlink=False)
        rows = data.split(b"\r\n")
        return (rows + [b""] * (last - first + 1))[: last - first + 1]

    @property
    def history(self) -> int:
        total, _, _ = self.screen.scrollbar
        return max(0, total - self.rows)


@dataclass(eq=False)
class _Delay:
    seconds: float
    released: trio.Event = field(default_factory=trio.Event)


class FakeAgliteterm:
    """One agliteterm window's control API on a Unix socket; sessions are real PTYs."""

    def __init__(
        self,
        socket_path: str | os.PathLike[str],
        *,
        dialect: str = "lite",
        columns: int = 80,
        rows: int = 24,
        version: str | None = None,
        has_events: bool = True,
        has_styles: bool = True,
        has_lines: bool = True,
        release: str | None = None,
        create_delay: float = 0.05,
    ) -> None:
        if dialect not in ("lite", "full"):
            raise ValueError(f"dialect is lite or full, not {dialect!r}")
        if release not in (None, RELEASES[dialect]):
            raise ValueError(f"the {dialect} release modelled is {RELEASES[dialect]}")
        self.socket_path = os.fspath(socket_path)
        self.dialect = dialect
        #: ``None``: the newer, unreleased code; else the release (lite 0.17.7, full 0.17.5).
        self.release = release
        self.columns = columns
        self.rows = rows
        default_version = {
            ("lite", None): "agliteterm 0.17.14",
            ("lite", "0.17.7"): "agliteterm 0.1",  # 0.17.7 ctlDispatch: ping
            ("full", None): "agwinterm 0.17.12",
            ("full", "0.17.5"): "agwinterm 0.17.5",  # ControlServer: "agwinterm " + AppVersion()
        }
        self.version = version or default_version[(dialect, release)]
        self.has_events = has_events
        self.has_styles = has_styles and release is None
        self.has_lines = has_lines
        #: The full app posts a new session to its UI thread: it is listed this much later.
        self.create_delay = create_delay
        self.workspaces: list[str] = []
        #: The workspaces' ids as ``tree`` reports them (lite: indexes, full: GUIDs).
        self.workspace_ids: list[str] = []
        self.sessions: dict[str, _Session] = {}
        #: The session the window shows: lite's focused pane, the full app's ``_active``.
        self.active: str | None = None
        #: lite's ``g_activeWs`` (the full app's follows its active session).
        self.active_workspace = 0
        #: What each session created by ``session.new`` ran: one argv per program.
        self.launched: dict[str, list[list[str]]] = {}
        self.requests: list[dict[str, Any]] = []
        self.clipboard = "CLIPBOARD CONTENTS"
        self.clipboard_pastes = 0
        self._events: deque[dict[str, Any]] = deque(maxlen=_EVENT_RING)
        self._seq = 0
        self._next_id = 1
        self._delays: dict[str, _Delay] = {}
        self._drops: dict[str, int] = {}
        #: Client connections open now (what a host keeps open on agliteterm).
        self.connections_open = 0
        self._nursery: trio.Nursery | None = None
        self._connections: trio.Nursery | None = None
        self._stopped = trio.Event()

    # ------------------------------------------------------------ driving it

    @property
    def old(self) -> bool:
        """Whether this is a release (0.17.7, 0.17.5) rather than the newer code."""
        return self.release is not None

    def add_workspace(self, name: str) -> str:
        """A workspace; its id as ``tree`` reports it (lite: its index, full: a GUID)."""
        self.workspaces.append(name)
        # lite: the index (main.cpp tree, std::to_string(w)); full: a GUID
        # (ControlHost.NewWorkspace: Guid.NewGuid()).
        self.workspace_ids.append(
            str(len(self.workspaces) - 1) if self.dialect == "lite" else str(uuid.uuid4())
        )
        self._emit("tree")
        return self.workspace_ids[-1]

    def select(self, session_id: str) -> None:
        """The operator clicks a session: the window shows it (and its workspace)."""
        self.active = session_id
        self.active_workspace = self.sessions[session_id].workspace
        self._emit("tree")

    async def add_session(
        self,
        workspace: str,
        command: str,
        *,
        name: str | None = None,
        columns: int | None = None,
        rows: int | None = None,
        env: Mapping[str, str] | None = None,
    ) -> str:
        """Start ``command`` (run by ``sh -c``) in a new session; its id.

        The window's selection stays (the first session is selected when there
        was none)."""
        if self._nursery is None:
            raise RuntimeError("start serving first")
        index = self.workspace_ids.index(workspace)
        session = self._spawn(index, ["/bin/sh", "-c", command], name, columns, rows, env)
        self._emit("session", session.id, "created")
        return session.id

    def set_status(self, session_id: str, status: str) -> None:
        """What an agent's hook reports (``session.status``): stamps and emits.

        agwinterm 0.17.5 keeps one of four statuses (``HandleStatus``)."""
        session = self.sessions[session_id]
        if self.dialect == "full" and self.old:
            word = status.lower()
            status = {"active": "active", "blocked": "blocked", "completed": "completed",
                      "complete": "completed", "done": "completed"}.get(word, "idle")  # fmt: skip
        session.status = status
        session.status_changed_at = int(time.time())
        self._emit("status", session_id, status)

    def rename(self, session_id: str, name: str) -> None:
        self.sessions[session_id].name = name
        self._emit("tree")

    async def close_session(self, session_id: str) -> None:
        """Close a session as ``session close`` does: its program ends, it leaves the tree."""
        session = self.sessions.pop(session_id, None)
        if session is None:
            return
        if self.active == session_id:
            self.active = next(iter(self.sessions), None)
        session.scope.cancel()
        await self._reap(session)
        self._emit("session", session_id, "closed")

    def refuse_input(self, session_id: str, kind: str, count: int = 1) -> None:
        """The next ``count`` type/paste calls on the session are refused as lite's
        bounded writer does: ``busy`` (nothing written), ``partial`` (the first
        half written, ``N of M bytes written``), ``in_flight``, or ``unknown``."""
        if kind not in INPUT_REFUSALS:
            raise ValueError(kind)
        self.sessions[session_id].refusals.extend([kind] * count)

    def delay(self, cmd: str, seconds: float) -> None:
        """Hold the answers to ``cmd`` for ``seconds`` (``inf``: never answer)."""
        self._delays[cmd] = _Delay(seconds)

    def drop_reply(self, cmd: str, count: int = 1) -> None:
        """Carry out the next ``count`` ``cmd`` requests, then cut each one's
        connection instead of answering."""
        self._drops[cmd] = self._drops.get(cmd, 0) + count

    def clear_delay(self, cmd: str | None = None) -> None:
        for name in [cmd] if cmd else list(self._delays):
            delay = self._delays.pop(name, None)
            if delay is not None:
                delay.released.set()

    async def restart(self) -> None:
        """agliteterm restarted: every client connection is cut and the event log
        begins again at cursor 0; the sessions (in the shared pty-host) live on."""
        self._events.clear()
        self._seq = 0
        if self._connections is not None:
            self._connections.cancel_scope.cancel()
            self._connections = None
        self._emit("tree")

    def screen(self, session_id: str) -> Screen:
        return self.sessions[session_id].screen

    def received_input(self, session_id: str) -> bytes:
        return bytes(self.sessions[session_id].received)

    def requests_for(self, cmd: str, *, target: str | None = None) -> list[dict[str, Any]]:
        return [
            r
            for r in self.requests
            if r["cmd"] == cmd and (target is None or r["target"] == target)
        ]

    @property
    def cursor(self) -> int:
        return self._seq

    # ------------------------------------------------------------ serving

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Listen until cancelled or stopped; kill every session on the way out."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.socket_path)
        sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
        await sock.bind(self.socket_path)
        os.chmod(self.socket_path, 0o600)
        sock.listen(64)
        listener = trio.SocketListener(sock)
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._accept, listener)
                task_status.started()
        finally:
            self._nursery = None
            with trio.CancelScope(shield=True):
                await listener.aclose()
                for session in list(self.sessions.values()):
                    await self._reap(session)
                self.sessions.clear()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.socket_path)
            self._stopped.set()

    async def stop(self) -> None:
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()
            await self._stopped.wait()

    async def _accept(self, listener: trio.SocketListener) -> None:
        while True:
            stream = await listener.accept()
            if self._connections is None:  # the first, or the first since a restart
                assert self._nursery is not None
                self._connections = await self._nursery.start(self._connection_pool)
            self._connections.start_soon(self._connection, stream)

    @staticmethod
    async def _connection_pool(task_status: trio.TaskStatus[trio.Nursery]) -> None:
        async with trio.open_nursery() as nursery:
            task_status.started(nursery)
            await trio.sleep_forever()

    async def _connection(self, stream: trio.SocketStream) -> None:
        splitter = LineSplitter(_MAX_REQUEST)
        ending = b"\n" if self.dialect == "lite" else b"\r\n"
        self.connections_open += 1
        try:
            await self._serve_connection(stream, splitter, ending)
        finally:
            self.connections_open -= 1

    async def _serve_connection(
        self, stream: trio.SocketStream, splitter: LineSplitter, ending: bytes
    ) -> None:
        async with stream:
            while True:
                try:
                    chunk = await stream.receive_some(_READ_BYTES)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return
                if not chunk:
                    return
                for raw in splitter.feed(chunk):
                    line = raw.rstrip(b"\r")
                    if not line.strip():
                        continue
                    reply = await self._answer(line)
                    if reply is None:
                        return  # done, but the answer never leaves
                    try:
                        await stream.send_all(reply + ending)
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        return

    # ------------------------------------------------------------ requests

    def _ok(self, result: Any) -> bytes:
        return json.dumps({"ok": True, "result": result}, separators=(",", ":")).encode()

    def _err(self, message: str) -> bytes:
        return json.dumps({"ok": False, "error": message}, separators=(",", ":")).encode()

    def _read(self, line: bytes) -> tuple[str, str, dict[str, Any]] | bytes:
        """``(cmd, target, args)``, or the error reply for a line that does not parse."""
        text = line.decode("utf-8", "replace")
        if self.dialect == "lite":
            fields = parse_lite_request(text)
            if fields is None:
                return self._err("invalid JSON")
            args = {k[5:]: v for k, v in fields.items() if k.startswith("args.")}
            return fields.get("cmd", ""), fields.get("target", ""), args
        try:
            request = json.loads(text)
        except json.JSONDecodeError as exc:
            return self._err(f"invalid json: {exc.msg}")
        if not isinstance(request, dict):
            return self._err("invalid json: not an object")
        args = request.get("args") if isinstance(request.get("args"), dict) else {}
        target = request.get("target")
        return str(request.get("cmd", "")), target if isinstance(target, str) else "", args

    async def _answer(self, line: bytes) -> bytes | None:
        """The reply to ``line``; ``None``: carried out, but the connection is cut."""
        parsed = self._read(line)
        if isinstance(parsed, bytes):
            return parsed
        cmd, target, args = parsed
        reply = await self._carry_out(cmd, target, args)
        if self._drops.get(cmd):
            self._drops[cmd] -= 1
            return None
        return reply

    async def _carry_out(self, cmd: str, target: str, args: dict[str, Any]) -> bytes:
        self.requests.append({"cmd": cmd, "target": target or None, "args": args})
        delay = self._delays.get(cmd)
        if delay is not None:
            with trio.move_on_after(delay.seconds):
                await delay.released.wait()
        handler = getattr(self, "_cmd_" + cmd.replace(".", "_"), None)
        missing = (cmd == "session.metrics" and self.dialect == "lite") or (
            self.old and cmd in _MISSING_IN_RELEASE
        )
        if handler is None or missing:
            suffix = " (lite subset)" if self.dialect == "lite" else ""
            return self._err(f"unknown command '{cmd}'{suffix}")
        if cmd == "events" and not self.has_events:
            return self._err(f"unknown command '{cmd}' (lite subset)")
        try:
            return self._ok(await handler(target, args))
        except _Refused as refused:
            return self._err(refused.message)

    def _flag(self, args: Mapping[str, Any], key: str) -> bool:
        value = args.get(key)
        if self.dialect == "lite":
            return value in ("true", "1")
        return value is True

    def _number(self, args: Mapping[str, Any], key: str) -> int | None:
        value = args.get(key)
        if value is None:
            return None
        if self.dialect == "lite":
            if not isinstance(value, str) or not value.isdigit():
                raise _Refused(f"--{key} needs a whole number, not {value!r}")
            return int(value)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise _Refused(f"--{key} needs a whole number")
        return value

    def _target(self, target: str) -> _Session:
        if not target or target == "active":
            found = self.sessions.get(self.active or "")
        else:
            found = self.sessions.get(target) or next(
                (s for i, s in self.sessions.items() if len(target) >= 4 and i.startswith(target)),
                None,
            )
        if found is None:
            raise _Refused("session not found" if self.dialect == "lite" else "no session")
        return found

    async def _cmd_ping(self, target: str, args: dict[str, Any]) -> Any:
        return self.version

    async def _cmd_window_list(self, target: str, args: dict[str, Any]) -> Any:
        return {
            "windows": [{"id": "agliteterm", "name": "agliteterm", "open": True, "active": True}]
        }

    async def _cmd_tree(self, target: str, args: dict[str, Any]) -> Any:
        workspaces = []
        shown = self.sessions.get(self.active or "")
        for index, name in enumerate(self.workspaces):
            nodes = []
            for session in self.sessions.values():
                if session.workspace != index:
                    continue
                node: dict[str, Any] = {
                    "id": session.id,
                    "name": session.name,
                    "active": session.id == self.active,
                    "status": session.status,
                }
                if not self.old:  # newer builds stamp the status (0.17.7, 0.17.5: not)
                    node["statusChangedAt"] = session.status_changed_at
                    title = session.screen.title
                    if self.dialect == "full" and title:  # newer agwinterm: the terminal's
                        node["title"] = title  # title (spec/agliteterm.md, "size" row)
                if self.dialect == "lite":
                    node.update(flagged=False, exited=session.exited, failed=False, unread=0)
                    if not self.old:  # the grid: newer lite only
                        node.update(cols=session.columns, rows=session.rows)
                nodes.append(node)
            record: dict[str, Any] = {"id": self.workspace_ids[index], "name": name}
            if self.dialect == "lite":  # w == g_activeWs, w == g_focusWs
                record.update(active=index == self.active_workspace, focused=False)
            else:  # the workspace of the active session (ControlHost.Tree)
                record["active"] = shown is not None and shown.workspace == index
            record["sessions"] = nodes
            workspaces.append(record)
        return {"workspaces": workspaces}

    async def _cmd_events(self, target: str, args: dict[str, Any]) -> Any:
        since = args.get("since", 0)
        limit = args.get("limit", 0)
        if self.dialect == "lite":  # atoll / atoi: whatever digits lead
            since = int(re.match(r"-?\d*", str(since)).group() or 0)  # type: ignore[union-attr]
            limit = int(re.match(r"-?\d*", str(limit)).group() or 0)  # type: ignore[union-attr]
        events = [e for e in self._events if e["seq"] > int(since)]
        if int(limit) > 0:
            events = events[: int(limit)]
        return {"cursor": self._seq, "events": events}

    async def _cmd_session_metrics(self, target: str, args: dict[str, Any]) -> Any:
        session = self._target(target)
        return {"cols": session.columns, "rows": session.rows, "cellWidth": 9, "cellHeight": 18,
                "widthPx": session.columns * 9, "heightPx": session.rows * 18}  # fmt: skip

    async def _cmd_surface_cursor(self, target: str, args: dict[str, Any]) -> Any:
        return self._target(target).screen.cursor[0]

    async def _cmd_session_status(self, target: str, args: dict[str, Any]) -> Any:
        session = self._target(target)
        if not args.get("status"):
            raise _Refused("session status needs a state")
        self.set_status(session.id, str(args["status"]))
        return "status set"

    async def _cmd_session_close(self, target: str, args: dict[str, Any]) -> Any:
        await self.close_session(self._target(target).id)
        return "closed"

    async def _cmd_session_select(self, target: str, args: dict[str, Any]) -> Any:
        # agliteterm main.cpp (v0.17.7) session.select: g_pane[g_focus] = target;
        # agwinterm ControlHost.SelectSession (0.17.5): SetActive.
        self.select(self._target(target).id)
        return "selected"

    def _workspace_for_new(self, wanted: str) -> int:
        """Where ``session.new`` puts the session (module docstring)."""
        if self.dialect == "lite":
            if self.old or not wanted:  # 0.17.7 attachSession: the active workspace
                return self.active_workspace
            if wanted not in self.workspace_ids:
                raise _Refused(f"no workspace '{wanted}' (ids are the indices `tree` reports)")
            return self.workspace_ids.index(wanted)
        # Full app: an exact id, else a prefix, else the active workspace
        # (agwinterm src/Agwinterm.Win32/Program.ControlHost.cs NewSession, 0.17.5).
        for index, known in enumerate(self.workspace_ids):
            if wanted and known == wanted:
                return index
        for index, known in enumerate(self.workspace_ids):
            if wanted and known.startswith(wanted):
                return index
        shown = self.sessions.get(self.active or "")
        return shown.workspace if shown is not None else 0

    def _programs(self, command: str) -> tuple[list[list[str]], list[str]]:
        """What a ``session.new`` ``command`` runs: the programs (each an argv) and the
        argv started in the pane (a shell script running them in turn)."""
        if not command.strip():
            shell = ["/bin/sh", "-c", "exec bash --norc --noprofile -i"]
            return [], shell
        if self.dialect == "full" and self.old:
            # agwinterm 0.17.5 Program.Sessions.cs CreatePane: ParseArgv, no shell, no -NoExit.
            argv = agwinterm_argv(command)
            return [argv], argv
        # agliteterm main.cpp (v0.17.7) session.new: powershell.exe -NoExit -Command
        # <command>; newer (src/session_command.h, agwinterm SessionCommand.cs): -NoLogo too.
        try:
            programs = powershell_argvs(command)
        except Unsupported as exc:
            script = f"echo 'PowerShell: {exc}'; exec bash --norc --noprofile -i"
            return [], ["/bin/sh", "-c", script]
        # -NoExit: the interactive shell stays once the programs have run.
        lines = [" ".join(shlex.quote(word) for word in argv) for argv in programs]
        script = "; ".join([*lines, "exec bash --norc --noprofile -i"])
        return programs, ["/bin/sh", "-c", script]

    async def _cmd_session_new(self, target: str, args: dict[str, Any]) -> Any:
        workspace = self._workspace_for_new(str(args.get("workspace") or ""))
        name = str(args.get("name") or "") or None
        programs, argv = self._programs(str(args.get("command") or ""))
        if self.dialect == "lite":
            # Created before the answer, then shown in the focused pane (every version):
            # main.cpp (v0.17.7) session.new, newSession, g_pane[g_focus] = new.
            session = self._spawn(workspace, argv, name, None, None, None)
            self.launched[session.id] = programs
            self._emit("session", session.id, "created")
            self._emit("tree")
            self.active = session.id
            return session.id
        # agwinterm ControlServer.cs (0.17.5): the id comes back at once, NewSession
        # Posts the creation to the UI thread, CreateSession(makeActive: !noSelect).
        session_id = str(uuid.uuid4())
        select = not self._flag(args, "no-select")

        async def on_the_ui_thread() -> None:
            await trio.sleep(self.create_delay)
            nothing_shown = self.active is None  # then it is shown whatever was asked
            self._spawn(workspace, argv, name, None, None, None, session_id=session_id)
            self.launched[session_id] = programs
            if select or nothing_shown:
                self.active = session_id
            self._emit("session", session_id, "created")
            self._emit("tree")

        assert self._nursery is not None
        self._nursery.start_soon(on_the_ui_thread)
        return session_id

    async def _cmd_session_text(self, target: str, args: dict[str, Any]) -> Any:
        if self.old:
            return self._released_text(self._target(target))
        if "lines" in args and not self.has_lines:
            raise _Refused("session text: unknown option --lines")
        lines = self._number(args, "lines")
        whole = self._flag(args, "all")
        if whole and lines is not None:
            raise _Refused("session text: --all and --lines are two answers to one question")
        session = self._target(target)
        total, history = session.history + session.rows, session.history
        if whole or (lines is None and self.dialect == "lite"):
            first = 0
        elif lines:
            first = max(0, total - lines)
        else:  # lines 0, or the full app's bare form: the screen
            first = history
        if self._flag(args, "styles") and self.has_styles:
            return self._styled(session, first, total - 1, history)
        rows = [_cells_of(row) for row in session.rows_of(first, total - 1)]
        text = "".join("".join(c for c, _, _ in row).rstrip(" ") + "\n" for row in rows)
        while text.endswith("\n\n"):
            text = text[:-1]
        return text

    def _released_text(self, session: _Session) -> str:
        """The releases' ``session.text``, whatever was asked (module docstring)."""
        total, history = session.history + session.rows, session.history
        if self.dialect == "lite":  # 0.17.7 dumpBufferText: history and screen
            rows = [_cells_of(row) for row in session.rows_of(0, total - 1)]
            text = "".join("".join(c for c, _, _ in row).rstrip(" ") + "\n" for row in rows)
            while text.endswith("\n\n"):
                text = text[:-1]
            return text
        rows = [_cells_of(row) for row in session.rows_of(history, total - 1)]  # HandleText
        return "\n".join("".join(c for c, _, _ in row).rstrip() for row in rows).rstrip("\n")

    def _styled(self, session: _Session, first: int, last: int, history: int) -> Any:
        rows = []
        for index, row in enumerate(session.rows_of(first, last)):
            rows.append({"row": first + index - history, "runs": _runs(_cells_of(row))})
        while rows and not rows[-1]["runs"]:
            rows.pop()
        x, y = session.screen.cursor
        return {"cols": session.columns, "rows": rows, "cursor": {"row": y, "col": x}}

    def _refusal(self, session: _Session, verb: str, data: str) -> tuple[str, str] | None:
        """``(bytes to write anyway, refusal)`` for an injected refusal, else ``None``."""
        if not session.refusals:
            return None
        kind = session.refusals.popleft()
        did = "typed" if verb == "type" else "pasted"
        head = f"session {verb}: "
        size = len(data.encode())
        if kind == "busy":
            return "", f"{head}input to this pane is busy or reserved; nothing {did}"
        if kind == "unknown":
            return data, f"{head}input reserved or write failed/partial; shell outcome unknown"
        written = data.encode()[: size // 2].decode("utf-8", "ignore")
        done = len(written.encode())
        chunk = size - done
        if kind == "partial":
            return written, (
                f"{head}{done} of {size} bytes written; the {chunk}-byte chunk at offset {done} "
                "was cancelled at the 15 s input deadline and may have been partly delivered; "
                "the remaining 0 bytes were not written"
            )
        self._emit("input", session.id, "resolved")
        return written, (
            f"{head}{done} of {size} bytes written; the {chunk}-byte chunk at offset {done} is "
            "still in flight and may still arrive; the remaining 0 bytes were not written; "
            "this pane's input stays reserved until that write resolves"
        )

    async def _cmd_session_type(self, target: str, args: dict[str, Any]) -> Any:
        session = self._target(target)
        text = str(args.get("text") or "")
        if self.dialect == "full":  # HandleType: CRLF first, then LF, to CR
            text = text.replace("\r\n", "\r")
        text = text.replace("\n", "\r")
        # Releases refuse nothing: 0.17.7 main.cpp session.type writes the text as it
        # is; agwinterm 0.17.5 ControlServer.HandleType likewise (CRLF, LF -> CR).
        if not self.old and not self._flag(args, "allow-control"):
            for index, char in enumerate(text.encode()):
                if (char >= 0x20 and char != 0x7F) or char in (0x0D, 0x09):
                    continue
                raise _Refused(
                    f"session.type refuses control byte 0x{char:02X} at index {index} "
                    "(CR, LF and TAB are fine) - pass --allow-control if you mean it"
                )
        await self._input(session, "type", text)
        return "typed"

    async def _cmd_session_paste(self, target: str, args: dict[str, Any]) -> Any:
        session = self._target(target)
        text = args.get("text")
        released_full = self.dialect == "full" and self.old
        if not isinstance(text, str) or (not text and not released_full):
            # agliteterm's documented behaviour (0.17.7 too: ``text.empty()``): the
            # Windows clipboard is pasted; agwinterm 0.17.5 does so for a missing
            # text only (``text ?? ClipboardGet()``).
            self.clipboard_pastes += 1
            text = self.clipboard
            if not text:
                raise _Refused("session paste: nothing to paste")
        if not text:
            return "pasted"
        body = text.replace("\r\n", "\r").replace("\n", "\r")
        if session.screen.mode(2004):
            body = _PASTE_START + body + _PASTE_END
        await self._input(session, "paste", body)
        return "pasted"

    async def _input(self, session: _Session, verb: str, data: str) -> None:
        if not data:
            return
        if session.exited:
            raise _Refused(f"session {verb}: pane has no live input; nothing {verb}d")
        refused = self._refusal(session, verb, data)
        if refused is not None:
            if refused[0]:
                await self._write(session, refused[0].encode())
            raise _Refused(refused[1])
        await self._write(session, data.encode())

    # ------------------------------------------------------------ sessions

    def _emit(self, kind: str, session: str | None = None, info: str | None = None) -> None:
        self._seq += 1
        event: dict[str, Any] = {"seq": self._seq, "type": kind}
        if session:
            event["session"] = session
        if info:
            event["info"] = info
        self._events.append(event)

    def _spawn(
        self,
        workspace: int,
        argv: list[str],
        name: str | None,
        columns: int | None,
        rows: int | None,
        env: Mapping[str, str] | None,
        *,
        session_id: str | None = None,
    ) -> _Session:
        columns, rows = columns or self.columns, rows or self.rows
        lite = self.dialect == "lite"
        session_id = session_id or (f"lite-{self._next_id}" if lite else str(uuid.uuid4()))
        self._next_id += 1
        master_fd, slave_fd = os.openpty()
        fcntl.ioctl(slave_fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        environment = {k: v for k, v in os.environ.items() if k not in ("LINES", "COLUMNS")}
        environment.update(env or {})
        environment.update(
            TERM="xterm-256color",
            TERM_PROGRAM="agliteterm",
            AGWINTERM_ENABLED="1",
            AGWINTERM_PIPE="agliteterm",
            AGWINTERM_SESSION_ID=session_id,
            AGWINTERM_PANE_ID=session_id,
        )
        try:
            process = subprocess.Popen(
                argv, stdin=slave_fd, stdout=slave_fd, stderr=slave_fd, env=environment,
                start_new_session=True, preexec_fn=_set_controlling_tty, close_fds=True,
            )  # fmt: skip
        finally:
            os.close(slave_fd)
        replies = trio.open_memory_channel[bytes](_REPLY_QUEUE)

        def reply(data: bytes) -> None:
            with contextlib.suppress(trio.WouldBlock, trio.ClosedResourceError):
                replies[0].send_nowait(data)

        session = _Session(
            id=session_id,
            name=name or session_id,
            workspace=workspace,
            columns=columns,
            rows=rows,
            process=process,
            master_fd=master_fd,
            master=trio.lowlevel.FdStream(master_fd),
            screen=Screen(columns, rows, on_reply=reply),
            replies=replies,
        )
        self.sessions[session_id] = session
        if self.active is None:
            self.active = session_id
            self.active_workspace = workspace
        assert self._nursery is not None
        self._nursery.start_soon(self._run, session)
        return session

    async def _run(self, session: _Session) -> None:
        with session.scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._answer_queries, session)
                while True:
                    try:
                        data = await session.master.receive_some(_READ_BYTES)
                    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                        break  # EIO: the program is gone
                    if not data:
                        break
                    session.screen.feed(data)
                session.exited = True  # lite keeps the session, marked exited
                self._emit("tree")
                nursery.cancel_scope.cancel()

    async def _answer_queries(self, session: _Session) -> None:
        async for data in session.replies[1]:
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                async with session.write_lock:
                    await session.master.send_all(data)

    async def _write(self, session: _Session, data: bytes) -> None:
        session.received += data
        try:
            async with session.write_lock:
                await session.master.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            raise _Refused(f"session type: pane has no live input ({exc})") from exc

    async def _reap(self, session: _Session) -> None:
        for sig, grace in ((signal.SIGHUP, 1.0), (signal.SIGKILL, 5.0)):
            with contextlib.suppress(OSError):
                os.killpg(session.process.pid, sig)
            with trio.move_on_after(grace):
                while session.process.poll() is None:
                    await trio.sleep(0.02)
            if session.process.poll() is not None:
                break
        session.replies[0].close()
        with contextlib.suppress(OSError, trio.ClosedResourceError):
            await session.master.aclose()


class _Refused(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# ---------------------------------------------------------------- by hand


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.fakes.agliteterm_fake --socket PATH [--session CMD …]``."""
    parser = argparse.ArgumentParser(description="A fake agliteterm control API on a Unix socket.")
    parser.add_argument("--socket", required=True)
    parser.add_argument("--dialect", choices=("lite", "full"), default="lite")
    parser.add_argument("--session", action="append", default=[], metavar="CMD")
    args = parser.parse_args(argv)

    async def run() -> None:
        fake = FakeAgliteterm(args.socket, dialect=args.dialect)
        async with trio.open_nursery() as nursery:
            await nursery.start(fake.serve)
            workspace = fake.add_workspace("work")
            for command in args.session or ["exec bash --norc --noprofile -i"]:
                await fake.add_session(workspace, command)
            print(f"agliteterm fake ({args.dialect}) on {args.socket}", file=sys.stderr)

    with contextlib.suppress(KeyboardInterrupt):
        trio.run(run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
