"""Herdr's socket API as values: requests, replies, errors, pane records, labels. Pure.

Herdr (docs/operations.md, "Running beside Herdr") answers newline-delimited
JSON on a Unix socket, one request per connection. This module builds request
lines, reads replies tolerantly (unknown fields and result types are ignored),
maps error replies to typed exceptions, and turns a session snapshot into the
pane list the host shows: titles ``workspace · tab · name[ · Pane N]`` (the
pane's own title where Herdr has one), subtitles that say what an agent is
doing in Herdr's words (``done``: finished, not yet seen), and grid sizes.
Pane ids come from Herdr's public pane ids (``identity.py``). It also reads an
agent record the way Herdr's own CLI does after ``agent.start``
(:func:`launch_progress`).
"""

from __future__ import annotations

import enum
import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

from mirror_host.capture.values import ScrollBounds
from mirror_host.errors import PaneNotFound, PaneSourceError
from mirror_host.panes.model import PaneInfo
from mirror_host.width import text_width

__all__ = [
    "HerdrError",
    "HerdrPane",
    "HerdrPaneNotFound",
    "HerdrUnknownMethod",
    "LaunchFailed",
    "LaunchProgress",
    "ScrollChange",
    "Snapshot",
    "Tab",
    "Workspace",
    "decode_reply",
    "encode_request",
    "frame_from_rows",
    "grid_size",
    "launch_progress",
    "pane_labels",
    "pane_name",
    "pane_uuid",
    "parse_scroll_changed",
    "parse_snapshot",
    "resolve_socket_path",
    "scroll_bounds",
    "split_rows",
    "strip_escapes",
    "terminal_name",
]

_PANE_NAMESPACE = uuid.UUID("3f1b0f6e-8f0a-4e63-9a54-6b8c1d0f2a77")
_UNKNOWN_VARIANT = re.compile(r"unknown variant `([^`]+)`")
# CSI, OSC (BEL or ST terminated), and other two-byte escapes.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


class HerdrError(PaneSourceError):
    """Herdr answered with an error object."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"herdr {code}: {message}")
        self.code = code
        self.message = message


class HerdrPaneNotFound(HerdrError, PaneNotFound):
    """``pane_not_found`` (and the other not-found codes for panes)."""


class HerdrUnknownMethod(HerdrError):
    """``invalid_request: unknown variant `<method>``` : this server lacks the method."""


def encode_request(request_id: str, method: str, params: Mapping[str, Any] | None = None) -> bytes:
    """One request line (ids are strings; ``params`` is always present)."""
    return (
        json.dumps({"id": request_id, "method": method, "params": dict(params or {})}).encode()
        + b"\n"
    )


def decode_reply(line: bytes, *, method: str) -> dict[str, Any]:
    """The ``result`` object of a reply line.

    Raises:
        HerdrUnknownMethod: the server does not know ``method``.
        HerdrPaneNotFound: the pane is gone.
        HerdrError: any other error reply.
        PaneSourceError: the line is not a reply at all.
    """
    try:
        reply = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PaneSourceError(f"herdr sent something that is not JSON ({exc})") from exc
    if not isinstance(reply, dict):
        raise PaneSourceError("herdr sent a reply that is not an object")
    error = reply.get("error")
    if isinstance(error, dict):
        code = str(error.get("code", "unknown"))
        message = str(error.get("message", ""))
        variant = _UNKNOWN_VARIANT.search(message)
        if code == "invalid_request" and variant and variant.group(1) == method:
            raise HerdrUnknownMethod(code, message)
        if code in ("pane_not_found", "agent_pane_not_found", "target_pane_not_found"):
            raise HerdrPaneNotFound(code, message)
        raise HerdrError(code, message)
    result = reply.get("result")
    if not isinstance(result, dict):
        raise PaneSourceError("herdr sent a reply without a result")
    return result


@dataclass(frozen=True, slots=True)
class Workspace:
    """A Herdr workspace (the unit Prowl calls a worktree)."""

    id: str
    label: str
    number: int = 0
    focused: bool = False
    cwd: str | None = None
    repo_root: str | None = None


@dataclass(frozen=True, slots=True)
class Tab:
    """A tab of a workspace, in Herdr's array order."""

    id: str
    workspace_id: str
    label: str
    number: int = 0
    focused: bool = False


@dataclass(frozen=True, slots=True)
class HerdrPane:
    """The fields of ``PaneInfo`` the host uses."""

    pane_id: str
    terminal_id: str
    workspace_id: str
    tab_id: str
    focused: bool
    agent_status: str
    cwd: str | None = None
    agent: str | None = None
    label: str | None = None
    offset_from_bottom: int | None = None
    max_offset_from_bottom: int | None = None
    viewport_rows: int | None = None
    #: What an integration reports as the pane's title (``title``).
    title: str | None = None
    #: The terminal's own title without a leading spinner (``terminal_title_stripped``).
    terminal_title: str | None = None
    #: The agent's name for people, as an integration reports it (``display_agent``).
    display_agent: str | None = None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything discovery learns in one pass."""

    workspaces: tuple[Workspace, ...]
    tabs: tuple[Tab, ...]
    panes: tuple[HerdrPane, ...]
    #: pane_id → (width, height) of its outer rect, and whether its tab is split.
    rects: dict[str, tuple[int, int, bool]] = field(default_factory=dict)
    protocol: int | None = None


def pane_uuid(session: str, pane_id: str, *, terminal_id: str | None = None) -> UUID:
    """The UUID Prowl clients see for Herdr pane ``pane_id`` (``w1:p2``) of the Herdr
    session ``session`` (its socket path): the same after a Herdr restart, which
    keeps public pane ids and gives every pane a new ``terminal_id``.

    With ``terminal_id``: the id of a pane that was given a public id Herdr had
    already used for another (``identity.py``), unique to that terminal.
    """
    name = (
        f"{session}\0{pane_id}" if terminal_id is None else f"{session}\0{pane_id}\0{terminal_id}"
    )
    return uuid.uuid5(_PANE_NAMESPACE, name)


def _text(record: Mapping[str, Any], key: str, default: str = "") -> str:
    value = record.get(key)
    return value if isinstance(value, str) else default


def _opt_text(record: Mapping[str, Any], key: str) -> str | None:
    value = record.get(key)
    return value if isinstance(value, str) and value else None


def _int(record: Mapping[str, Any], key: str) -> int | None:
    value = record.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def parse_workspace(record: Mapping[str, Any]) -> Workspace | None:
    """A workspace record (``None`` if it lacks an id)."""
    workspace_id = _text(record, "workspace_id")
    if not workspace_id:
        return None
    worktree = record.get("worktree")
    root = None
    if isinstance(worktree, Mapping):
        root = _opt_text(worktree, "checkout_path") or _opt_text(worktree, "repo_root")
    return Workspace(
        id=workspace_id,
        label=_text(record, "label", workspace_id),
        number=_int(record, "number") or 0,
        focused=record.get("focused") is True,
        cwd=_opt_text(record, "cwd"),
        repo_root=root,
    )


def parse_tab(record: Mapping[str, Any]) -> Tab | None:
    """A tab record (``None`` if it lacks ids)."""
    tab_id, workspace_id = _text(record, "tab_id"), _text(record, "workspace_id")
    if not tab_id or not workspace_id:
        return None
    number = _int(record, "number") or 0
    return Tab(
        id=tab_id,
        workspace_id=workspace_id,
        label=_text(record, "label", str(number)),
        number=number,
        focused=record.get("focused") is True,
    )


def parse_pane(record: Mapping[str, Any]) -> HerdrPane | None:
    """A ``PaneInfo`` record (``None`` if it lacks the required ids)."""
    pane_id, terminal_id = _text(record, "pane_id"), _text(record, "terminal_id")
    workspace_id, tab_id = _text(record, "workspace_id"), _text(record, "tab_id")
    if not (pane_id and terminal_id and workspace_id and tab_id):
        return None
    scroll = record.get("scroll")
    scroll = scroll if isinstance(scroll, Mapping) else {}
    return HerdrPane(
        pane_id=pane_id,
        terminal_id=terminal_id,
        workspace_id=workspace_id,
        tab_id=tab_id,
        focused=record.get("focused") is True,
        agent_status=_text(record, "agent_status", "unknown"),
        cwd=_opt_text(record, "cwd") or _opt_text(record, "foreground_cwd"),
        agent=_opt_text(record, "agent"),
        label=_opt_text(record, "label"),
        offset_from_bottom=_int(scroll, "offset_from_bottom"),
        max_offset_from_bottom=_int(scroll, "max_offset_from_bottom"),
        viewport_rows=_int(scroll, "viewport_rows"),
        title=_opt_line(record, "title"),
        terminal_title=(
            _opt_line(record, "terminal_title_stripped") or _opt_line(record, "terminal_title")
        ),
        display_agent=_opt_line(record, "display_agent"),
    )


#: Control characters, and line or paragraph breaks, which have no place in a title.
_NOT_IN_A_TITLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")
_TITLE_CHARACTERS = 200


def _opt_line(record: Mapping[str, Any], key: str) -> str | None:
    """A title-like text as one tidy line (a program sets whatever it likes), or ``None``."""
    value = _opt_text(record, key)
    if value is None:
        return None
    line = " ".join(_NOT_IN_A_TITLE.sub(" ", value).split())[:_TITLE_CHARACTERS]
    return line or None


class LaunchProgress(enum.Enum):
    """Where an agent started with ``agent.start`` is (:func:`launch_progress`)."""

    #: Still starting: ask again.
    WAITING = "waiting"
    #: ``interactive_ready``: it takes prompts now.
    READY = "ready"


@dataclass(frozen=True, slots=True)
class LaunchFailed:
    """An agent start that will not become ready: Herdr's code and, for people,
    what happened (it follows the agent's name: "Claude Code exited before …")."""

    code: str
    reason: str


def launch_progress(
    agent: Mapping[str, Any] | None,
    *,
    name: str,
    terminal_id: str | None,
    kind: str | None,
    seen: bool,
) -> LaunchProgress | LaunchFailed:
    """Read an ``agent.get`` record after ``agent.start`` as Herdr's own CLI does
    (wait_for_named_agent, src/cli/agent.rs 0.8.2).

    ``agent`` is the record found by the agent's ``name`` or, once that is gone,
    by its pane (``None``: neither names an agent). ``terminal_id`` and ``kind``
    are what ``agent.start`` answered (``None``: not said). ``seen``: the name
    was found before.

    Herdr leaves ``interactive_ready`` and ``launch_pending`` out when they are
    false (``skip_serializing_if``), so only an explicit ``true`` counts: an
    idle (or ``done``) agent that says neither is one whose launch was dropped,
    "exited before becoming interactive". An agent the launch knew, that
    neither its name nor its pane names any more, exited too (the CLI waits
    for its deadline there; nothing can come of it).
    """
    if agent is None:
        return _EXITED if seen else LaunchProgress.WAITING
    if terminal_id is not None and agent.get("terminal_id") != terminal_id:
        return _ELSEWHERE
    actual = agent.get("agent")
    if kind is not None and isinstance(actual, str) and actual != kind:
        return LaunchFailed("agent_kind_mismatch", f"did not start: Herdr found {actual} there")
    if agent.get("name") != name:
        return _ELSEWHERE
    status = agent.get("agent_status")
    if status == "blocked":
        return LaunchFailed(
            "agent_not_ready", "stopped on a question while starting (answer it on the host)"
        )
    if status in ("idle", "done"):
        if agent.get("interactive_ready") is True:
            return LaunchProgress.READY
        if agent.get("launch_pending") is not True:
            return _EXITED
    return LaunchProgress.WAITING


_EXITED = LaunchFailed("agent_start_failed", "exited before it became ready")
_ELSEWHERE = LaunchFailed("agent_name_not_found", "no longer runs in the new tab")


@dataclass(frozen=True, slots=True)
class ScrollChange:
    """A ``pane.scroll_changed`` push: where a pane's viewport is now."""

    pane_id: str
    offset_from_bottom: int | None
    max_offset_from_bottom: int | None
    viewport_rows: int | None


#: Pane-scoped pushes use the dotted name (herdr.md §1.4); the snake_case form
#: of the lifecycle events is accepted too.
_SCROLL_CHANGED = ("pane.scroll_changed", "pane_scroll_changed")


def parse_scroll_changed(event: Mapping[str, Any]) -> ScrollChange | None:
    """``{"event": "pane.scroll_changed", "data": {pane_id, workspace_id, scroll}}``.

    ``None`` for any other event, or one without a pane id or ``scroll`` object.
    """
    if event.get("event") not in _SCROLL_CHANGED:
        return None
    data = event.get("data")
    data = data if isinstance(data, Mapping) else {}
    pane_id, scroll = _text(data, "pane_id"), data.get("scroll")
    if not pane_id or not isinstance(scroll, Mapping):
        return None
    return ScrollChange(
        pane_id=pane_id,
        offset_from_bottom=_int(scroll, "offset_from_bottom"),
        max_offset_from_bottom=_int(scroll, "max_offset_from_bottom"),
        viewport_rows=_int(scroll, "viewport_rows"),
    )


def _records(value: object) -> list[Mapping[str, Any]]:
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, Mapping)]


def _rects(layouts: object) -> dict[str, tuple[int, int, bool]]:
    rects: dict[str, tuple[int, int, bool]] = {}
    for layout in _records(layouts):
        panes = _records(layout.get("panes"))
        for entry in panes:
            rect = entry.get("rect")
            pane_id = entry.get("pane_id")
            if not isinstance(rect, Mapping) or not isinstance(pane_id, str):
                continue
            width, height = _int(rect, "width"), _int(rect, "height")
            if width and height:
                rects[pane_id] = (width, height, len(panes) > 1)
    return rects


def parse_snapshot(
    *,
    workspaces: object,
    tabs: object,
    panes: object,
    layouts: object = None,
    protocol: int | None = None,
) -> Snapshot:
    """Build a :class:`Snapshot` from ``session.snapshot`` arrays (or the list trio)."""
    return Snapshot(
        workspaces=tuple(w for w in map(parse_workspace, _records(workspaces)) if w),
        tabs=tuple(t for t in map(parse_tab, _records(tabs)) if t),
        panes=tuple(p for p in map(parse_pane, _records(panes)) if p),
        rects=_rects(layouts),
        protocol=protocol,
    )


def terminal_name(pane: HerdrPane) -> str:
    """What runs in the pane, for people: the agent's name (``Claude``, or the name
    its integration gives, ``display_agent``) or ``Shell``."""
    if pane.display_agent:
        return pane.display_agent
    return pane.agent[:1].upper() + pane.agent[1:] if pane.agent else "Shell"


def pane_name(pane: HerdrPane) -> str:
    """The pane's name where a Prowl client shows a title: Herdr's own order
    (the reported ``title``, the name the user gave, src/app/actions.rs), then
    the title the program set on its terminal (what a Ghostty tab shows in
    Prowl's host), else what runs there (:func:`terminal_name`)."""
    return pane.title or pane.label or pane.terminal_title or terminal_name(pane)


#: Herdr's status words (state_label_text, src/app/actions.rs 0.8.2); ``unknown`` says nothing.
_STATUS_WORDS = {"idle": "idle", "done": "done", "working": "working", "blocked": "blocked"}


def _status(pane: HerdrPane) -> list[str]:
    """``[agent, status]`` for an agent pane, as Herdr lists it (``Claude · done``)."""
    if not pane.agent:
        return []
    words = [] if pane_name(pane) == terminal_name(pane) else [terminal_name(pane)]
    status = _STATUS_WORDS.get(pane.agent_status)
    return words + ([status] if status else [])


def pane_labels(snapshot: Snapshot, ids: Mapping[str, UUID]) -> list[tuple[HerdrPane, PaneInfo]]:
    """Pane descriptions in workspace → tab → pane order (Herdr's array order);
    ``ids`` gives each pane's UUID by its ``terminal_id`` (panes without one are
    left out)."""
    workspaces = {w.id: w for w in snapshot.workspaces}
    tab_order = {t.id: i for i, t in enumerate(snapshot.tabs)}
    tabs = {t.id: t for t in snapshot.tabs}
    workspace_order = {w.id: i for i, w in enumerate(snapshot.workspaces)}
    per_tab: dict[str, list[HerdrPane]] = {}
    for pane in snapshot.panes:
        per_tab.setdefault(pane.tab_id, []).append(pane)
    ordered = sorted(
        snapshot.panes,
        key=lambda p: (
            workspace_order.get(p.workspace_id, 1 << 30),
            tab_order.get(p.tab_id, 1 << 30),
        ),
    )
    result = []
    for pane in ordered:
        key = ids.get(pane.terminal_id)
        if key is None:
            continue
        workspace = workspaces.get(pane.workspace_id)
        tab = tabs.get(pane.tab_id)
        workspace_label = workspace.label if workspace else pane.workspace_id
        parts = [tab.label if tab else pane.tab_id, pane_name(pane)]
        siblings = per_tab.get(pane.tab_id, [])
        if len(siblings) > 1:
            parts.append(f"Pane {siblings.index(pane) + 1}")
        directory = pane.cwd or (workspace.cwd if workspace else None) or ""
        project = workspace_label or (Path(directory).name if directory else None)
        result.append(
            (
                pane,
                PaneInfo(
                    id=key,
                    title=" · ".join([workspace_label, *parts]),
                    directory=directory,
                    project_name=project or None,
                    # The title stays put (the apps sort by it); what the agent
                    # is doing goes after it, in Herdr's words.
                    subtitle=" · ".join([*parts, *_status(pane)]),
                ),
            )
        )
    return result


_ROW_BREAK = re.compile(r"\r?\n")


def split_rows(text: str) -> list[str]:
    """Rows of a ``pane.read`` text: Herdr separates them with ``\r\n`` (a bare
    ``\n`` is accepted too, as some recorded captures have it)."""
    return _ROW_BREAK.split(text)


def strip_escapes(text: str) -> str:
    """Text without SGR or any other escape sequence."""
    return _ESCAPES.sub("", text)


def grid_size(
    pane: HerdrPane, snapshot: Snapshot, rows_text: list[str] | None = None
) -> tuple[int, int]:
    """Best estimate of a pane's grid: rows from ``scroll.viewport_rows``, columns
    from its layout rect (minus the border of a split tab), never narrower than
    the widest row actually read.
    """
    rect = snapshot.rects.get(pane.pane_id)
    columns = 0
    rows = pane.viewport_rows or 0
    if rect is not None:
        width, height, split = rect
        columns = width - 2 if split else width
        if not rows:
            rows = height - 2 if split else height
    # Nothing known: assume a classic 80x24 at least.
    columns, rows = columns or 80, rows or 24
    if rows_text:
        columns = max(columns, *(text_width(strip_escapes(r)) for r in rows_text))
        rows = max(rows, len(rows_text))
    return max(1, min(columns, 1000)), max(1, min(rows, 1000))


def frame_from_rows(rows_text: list[str]) -> bytes:
    """VT bytes that draw ``pane.read format=ansi`` rows on a cleared screen.

    Herdr trims trailing blank rows and spaces, so each row is placed with an
    explicit cursor move; rows beyond the text stay blank.
    """
    out = bytearray(b"\x1b[H\x1b[2J")
    for index, row in enumerate(rows_text):
        out += b"\x1b[%d;1H\x1b[0m" % (index + 1) + row.encode("utf-8", "replace")
    out += b"\x1b[0m\x1b[1;1H"
    return bytes(out)


def scroll_bounds(pane: HerdrPane) -> ScrollBounds:
    """Bounds from ``PaneInfo.scroll``; unknown when there is no scrollback at all
    (a full-screen program, or nothing printed yet)."""
    offset, maximum = pane.offset_from_bottom, pane.max_offset_from_bottom
    if offset is None or not maximum:
        return ScrollBounds()
    return ScrollBounds(at_top=offset >= maximum, at_bottom=offset == 0)


def resolve_socket_path(
    explicit: str | None, environ: Mapping[str, str], *, session: str | None = None
) -> Path:
    """Herdr's own order: ``--herdr-socket``, ``HERDR_SOCKET_PATH``, a named session
    (``--herdr-session`` or ``HERDR_SESSION``), then the default path."""
    if explicit:
        return Path(explicit).expanduser()
    if environ.get("HERDR_SOCKET_PATH"):
        return Path(environ["HERDR_SOCKET_PATH"]).expanduser()
    base = Path(environ.get("XDG_CONFIG_HOME") or Path(environ.get("HOME", "~")) / ".config")
    name = session or environ.get("HERDR_SESSION")
    if name:
        return (base / "herdr" / "sessions" / name / "herdr.sock").expanduser()
    return (base / "herdr" / "herdr.sock").expanduser()
