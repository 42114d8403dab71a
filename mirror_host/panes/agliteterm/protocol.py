"""agliteterm's control API as values: requests, replies, refusals, tree, events, rows. Pure.

agliteterm (and its full-app sibling agwinterm) answer newline-delimited JSON
on a Windows named pipe (``../shared/spec/agliteterm.md``): one request
``{"cmd","target","args"}`` per line and one reply line each,
``{"ok":true,"result":…}`` or ``{"ok":false,"error":"…"}``, several per
connection, strictly in turn, with **no request ids**. Lite ends a reply with
``\\n``, the full app probably with ``\\r\\n``; both are read here.

Three rules this module enforces for every caller, because the API does
something surprising when they are broken:

* ``session.paste`` with an empty or missing ``text`` pastes the **Windows
  clipboard**: :func:`encode_request` refuses to build one;
* an empty ``target`` (or ``active``) means "the focused session": every
  surface verb must name its pane, so a request without one is refused too;
* lite's request parser skips spaces and tabs only, so requests are written
  as compact JSON, ASCII only (a ``\\u`` escape and four hex digits for anything
  else, which lite decodes).

Error replies carry free text and no code. :func:`decode_reply` turns the
texts the docs and sources document into typed exceptions: a gone session
(:class:`AgliteSessionNotFound`), an unknown verb, and for ``session.type`` /
``session.paste`` the difference that matters most, **nothing was written**
(:class:`InputNotWritten`: busy or reserved input, no live input, a refused
control byte) versus **some of it may have been** (:class:`InputIncomplete`:
``N of M bytes written``, a chunk still in flight, an unknown outcome).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from uuid import UUID

from mirror_host.errors import InputRefused, InvalidArgument, PaneNotFound, PaneSourceError
from mirror_host.width import text_width

__all__ = [
    "DEFAULT_COLUMNS",
    "DEFAULT_ROWS",
    "TARGETED_VERBS",
    "AgliteError",
    "AgliteSessionNotFound",
    "AgliteUnknownCommand",
    "Dialect",
    "EventBatch",
    "InputIncomplete",
    "InputNotWritten",
    "Row",
    "Run",
    "SessionPane",
    "StyledScreen",
    "TreeEvent",
    "decode_reply",
    "dialect_of",
    "encode_request",
    "grid_size",
    "pane_uuid",
    "parse_events",
    "parse_metrics",
    "parse_styled",
    "parse_tree",
    "plain_buffer",
    "plain_history",
    "plain_lines",
    "plain_screen",
    "plain_text",
    "release_of",
    "status_age",
    "widest_line",
]

#: A grid nobody told us about (full app without ``session.metrics``, a split pane).
DEFAULT_COLUMNS, DEFAULT_ROWS = 80, 24
_MAX_GRID = 1000
_PANE_NAMESPACE = uuid.UUID("5a0f3c2e-9d41-4b8e-8c0a-61f2d7e4b9a3")

#: Verbs that act on one pane and fall back to the focused one without a target.
TARGETED_VERBS = frozenset(
    {
        "session.type",
        "session.paste",
        "session.text",
        "session.write",
        "session.close",
        "session.output",
        "session.metrics",
        "surface.cursor",
    }
)
_INPUT_VERBS = ("session.type", "session.paste")

_WRITTEN = re.compile(r"(\d+) of (\d+) bytes written")


class Dialect(StrEnum):
    """Which product answers: agliteterm (``lite``) or agwinterm (``full``)."""

    LITE = "lite"
    FULL = "full"


class AgliteError(PaneSourceError):
    """agliteterm answered ``ok:false``; ``message`` is its text, as sent."""

    def __init__(self, cmd: str, message: str) -> None:
        super().__init__(f"agliteterm refused {cmd}: {message}")
        self.cmd = cmd
        self.message = message


class AgliteSessionNotFound(AgliteError, PaneNotFound):
    """``session not found`` (lite) / ``no session`` (full): the target is gone."""


class AgliteUnknownCommand(AgliteError):
    """``unknown command 'x'`` (``(lite subset)`` on lite): this build lacks the verb."""


class InputNotWritten(AgliteError, InputRefused):
    """A documented ``session.type``/``paste`` refusal after which no byte was written.

    ``retryable`` when the pane's input was only busy or reserved (another
    write holds it); not when the pane has no live input or the text itself
    was refused.
    """

    def __init__(self, cmd: str, message: str, *, retryable: bool) -> None:
        super().__init__(cmd, message)
        self.retryable = retryable


class InputIncomplete(AgliteError):
    """Input that may have been partly written (``N of M bytes written``, in flight, unknown).

    Never reported as delivered, never retried: a retry would repeat what went.
    """

    def __init__(
        self, cmd: str, message: str, *, written: int | None = None, total: int | None = None
    ) -> None:
        super().__init__(cmd, message)
        self.written = written
        self.total = total


# ------------------------------------------------------------------ requests


def encode_request(
    cmd: str, *, target: str | None = None, args: Mapping[str, Any] | None = None
) -> bytes:
    """One request line: compact, ASCII-only JSON ending in ``\\n``.

    Raises:
        InvalidArgument: an empty ``session.paste`` (it would paste the Windows
            clipboard), a targeted verb without a real target (it would act on
            the focused session), or text that is not a string.
    """
    if not cmd:
        raise InvalidArgument("an agliteterm request needs a verb")
    if cmd in TARGETED_VERBS and (not target or target == "active"):
        raise InvalidArgument(f"{cmd} without a pane id would act on the focused session")
    arguments = dict(args or {})
    if cmd in _INPUT_VERBS:
        text = arguments.get("text")
        if not isinstance(text, str):
            raise InvalidArgument(f"{cmd} needs its text as a string")
        if cmd == "session.paste" and not text:
            raise InvalidArgument("an empty session.paste pastes the Windows clipboard; refused")
    request: dict[str, Any] = {"cmd": cmd}
    if target is not None:
        request["target"] = target
    if arguments:
        request["args"] = arguments
    return json.dumps(request, separators=(",", ":"), ensure_ascii=True).encode("ascii") + b"\n"


# ------------------------------------------------------------------ replies


def decode_reply(line: bytes, *, cmd: str) -> Any:
    """The ``result`` of one reply line (a trailing ``\\r`` is dropped).

    Raises:
        AgliteSessionNotFound, AgliteUnknownCommand, InputNotWritten,
        InputIncomplete, AgliteError: ``ok:false``, typed by its text.
        PaneSourceError: the line is not a reply at all.
    """
    try:
        reply = json.loads(line.rstrip(b"\r"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PaneSourceError(f"agliteterm sent something that is not JSON ({exc})") from exc
    if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
        raise PaneSourceError("agliteterm sent a reply without an ok field")
    if reply["ok"]:
        return reply.get("result")
    error = reply.get("error")
    raise refusal(cmd, error if isinstance(error, str) else json.dumps(error))


def refusal(cmd: str, message: str) -> AgliteError:
    """The typed exception for an ``ok:false`` reply to ``cmd``."""
    lowered = message.lower()
    if lowered.startswith("unknown command"):
        return AgliteUnknownCommand(cmd, message)
    if cmd in _INPUT_VERBS:
        typed = _input_refusal(cmd, message, lowered)
        if typed is not None:
            return typed
    if lowered in ("session not found", "no session") or lowered.startswith("no session "):
        return AgliteSessionNotFound(cmd, message)
    if cmd in _INPUT_VERBS:
        # An input refusal nobody documented: whether anything went is unknown.
        return InputIncomplete(cmd, message)
    return AgliteError(cmd, message)


def _input_refusal(cmd: str, message: str, lowered: str) -> AgliteError | None:
    nothing = "nothing typed" in lowered or "nothing pasted" in lowered
    if "busy or reserved" in lowered and nothing:
        return InputNotWritten(cmd, message, retryable=True)
    if "has no live input" in lowered or "refuses control byte" in lowered:
        return InputNotWritten(cmd, message, retryable=False)
    if "nothing to paste" in lowered:
        return InputNotWritten(cmd, message, retryable=False)
    written = _WRITTEN.search(message)
    if written is not None:
        done, total = int(written.group(1)), int(written.group(2))
        if done == 0 and "chunk at offset" not in lowered and "in flight" not in lowered:
            # Stopped at the deadline before the first chunk was even issued.
            return InputNotWritten(cmd, message, retryable=False)
        return InputIncomplete(cmd, message, written=done, total=total)
    if "in flight" in lowered or "outcome unknown" in lowered or "partial" in lowered:
        return InputIncomplete(cmd, message)
    return None


def dialect_of(pong: object) -> Dialect:
    """``ping``'s answer names the product: ``agliteterm <v>`` or ``agwinterm <v>``."""
    text = pong if isinstance(pong, str) else ""
    return Dialect.FULL if text.lower().startswith("agwinterm") else Dialect.LITE


def release_of(version: str | None) -> tuple[int, int, int] | None:
    """``(0, 17, 5)`` from ``agwinterm 0.17.5`` (``(0, 1, 0)`` from 0.17.7's
    ``agliteterm 0.1``); ``None`` when ``version`` names none (``dev``)."""
    found = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", version or "")
    if found is None:
        return None
    major, minor, patch = found.groups(default="0")
    return int(major), int(minor), int(patch)


# ------------------------------------------------------------------ the tree


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionPane:
    """One pane (a shell) of the tree: a session's own, or one side of its split."""

    pane_id: str
    session_id: str
    name: str
    workspace_id: str
    workspace_name: str
    status: str = ""
    status_changed_at: int | None = None
    exited: bool = False
    active: bool = False
    #: The grid, when the tree says (lite, for the session's own shell).
    columns: int | None = None
    rows: int | None = None
    #: 0 for the session's own (or a single) pane, 1 for the other side of a split.
    slot: int = 0
    pane_count: int = 1
    axis: str | None = None
    directory: str | None = None
    title: str | None = None

    @property
    def label(self) -> str:
        """``workspace · name`` (``· Pane N`` for either side of a split)."""
        parts = [self.workspace_name, self.name]
        if self.pane_count > 1:
            parts.append(f"Pane {self.slot + 1}")
        return " · ".join(part for part in parts if part)

    @property
    def pane_title(self) -> str:
        """The pane's own title: the terminal's title where the tree has one (newer
        agwinterm), else ``name`` (``· Pane N`` for either side of a split)."""
        if self.title and self.pane_count == 1:
            return self.title
        return self.label.split(" · ", 1)[-1]

    def subtitle(self, now: float) -> str:
        """What the pane list's ``subtitle`` shows: the pane's title, the terminal's
        title where it differs, and the agent's status with its age
        (``statusChangedAt``, ``now`` in epoch seconds), or ``exited``."""
        parts = [self.label.split(" · ", 1)[-1]]
        if self.title and self.title != self.name:
            parts.append(self.title)
        if self.exited:
            parts.append("exited")
        elif self.status:
            age = status_age(self.status_changed_at, now)
            parts.append(f"{self.status} {age}" if age else self.status)
        return " · ".join(parts)


def status_age(changed_at: int | None, now: float) -> str:
    """How long a status has held, in words (``40 s``, ``3 min``, ``2 h``, ``5 d``);
    empty when agliteterm did not stamp it (0.17.7, agwinterm 0.17.5) or the clocks
    disagree (a stamp in the future)."""
    if changed_at is None or changed_at <= 0:
        return ""
    seconds = int(now - changed_at)
    if seconds < 0:
        return ""
    for size, unit in ((86_400, "d"), (3_600, "h"), (60, "min")):
        if seconds >= size:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def pane_uuid(endpoint: str, pane_id: str) -> UUID:
    """The UUID Prowl clients see: stable across host and agliteterm restarts
    (agliteterm restores its ids), distinct per instance."""
    return uuid.uuid5(_PANE_NAMESPACE, f"{endpoint}\n{pane_id}")


def _text(record: Mapping[str, Any], key: str, default: str = "") -> str:
    value = record.get(key)
    return value if isinstance(value, str) else default


def _ident(record: Mapping[str, Any]) -> str:
    """An ``id`` as text (agliteterm's are strings; a number is taken as its digits)."""
    value = record.get("id")
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value if isinstance(value, str) else ""


def _int(record: Mapping[str, Any], key: str) -> int | None:
    value = record.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _grid(value: int | None) -> int | None:
    return max(1, min(value, _MAX_GRID)) if value is not None and value > 0 else None


def _records(value: object) -> list[Mapping[str, Any]]:
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


def _pane_directory(node: Mapping[str, Any], pane_id: str, slot: int) -> str | None:
    cwds = node.get("paneCwds")
    if isinstance(cwds, Mapping):
        found = cwds.get(pane_id)
        return found if isinstance(found, str) and found else None
    if isinstance(cwds, list) and slot < len(cwds) and isinstance(cwds[slot], str):
        return cwds[slot] or None
    return None


def parse_tree(result: object) -> list[SessionPane]:
    """Every pane of a ``tree`` result, in workspace → session → slot order.

    A split session (``paneCount`` 2, ``paneIds`` in slot order) yields one
    pane per id; the tree's ``cols``/``rows`` belong to the session's own
    shell only. Records without an id are skipped; unknown fields ignored.
    """
    workspaces = result.get("workspaces") if isinstance(result, Mapping) else None
    panes: list[SessionPane] = []
    for index, workspace in enumerate(_records(workspaces)):
        workspace_id = _ident(workspace) or str(index)
        workspace_name = _text(workspace, "name", workspace_id)
        for node in _records(workspace.get("sessions")):
            session_id = _ident(node)
            if not session_id:
                continue
            listed = node.get("paneIds")
            listed = listed if isinstance(listed, list) else []
            ids = [p for p in listed if isinstance(p, str) and p]
            ids = ids or [session_id]
            own = session_id if session_id in ids else ids[0]
            axis = node.get("axis")
            columns, rows = _grid(_int(node, "cols")), _grid(_int(node, "rows"))
            stacked = axis == "horizontal"
            for slot, pane_id in enumerate(ids):
                mine = pane_id == own
                panes.append(
                    SessionPane(
                        pane_id=pane_id,
                        session_id=session_id,
                        name=_text(node, "name", session_id),
                        workspace_id=workspace_id,
                        workspace_name=workspace_name,
                        status=_text(node, "status"),
                        status_changed_at=_int(node, "statusChangedAt"),
                        exited=node.get("exited") is True,
                        active=node.get("active") is True,
                        # The other side of a split shares the session's height
                        # (left/right) or width (top/bottom); its other extent
                        # comes from its own styled answer, or is estimated as
                        # the session's (docs/operations.md).
                        columns=columns if mine or stacked else None,
                        rows=rows,
                        slot=slot,
                        pane_count=len(ids),
                        axis=axis if isinstance(axis, str) else None,
                        directory=_pane_directory(node, pane_id, slot),
                        title=_text(node, "title") or None,
                    )
                )
    return panes


def grid_size(
    pane: SessionPane,
    screen: StyledScreen | None,
    metrics: tuple[int, int] | None = None,
    estimate: tuple[int, int] | None = None,
) -> tuple[int, int]:
    """``(columns, rows)`` to mirror ``pane`` at.

    ``session.metrics`` (full app) wins, then the tree (lite), then what the
    plain text of a build that reports no grid showed (``estimate``: its widest
    line, and for a screen read its line count; never less than 80 × 24); the
    width a styled answer reports is fresher than any of them (a resize
    between two tree reads), and the rows grow to hold every row and the cursor
    the answer shows. Nothing known: 80 × 24.
    """
    columns = (metrics[0] if metrics else None) or pane.columns
    rows = (metrics[1] if metrics else None) or pane.rows
    if estimate is not None:
        columns = columns or max(DEFAULT_COLUMNS, estimate[0])
        rows = rows or max(DEFAULT_ROWS, estimate[1])
    rows = rows or DEFAULT_ROWS
    if screen is not None:
        columns = screen.columns or columns
        rows = max(rows, screen.extent())
        if screen.cursor is not None:
            rows = max(rows, screen.cursor[0] + 1)
    return max(1, min(columns or DEFAULT_COLUMNS, _MAX_GRID)), max(1, min(rows, _MAX_GRID))


def parse_metrics(result: object) -> tuple[int, int] | None:
    """``session.metrics`` (full app): ``(cols, rows)``, if it carries them."""
    if not isinstance(result, Mapping):
        return None
    columns, rows = _grid(_int(result, "cols")), _grid(_int(result, "rows"))
    return (columns, rows) if columns and rows else None


# ------------------------------------------------------------------ events


@dataclass(frozen=True, slots=True)
class TreeEvent:
    """One events entry: ``session`` (created/closed), ``status``, ``tree``, ``input`` …"""

    seq: int
    type: str
    session: str | None = None
    info: str | None = None


@dataclass(frozen=True, slots=True)
class EventBatch:
    """An ``events`` answer: the cursor now and what happened after ``since``."""

    cursor: int
    events: tuple[TreeEvent, ...]

    def restarted(self, since: int) -> bool:
        """The cursor went backwards: agliteterm restarted and its log began again."""
        return self.cursor < since

    def missed(self, since: int) -> bool:
        """Entries after ``since`` fell off the 1000-entry ring before we read them."""
        return since > 0 and bool(self.events) and self.events[0].seq > since + 1


def parse_events(result: object) -> EventBatch:
    """An ``events`` result.

    Raises:
        PaneSourceError: it carries no cursor.
    """
    cursor = _int(result, "cursor") if isinstance(result, Mapping) else None
    if cursor is None:
        raise PaneSourceError("agliteterm's events answer has no cursor")
    assert isinstance(result, Mapping)
    events = []
    for record in _records(result.get("events")):
        seq = _int(record, "seq")
        if seq is None:
            continue
        session, info = record.get("session"), record.get("info")
        events.append(
            TreeEvent(
                seq=seq,
                type=_text(record, "type"),
                session=session if isinstance(session, str) else None,
                info=info if isinstance(info, str) else None,
            )
        )
    return EventBatch(cursor, tuple(sorted(events, key=lambda e: e.seq)))


# ------------------------------------------------------------------ styled text


@dataclass(frozen=True, slots=True)
class Run:
    """Adjacent cells of one style: grid column, cells covered, text and style.

    A wide glyph covers two cells with one character. Colours are
    ``default``, ``idx:N`` or ``#rrggbb``.
    """

    col: int
    width: int
    text: str
    faint: bool = False
    bold: bool = False
    italic: bool = False
    underline: bool = False
    inverse: bool = False
    strike: bool = False
    fg: str = "default"
    bg: str = "default"


Row = tuple[Run, ...]


@dataclass(frozen=True, slots=True)
class StyledScreen:
    """``session.text {styles:true}``: rows by screen-relative index (negative =
    scrollback), the grid width and the cursor ``(row, col)`` (``col`` may equal
    ``columns`` while a wrap is deferred). Rows not listed are blank."""

    columns: int
    rows: Mapping[int, Row]
    cursor: tuple[int, int] | None = None

    @property
    def history_rows(self) -> int:
        """How many scrollback rows the answer holds (``-1`` … ``-n``)."""
        lowest = min(self.rows, default=0)
        return -lowest if lowest < 0 else 0

    def extent(self) -> int:
        """One past the lowest screen row that holds text (0 when none does)."""
        return max((row + 1 for row, runs in self.rows.items() if row >= 0 and runs), default=0)


def _flag(record: Mapping[str, Any], key: str) -> bool:
    return record.get(key) is True


def _colour(record: Mapping[str, Any], key: str) -> str:
    value = record.get(key)
    return value if isinstance(value, str) and value else "default"


def _run(record: Mapping[str, Any], columns: int) -> Run | None:
    col, width, text = _int(record, "col"), _int(record, "width"), record.get("text")
    if col is None or width is None or not isinstance(text, str) or col < 0 or width < 1:
        return None
    if col >= columns:
        return None
    return Run(
        col=col,
        width=min(width, columns - col),
        text=text,
        faint=_flag(record, "faint"),
        bold=_flag(record, "bold"),
        italic=_flag(record, "italic"),
        underline=_flag(record, "underline"),
        inverse=_flag(record, "inverse"),
        strike=_flag(record, "strike"),
        fg=_colour(record, "fg"),
        bg=_colour(record, "bg"),
    )


def parse_styled(result: object, *, columns: int | None = None) -> StyledScreen:
    """A styled ``session.text`` result; runs sorted by column, malformed ones dropped.

    ``columns`` (from the tree) is used when the answer does not say.

    Raises:
        PaneSourceError: the answer is not a styled object at all.
    """
    if not isinstance(result, Mapping) or not isinstance(result.get("rows"), list):
        raise PaneSourceError("agliteterm's session.text answer is not styled rows")
    width = _grid(_int(result, "cols")) or columns or DEFAULT_COLUMNS
    rows: dict[int, Row] = {}
    for record in _records(result.get("rows")):
        index = _int(record, "row")
        if index is None:
            continue
        runs = [_run(item, width) for item in _records(record.get("runs"))]
        rows[index] = tuple(sorted((r for r in runs if r is not None), key=lambda r: r.col))
    cursor = None
    place = result.get("cursor")
    if isinstance(place, Mapping):
        row, col = _int(place, "row"), _int(place, "col")
        if row is not None and col is not None:
            cursor = (row, max(0, col))
    return StyledScreen(columns=width, rows=rows, cursor=cursor)


def plain_text(result: object) -> str | None:
    """The text of a plain ``session.text`` answer (a string, or ``{text}``), else ``None``."""
    if isinstance(result, Mapping):
        result = result.get("text")
    return result if isinstance(result, str) else None


def plain_history(result: object) -> str:
    """A plain ``session.text`` answer as history text: rows joined by ``\\n``,
    the dump's trailing line break (and any ``\\r``) dropped."""
    text = plain_text(result) or ""
    return text.replace("\r\n", "\n").rstrip("\n")


def plain_lines(text: str, keep: int) -> list[str]:
    """The last ``keep`` lines of a plain answer (none for an empty one)."""
    return plain_history(text).split("\n")[-keep:] if text and keep > 0 else []


def widest_line(lines: Sequence[str], at_least: int = 0) -> int:
    """The most cells any of ``lines`` takes, or ``at_least`` if none takes more.

    Only lines that could be wider are measured (a character takes at most two
    cells), so a dump of a whole buffer costs little once its width is known.
    """
    widest = at_least
    for line in lines:
        if 2 * len(line) > widest:
            widest = max(widest, text_width(line))
    return widest


def plain_screen(text: str, rows: int, columns: int) -> StyledScreen:
    """A build without ``styles``: the last ``rows`` lines of its plain answer
    (agliteterm 0.17.7: the whole buffer; agwinterm 0.17.5: the screen),
    unstyled, the cursor after the last one."""
    return plain_buffer(text, rows=rows, columns=columns, keep=rows)


def plain_buffer(text: str, *, rows: int, columns: int, keep: int) -> StyledScreen:
    """The last ``keep`` lines of a plain answer as rows: its last ``rows`` lines are
    the screen (``0 …``), the ones above scrollback (``-1`` the newest); the cursor
    after the last line. A copy to scroll through when the build has no styles."""
    lines = plain_lines(text, max(keep, rows))
    top = max(0, len(lines) - rows)
    screen: dict[int, Row] = {}
    for index, line in enumerate(lines):
        if line:
            run = Run(col=0, width=max(1, min(columns, text_width(line))), text=line)
            screen[index - top] = (run,)
    last = len(lines) - 1 - top
    cursor = (max(0, last), min(columns, text_width(lines[-1]))) if lines else (0, 0)
    return StyledScreen(columns=columns, rows=screen, cursor=cursor)
