"""tmux control mode and format output, parsed. Pure.

Control mode (``tmux -C``) writes one line per notification. The ones we read:

* ``%output %<pane> <data>``: what a pane's program wrote, with bytes below 32
  and ``\\`` escaped as three octal digits (tmux's ``control.c`` escapes exactly
  those);
* ``%begin <time> <number> <flags>`` … ``%end``/``%error`` with the same time and
  number: the output of a command (flags 1 = one this client sent). tmux does
  **not** escape the lines between them (``display -p '%end …'`` prints that
  line as it is), so only the guard with the ``%begin``'s time and number ends a
  block;
* ``%window-add``, ``%window-close``, ``%layout-change`` and friends: the pane
  set or layout changed, so the pane list must be read again;
* ``%exit``: the client is detached (its session is gone).

:class:`ControlParser` turns the line stream into events: pane output, layout
changes, exit, and the replies to the command lines we sent. How many blocks a
command line yields (tmux 3.3a, checked against a real server): one per command
when every command succeeds; when one fails, its ``%error`` block is the last,
because tmux drops the rest of the line; a line that does not parse yields a
single ``%error`` block. Blocks without flag 1 (the attach itself, hooks) belong
to nobody we wait for.

``list-panes -F`` output is parsed from fields joined by a separator that cannot
appear in tmux names (a unit separator, 0x1F).
"""

from __future__ import annotations

import codecs
from collections import deque
from dataclasses import dataclass, field

from mirror_host.errors import InvalidArgument
from mirror_host.width import text_width

__all__ = [
    "LIST_FORMAT",
    "PANE_STATE_FORMAT",
    "SEPARATOR",
    "BlockEnd",
    "BlockStart",
    "CommandFinished",
    "ControlEvent",
    "ControlParser",
    "Exited",
    "LayoutChanged",
    "Notification",
    "Output",
    "OutputReceived",
    "PaneRow",
    "PaneState",
    "Paused",
    "Unknown",
    "pane_title",
    "parse_line",
    "parse_pane_rows",
    "parse_pane_state",
    "soft_wraps",
    "unescape_output",
]

SEPARATOR = "\x1f"

_LIST_FIELDS = (
    "session_id", "session_name", "window_id", "window_index", "window_name", "window_panes",
    "pane_id", "pane_index", "pane_title", "pane_current_command", "pane_current_path",
    "pane_width", "pane_height", "pane_dead", "pid", "socket_path",
)  # fmt: skip
#: ``list-panes -a -F`` format for :func:`parse_pane_rows`.
LIST_FORMAT = SEPARATOR.join(f"#{{{name}}}" for name in _LIST_FIELDS)

_STATE_FIELDS = (
    "cursor_x", "cursor_y", "alternate_on", "cursor_flag", "keypad_cursor_flag", "keypad_flag",
    "insert_flag", "origin_flag", "wrap_flag", "mouse_standard_flag", "mouse_button_flag",
    "mouse_all_flag", "mouse_sgr_flag", "mouse_utf8_flag", "scroll_region_upper",
    "scroll_region_lower", "pane_width", "pane_height", "pane_in_mode", "scroll_position",
    "history_size",
)  # fmt: skip
#: ``display-message -p`` format for :func:`parse_pane_state`.
PANE_STATE_FORMAT = SEPARATOR.join(f"#{{{name}}}" for name in _STATE_FIELDS)

#: Notifications after which the pane list is read again.
_RELIST = frozenset(
    {
        b"%window-add", b"%window-close", b"%unlinked-window-add", b"%unlinked-window-close",
        b"%window-renamed", b"%unlinked-window-renamed", b"%layout-change",
        b"%sessions-changed", b"%session-changed", b"%session-renamed", b"%session-window-changed",
        b"%window-pane-changed", b"%pane-mode-changed",
    }
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Output:
    """``%output``: bytes a pane's program wrote."""

    pane: str
    data: bytes


@dataclass(frozen=True, slots=True)
class BlockStart:
    """``%begin``: a command's output follows."""

    time: int
    number: int
    ours: bool


@dataclass(frozen=True, slots=True)
class BlockEnd:
    """``%end`` or ``%error`` for the block with this time and number."""

    time: int
    number: int
    ok: bool


@dataclass(frozen=True, slots=True)
class LayoutChanged:
    """Panes were added, removed, renamed or resized."""

    name: str


@dataclass(frozen=True, slots=True)
class Paused:
    """``%pause``/``%continue``: output of a pane stopped or resumed for us."""

    pane: str
    paused: bool


@dataclass(frozen=True, slots=True)
class Exited:
    """``%exit``: this control client is detached."""

    reason: str


@dataclass(frozen=True, slots=True)
class Unknown:
    """Anything else (other notifications, or a line inside a command block)."""

    line: bytes


Notification = Output | BlockStart | BlockEnd | LayoutChanged | Paused | Exited | Unknown


def unescape_output(data: bytes) -> bytes:
    """Undo control mode's ``\\ooo`` escaping.

    tmux escapes exactly the bytes below 32 and the backslash, always as three
    octal digits, so the data holds no other backslash sequence and Python's
    own C decoder of ``\\ooo`` escapes (the one ``bytes`` literals use) undoes
    it in one pass: about sixty times faster than replacing each of the 33
    escapes in turn, per ``%output`` line of a pane printing flat out.
    """
    if b"\\" not in data:
        return data
    return bytes(codecs.escape_decode(data)[0])


def parse_line(line: bytes) -> Notification:
    """Classify one control-mode line (without its newline)."""
    if not line.startswith(b"%"):
        return Unknown(line)
    head, _, rest = line.partition(b" ")
    if head == b"%output":
        pane, _, data = rest.partition(b" ")
        return Output(pane.decode("ascii", "replace"), unescape_output(data))
    if head in (b"%begin", b"%end", b"%error"):
        parts = rest.split(b" ")
        try:
            time, number = int(parts[0]), int(parts[1])
            flags = int(parts[2]) if len(parts) > 2 else 0
        except (IndexError, ValueError):
            return Unknown(line)
        if head == b"%begin":
            return BlockStart(time, number, bool(flags & 1))
        return BlockEnd(time, number, head == b"%end")
    if head in _RELIST:
        return LayoutChanged(head.decode()[1:])
    if head in (b"%pause", b"%continue"):
        return Paused(rest.decode("ascii", "replace").strip(), head == b"%pause")
    if head == b"%exit":
        return Exited(rest.decode("utf-8", "replace"))
    return Unknown(line)


# ---------------------------------------------------------------- the parser


#: A pane's program wrote ``data`` (already unescaped): the ``%output`` line itself.
OutputReceived = Output


@dataclass(frozen=True, slots=True)
class CommandFinished:
    """The command line :meth:`ControlParser.expect` numbered ``command`` is answered.

    ``results`` holds each block's lines in order; after a failure there may be
    fewer blocks than commands (tmux skips the rest of a failed line).
    """

    command: int
    results: tuple[tuple[bytes, ...], ...]
    ok: bool


#: What :meth:`ControlParser.feed` reports.
ControlEvent = OutputReceived | CommandFinished | LayoutChanged | Paused | Exited


@dataclass(slots=True)
class _Waiting:
    """A command line sent to tmux, collecting its blocks."""

    command: int
    blocks: int
    results: list[tuple[bytes, ...]] = field(default_factory=list)


@dataclass(slots=True)
class _Block:
    """The block being read: its guard, whose it is and its lines so far."""

    time: int
    number: int
    ours: bool
    lines: list[bytes] = field(default_factory=list)


class ControlParser:
    """The control-mode line stream as events; replies matched to command lines.

    Call :meth:`expect` for each command line, in the order the lines are
    written to tmux, then :meth:`feed` every line tmux prints. Replies come back
    in the order the lines were sent, so the oldest waiting line owns the next
    block that carries flag 1.
    """

    def __init__(self) -> None:
        self._waiting: deque[_Waiting] = deque()
        self._block: _Block | None = None
        self._next_command = 1

    def expect(self, blocks: int) -> int:
        """A command line of ``blocks`` commands is being sent; returns its number."""
        if blocks < 1:
            raise InvalidArgument("a command line yields at least one block")
        command = self._next_command
        self._next_command += 1
        self._waiting.append(_Waiting(command, blocks))
        return command

    @property
    def waiting(self) -> tuple[int, ...]:
        """Numbers of the command lines still waiting for their reply, oldest first."""
        return tuple(waiting.command for waiting in self._waiting)

    def feed(self, line: bytes) -> ControlEvent | None:
        """One line (without its newline); the event it completes, if any."""
        block = self._block
        if block is not None:
            if line.startswith((b"%end ", b"%error ")):
                end = parse_line(line)
                if isinstance(end, BlockEnd) and (end.time, end.number) == (
                    block.time,
                    block.number,
                ):
                    self._block = None
                    return self._finish(block, ok=end.ok)
            block.lines.append(line)  # command output, even when it looks like a guard
            return None
        event = parse_line(line)
        if isinstance(event, BlockStart):
            self._block = _Block(event.time, event.number, event.ours)
            return None
        if isinstance(event, Output | LayoutChanged | Paused | Exited):
            return event
        return None  # a stray guard, or a notification we do not follow

    def _finish(self, block: _Block, *, ok: bool) -> CommandFinished | None:
        if not block.ours or not self._waiting:
            return None  # another client's command, the attach itself, or a hook
        waiting = self._waiting[0]
        waiting.results.append(tuple(block.lines))
        if ok and len(waiting.results) < waiting.blocks:
            return None
        self._waiting.popleft()
        return CommandFinished(waiting.command, tuple(waiting.results), ok)


@dataclass(frozen=True, slots=True)
class PaneRow:
    """One line of ``list-panes -a -F LIST_FORMAT``."""

    session_id: str
    session_name: str
    window_id: str
    window_index: int
    window_name: str
    window_panes: int
    pane_id: str
    pane_index: int
    title: str
    command: str
    path: str
    width: int
    height: int
    dead: bool
    server_pid: int
    socket_path: str


def pane_title(row: PaneRow) -> tuple[str, str]:
    """A tmux pane's title and subtitle as phones list it: ``session · window ·
    command`` (``· Pane N`` in a split window), the command left out where it is
    the window's name, as tmux names windows by default (``work · bash``, not
    ``work · bash · bash``)."""
    parts = [row.session_name, row.window_name]
    terminal = row.command or "Shell"
    if terminal != row.window_name:
        parts.append(terminal)
    if row.window_panes > 1:
        parts.append(f"Pane {row.pane_index + 1}")
    return " · ".join(parts), " · ".join(parts[1:])


def parse_pane_rows(text: str) -> list[PaneRow]:
    """Parse ``list-panes`` output; malformed lines are skipped."""
    rows = []
    for line in text.splitlines():
        fields = line.split(SEPARATOR)
        if len(fields) != len(_LIST_FIELDS):
            continue
        try:
            rows.append(
                PaneRow(
                    session_id=fields[0],
                    session_name=fields[1],
                    window_id=fields[2],
                    window_index=int(fields[3]),
                    window_name=fields[4],
                    window_panes=int(fields[5]),
                    pane_id=fields[6],
                    pane_index=int(fields[7]),
                    title=fields[8],
                    command=fields[9],
                    path=fields[10],
                    width=int(fields[11]),
                    height=int(fields[12]),
                    dead=fields[13] == "1",
                    server_pid=int(fields[14]),
                    socket_path=fields[15],
                )
            )
        except ValueError:
            continue
    return rows


@dataclass(frozen=True, slots=True)
class PaneState:
    """Cursor, modes and scroll position of one pane (``display-message``)."""

    cursor_x: int
    cursor_y: int
    alternate_on: bool
    cursor_visible: bool
    application_cursor: bool
    application_keypad: bool
    insert: bool
    origin: bool
    wrap: bool
    mouse_standard: bool
    mouse_button: bool
    mouse_all: bool
    mouse_sgr: bool
    mouse_utf8: bool
    scroll_top: int
    scroll_bottom: int
    width: int
    height: int
    in_mode: bool
    scroll_position: int
    history_size: int

    def seed_modes(self) -> bytes:
        """VT that sets this state's modes, scroll region and cursor on a fresh screen."""
        out = bytearray()

        def mode(flag: bool, number: int, default: bool = False) -> None:
            if flag != default:
                out.extend(b"\x1b[?%d%s" % (number, b"h" if flag else b"l"))

        mode(self.application_cursor, 1)
        mode(self.wrap, 7, default=True)
        mode(self.mouse_standard, 1000)
        mode(self.mouse_button, 1002)
        mode(self.mouse_all, 1003)
        mode(self.mouse_utf8, 1005)
        mode(self.mouse_sgr, 1006)
        if self.insert:
            out.extend(b"\x1b[4h")
        if self.application_keypad:
            out.extend(b"\x1b=")
        if (self.scroll_top, self.scroll_bottom) != (0, self.height - 1):
            out.extend(b"\x1b[%d;%dr" % (self.scroll_top + 1, self.scroll_bottom + 1))
        mode(self.origin, 6)
        row = self.cursor_y + 1 - (self.scroll_top if self.origin else 0)
        out.extend(b"\x1b[%d;%dH" % (row, self.cursor_x + 1))
        mode(self.cursor_visible, 25, default=True)
        return bytes(out)


def _int(text: str, default: int = 0) -> int:
    try:
        return int(text)
    except ValueError:
        return default


def parse_pane_state(text: str) -> PaneState | None:
    """Parse one ``display-message -p PANE_STATE_FORMAT`` line."""
    fields = text.strip("\n").split(SEPARATOR)
    if len(fields) != len(_STATE_FIELDS):
        return None
    flag = [f == "1" for f in fields]
    height = _int(fields[17], 1)
    return PaneState(
        cursor_x=_int(fields[0]),
        cursor_y=_int(fields[1]),
        alternate_on=flag[2],
        cursor_visible=flag[3],
        application_cursor=flag[4],
        application_keypad=flag[5],
        insert=flag[6],
        origin=flag[7],
        wrap=flag[8],
        mouse_standard=flag[9],
        mouse_button=flag[10],
        mouse_all=flag[11],
        mouse_sgr=flag[12],
        mouse_utf8=flag[13],
        scroll_top=_int(fields[14]),
        scroll_bottom=_int(fields[15], height - 1),
        width=_int(fields[16], 1),
        height=height,
        in_mode=flag[18],
        scroll_position=_int(fields[19]),
        history_size=_int(fields[20]),
    )


def soft_wraps(rows: list[str], joined: list[str], width: int) -> list[bool]:
    """Which screen rows continue the row above (tmux wrapped a line there).

    ``rows`` is ``capture-pane -p -N`` (one line per row, written trailing spaces
    kept), ``joined`` is ``capture-pane -p -J`` of the same screen (wrapped rows
    joined). A row continues when it is part of a joined line after its first
    row, and the row above reaches the last column (a wide glyph that did not
    fit leaves that cell empty: such a line is left on its rows, so nothing
    moves). Rows that do not add up to the joined lines: no row continues.
    """
    flags = [False] * len(rows)
    index = 0
    for line in joined:
        if index >= len(rows):
            break
        collected = rows[index]
        index += 1
        while collected != line and index < len(rows) and line.startswith(collected):
            flags[index] = text_width(rows[index - 1]) >= width
            collected += rows[index]
            index += 1
        if collected != line:
            return [False] * len(rows)
    return flags
