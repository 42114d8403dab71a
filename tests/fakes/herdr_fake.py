"""A faithful fake Herdr server for tests (Herdr itself cannot run here). I/O.

Herdr's JSON socket API as ``/work/shared/spec/herdr.md`` and the research notes
describe it, quirks included:

* a Unix socket, **one request per connection**: one line (within 5 s, at most
  1 MiB), one answer line, then the connection closes (``events.subscribe`` and
  the private ``fake.observe`` stream instead);
* requests ``{"id": <string>, "method": …, "params": {…}}``; a request that does
  not deserialize gets ``"id": ""``, code ``invalid_request`` and serde's message
  (``unknown variant `x`, expected one of …``, ``missing field `pane_id```,
  ``invalid type: integer `5`, expected a string``), followed, as serde_json does,
  by `` at line 1 column N`` where N is the length of the line (Herdr flattens the
  method into the request, so serde reports every such error at the end of it);
* optional fields omitted (never ``null``), ``revision`` always 0, keys in Herdr's
  declaration order, compact JSON;
* protocols 16, 20 and 22 (``agent.send`` only at 16, ``agent.prompt`` from 17,
  ``pane.scroll`` only at 22), and an old server without ``session.snapshot``.

And as the released program's source does it (herdrdev/herdr 0.8.2; the file
is cited beside each behaviour below):

* an ``agent.start`` launch that is pending for at least 3 s (recognised idle,
  ``done`` in a background tab, meanwhile) before it is ``interactive_ready``,
  both flags left out of the record while false; ``agent.prompt`` refused with
  ``agent_not_ready`` until then; a launch whose agent exits (``agent_launch``);
* a restart with session restore (``saved_session`` / ``restore=``) and a live
  hand-off (``live_handoff``): the same public pane ids, every ``terminal_id`` new;
* a text harvest (another client's ``recent`` text read of an idle agent on the
  alternate screen with the mouse on) that holds every ANSI read of the pane
  until it ends (``harvest_seconds``);
* an observe program of another client protocol refused at its handshake, with
  Herdr's words (``tests/fakes/herdr`` prints them and exits 1);
* ``terminal_title_stripped``, ``display_agent`` and ``title`` as Herdr reports them.

Every pane is a real program in a real PTY whose output feeds a libghostty
:class:`~mirror_host.terminal.Screen` (which also answers the program's terminal
queries). ``fake.observe`` (used by the fake ``herdr`` CLI next to this file)
streams Herdr-style ANSI frames of a pane, pushed on change.

Tests drive it from Python::

    fake = FakeHerdr(socket_path, protocol=22, snapshot=True)
    await nursery.start(fake.serve)
    workspace = fake.add_workspace("demo", cwd=path)
    tab = fake.add_tab(workspace)
    pane = await fake.add_pane(tab, "bash --norc", columns=80, rows=24)
    fake.set_agent_status(pane, "working")      # events, roll-ups
    fake.requests, fake.received_input(pane)    # what clients sent
    await fake.stop()                            # kills every pane, unlinks the socket

A slow Herdr (its main loop busy, so requests wait their turn) is one call
away; only the delayed request's own connection waits, never the whole fake::

    fake.delay_method("pane.read", 10.0, when=lambda p: p.get("source") == "recent")
    await fake.wait_held("pane.read")   # one such request is being held now
    fake.holding("pane.read")           # how many are held
    fake.clear_delay("pane.read")       # no more delays; held requests go on at once
    fake.clear_delay()                  # the same for every method

By default a delayed request is handled (and answered) when its delay ends: a
delayed ``pane.scroll`` scrolls late, a delayed ``pane.read`` reads the screen
as it is then. With ``stage="answer"`` it is handled at once and only its
answer waits (a ``session.snapshot`` then describes the session as it was).
``when`` sees the request's ``params``; without it every request of the method
waits. A new ``delay_method`` for the same method applies to requests that
arrive after it. Only requests that deserialize are delayed (serde errors are
answered at once, as Herdr answers them before its main loop sees them).

``fake.observe {target, cols, rows}`` (private) keeps the connection open and
sends ``{"seq":n,"full":bool,"width":c,"height":r,"bytes":"<base64>"}`` per frame,
then ``{"closed":"<reason>"}`` (``null`` when the server stops).

Run by hand: ``python -m tests.fakes.herdr_fake --socket /tmp/h.sock --pane bash``.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import fcntl
import json
import logging
import os
import re
import secrets
import shlex
import signal
import struct
import subprocess
import sys
import termios
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import trio
from pyghostty import lib
from pyghostty.core import init_sized

from mirror_host.terminal import Screen
from mirror_host.width import char_width

__all__ = [
    "AGENT_START_SETTLE_SECONDS",
    "PROTOCOLS",
    "FakeHerdr",
    "FrameEncoder",
    "SavedSession",
    "encode_key",
    "main",
    "read_screen",
]

logger = logging.getLogger(__name__)

PROTOCOLS = (16, 20, 22)
_VERSIONS = {16: "0.7.4", 20: "0.8.2", 22: "0.9.0"}

MAX_REQUEST_BYTES = 1024 * 1024
REQUEST_TIMEOUT = 5.0
WRITE_TIMEOUT = 5.0
_FRAME_INTERVAL = 1 / 60
_SUBSCRIPTION_TICK = 0.1
_EVENT_QUEUE = 512
_READ_BYTES = 65_536
_REPLY_QUEUE = 256
_MAX_READ_LINES = 1000
_DEFAULT_RECENT_LINES = 80
_PROMPT_ENTER_DELAY = 0.3
_PROMPT_STALL_SECONDS = 5.0
_OBSERVE_COLUMNS, _OBSERVE_ROWS = 120, 40
#: A managed agent launch settles no sooner than this (AGENT_START_SETTLE_DELAY) and is
#: dropped after its start timeout (DEFAULT_AGENT_START_TIMEOUT): src/app/agents.rs 0.8.2.
AGENT_START_SETTLE_SECONDS = 3.0
_AGENT_START_TIMEOUT_MS = 30_000

# The method enum of Herdr 0.9.0 (protocol 22), in declaration order, as its
# unknown-variant error lists it (live capture, herdr-gsd-core M0-H).
_METHODS_22: tuple[str, ...] = (
    "ping",
    "server.stop",
    "server.live_handoff",
    "server.reload_config",
    "server.agent_manifests",
    "server.reload_agent_manifests",
    "notification.show",
    "product_announcement.dismiss",
    "release_notes.dismiss",
    "command.invoke",
    "client.window_title.set",
    "client.window_title.clear",
    "client_shell.surface.set",
    "session.snapshot",
    "workspace.create",
    "workspace.list",
    "workspace.get",
    "workspace.focus",
    "workspace.rename",
    "workspace.move",
    "workspace.move_block",
    "workspace.report_metadata",
    "workspace.close",
    "worktree.list",
    "worktree.create",
    "worktree.open",
    "worktree.remove",
    "tab.create",
    "tab.list",
    "tab.get",
    "tab.focus",
    "tab.rename",
    "tab.move",
    "tab.close",
    "agent.list",
    "agent.get",
    "agent.read",
    "agent.explain",
    "agent.send_keys",
    "agent.rename",
    "agent.view.set",
    "agent.view.clear",
    "agent.focus",
    "agent.start",
    "agent.prompt",
    "agent.wait",
    "pane.split",
    "pane.swap",
    "pane.move",
    "pane.zoom",
    "pane.layout",
    "pane.process_info",
    "layout.export",
    "layout.apply",
    "layout.set_split_ratio",
    "pane.neighbor",
    "pane.edges",
    "pane.focus_direction",
    "pane.resize",
    "pane.scroll",
    "pane.edit_scrollback",
    "pane.selection.read",
    "pane.copy_motion",
    "pane.copy_search",
    "pane.list",
    "pane.current",
    "pane.get",
    "pane.focus",
    "pane.input.set",
    "pane.link.activate",
    "pane.rename",
    "pane.send_text",
    "pane.send_keys",
    "pane.send_input",
    "pane.read",
    "pane.graphics.set",
    "pane.graphics.clear",
    "pane.graphics.info",
    "pane.graphics.stream",
    "pane.report_agent",
    "pane.report_agent_session",
    "pane.report_metadata",
    "pane.clear_agent_authority",
    "pane.release_agent",
    "pane.close",
    "popup.close",
    "events.subscribe",
    "events.wait",
    "pane.wait_for_output",
    "integration.list",
    "integration.install",
    "integration.uninstall",
    "plugin.link",
    "plugin.list",
    "plugin.unlink",
    "plugin.enable",
    "plugin.disable",
    "plugin.action.list",
    "plugin.action.invoke",
    "plugin.log.list",
    "plugin.pane.open",
    "plugin.pane.focus",
    "plugin.pane.close",
)
# herdr.md §1.6: methods protocol 22 added, and those 17-20 added.
_ADDED_IN_22 = frozenset(
    {
        "pane.scroll",
        "pane.edit_scrollback",
        "pane.selection.read",
        "pane.copy_motion",
        "pane.copy_search",
        "pane.link.activate",
        "command.invoke",
        "integration.list",
        "release_notes.dismiss",
        "product_announcement.dismiss",
        "client_shell.surface.set",
    }
)
_ADDED_IN_17_TO_20 = frozenset(
    {
        "agent.send_keys",
        "agent.prompt",
        "agent.wait",
        "agent.view.set",
        "agent.view.clear",
        "workspace.move_block",
        "pane.input.set",
    }
)
#: Private: the observe stream behind the fake ``herdr`` CLI. Never advertised.
_PRIVATE_METHODS = frozenset({"fake.observe"})

_LIFECYCLE_TYPES: tuple[str, ...] = (
    "workspace.created",
    "workspace.updated",
    "workspace.metadata_updated",
    "workspace.renamed",
    "workspace.moved",
    "workspace.reordered",
    "workspace.closed",
    "workspace.focused",
    "worktree.created",
    "worktree.opened",
    "worktree.removed",
    "tab.created",
    "tab.closed",
    "tab.focused",
    "tab.renamed",
    "tab.moved",
    "pane.created",
    "pane.closed",
    "pane.updated",
    "pane.focused",
    "pane.moved",
    "pane.exited",
    "pane.agent_detected",
    "layout.updated",
)
_PANE_SCOPED_TYPES: tuple[str, ...] = (
    "pane.output_matched",
    "pane.agent_status_changed",
    "pane.scroll_changed",
)
_READ_SOURCES = ("visible", "recent", "recent_unwrapped", "detection")
_READ_FORMATS = ("text", "ansi")
_AGENT_STATUSES = ("idle", "working", "blocked", "done", "unknown")
_MATCH_TYPES = ("substring", "regex")
#: Roll-up order for workspace and tab ``agent_status``.
_STATUS_PRIORITY = {"blocked": 4, "working": 3, "done": 2, "idle": 1, "unknown": 0}
_AGENT_NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}")


def _method_names(protocol: int, snapshot: bool) -> tuple[str, ...]:
    """The methods a server of ``protocol`` accepts, in enum order."""
    names = [m for m in _METHODS_22 if protocol >= 22 or m not in _ADDED_IN_22]
    if protocol < 17:
        names = [m for m in names if m not in _ADDED_IN_17_TO_20]
        names.insert(names.index("agent.rename"), "agent.send")
    if not snapshot:
        names.remove("session.snapshot")
    return tuple(names)


def _subscription_types(protocol: int) -> tuple[str, ...]:
    lifecycle = [t for t in _LIFECYCLE_TYPES if protocol >= 19 or t != "workspace.reordered"]
    return (*lifecycle, *_PANE_SCOPED_TYPES)


# ---------------------------------------------------------------- JSON and serde


def _dumps(value: object) -> bytes:
    """One compact JSON line, as serde_json writes it (UTF-8, not ASCII-escaped)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


class _InvalidRequest(Exception):
    """The request does not deserialize; ``str()`` is serde's message."""


class _ApiError(Exception):
    """A method failed: an error object with the request's id."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _unexpected(value: object) -> str:
    """serde's ``Unexpected`` wording for a JSON value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean `{'true' if value else 'false'}`"
    if isinstance(value, int):
        return f"integer `{value}`"
    if isinstance(value, float):
        return f"floating point `{value}`"
    if isinstance(value, str):
        return f"string {json.dumps(value, ensure_ascii=False)}"
    if isinstance(value, list):
        return "sequence"
    return "map"


def _expected_one_of(variants: Sequence[str]) -> str:
    if not variants:
        return "there are no variants"
    if len(variants) == 1:
        return f"expected `{variants[0]}`"
    if len(variants) == 2:
        return f"expected `{variants[0]}` or `{variants[1]}`"
    return "expected one of " + ", ".join(f"`{v}`" for v in variants)


def _invalid_type(value: object, expected: str) -> _InvalidRequest:
    return _InvalidRequest(f"invalid type: {_unexpected(value)}, expected {expected}")


def _unknown_variant(value: str, variants: Sequence[str]) -> _InvalidRequest:
    return _InvalidRequest(f"unknown variant `{value}`, {_expected_one_of(variants)}")


@dataclass(frozen=True, slots=True)
class _Field:
    """One field of a params struct."""

    name: str
    kind: str
    required: bool = False
    #: ``Option<T>``: an explicit ``null`` is accepted.
    nullable: bool = False
    variants: tuple[str, ...] = ()


def _opt(name: str, kind: str = "string", variants: tuple[str, ...] = ()) -> _Field:
    return _Field(name, kind, nullable=True, variants=variants)


def _req(name: str, kind: str = "string", variants: tuple[str, ...] = ()) -> _Field:
    return _Field(name, kind, required=True, variants=variants)


_PANE_ID = _req("pane_id")
_PARAMS: dict[str, tuple[str, tuple[_Field, ...]]] = {
    "ping": ("PingParams", ()),
    "session.snapshot": ("EmptyParams", ()),
    "workspace.list": ("EmptyParams", ()),
    "workspace.get": ("WorkspaceTarget", (_req("workspace_id"),)),
    "tab.list": ("TabListParams", (_opt("workspace_id"),)),
    "tab.get": ("TabTarget", (_req("tab_id"),)),
    "tab.create": (
        "TabCreateParams",
        (
            _opt("workspace_id"),
            _opt("cwd"),
            _opt("label"),
            _Field("focus", "bool"),
            _opt("env", "map"),
        ),
    ),
    "pane.list": ("PaneListParams", (_opt("workspace_id"),)),
    "pane.get": ("PaneTarget", (_PANE_ID,)),
    "pane.close": ("PaneTarget", (_PANE_ID,)),
    "pane.read": (
        "PaneReadParams",
        (
            _PANE_ID,
            _req("source", "enum", _READ_SOURCES),
            _opt("lines", "u32"),
            _Field("format", "enum", variants=_READ_FORMATS),
            _Field("strip_ansi", "bool"),
        ),
    ),
    "pane.send_text": ("PaneSendTextParams", (_PANE_ID, _req("text"))),
    "pane.send_keys": ("PaneSendKeysParams", (_PANE_ID, _req("keys", "strings"))),
    "pane.send_input": (
        "PaneSendInputParams",
        (_PANE_ID, _opt("text"), _Field("keys", "strings")),
    ),
    "pane.scroll": ("PaneScrollParams", (_PANE_ID, _req("offset_from_bottom", "u64"))),
    "agent.send": ("AgentSendParams", (_req("target"), _req("text"))),
    "agent.prompt": ("AgentPromptParams", (_req("target"), _req("text"), _opt("wait", "wait"))),
    "agent.get": ("AgentTarget", (_req("target"),)),
    "agent.list": ("EmptyParams", ()),
    "agent.start": (
        "AgentStartParams",
        (
            _req("name"),
            _req("kind"),
            _PANE_ID,
            _Field("args", "strings"),
            _opt("timeout_ms", "u64"),
        ),
    ),
    "events.subscribe": ("EventsSubscribeParams", (_req("subscriptions", "subscriptions"),)),
    "fake.observe": (
        "FakeObserveParams",
        (_req("target"), _opt("cols", "u16"), _opt("rows", "u16"), _opt("version", "u32")),
    ),
}
_UINT_MAX = {"u16": 0xFFFF, "u32": 0xFFFF_FFFF, "u64": 0xFFFF_FFFF_FFFF_FFFF}


def _check_uint(value: object, kind: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid_type(value, kind)
    if not 0 <= value <= _UINT_MAX[kind]:
        raise _InvalidRequest(f"invalid value: integer `{value}`, expected {kind}")


def _check_strings(value: object) -> None:
    if not isinstance(value, list):
        raise _invalid_type(value, "a sequence")
    for item in value:
        if not isinstance(item, str):
            raise _invalid_type(item, "a string")


def _check_struct(name: str, fields: Sequence[_Field], value: object, types: Sequence[str]) -> None:
    """Check ``value`` as serde derives a struct: type errors in key order, then missing."""
    if not isinstance(value, dict):
        raise _invalid_type(value, f"struct {name}")
    by_name = {f.name: f for f in fields}
    for key, item in value.items():
        spec = by_name.get(key)
        if spec is not None:
            _check_value(spec, item, types)
    for spec in fields:
        if spec.required and spec.name not in value:
            raise _InvalidRequest(f"missing field `{spec.name}`")


def _check_value(spec: _Field, value: object, types: Sequence[str]) -> None:
    if value is None and spec.nullable:
        return
    kind = spec.kind
    if kind == "string":
        if not isinstance(value, str):
            raise _invalid_type(value, "a string")
    elif kind in _UINT_MAX:
        _check_uint(value, kind)
    elif kind == "bool":
        if not isinstance(value, bool):
            raise _invalid_type(value, "a boolean")
    elif kind == "strings":
        _check_strings(value)
    elif kind == "map":
        if not isinstance(value, dict):
            raise _invalid_type(value, "a map")
        for item in value.values():
            if not isinstance(item, str):
                raise _invalid_type(item, "a string")
    elif kind == "enum":
        if not isinstance(value, str):
            raise _invalid_type(value, "variant identifier")
        if value not in spec.variants:
            raise _unknown_variant(value, spec.variants)
    elif kind == "wait":
        _check_wait(value)
    elif kind == "subscriptions":
        if not isinstance(value, list):
            raise _invalid_type(value, "a sequence")
        for item in value:
            _check_subscription(item, types)


def _check_wait(value: object) -> None:
    if not isinstance(value, dict):
        raise _invalid_type(value, "struct AgentPromptWaitOptions")
    for key, item in value.items():
        if key == "until":
            if not isinstance(item, list):
                raise _invalid_type(item, "a sequence")
            for status in item:
                _check_value(_Field("until", "enum", variants=_AGENT_STATUSES), status, ())
        elif key == "timeout_ms" and item is not None:
            _check_uint(item, "u64")


_SUBSCRIPTION_FIELDS: dict[str, tuple[_Field, ...]] = {
    "pane.agent_status_changed": (_PANE_ID, _opt("agent_status", "enum", _AGENT_STATUSES)),
    "pane.scroll_changed": (_PANE_ID,),
    "pane.output_matched": (
        _PANE_ID,
        _req("source", "enum", _READ_SOURCES),
        _req("match", "match"),
        _opt("lines", "u32"),
    ),
}


def _check_subscription(item: object, types: Sequence[str]) -> None:
    """An internally tagged ``Subscription`` (``{"type": …, …}``)."""
    if not isinstance(item, dict):
        raise _invalid_type(item, "internally tagged enum Subscription")
    if "type" not in item:
        raise _InvalidRequest("missing field `type`")
    kind = item["type"]
    if not isinstance(kind, str):
        raise _invalid_type(kind, "variant identifier")
    if kind not in types:
        raise _unknown_variant(kind, types)
    fields = _SUBSCRIPTION_FIELDS.get(kind, ())
    for key, value in item.items():
        spec = next((f for f in fields if f.name == key), None)
        if spec is None:
            continue
        if spec.kind == "match":
            _check_match(value)
        else:
            _check_value(spec, value, types)
    for spec in fields:
        if spec.required and spec.name not in item:
            raise _InvalidRequest(f"missing field `{spec.name}`")


def _check_match(value: object) -> None:
    if not isinstance(value, dict):
        raise _invalid_type(value, "internally tagged enum OutputMatch")
    if "type" not in value:
        raise _InvalidRequest("missing field `type`")
    _check_value(_Field("type", "enum", variants=_MATCH_TYPES), value["type"], ())
    if "value" not in value:
        raise _InvalidRequest("missing field `value`")
    if not isinstance(value["value"], str):
        raise _invalid_type(value["value"], "a string")


_JSON_MESSAGES = {
    "Expecting value": "expected value",
    "Extra data": "trailing characters",
    "Expecting property name enclosed in double quotes": "key must be a string",
    "Expecting ',' delimiter": "expected `,` or `}`",
    "Expecting ':' delimiter": "expected `:`",
    "Unterminated string starting at": "EOF while parsing a string",
    "Invalid control character at": (
        "control character (\\u0000-\\u001F) found while parsing a string"
    ),
}


def _parse_json(line: bytes) -> object:
    """The JSON value of a request line, or serde_json's syntax error."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _InvalidRequest(
            f"invalid unicode code point at line 1 column {exc.start + 1}"
        ) from exc
    if not text.strip():
        raise _InvalidRequest(f"EOF while parsing a value at line 1 column {len(line)}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        message = _JSON_MESSAGES.get(exc.msg, "expected value")
        raise _InvalidRequest(f"{message} at line {exc.lineno} column {exc.colno}") from exc


def _check_request(
    value: object, methods: Collection[str], ordered: Sequence[str], types: Sequence[str]
) -> tuple[str, str, dict[str, Any]]:
    """``(id, method, params)`` of a request, checked as Herdr's serde types check it."""
    if not isinstance(value, dict):
        raise _invalid_type(value, "struct Request")
    if "id" in value and not isinstance(value["id"], str):
        raise _invalid_type(value["id"], "a string")
    if "id" not in value:
        raise _InvalidRequest("missing field `id`")
    if "method" not in value:
        raise _InvalidRequest("missing field `method`")
    method = value["method"]
    if not isinstance(method, str):
        raise _invalid_type(method, "variant identifier")
    if method not in methods:
        raise _unknown_variant(method, ordered)
    if "params" not in value:
        raise _InvalidRequest("missing field `params`")
    params = value["params"]
    struct_name, fields = _PARAMS.get(method, ("Params", ()))
    _check_struct(struct_name, fields, params, types)
    return value["id"], method, params


# ---------------------------------------------------------------- keys


_NAMED_KEYS = {
    "enter": b"\r",
    "return": b"\r",
    "esc": b"\x1b",
    "escape": b"\x1b",
    "tab": b"\t",
    "backspace": b"\x7f",
    "bs": b"\x7f",
    "space": b" ",
}
_ARROWS = {"up": "A", "down": "B", "right": "C", "left": "D"}
_SS3_FUNCTION_KEYS = {1: "P", 2: "Q", 3: "R", 4: "S"}
_CSI_FUNCTION_KEYS = {5: 15, 6: 17, 7: 18, 8: 19, 9: 20, 10: 21, 11: 23, 12: 24}
_PUNCTUATION = {
    "minus": "-",
    "plus": "+",
    "equal": "=",
    "equals": "=",
    "slash": "/",
    "backslash": "\\",
    "semicolon": ";",
    "colon": ":",
    "comma": ",",
    "period": ".",
    "dot": ".",
    "quote": "'",
    "apostrophe": "'",
    "backquote": "`",
    "grave": "`",
    "tilde": "~",
    "bracketleft": "[",
    "bracketright": "]",
    "question": "?",
    "underscore": "_",
    "pipe": "|",
}
_MODIFIERS = {
    "ctrl": "ctrl",
    "control": "ctrl",
    "shift": "shift",
    "alt": "alt",
    "cmd": "super",
    "super": "super",
}
_CTRL_SYMBOLS = {"@": 0, " ": 0, "[": 27, "\\": 28, "]": 29, "^": 30, "_": 31, "?": 127}


def _ctrl_char(char: str) -> bytes:
    if char.isascii() and char.isalpha():
        return bytes((ord(char.upper()) - 64,))
    code = _CTRL_SYMBOLS.get(char)
    return bytes((code,)) if code is not None else char.encode()


def encode_key(
    name: str, *, application_cursor: bool = False, allow_tmux_alias: bool = True
) -> bytes:
    """The bytes Herdr's ``send_keys`` grammar writes for ``name`` (legacy encoding).

    Raises:
        ValueError: Herdr would answer ``invalid_key`` (``unsupported key X``).
    """
    if len(name) == 1:
        return name.encode()
    spec = name
    if allow_tmux_alias and re.fullmatch(r"C-.", spec):
        spec = "ctrl+" + spec[2:]
    if spec.endswith("++"):
        key, modifier_names = "+", spec[:-2].split("+")
    else:
        *modifier_names, key = spec.split("+")
    modifiers = set()
    for modifier in modifier_names:
        mapped = _MODIFIERS.get(modifier.lower())
        if mapped is None:
            raise ValueError(name)
        modifiers.add(mapped)
    lower = key.lower()
    char = key if len(key) == 1 else _PUNCTUATION.get(lower)
    if char is not None:
        if char.isupper():
            modifiers.add("shift")
        if "shift" in modifiers and char.isalpha():
            char = char.upper()
        data = _ctrl_char(char) if "ctrl" in modifiers else char.encode()
        return b"\x1b" + data if "alt" in modifiers else data
    parameter = (
        1
        + (1 if "shift" in modifiers else 0)
        + (2 if "alt" in modifiers else 0)
        + (4 if "ctrl" in modifiers else 0)
    )
    if lower in _NAMED_KEYS:
        if lower == "tab" and "shift" in modifiers:
            data = b"\x1b[Z"
        elif lower in ("backspace", "bs") and "ctrl" in modifiers:
            data = b"\x08"
        elif lower == "space" and "ctrl" in modifiers:
            data = b"\x00"
        else:
            data = _NAMED_KEYS[lower]
        return b"\x1b" + data if "alt" in modifiers else data
    if lower in _ARROWS:
        final = _ARROWS[lower]
        if parameter > 1:
            return f"\x1b[1;{parameter}{final}".encode()
        return (b"\x1bO" if application_cursor else b"\x1b[") + final.encode()
    number = re.fullmatch(r"f([0-9]{1,2})", lower)
    if number:
        n = int(number.group(1))
        if n in _SS3_FUNCTION_KEYS:
            final = _SS3_FUNCTION_KEYS[n]
            return (f"\x1b[1;{parameter}{final}" if parameter > 1 else f"\x1bO{final}").encode()
        if n in _CSI_FUNCTION_KEYS:
            code = _CSI_FUNCTION_KEYS[n]
            return (f"\x1b[{code};{parameter}~" if parameter > 1 else f"\x1b[{code}~").encode()
    raise ValueError(name)


# ---------------------------------------------------------------- screen formatting
#
# libghostty's formatter through the Screen's native handles (the same calls
# Screen makes for its own text and VT output, with other selections).


def _format(
    screen: Screen,
    start: tuple[int, int, str],
    end: tuple[int, int, str],
    *,
    vt: bool,
    unwrap: bool = False,
    trim: bool = True,
) -> bytes:
    terminal = screen._terminal
    options = init_sized("GhosttyFormatterTerminalOptions")
    options.emit = lib.GHOSTTY_FORMATTER_FORMAT_VT if vt else lib.GHOSTTY_FORMATTER_FORMAT_PLAIN
    options.unwrap = unwrap
    options.trim = trim
    selection = init_sized("GhosttySelection")
    selection.start = terminal.ref(*start)[0]
    selection.end = terminal.ref(*end)[0]
    options.selection = selection
    data: bytes = screen._format(options)
    return data


def _scrollbar(screen: Screen) -> tuple[int, int, int]:
    """``(total rows, viewport top, viewport rows)``."""
    total, offset, length = screen.scrollbar
    return total, offset, length


def _scroll_info(screen: Screen) -> dict[str, int]:
    total, offset, length = _scrollbar(screen)
    return {
        "offset_from_bottom": max(0, total - (offset + length)),
        "max_offset_from_bottom": max(0, total - length),
        "viewport_rows": screen.size[1],
    }


_ESCAPE = re.compile(
    rb"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[PX^_][^\x1b]*\x1b\\|[ -/]*[0-~])"
)
_SGR = re.compile(rb"\x1b\[([0-9;:]*)m")


def _only_sgr(data: bytes) -> bytes:
    """``data`` without any escape sequence other than SGR."""
    return _ESCAPE.sub(lambda m: m.group(0) if _SGR.fullmatch(m.group(0)) else b"", data)


def _ansi_rows(data: bytes) -> list[str]:
    """Formatter VT output as ``pane.read format=ansi`` rows: SGR only, trimmed."""
    rows = [row.rstrip(b" ") for row in _only_sgr(data).split(b"\r\n")]
    while rows and not _SGR.sub(b"", rows[-1]).strip(b" "):
        rows.pop()
    return [row.decode("utf-8", "replace") for row in rows]


def _text_rows(text: str) -> list[str]:
    rows = [row.rstrip(" ") for row in text.split("\n")]
    while rows and not rows[-1]:
        rows.pop()
    return rows


def _last(rows: list[str], limit: int | None, separator: str) -> tuple[str, bool]:
    if limit is not None and len(rows) > limit:
        return separator.join(rows[len(rows) - limit :]), True
    return separator.join(rows), False


def read_screen(
    screen: Screen, source: str, fmt: str = "text", lines: int | None = None
) -> tuple[str, bool]:
    """``(text, truncated)`` of a ``pane.read`` (herdr.md §1.3, "How lines works")."""
    if lines == 0:
        return "", True
    limit = None if lines is None else min(lines, _MAX_READ_LINES)
    columns, rows = screen.size
    if source == "detection":
        return _last(_text_rows(screen.active_text()), limit, "\n")
    if source == "visible":
        if fmt == "ansi":
            data = _format(screen, (0, 0, "viewport"), (columns - 1, rows - 1, "viewport"), vt=True)
            return _last(_ansi_rows(data), limit, "\r\n")
        return _last(_text_rows(screen.viewport_text()), limit, "\n")
    limit = _DEFAULT_RECENT_LINES if limit is None else limit
    total = _scrollbar(screen)[0]
    unwrap = source == "recent_unwrapped"
    whole = ((0, 0, "screen"), (columns - 1, total - 1, "screen"))
    plain = _text_rows(_format(screen, *whole, vt=False, unwrap=unwrap).decode("utf-8", "replace"))
    if fmt == "text":
        return _last(plain, limit, "\n")
    if unwrap or not plain:
        return _last(_ansi_rows(_format(screen, *whole, vt=True, unwrap=unwrap)), limit, "\r\n")
    first = max(0, len(plain) - limit)
    data = _format(screen, (0, first, "screen"), (columns - 1, len(plain) - 1, "screen"), vt=True)
    return "\r\n".join(_ansi_rows(data)), len(plain) > limit


# ---------------------------------------------------------------- observe frames

_DEFAULT_SGR = b"\x1b[0;39;49m"
_FRAME_BEGIN = b"\x1b[?2026h\x1b[?25l\x1b]8;;\x1b\\"
_FRAME_END = b"\x1b[?2026l"


@dataclass(slots=True)
class _Pen:
    """SGR state while reading formatter output."""

    bold: bool = False
    faint: bool = False
    italic: bool = False
    underline: int = 0
    blink: bool = False
    inverse: bool = False
    invisible: bool = False
    strike: bool = False
    overline: bool = False
    fg: str = "39"
    bg: str = "49"
    underline_color: str = ""

    def reset(self) -> None:
        self.bold = self.faint = self.italic = False
        self.blink = self.inverse = self.invisible = self.strike = self.overline = False
        self.underline = 0
        self.fg, self.bg, self.underline_color = "39", "49", ""

    def sgr(self) -> bytes:
        """The complete SGR Herdr's encoder writes: reset, attributes, colours."""
        parts = ["0"]
        for flag, code in (
            (self.bold, "1"),
            (self.faint, "2"),
            (self.italic, "3"),
        ):
            if flag:
                parts.append(code)
        if self.underline:
            parts.append("4" if self.underline == 1 else f"4:{self.underline}")
        for flag, code in (
            (self.blink, "5"),
            (self.inverse, "7"),
            (self.invisible, "8"),
            (self.strike, "9"),
            (self.overline, "53"),
        ):
            if flag:
                parts.append(code)
        parts += [self.fg, self.bg]
        if self.underline_color:
            parts.append(self.underline_color)
        return ("\x1b[" + ";".join(parts) + "m").encode()


def _color(base: int, values: list[str]) -> tuple[str | None, int]:
    """An extended colour (``38;5;n`` / ``38;2;r;g;b``) and how many params it used."""
    if values[:1] == ["5"] and len(values) >= 2:
        return f"{base};5;{int(values[1] or 0)}", 2
    if values[:1] == ["2"] and len(values) >= 4:
        r, g, b = (int(v or 0) for v in values[1:4])
        return f"{base};2;{r};{g};{b}", 4
    return None, len(values)


def _apply_sgr(pen: _Pen, params: str) -> None:
    items = params.split(";") if params else ["0"]
    index = 0
    while index < len(items):
        item = items[index]
        index += 1
        if ":" in item:
            sub = item.split(":")
            if sub[0] == "4":
                pen.underline = int(sub[1] or 0)
            elif sub[0] in ("38", "48", "58"):
                values = sub[1:]
                if values[:1] == ["2"] and len(values) >= 5:
                    values = ["2", *values[-3:]]
                color, _ = _color(int(sub[0]), values)
                if color is not None:
                    _set_color(pen, int(sub[0]), color)
            continue
        code = int(item or 0)
        if code in (38, 48, 58):
            color, used = _color(code, items[index:])
            index += used
            if color is not None:
                _set_color(pen, code, color)
        elif code == 0:
            pen.reset()
        elif code == 1:
            pen.bold = True
        elif code == 2:
            pen.faint = True
        elif code == 3:
            pen.italic = True
        elif code == 4:
            pen.underline = 1
        elif code == 21:
            pen.underline = 2
        elif code in (5, 6):
            pen.blink = True
        elif code == 7:
            pen.inverse = True
        elif code == 8:
            pen.invisible = True
        elif code == 9:
            pen.strike = True
        elif code == 22:
            pen.bold = pen.faint = False
        elif code == 23:
            pen.italic = False
        elif code == 24:
            pen.underline = 0
        elif code == 25:
            pen.blink = False
        elif code == 27:
            pen.inverse = False
        elif code == 28:
            pen.invisible = False
        elif code == 29:
            pen.strike = False
        elif code == 53:
            pen.overline = True
        elif code == 55:
            pen.overline = False
        elif 30 <= code <= 37:
            pen.fg = f"38;5;{code - 30}"
        elif code == 39:
            pen.fg = "39"
        elif 40 <= code <= 47:
            pen.bg = f"48;5;{code - 40}"
        elif code == 49:
            pen.bg = "49"
        elif code == 59:
            pen.underline_color = ""
        elif 90 <= code <= 97:
            pen.fg = f"38;5;{code - 90 + 8}"
        elif 100 <= code <= 107:
            pen.bg = f"48;5;{code - 100 + 8}"


def _set_color(pen: _Pen, code: int, color: str) -> None:
    if code == 38:
        pen.fg = color
    elif code == 48:
        pen.bg = color
    else:
        pen.underline_color = color


Segments = tuple[tuple[bytes, bytes], ...]


def _segments(data: bytes, columns: int) -> Segments:
    """Formatter VT output of one row as ``(complete SGR, text)`` runs, at most ``columns``."""
    pen = _Pen()
    runs: list[tuple[bytes, bytes]] = []
    width = 0
    position = 0

    def text(chunk: bytes) -> None:
        nonlocal width
        if not chunk:
            return
        kept = []
        for char in chunk.decode("utf-8", "replace"):
            cells = char_width(char)  # Herdr's grid is libghostty's
            if width + cells > columns:
                break
            width += cells
            kept.append(char)
        if not kept:
            return
        encoded = "".join(kept).encode()
        sgr = pen.sgr()
        if runs and runs[-1][0] == sgr:
            runs[-1] = (sgr, runs[-1][1] + encoded)
        else:
            runs.append((sgr, encoded))

    for match in _ESCAPE.finditer(data):
        text(data[position : match.start()])
        position = match.end()
        sgr = _SGR.fullmatch(match.group(0))
        if sgr is not None:
            _apply_sgr(pen, sgr.group(1).decode())
    text(data[position:])
    return tuple(runs)


def _styled_rows(screen: Screen, columns: int, rows: int) -> list[Segments]:
    """The pane's viewport cropped (top-left) or padded to ``columns`` × ``rows``."""
    pane_columns, pane_rows = screen.size
    width = min(columns, pane_columns)
    result = []
    for y in range(min(rows, pane_rows)):
        data = _format(screen, (0, y, "viewport"), (width - 1, y, "viewport"), vt=True, trim=False)
        result.append(_segments(data, columns))
    result += [()] * (rows - len(result))
    return result


class FrameEncoder:
    """Herdr's per-observer blit encoder: a full repaint, then diffs of changed rows."""

    def __init__(self, columns: int, rows: int) -> None:
        self.columns = columns
        self.rows = rows
        self._last_rows: list[Segments] | None = None
        self._last_cursor: tuple[int, int, bool] | None = None

    def reset(self) -> None:
        """Forget the baseline: the next frame is full."""
        self._last_rows = None
        self._last_cursor = None

    def encode(self, screen: Screen) -> tuple[bool, bytes] | None:
        """``(full, bytes)`` of the next frame, or ``None`` when nothing changed."""
        rows = _styled_rows(screen, self.columns, self.rows)
        x, y = screen.cursor
        visible = (
            screen.mode(25) and not screen.is_scrolled_back and x < self.columns and y < self.rows
        )
        cursor = (min(x, self.columns - 1), min(y, self.rows - 1), visible)
        previous = self._last_rows
        if previous is not None and rows == previous and cursor == self._last_cursor:
            return None
        full = previous is None
        out = bytearray(_FRAME_BEGIN)
        if full:
            out += b"\x1b[2J"
        pen = b""
        blank = b" " * self.columns
        for index, segments in enumerate(rows):
            if previous is not None and previous[index] == segments:
                continue
            move = b"\x1b[%d;1H" % (index + 1)
            out += move
            if pen != _DEFAULT_SGR:
                out += _DEFAULT_SGR
                pen = _DEFAULT_SGR
            out += blank
            if segments:
                out += move
                for sgr, text in segments:
                    if sgr != pen:
                        out += sgr
                        pen = sgr
                    out += text
        out += b"\x1b[0m"
        tail = b"\x1b[%d;%dH" % (cursor[1] + 1, cursor[0] + 1)
        tail += b"\x1b[?25h" if visible else b"\x1b[?25l"
        out += tail + _FRAME_END + tail
        self._last_rows = rows
        self._last_cursor = cursor
        return full, bytes(out)


# ---------------------------------------------------------------- model


#: What observers of a server handing off are told (src/server/headless.rs 0.8.2).
_HANDOFF_REASON = "live update in progress; reconnect after handoff completes"


def _version_refusal(client: int, server: int) -> str:
    """check_client_version's words (src/protocol/wire.rs 0.8.2)."""
    if client < server:
        return (
            f"client version {client} is older than server version {server}; "
            "please upgrade your herdr client"
        )
    return (
        f"client version {client} is newer than server version {server}; "
        "please upgrade the herdr server"
    )


def _new_terminal_id() -> str:
    """A fresh ``term_…`` id (TerminalId::alloc, src/terminal/id.rs 0.8.2: never reused,
    not even for the same pane after a restart)."""
    return f"term_{secrets.token_hex(7)}"


def _pane_number(pane_id: str) -> int:
    """The number of a public pane id ``w1:p3`` (3)."""
    return int(pane_id.rpartition(":p")[2])


def _set_controlling_tty() -> None:  # pragma: no cover - runs in the child
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _wait_for(process: subprocess.Popen[bytes], seconds: float) -> int | None:
    try:
        return process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        return None


#: Claude Code's activity glyphs (src/terminal/title.rs 0.8.2); braille spinners too.
_ACTIVITY_GLYPHS = "·✢✳✶✻✽◐◓◑◒"


def _strip_title(title: str) -> str | None:
    """``terminal_title_stripped`` (stripped_terminal_title, src/terminal/title.rs 0.8.2):
    one leading spinner or activity glyph followed by a space (or nothing) is
    dropped; any other symbol stays. ``None`` for a blank title."""
    title = title.strip()
    if not title:
        return None
    first, rest = title[0], title[1:]
    recognized = "\u2800" <= first <= "\u28ff" or first in _ACTIVITY_GLYPHS
    if recognized and (not rest or rest[0].isspace()):
        title = rest.strip()
    return title or None


@dataclass(eq=False)
class _Workspace:
    workspace_id: str
    label: str
    cwd: str | None
    tabs: list[_Tab] = field(default_factory=list)
    active_tab: _Tab | None = None
    next_tab: int = 1
    next_pane: int = 1


@dataclass(eq=False)
class _Tab:
    tab_id: str
    workspace: _Workspace
    number: int
    label: str
    panes: list[_Pane] = field(default_factory=list)
    active_pane: _Pane | None = None


@dataclass(eq=False)
class _Pane:
    pane_id: str
    terminal_id: str
    tab: _Tab
    argv: list[str]
    columns: int
    rows: int
    start_dir: str
    process: subprocess.Popen[bytes]
    master_fd: int
    master: trio.lowlevel.FdStream
    screen: Screen
    replies: tuple[trio.MemorySendChannel[bytes], trio.MemoryReceiveChannel[bytes]]
    agent: str | None = None
    agent_name: str | None = None
    agent_status: str = "unknown"
    state_change_seq: int = 0
    launch_pending: bool = False
    interactive_ready: bool = False
    label: str | None = None
    title: str | None = None
    display_agent: str | None = None
    terminal_title: str | None = None
    alive: bool = True
    started: bool = False
    #: ``exited`` (the program ended), ``closed`` (closed through the API) or ``shutdown``.
    end_reason: str | None = None
    cancel_scope: trio.CancelScope | None = None
    retired: trio.Event = field(default_factory=trio.Event)
    changed: trio.Event = field(default_factory=trio.Event)
    write_lock: trio.Lock = field(default_factory=trio.Lock)

    @property
    def workspace(self) -> _Workspace:
        return self.tab.workspace

    def notify(self) -> None:
        """Wake everybody waiting for a change of this pane."""
        event, self.changed = self.changed, trio.Event()
        event.set()

    def directories(self) -> tuple[str, str]:
        """``(cwd, foreground_cwd)``: the program's directory and its foreground job's."""
        try:
            cwd = os.readlink(f"/proc/{self.process.pid}/cwd")
        except OSError:
            cwd = self.start_dir
        foreground = cwd
        with contextlib.suppress(OSError):
            group = os.tcgetpgrp(self.master_fd)
            if group > 1:
                foreground = os.readlink(f"/proc/{group}/cwd")
        return cwd, foreground


@dataclass(eq=False)
class _Subscriber:
    types: frozenset[str]
    entries: list[dict[str, Any]]
    channel: trio.MemorySendChannel[bytes]

    def push(self, line: bytes) -> None:
        with contextlib.suppress(
            trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError
        ):
            self.channel.send_nowait(line)  # a full hub drops the event, as Herdr's ring does


@dataclass(eq=False)
class _Delay:
    """``delay_method``: hold matching requests of one method for ``seconds``."""

    method: str
    seconds: float
    when: Callable[[Mapping[str, Any]], bool] | None
    #: ``request``: handled late (Herdr busy); ``answer``: handled now, answered late.
    stage: str
    #: Set by ``clear_delay``: every request still held goes on at once.
    released: trio.Event = field(default_factory=trio.Event)

    def applies(self, params: Mapping[str, Any]) -> bool:
        return self.when is None or self.when(params)


@dataclass(frozen=True, slots=True)
class _SavedPane:
    pane_id: str
    cwd: str
    label: str | None
    columns: int
    rows: int


@dataclass(frozen=True, slots=True)
class _SavedTab:
    number: int
    label: str
    panes: tuple[_SavedPane, ...]


@dataclass(frozen=True, slots=True)
class _SavedWorkspace:
    workspace_id: str
    label: str
    cwd: str | None
    tabs: tuple[_SavedTab, ...]
    next_tab: int
    next_pane: int


@dataclass(frozen=True, slots=True)
class SavedSession:
    """What Herdr keeps of a session across a restart (its session snapshot,
    src/persist/snapshot.rs 0.8.2): workspace ids, tab numbers, public pane
    numbers and the next free ones, labels and directories. No terminal ids and
    no programs: a restored pane is a fresh shell (src/persist/restore.rs)."""

    workspaces: tuple[_SavedWorkspace, ...]
    focused: str | None


Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


# ---------------------------------------------------------------- the server


class FakeHerdr:
    """A Herdr server on a Unix socket, with panes that are real programs in PTYs.

    Use ``await nursery.start(fake.serve)``; ``await fake.stop()`` (or cancelling
    the nursery) kills every pane's process group and removes the socket file.
    ``delay_method``/``clear_delay`` make it a slow Herdr (see the module docstring).
    """

    def __init__(
        self,
        socket_path: str | os.PathLike[str],
        *,
        protocol: int = 22,
        snapshot: bool = True,
        shell: str | Sequence[str] | None = None,
        agent_ready_after: float | None = AGENT_START_SETTLE_SECONDS,
        agent_detected_after: float = 0.5,
        agent_launch: str = "ready",
        restore: SavedSession | None = None,
        harvest_seconds: float = 2.0,
    ) -> None:
        """
        Args:
            socket_path: where to listen (a stale socket file there is replaced).
            protocol: 16, 20 or 22; decides the method set, ``ping`` and shapes.
            snapshot: ``False`` makes ``session.snapshot`` an unknown method.
            shell: the program of panes made by ``tab.create`` (default ``bash
                --norc --noprofile``, or ``/bin/sh`` without bash).
            agent_ready_after: seconds after ``agent.start`` until the launch
                settles (Herdr's settle delay is 3 s: ``AGENT_START_SETTLE_DELAY``,
                src/app/agents.rs 0.8.2); ``None`` leaves it pending until the
                start timeout (``timeout_ms``, 30 s by default) clears it.
            agent_detected_after: seconds after ``agent.start`` until the agent's
                screen is recognised (``agent`` set, status ``done``: idle and not
                yet seen), while the launch is still pending.
            agent_launch: ``"ready"`` (the launch ends ``interactive_ready``) or
                ``"exit"`` (the agent's process exits at that moment: the managed
                launch and its name are dropped, and with the process gone its
                screen names no agent; reconcile_managed_agent_at and
                effective_agent_label, src/terminal/state.rs 0.8.2).
            restore: a session saved by :meth:`saved_session` (Herdr's session
                file): the same workspaces, tabs and public pane ids, each pane
                a fresh shell in its saved directory under a **new**
                ``terminal_id`` (src/persist/restore.rs 0.8.2), as after a Herdr
                restart or a reboot.
            harvest_seconds: how long a text harvest runs (below). Herdr's ends at
                the top of the history or after 15 s, and its restore within 5 s
                more (MAX_DURATION, MAX_RESTORE_DURATION, src/server/alt_screen_read.rs
                0.8.2), so at most 20.
        """
        if not 0 <= harvest_seconds <= 20:
            raise ValueError("a harvest lasts at most 15 + 5 seconds")
        self.harvest_seconds = harvest_seconds
        if agent_launch not in ("ready", "exit"):
            raise ValueError("agent_launch must be 'ready' or 'exit'")
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {PROTOCOLS}")
        self.socket_path = os.fspath(socket_path)
        self.protocol = protocol
        self.version = _VERSIONS[protocol]
        self.snapshot_supported = snapshot
        self.agent_ready_after = agent_ready_after
        self.agent_detected_after = agent_detected_after
        self.agent_launch = agent_launch
        if shell is None:
            bash = "/bin/bash" if os.path.exists("/bin/bash") else None
            self._shell = [bash, "--norc", "--noprofile"] if bash else ["/bin/sh"]
        else:
            self._shell = shlex.split(shell) if isinstance(shell, str) else list(shell)
        self._methods = _method_names(protocol, snapshot)
        self._method_set = frozenset(self._methods) | _PRIVATE_METHODS
        self._subscription_types = _subscription_types(protocol)
        #: Every request that decoded as a JSON object, in arrival order.
        self.requests: list[dict[str, Any]] = []
        #: ``agent.start`` requests that started a launch; ``agent.prompt`` texts
        #: accepted, as ``(pane_id, text)``.
        self.launches = 0
        self.prompts: list[tuple[str, str]] = []
        #: Text harvests begun, and ANSI reads that had to wait for one.
        self.harvests_started = 0
        self.deferred_reads = 0
        self._workspaces: dict[str, _Workspace] = {}
        self._tabs: dict[str, _Tab] = {}
        self._panes: dict[str, _Pane] = {}
        self._focused_workspace: _Workspace | None = None
        self._next_workspace = 1
        self._inputs: dict[str, bytearray] = {}
        self._subscribers: set[_Subscriber] = set()
        self._nursery: trio.Nursery | None = None
        self._serving = False
        self._stopping = False
        self._stopped = trio.Event()
        self._observers = 0
        self._observers_idle = trio.Event()
        #: ``delay_method``: the delay new requests of a method get, and every
        #: delay not yet cleared (requests may still be held by a replaced one).
        self._delays: dict[str, _Delay] = {}
        self._active_delays: list[_Delay] = []
        self._held: dict[str, int] = {}
        self._held_changed = trio.Event()
        self._socket_identity: tuple[int, int] | None = None
        # One blocked thread per live pane waits for its program (not polling).
        self._waiters = trio.CapacityLimiter(10_000)
        #: Text harvests under way (terminal id → set when it ends): an ANSI read of
        #: that terminal waits for it (AltScreenReadConflict::Defer).
        self._harvests: dict[str, trio.Event] = {}
        if restore is not None:
            self._restore(restore)
        self._handlers: dict[str, Handler] = {
            "ping": self._ping,
            "session.snapshot": self._session_snapshot,
            "workspace.list": self._workspace_list,
            "workspace.get": self._workspace_get,
            "tab.list": self._tab_list,
            "tab.get": self._tab_get,
            "tab.create": self._tab_create,
            "pane.list": self._pane_list,
            "pane.get": self._pane_get,
            "pane.close": self._pane_close,
            "pane.read": self._pane_read,
            "pane.send_text": self._pane_send_text,
            "pane.send_keys": self._pane_send_keys,
            "pane.send_input": self._pane_send_input,
            "pane.scroll": self._pane_scroll,
            "agent.send": self._agent_send,
            "agent.prompt": self._agent_prompt,
            "agent.get": self._agent_get,
            "agent.list": self._agent_list,
            "agent.start": self._agent_start,
        }

    # ------------------------------------------------------------ test API: model

    @property
    def methods(self) -> tuple[str, ...]:
        """The public methods this server accepts, in Herdr's enum order."""
        return self._methods

    def add_workspace(self, label: str, cwd: str | None = None) -> str:
        """A new workspace (no tabs yet); the first one gets the focus."""
        workspace = _Workspace(f"w{self._next_workspace}", label, cwd)
        self._next_workspace += 1
        self._workspaces[workspace.workspace_id] = workspace
        if self._focused_workspace is None:
            self._focused_workspace = workspace
        self._emit("workspace_created", {"workspace": self._workspace_info(workspace)})
        return workspace.workspace_id

    def add_tab(self, workspace_id: str, label: str | None = None) -> str:
        """A new tab at the end of the workspace (no panes yet)."""
        tab = self._new_tab(self._workspace(workspace_id), label)
        self._emit("tab_created", {"tab": self._tab_info(tab)})
        return tab.tab_id

    def _new_tab(self, workspace: _Workspace, label: str | None) -> _Tab:
        number = workspace.next_tab
        workspace.next_tab += 1
        tab = _Tab(f"{workspace.workspace_id}:t{number}", workspace, number, label or str(number))
        workspace.tabs.append(tab)
        self._tabs[tab.tab_id] = tab
        if workspace.active_tab is None:
            workspace.active_tab = tab
        return tab

    async def add_pane(
        self,
        tab_id: str,
        command: str | Sequence[str],
        *,
        columns: int = 80,
        rows: int = 24,
        cwd: str | None = None,
        agent: str | None = None,
        agent_status: str = "unknown",
        label: str | None = None,
        env: Mapping[str, str] | None = None,
        terminal_id: str | None = None,
    ) -> str:
        """Spawn ``command`` (a shell command line, or an argv) in a new pane of the tab."""
        if agent_status not in _AGENT_STATUSES:
            raise ValueError(f"agent_status must be one of {_AGENT_STATUSES}")
        tab = self._tabs.get(tab_id)
        if tab is None:
            raise KeyError(f"no tab {tab_id}")
        argv = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
        pane = self._spawn(tab, argv, columns, rows, cwd, env, terminal_id)
        pane.agent = agent
        pane.agent_status = agent_status
        pane.label = label
        self._announce(pane)
        await trio.lowlevel.checkpoint()
        return pane.pane_id

    def set_agent_status(self, pane_id: str, status: str) -> None:
        """Change a pane's ``agent_status`` (pushes ``pane.updated`` and status events)."""
        if status not in _AGENT_STATUSES:
            raise ValueError(f"status must be one of {_AGENT_STATUSES}")
        pane = self._live_pane(pane_id)
        if pane.agent_status != status:
            pane.agent_status = status
            pane.state_change_seq += 1
            self._status_changed(pane)

    def set_agent(self, pane_id: str, agent: str | None, *, name: str | None = None) -> None:
        """Mark (or unmark) the agent a pane hosts, as Herdr's detection would."""
        pane = self._live_pane(pane_id)
        pane.agent = agent
        pane.agent_name = name
        self._emit("pane_updated", {"pane": self._pane_info(pane)})

    def set_pane_title(
        self, pane_id: str, title: str | None, *, display_agent: str | None = None
    ) -> None:
        """Set ``PaneInfo.title`` and ``display_agent`` (what an integration reports
        through ``pane.report_metadata``)."""
        pane = self._live_pane(pane_id)
        pane.title = title
        pane.display_agent = display_agent
        self._emit("pane_updated", {"pane": self._pane_info(pane)})

    def move_pane(self, pane_id: str, tab_id: str) -> str:
        """Move a live pane to the end of another tab, as Herdr's ``pane.move`` does; its new id.

        The program and ``terminal_id`` stay; the pane id changes when the tab is
        in another workspace (``w2:p1``: ids are numbered per workspace), and
        ``pane.moved`` carries ``previous_pane_id`` (herdr.md §1.3). Until a
        client re-reads the session, the old id gets ``pane_not_found``. (Only
        the test API: ``pane.move``'s own parameters are not documented.)
        """
        pane = self._live_pane(pane_id)
        target = self._tabs.get(tab_id)
        if target is None:
            raise KeyError(f"no tab {tab_id}")
        source = pane.tab
        source.panes.remove(pane)
        if source.active_pane is pane:
            source.active_pane = source.panes[0] if source.panes else None
        if target.workspace is not source.workspace:
            workspace = target.workspace
            new_id = f"{workspace.workspace_id}:p{workspace.next_pane}"
            workspace.next_pane += 1
            del self._panes[pane_id]
            self._panes[new_id] = pane
            self._inputs[new_id] = self._inputs.pop(pane_id, bytearray())
            pane.pane_id = new_id
        pane.tab = target
        target.panes.append(pane)
        if target.active_pane is None:
            target.active_pane = pane
        pane.notify()
        self._emit("pane_moved", {"pane": self._pane_info(pane), "previous_pane_id": pane_id})
        self._emit("layout_updated", {"layout": self._layout(source)})
        self._emit("layout_updated", {"layout": self._layout(target)})
        return pane.pane_id

    def scroll_pane(self, pane_id: str, offset_from_bottom: int) -> None:
        """The operator scrolls the pane in Herdr's own UI (any protocol; no API call)."""
        self._scroll_to(self._live_pane(pane_id), offset_from_bottom)

    async def close_pane(self, pane_id: str) -> None:
        """Close a pane as ``pane.close`` does: kill its programs, emit ``pane.closed``."""
        pane = self._live_pane(pane_id)
        await self._close(pane)

    def saved_session(self) -> SavedSession:
        """The session as Herdr saves it for the next start (see :class:`SavedSession`)."""
        workspaces = []
        for workspace in self._workspaces.values():
            tabs = tuple(
                _SavedTab(
                    tab.number,
                    tab.label,
                    tuple(
                        _SavedPane(p.pane_id, p.directories()[0], p.label, p.columns, p.rows)
                        for p in tab.panes
                    ),
                )
                for tab in workspace.tabs
            )
            workspaces.append(
                _SavedWorkspace(
                    workspace.workspace_id,
                    workspace.label,
                    workspace.cwd,
                    tabs,
                    workspace.next_tab,
                    workspace.next_pane,
                )
            )
        focused = self._focused_workspace
        return SavedSession(tuple(workspaces), focused.workspace_id if focused else None)

    def restarted(self) -> FakeHerdr:
        """The server Herdr is when it starts again with this session restored: the same
        settings, the same public ids, new terminals. Call it before :meth:`stop`; then
        ``await nursery.start(new.serve)`` (the old one must have stopped)::

            second = fake.restarted()
            await fake.stop()
            await nursery.start(second.serve)
        """
        return FakeHerdr(
            self.socket_path,
            protocol=self.protocol,
            snapshot=self.snapshot_supported,
            shell=self._shell,
            agent_ready_after=self.agent_ready_after,
            agent_detected_after=self.agent_detected_after,
            agent_launch=self.agent_launch,
            restore=self.saved_session(),
            harvest_seconds=self.harvest_seconds,
        )

    def _restore(self, saved: SavedSession) -> None:
        """restore_workspace / restore_tab (src/persist/restore.rs 0.8.2): ids and
        numbers as saved, every pane a fresh shell in its saved directory with a
        new terminal id; the next numbers never fall below the saved ones."""
        for saved_workspace in saved.workspaces:
            workspace = _Workspace(saved_workspace.workspace_id, saved_workspace.label,
                                   saved_workspace.cwd)  # fmt: skip
            workspace.next_tab = saved_workspace.next_tab
            workspace.next_pane = saved_workspace.next_pane
            self._workspaces[workspace.workspace_id] = workspace
            for saved_tab in saved_workspace.tabs:
                tab = _Tab(f"{workspace.workspace_id}:t{saved_tab.number}", workspace,
                           saved_tab.number, saved_tab.label)  # fmt: skip
                workspace.tabs.append(tab)
                self._tabs[tab.tab_id] = tab
                workspace.active_tab = workspace.active_tab or tab
                for saved_pane in saved_tab.panes:
                    cwd = saved_pane.cwd if os.path.isdir(saved_pane.cwd) else None
                    pane = self._spawn(tab, list(self._shell), saved_pane.columns,
                                       saved_pane.rows, cwd, None, None,
                                       pane_id=saved_pane.pane_id)  # fmt: skip
                    pane.label = saved_pane.label
        self._focused_workspace = self._workspaces.get(saved.focused or "")
        if self._focused_workspace is None and self._workspaces:
            self._focused_workspace = next(iter(self._workspaces.values()))
        # reserve_workspace_ids (src/workspace.rs 0.8.2): the next workspace id follows
        # the highest one restored, so the id of a workspace closed before the
        # restart can be given out again.
        numbers = [int(w.lstrip("w")) for w in self._workspaces if w.lstrip("w").isdigit()]
        self._next_workspace = max(numbers, default=0) + 1

    def live_handoff(self) -> None:
        """``server.live_handoff``: a new server takes the panes over, programs and
        screens included, under new terminal ids (restore_handoff allocates them,
        src/persist/restore.rs 0.8.2); public ids stay. Observers are told to
        reconnect (src/server/headless.rs 0.8.2)."""
        for pane in self._panes.values():
            pane.terminal_id = _new_terminal_id()
            pane.notify()
            self._emit("pane_updated", {"pane": self._pane_info(pane)})

    def pane_screen(self, pane_id: str) -> Screen:
        """The libghostty screen of a live pane."""
        return self._live_pane(pane_id).screen

    def pane_pids(self) -> dict[str, int]:
        """Process id of each live pane's program."""
        return {pane_id: pane.process.pid for pane_id, pane in self._panes.items()}

    def pane_ids(self) -> list[str]:
        """Live panes in workspace → tab → pane order."""
        return [p.pane_id for w in self._workspaces.values() for t in w.tabs for p in t.panes]

    def terminal_id(self, pane_id: str) -> str:
        return self._live_pane(pane_id).terminal_id

    def received_input(self, pane_id: str) -> bytes:
        """Everything written to the pane's PTY through any method (not terminal replies)."""
        return bytes(self._inputs.get(pane_id, b""))

    def requests_for(self, method: str) -> list[dict[str, Any]]:
        """The decoded requests of one method."""
        return [r for r in self.requests if r.get("method") == method]

    def streaming(self, event_type: str, pane_id: str) -> bool:
        """Whether an ``events.subscribe`` stream that was acknowledged follows
        ``event_type`` for the pane (what changes now, it reports)."""
        return any(
            entry["type"] == event_type and entry.get("pane_id") == pane_id
            for subscriber in self._subscribers
            for entry in subscriber.entries
        )

    # ------------------------------------------------------------ test API: a slow Herdr

    def delay_method(
        self,
        method: str,
        seconds: float,
        *,
        when: Callable[[Mapping[str, Any]], bool] | None = None,
        stage: str = "request",
    ) -> None:
        """Handle and answer ``method`` ``seconds`` late (if ``when(params)``, or always).

        ``stage="answer"`` handles it at once and holds only the answer. Only
        that request's connection waits: every other request is answered as
        usual meanwhile, as Herdr serves each connection on its own thread.
        """
        if seconds < 0:
            raise ValueError("seconds must not be negative")
        if stage not in ("request", "answer"):
            raise ValueError("stage must be 'request' or 'answer'")
        if stage == "answer" and method in ("events.subscribe", "fake.observe"):
            raise ValueError(f"{method} streams: only its request can be delayed")
        delay = _Delay(method, seconds, when, stage)
        self._delays[method] = delay
        self._active_delays.append(delay)

    def clear_delay(self, method: str | None = None) -> None:
        """Stop delaying ``method`` (every method if ``None``); held requests go on now."""
        for delay in list(self._active_delays):
            if method is None or delay.method == method:
                delay.released.set()
                self._active_delays.remove(delay)
                if self._delays.get(delay.method) is delay:
                    del self._delays[delay.method]

    def holding(self, method: str) -> int:
        """How many requests of ``method`` a delay is holding right now."""
        return self._held.get(method, 0)

    async def wait_held(self, method: str, count: int = 1) -> None:
        """Wait until at least ``count`` requests of ``method`` are being held."""
        while self.holding(method) < count:
            await self._held_changed.wait()

    async def _hold(self, delay: _Delay) -> None:
        self._held[delay.method] = self._held.get(delay.method, 0) + 1
        self._held_changed.set()
        self._held_changed = trio.Event()
        try:
            with trio.move_on_after(delay.seconds):
                await delay.released.wait()
        finally:
            self._held[delay.method] -= 1

    # ------------------------------------------------------------ lifecycle

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Listen until cancelled or stopped; kill every pane on the way out."""
        if self._serving:
            raise RuntimeError("already serving")
        listener = await self._listen()
        self._serving = True
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                for pane in list(self._panes.values()):
                    if not pane.started:
                        pane.started = True
                        nursery.start_soon(self._run_pane, pane)
                nursery.start_soon(self._accept, listener)
                task_status.started()
        finally:
            self._nursery = None
            self._serving = False
            with trio.CancelScope(shield=True):
                await listener.aclose()
                await self._kill_unstarted()
            self._remove_socket()
            self._stopped.set()

    async def stop(self) -> None:
        """Close observe streams (``terminal.closed`` with no reason), kill panes, unlink."""
        if self._nursery is not None:
            self._stopping = True
            for pane in list(self._panes.values()):
                pane.notify()
            if self._observers:
                self._observers_idle = trio.Event()
                with trio.move_on_after(1.0):
                    await self._observers_idle.wait()
            self._nursery.cancel_scope.cancel()
            await self._stopped.wait()
        else:
            await self._kill_unstarted()
            self._remove_socket()

    async def _listen(self) -> trio.SocketListener:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.socket_path)
        sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
        try:
            await sock.bind(self.socket_path)
            os.chmod(self.socket_path, 0o600)
            sock.listen(64)
        except BaseException:
            sock.close()
            raise
        stat = os.stat(self.socket_path)
        self._socket_identity = (stat.st_dev, stat.st_ino)
        return trio.SocketListener(sock)

    def _remove_socket(self) -> None:
        try:
            stat = os.stat(self.socket_path)
        except FileNotFoundError:
            return
        if self._socket_identity in (None, (stat.st_dev, stat.st_ino)):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.socket_path)

    async def _accept(self, listener: trio.SocketListener) -> None:
        while True:
            stream = await listener.accept()
            assert self._nursery is not None
            self._nursery.start_soon(self._connection, stream)

    async def _kill_unstarted(self) -> None:
        for pane in list(self._panes.values()):
            if not pane.started:
                pane.end_reason = "shutdown"
                await self._retire(pane)

    # ------------------------------------------------------------ panes

    def _spawn(
        self,
        tab: _Tab,
        argv: list[str],
        columns: int,
        rows: int,
        cwd: str | None,
        env: Mapping[str, str] | None,
        terminal_id: str | None,
        pane_id: str | None = None,
    ) -> _Pane:
        workspace = tab.workspace
        pane_id = pane_id or f"{workspace.workspace_id}:p{workspace.next_pane}"
        start_dir = cwd or workspace.cwd or os.getcwd()
        master_fd, slave_fd = os.openpty()
        fcntl.ioctl(slave_fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        environment = dict(os.environ)
        environment.pop("LINES", None)
        environment.pop("COLUMNS", None)
        environment.update(env or {})
        environment.update(
            TERM="xterm-256color",
            HERDR_SOCKET_PATH=self.socket_path,
            HERDR_PANE_ID=pane_id,
            HERDR_ENV="1",
        )
        try:
            process = subprocess.Popen(
                argv,
                stdin=slave_fd,
                stdout=slave_fd,
                stderr=slave_fd,
                cwd=start_dir,
                env=environment,
                start_new_session=True,
                preexec_fn=_set_controlling_tty,
                close_fds=True,
            )
        except OSError:
            os.close(master_fd)
            os.close(slave_fd)
            raise
        os.close(slave_fd)
        workspace.next_pane = max(workspace.next_pane, _pane_number(pane_id) + 1)
        replies = trio.open_memory_channel[bytes](_REPLY_QUEUE)

        def reply(data: bytes) -> None:
            # Answers to the program's terminal queries (DSR, DA …) go back in order.
            with contextlib.suppress(trio.WouldBlock, trio.ClosedResourceError):
                replies[0].send_nowait(data)

        pane = _Pane(
            pane_id=pane_id,
            terminal_id=terminal_id or _new_terminal_id(),
            tab=tab,
            argv=argv,
            columns=columns,
            rows=rows,
            start_dir=start_dir,
            process=process,
            master_fd=master_fd,
            master=trio.lowlevel.FdStream(master_fd),
            screen=Screen(columns, rows, on_reply=reply),
            replies=replies,
        )
        tab.panes.append(pane)
        if tab.active_pane is None:
            tab.active_pane = pane
        self._panes[pane_id] = pane
        self._inputs[pane_id] = bytearray()
        if self._nursery is not None:
            pane.started = True
            self._nursery.start_soon(self._run_pane, pane)
        return pane

    def _announce(self, pane: _Pane) -> None:
        self._emit("pane_created", {"pane": self._pane_info(pane)})
        self._emit("layout_updated", {"layout": self._layout(pane.tab)})

    async def _run_pane(self, pane: _Pane) -> None:
        try:
            async with trio.open_nursery() as nursery:
                pane.cancel_scope = nursery.cancel_scope
                if pane.end_reason is not None:
                    nursery.cancel_scope.cancel()
                drained = trio.Event()
                nursery.start_soon(self._pump, pane, drained)
                nursery.start_soon(self._write_replies, pane)
                nursery.start_soon(self._wait_exit, pane, drained)
        finally:
            if pane.end_reason is None:
                pane.end_reason = "shutdown"
            with trio.CancelScope(shield=True):
                await self._retire(pane)

    async def _pump(self, pane: _Pane, drained: trio.Event) -> None:
        try:
            while True:
                try:
                    data = await pane.master.receive_some(_READ_BYTES)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    break  # EIO: nothing holds the PTY open any more
                if not data:
                    break
                pane.screen.feed(data)
                title = pane.screen.title
                if title != pane.terminal_title:
                    pane.terminal_title = title
                    self._emit("pane_updated", {"pane": self._pane_info(pane)})
                pane.notify()
        finally:
            drained.set()
        if pane.end_reason is None:
            pane.end_reason = "exited"
        assert pane.cancel_scope is not None
        pane.cancel_scope.cancel()

    async def _wait_exit(self, pane: _Pane, drained: trio.Event) -> None:
        await trio.to_thread.run_sync(
            pane.process.wait, abandon_on_cancel=True, limiter=self._waiters
        )
        with trio.move_on_after(0.2):
            await drained.wait()  # let the last output reach the screen
        if pane.end_reason is None:
            pane.end_reason = "exited"
        assert pane.cancel_scope is not None
        pane.cancel_scope.cancel()

    async def _write_replies(self, pane: _Pane) -> None:
        async for data in pane.replies[1]:
            try:
                async with pane.write_lock:
                    await pane.master.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                return

    async def _close(self, pane: _Pane) -> None:
        if pane.end_reason is None:
            pane.end_reason = "closed"
        if pane.started and pane.cancel_scope is not None:
            pane.cancel_scope.cancel()
            await pane.retired.wait()
        elif pane.started:
            await pane.retired.wait()
        else:
            await self._retire(pane)

    async def _retire(self, pane: _Pane) -> None:
        """Remove the pane, tell subscribers and observers, then end its processes."""
        if not pane.alive:
            await pane.retired.wait()
            return
        pane.alive = False
        reason = pane.end_reason or "shutdown"
        tab = pane.tab
        if pane in tab.panes:
            tab.panes.remove(pane)
        if tab.active_pane is pane:
            tab.active_pane = tab.panes[0] if tab.panes else None
        self._panes.pop(pane.pane_id, None)
        pane.notify()
        data = {"pane_id": pane.pane_id, "workspace_id": pane.workspace.workspace_id}
        if reason == "exited":
            self._emit("pane_exited", dict(data))
        if reason in ("exited", "closed"):
            self._emit("pane_closed", dict(data))
            self._emit("layout_updated", {"layout": self._layout(tab)})
        try:
            await self._reap(pane)
        finally:
            pane.replies[0].close()
            with contextlib.suppress(OSError, trio.ClosedResourceError):
                await pane.master.aclose()
            pane.retired.set()

    async def _reap(self, pane: _Pane) -> None:
        """Hang up the pane's process groups, then kill them if they linger."""
        groups = {pane.process.pid}
        with contextlib.suppress(OSError):
            foreground = os.tcgetpgrp(pane.master_fd)
            # 0 (no foreground group) would signal our own group through killpg.
            if foreground > 1 and foreground != os.getpgrp():
                groups.add(foreground)
        for sig, grace in ((signal.SIGHUP, 1.0), (signal.SIGKILL, 5.0)):
            for group in groups:
                with contextlib.suppress(OSError):
                    os.killpg(group, sig)
            code = await trio.to_thread.run_sync(
                _wait_for, pane.process, grace, limiter=self._waiters
            )
            if code is not None:
                # The program is gone; hang up what it left in the foreground too.
                for group in groups - {pane.process.pid}:
                    with contextlib.suppress(OSError):
                        os.killpg(group, signal.SIGKILL)
                return

    async def _write(self, pane: _Pane, data: bytes) -> None:
        """Input to the pane's program (recorded for :meth:`received_input`)."""
        self._inputs.setdefault(pane.pane_id, bytearray()).extend(data)
        try:
            async with pane.write_lock:
                await pane.master.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            raise _ApiError("pane_send_failed", f"pane {pane.pane_id} is gone") from exc

    # ------------------------------------------------------------ records

    def _workspace(self, workspace_id: str) -> _Workspace:
        workspace = self._workspaces.get(workspace_id)
        if workspace is None:
            raise KeyError(f"no workspace {workspace_id}")
        return workspace

    def _live_pane(self, pane_id: str) -> _Pane:
        pane = self._panes.get(pane_id)
        if pane is None:
            raise KeyError(f"no pane {pane_id}")
        return pane

    def _pane(self, pane_id: str) -> _Pane:
        pane = self._panes.get(pane_id)
        if pane is None:
            raise _ApiError("pane_not_found", f"pane {pane_id} not found")
        return pane

    def _focused_tab(self) -> _Tab | None:
        workspace = self._focused_workspace
        return workspace.active_tab if workspace is not None else None

    def _is_focused(self, pane: _Pane) -> bool:
        return self._focused_tab() is pane.tab and pane.tab.active_pane is pane

    def _rollup(self, panes: Sequence[_Pane]) -> str:
        statuses = [p.agent_status for p in panes] or ["unknown"]
        return max(statuses, key=lambda s: _STATUS_PRIORITY[s])

    def _workspace_info(self, workspace: _Workspace) -> dict[str, Any]:
        panes = [p for t in workspace.tabs for p in t.panes]
        active = workspace.active_tab
        return {
            "workspace_id": workspace.workspace_id,
            "number": list(self._workspaces).index(workspace.workspace_id) + 1,
            "label": workspace.label,
            "focused": workspace is self._focused_workspace,
            "pane_count": len(panes),
            "tab_count": len(workspace.tabs),
            "active_tab_id": active.tab_id if active is not None else "",
            "agent_status": self._rollup(panes),
        }

    def _tab_info(self, tab: _Tab) -> dict[str, Any]:
        return {
            "tab_id": tab.tab_id,
            "workspace_id": tab.workspace.workspace_id,
            "number": tab.number,
            "label": tab.label,
            "focused": self._focused_tab() is tab,
            "pane_count": len(tab.panes),
            "agent_status": self._rollup(tab.panes),
        }

    def _pane_info(self, pane: _Pane) -> dict[str, Any]:
        info: dict[str, Any] = {
            "pane_id": pane.pane_id,
            "terminal_id": pane.terminal_id,
            "workspace_id": pane.workspace.workspace_id,
            "tab_id": pane.tab.tab_id,
            "focused": self._is_focused(pane),
        }
        cwd, foreground = pane.directories()
        info["cwd"] = cwd
        info["foreground_cwd"] = foreground
        if pane.label is not None:
            info["label"] = pane.label
        info.update(self._presentation(pane))
        info["agent_status"] = pane.agent_status
        info["scroll"] = _scroll_info(pane.screen)
        info["revision"] = 0
        return info

    @staticmethod
    def _presentation(pane: _Pane) -> dict[str, Any]:
        """``agent``, ``title``, ``terminal_title``, ``terminal_title_stripped`` and
        ``display_agent``, each left out when absent (PaneInfo and AgentInfo,
        src/api/schema/panes.rs and agents.rs 0.8.2)."""
        info: dict[str, Any] = {}
        if pane.agent:
            info["agent"] = pane.agent
        if pane.title is not None:
            info["title"] = pane.title
        if pane.terminal_title:
            info["terminal_title"] = pane.terminal_title
            stripped = _strip_title(pane.terminal_title)
            if stripped is not None:
                info["terminal_title_stripped"] = stripped
        if pane.display_agent is not None:
            info["display_agent"] = pane.display_agent
        return info

    def _agent_info(self, pane: _Pane) -> dict[str, Any]:
        info: dict[str, Any] = {"terminal_id": pane.terminal_id}
        if pane.agent_name:
            info["name"] = pane.agent_name
        info.update(self._presentation(pane))
        info.update(
            agent_status=pane.agent_status,
            workspace_id=pane.workspace.workspace_id,
            tab_id=pane.tab.tab_id,
            pane_id=pane.pane_id,
            focused=self._is_focused(pane),
        )
        if self.protocol >= 17:
            # serde's skip_serializing_if = "is_false" (src/api/schema/agents.rs 0.8.2):
            # a false flag is left out, never sent as false.
            if pane.launch_pending:
                info["launch_pending"] = True
            if pane.interactive_ready:
                info["interactive_ready"] = True
            info["state_change_seq"] = pane.state_change_seq
        cwd, foreground = pane.directories()
        info["cwd"] = cwd
        info["foreground_cwd"] = foreground
        info["revision"] = 0
        return info

    def _layout(self, tab: _Tab) -> dict[str, Any]:
        """A ``PaneLayoutSnapshot``: panes side by side; split panes get a border cell."""
        panes = tab.panes
        entries, splits = [], []
        if len(panes) <= 1:
            width, height = (panes[0].columns, panes[0].rows) if panes else (80, 24)
            for pane in panes:
                rect = {"x": 0, "y": 0, "width": width, "height": height}
                entries.append({"pane_id": pane.pane_id, "focused": True, "rect": rect})
        else:
            x = 0
            height = max(p.rows for p in panes) + 2
            for pane in panes:
                rect = {"x": x, "y": 0, "width": pane.columns + 2, "height": pane.rows + 2}
                focused = tab.active_pane is pane
                entries.append({"pane_id": pane.pane_id, "focused": focused, "rect": rect})
                x += pane.columns + 2
            width = x
            left = 0
            for index, pane in enumerate(panes[:-1]):
                rest = width - left
                splits.append(
                    {
                        "id": f"{tab.tab_id}:s{index + 1}",
                        "direction": "right",
                        "ratio": round((pane.columns + 2) / rest, 4),
                        "rect": {"x": left, "y": 0, "width": rest, "height": height},
                    }
                )
                left += pane.columns + 2
        active = tab.active_pane
        return {
            "workspace_id": tab.workspace.workspace_id,
            "tab_id": tab.tab_id,
            "zoomed": False,
            "area": {"x": 0, "y": 0, "width": width, "height": height},
            "focused_pane_id": active.pane_id if active is not None else "",
            "panes": entries,
            "splits": splits,
        }

    def _all_panes(self) -> list[_Pane]:
        return [p for w in self._workspaces.values() for t in w.tabs for p in t.panes]

    def _all_tabs(self) -> list[_Tab]:
        return [t for w in self._workspaces.values() for t in w.tabs]

    # ------------------------------------------------------------ events

    def _emit(self, kind: str, data: dict[str, Any]) -> None:
        """Push a lifecycle event (``pane_created`` …) to matching subscribers."""
        if not self._subscribers:
            return
        prefix, _, rest = kind.partition("_")
        dotted = f"{prefix}.{rest}"
        line = _dumps({"event": kind, "data": {"type": kind, **data}})
        for subscriber in list(self._subscribers):
            if dotted in subscriber.types:
                subscriber.push(line)

    def _status_changed(self, pane: _Pane) -> None:
        pane.notify()
        self._emit("pane_updated", {"pane": self._pane_info(pane)})
        for subscriber in list(self._subscribers):
            for entry in subscriber.entries:
                if self._status_entry_matches(entry, pane):
                    subscriber.push(self._status_event(pane))

    @staticmethod
    def _status_entry_matches(entry: Mapping[str, Any], pane: _Pane) -> bool:
        return (
            entry.get("type") == "pane.agent_status_changed"
            and entry.get("pane_id") == pane.pane_id
            and entry.get("agent_status") in (None, pane.agent_status)
        )

    def _status_event(self, pane: _Pane) -> bytes:
        data: dict[str, Any] = {
            "pane_id": pane.pane_id,
            "workspace_id": pane.workspace.workspace_id,
            "agent_status": pane.agent_status,
        }
        if pane.agent:
            data["agent"] = pane.agent
        if pane.title is not None:
            data["title"] = pane.title
        return _dumps({"event": "pane.agent_status_changed", "data": data})

    # ------------------------------------------------------------ connections

    async def _connection(self, stream: trio.SocketStream) -> None:
        async with stream:
            try:
                line = await self._read_line(stream)
                if line is None:
                    return
                await self._answer(stream, line)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass

    @staticmethod
    async def _read_line(stream: trio.SocketStream) -> bytes | None:
        """The first line (without its newline); ``None`` when late, too long or absent."""
        buffer = bytearray()
        with trio.move_on_after(REQUEST_TIMEOUT):
            while True:
                end = buffer.find(b"\n")
                if end >= 0:
                    return bytes(buffer[:end]) if end <= MAX_REQUEST_BYTES else None
                if len(buffer) > MAX_REQUEST_BYTES:
                    return None  # Herdr drops it: "api request line is too large"
                chunk = await stream.receive_some(8192)
                if not chunk:
                    return bytes(buffer) if buffer else None
                buffer += chunk
        return None

    @staticmethod
    async def _send(stream: trio.SocketStream, line: bytes) -> bool:
        with trio.move_on_after(WRITE_TIMEOUT):
            try:
                await stream.send_all(line)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return False
            return True
        return False

    @staticmethod
    def _error(request_id: str, code: str, message: str) -> bytes:
        return _dumps({"id": request_id, "error": {"code": code, "message": message}})

    async def _answer(self, stream: trio.SocketStream, line: bytes) -> None:
        try:
            value = _parse_json(line)
        except _InvalidRequest as exc:
            await self._send(stream, self._error("", "invalid_request", f"invalid request: {exc}"))
            return
        if isinstance(value, dict):
            self.requests.append(value)
        try:
            request_id, method, params = _check_request(
                value, self._method_set, self._methods, self._subscription_types
            )
        except _InvalidRequest as exc:
            message = f"invalid request: {exc} at line 1 column {len(line)}"
            await self._send(stream, self._error("", "invalid_request", message))
            return
        delay = self._delays.get(method)
        if delay is not None and not delay.applies(params):
            delay = None
        if delay is not None and delay.stage == "request":
            await self._hold(delay)
        if method == "events.subscribe":
            await self._subscribe(stream, request_id, params)
            return
        if method == "fake.observe":
            await self._observe(stream, params)
            return
        await self._harvest_done(method, params)
        handler = self._handlers.get(method)
        try:
            if handler is None:
                raise _ApiError("not_implemented", f"the fake Herdr does not implement {method}")
            reply = _dumps({"id": request_id, "result": await handler(params)})
        except _ApiError as exc:
            reply = self._error(request_id, exc.code, exc.message)
        except Exception as exc:
            logger.exception("fake herdr: %s failed", method)
            reply = self._error(request_id, "internal_error", str(exc))
        if delay is not None and delay.stage == "answer":
            await self._hold(delay)
        await self._send(stream, reply)

    @staticmethod
    async def _watch_peer(stream: trio.SocketStream, scope: trio.CancelScope) -> None:
        """Cancel ``scope`` when the client hangs up (anything it sends is ignored)."""
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            while await stream.receive_some(4096):
                pass
        scope.cancel()

    # ------------------------------------------------------------ events.subscribe

    async def _subscribe(
        self, stream: trio.SocketStream, request_id: str, params: dict[str, Any]
    ) -> None:
        entries: list[dict[str, Any]] = params["subscriptions"]
        for entry in entries:
            if entry["type"] in _PANE_SCOPED_TYPES and entry["pane_id"] not in self._panes:
                pane_id = entry["pane_id"]
                await self._send(
                    stream, self._error(request_id, "pane_not_found", f"pane {pane_id} not found")
                )
                return
            if entry["type"] == "pane.output_matched" and entry["match"]["type"] == "regex":
                try:
                    re.compile(entry["match"]["value"])
                except re.error as exc:
                    await self._send(stream, self._error(request_id, "invalid_regex", str(exc)))
                    return
        send, receive = trio.open_memory_channel[bytes](_EVENT_QUEUE)
        types = frozenset(e["type"] for e in entries if e["type"] not in _PANE_SCOPED_TYPES)
        # Baselines are taken now: changes after the ack are reported.
        baselines = [
            _scroll_info(self._panes[e["pane_id"]].screen)
            if e["type"] == "pane.scroll_changed"
            else None
            for e in entries
        ]
        subscriber = _Subscriber(types, entries, send)
        ack = _dumps({"id": request_id, "result": {"type": "subscription_started"}})
        if not await self._send(stream, ack):
            return
        self._subscribers.add(subscriber)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._watch_peer, stream, nursery.cancel_scope)
                for entry, baseline in zip(entries, baselines, strict=True):
                    pane = self._panes.get(entry.get("pane_id") or "")
                    if pane is None:
                        continue
                    if (
                        self._status_entry_matches(entry, pane)
                        and entry.get("agent_status") is not None
                    ):
                        subscriber.push(self._status_event(pane))
                    elif entry["type"] == "pane.output_matched":
                        nursery.start_soon(self._watch_output, pane, entry, subscriber)
                    elif baseline is not None:
                        nursery.start_soon(self._watch_scroll, pane, baseline, subscriber)
                async for line in receive:
                    if not await self._send(stream, line):
                        break
                nursery.cancel_scope.cancel()
        finally:
            self._subscribers.discard(subscriber)
            send.close()

    async def _watch_output(
        self, pane: _Pane, entry: Mapping[str, Any], subscriber: _Subscriber
    ) -> None:
        source = "recent_unwrapped" if entry["source"] == "recent" else entry["source"]
        match = entry["match"]
        pattern = re.compile(match["value"]) if match["type"] == "regex" else None
        armed = True
        while pane.alive:
            changed = pane.changed
            text, truncated = read_screen(pane.screen, source, "text", entry.get("lines"))
            found = next(
                (
                    line
                    for line in text.split("\n")
                    if (pattern.search(line) if pattern else match["value"] in line)
                ),
                None,
            )
            if found is not None and armed:
                armed = False
                read = self._read_record(pane, source, "text", text, truncated)
                event = {"pane_id": pane.pane_id, "matched_line": found, "read": read}
                subscriber.push(_dumps({"event": "pane.output_matched", "data": event}))
            elif found is None:
                armed = True
            await changed.wait()
            await trio.sleep(_SUBSCRIPTION_TICK)

    async def _watch_scroll(
        self, pane: _Pane, last: dict[str, int], subscriber: _Subscriber
    ) -> None:
        while True:
            changed = pane.changed
            scroll = _scroll_info(pane.screen)
            if scroll != last:
                last = scroll
                data = {
                    "pane_id": pane.pane_id,
                    "workspace_id": pane.workspace.workspace_id,
                    "scroll": scroll,
                }
                subscriber.push(_dumps({"event": "pane.scroll_changed", "data": data}))
            await changed.wait()
            if not pane.alive:
                return
            await trio.sleep(_SUBSCRIPTION_TICK)

    # ------------------------------------------------------------ fake.observe

    def _terminal_target(self, target: str) -> _Pane | None:
        for pane in self._panes.values():
            if target in (pane.terminal_id, pane.pane_id) or (
                pane.agent_name is not None and pane.agent_name == target
            ):
                return pane
        return None

    async def _observe(self, stream: trio.SocketStream, params: dict[str, Any]) -> None:
        target: str = params["target"]
        columns = max(1, params.get("cols") or _OBSERVE_COLUMNS)
        rows = max(1, params.get("rows") or _OBSERVE_ROWS)
        version = params.get("version")
        if version is not None and version != self.protocol:
            # The binary handshake: a client of another protocol is refused
            # (check_client_version, src/protocol/wire.rs 0.8.2).
            refusal = {"version": self.protocol, "error": _version_refusal(version, self.protocol)}
            await self._send(stream, _dumps({"rejected": refusal}))
            return
        pane = self._terminal_target(target)
        if pane is None:
            reason = f"terminal session observe failed: terminal target {target} not found"
            await self._send(stream, _dumps({"closed": reason}))
            return
        observed = pane.terminal_id
        encoder = FrameEncoder(columns, rows)
        seq = 0
        self._observers += 1
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._watch_peer, stream, nursery.cancel_scope)
                while True:
                    changed = pane.changed
                    if self._stopping:
                        await self._send(stream, _dumps({"closed": None}))
                        break
                    if pane.terminal_id != observed:
                        # A live handoff: the old server tells its clients to come back.
                        await self._send(stream, _dumps({"closed": _HANDOFF_REASON}))
                        break
                    if not pane.alive:
                        reason = f"terminal attach ended: terminal {pane.terminal_id} not found"
                        await self._send(stream, _dumps({"closed": reason}))
                        break
                    frame = encoder.encode(pane.screen)
                    if frame is not None:
                        seq += 1
                        full, data = frame
                        line = _dumps(
                            {
                                "seq": seq,
                                "full": full,
                                "width": columns,
                                "height": rows,
                                "bytes": base64.b64encode(data).decode(),
                            }
                        )
                        if not await self._send(stream, line):
                            break
                        await trio.sleep(_FRAME_INTERVAL)
                    await changed.wait()
                nursery.cancel_scope.cancel()
        finally:
            self._observers -= 1
            if not self._observers:
                self._observers_idle.set()

    # ------------------------------------------------------------ methods

    async def _ping(self, params: dict[str, Any]) -> dict[str, Any]:
        capabilities: dict[str, Any] = {"live_handoff": True, "detached_server_daemon": True}
        if self.protocol >= 22:
            capabilities.update(
                endpoint_protocol_generation=1, surface_interest=True, health_check=True
            )
        return {
            "type": "pong",
            "version": self.version,
            "protocol": self.protocol,
            "capabilities": capabilities,
        }

    async def _session_snapshot(self, params: dict[str, Any]) -> dict[str, Any]:
        snapshot: dict[str, Any] = {"version": self.version, "protocol": self.protocol}
        workspace = self._focused_workspace
        tab = self._focused_tab()
        if workspace is not None:
            snapshot["focused_workspace_id"] = workspace.workspace_id
        if tab is not None:
            snapshot["focused_tab_id"] = tab.tab_id
            if tab.active_pane is not None:
                snapshot["focused_pane_id"] = tab.active_pane.pane_id
        panes = self._all_panes()
        snapshot.update(
            workspaces=[self._workspace_info(w) for w in self._workspaces.values()],
            tabs=[self._tab_info(t) for t in self._all_tabs()],
            panes=[self._pane_info(p) for p in panes],
            layouts=[self._layout(t) for t in self._all_tabs()],
            agents=[self._agent_info(p) for p in panes if p.agent or p.agent_name],
        )
        return {"type": "session_snapshot", "snapshot": snapshot}

    def _workspace_param(self, params: Mapping[str, Any]) -> _Workspace | None:
        workspace_id = params.get("workspace_id")
        if workspace_id is None:
            return None
        workspace = self._workspaces.get(workspace_id)
        if workspace is None:
            raise _ApiError("workspace_not_found", f"workspace {workspace_id} not found")
        return workspace

    async def _workspace_list(self, params: dict[str, Any]) -> dict[str, Any]:
        workspaces = [self._workspace_info(w) for w in self._workspaces.values()]
        return {"type": "workspace_list", "workspaces": workspaces}

    async def _workspace_get(self, params: dict[str, Any]) -> dict[str, Any]:
        workspace = self._workspace_param(params)
        assert workspace is not None
        return {"type": "workspace_info", "workspace": self._workspace_info(workspace)}

    async def _tab_list(self, params: dict[str, Any]) -> dict[str, Any]:
        workspace = self._workspace_param(params)
        tabs = workspace.tabs if workspace is not None else self._all_tabs()
        return {"type": "tab_list", "tabs": [self._tab_info(t) for t in tabs]}

    async def _tab_get(self, params: dict[str, Any]) -> dict[str, Any]:
        tab = self._tabs.get(params["tab_id"])
        if tab is None or tab not in tab.workspace.tabs:
            raise _ApiError("tab_not_found", f"tab {params['tab_id']} not found")
        return {"type": "tab_info", "tab": self._tab_info(tab)}

    async def _tab_create(self, params: dict[str, Any]) -> dict[str, Any]:
        workspace = self._workspace_param(params) or self._focused_workspace
        if workspace is None:
            raise _ApiError("workspace_not_found", "no active workspace")
        cwd = params.get("cwd")
        if cwd is not None and not os.path.isdir(cwd):
            raise _ApiError("tab_create_failed", f"cwd {cwd} is not a directory")
        tab = self._new_tab(workspace, params.get("label"))
        try:
            pane = self._spawn(tab, list(self._shell), 80, 24, cwd, params.get("env"), None)
        except OSError as exc:
            workspace.tabs.remove(tab)
            del self._tabs[tab.tab_id]
            raise _ApiError("tab_create_failed", str(exc)) from exc
        focus = bool(params.get("focus"))
        if focus:
            self._focused_workspace = workspace
            workspace.active_tab = tab
        self._emit("tab_created", {"tab": self._tab_info(tab)})
        self._announce(pane)
        if focus:
            self._emit(
                "tab_focused", {"tab_id": tab.tab_id, "workspace_id": workspace.workspace_id}
            )
        return {
            "type": "tab_created",
            "tab": self._tab_info(tab),
            "root_pane": self._pane_info(pane),
        }

    async def _pane_list(self, params: dict[str, Any]) -> dict[str, Any]:
        workspace = self._workspace_param(params)
        panes = [p for p in self._all_panes() if workspace is None or p.workspace is workspace]
        return {"type": "pane_list", "panes": [self._pane_info(p) for p in panes]}

    async def _pane_get(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"type": "pane_info", "pane": self._pane_info(self._pane(params["pane_id"]))}

    async def _pane_close(self, params: dict[str, Any]) -> dict[str, Any]:
        await self._close(self._pane(params["pane_id"]))
        return {"type": "ok"}

    def _read_record(
        self, pane: _Pane, source: str, fmt: str, text: str, truncated: bool
    ) -> dict[str, Any]:
        return {
            "pane_id": pane.pane_id,
            "workspace_id": pane.workspace.workspace_id,
            "tab_id": pane.tab.tab_id,
            "source": source,
            "format": fmt,
            "text": text,
            "revision": 0,
            "truncated": truncated,
        }

    async def _pane_read(self, params: dict[str, Any]) -> dict[str, Any]:
        pane = self._pane(params["pane_id"])
        source: str = params["source"]
        fmt: str = params.get("format") or "text"
        lines: int | None = params.get("lines")
        if self._harvests_on_read(pane, source, fmt, lines):
            return await self._harvest(pane, source, lines)
        text, truncated = read_screen(pane.screen, source, fmt, lines)
        return {"type": "pane_read", "read": self._read_record(pane, source, fmt, text, truncated)}

    def _harvests_on_read(self, pane: _Pane, source: str, fmt: str, lines: int | None) -> bool:
        """Whether this read starts a text harvest (alt_screen_read_spec,
        src/server/headless.rs 0.8.2): ``recent`` text of an idle, recognised
        agent on the alternate screen with mouse reporting on, asking for more
        lines than the screen shows, none under way for the terminal already."""
        wanted = min(_DEFAULT_RECENT_LINES if lines is None else lines, _MAX_READ_LINES)
        return (
            fmt == "text"
            and source in ("recent", "recent_unwrapped")
            and wanted > pane.screen.size[1]
            and pane.agent is not None
            and pane.agent_status in ("idle", "done")
            and pane.screen.on_alternate_screen
            and pane.screen.mouse_captured
            and pane.terminal_id not in self._harvests
        )

    async def _harvest(self, pane: _Pane, source: str, lines: int | None) -> dict[str, Any]:
        """Herdr scrolls the agent with its mouse wheel to collect history, then
        scrolls it back (src/server/alt_screen_read.rs 0.8.2); this fake only takes
        the time. Meanwhile ANSI reads of the terminal wait (:meth:`_harvest_done`)."""
        self._harvests[pane.terminal_id] = ended = trio.Event()
        self.harvests_started += 1
        try:
            await trio.sleep(self.harvest_seconds)
            text, truncated = read_screen(pane.screen, source, "text", lines)
        finally:
            del self._harvests[pane.terminal_id]
            ended.set()
        return {
            "type": "pane_read",
            "read": self._read_record(pane, source, "text", text, truncated),
        }

    async def _harvest_done(self, method: str, params: Mapping[str, Any]) -> None:
        """Hold an ANSI ``pane.read`` of a terminal whose text harvest runs until it
        ends (AltScreenReadConflict::Defer, src/server/headless.rs 0.8.2: requeued
        on every pass of the main loop until the harvest is over). A text read is
        answered at once (from the screen as the harvest began: ``Frozen``)."""
        if method != "pane.read" or params.get("format") != "ansi":
            return
        while (pane := self._panes.get(params["pane_id"])) is not None and (
            ended := self._harvests.get(pane.terminal_id)
        ) is not None:
            self.deferred_reads += 1
            await ended.wait()

    async def _pane_send_text(self, params: dict[str, Any]) -> dict[str, Any]:
        pane = self._pane(params["pane_id"])
        await self._write(pane, params["text"].encode())
        return {"type": "ok"}

    def _keys(self, pane: _Pane, keys: Sequence[str]) -> bytes:
        data = bytearray()
        application_cursor = pane.screen.mode(1)
        for key in keys:
            try:
                data += encode_key(
                    key,
                    application_cursor=application_cursor,
                    allow_tmux_alias=self.protocol >= 20,
                )
            except ValueError:
                raise _ApiError("invalid_key", f"unsupported key {key}") from None
        return bytes(data)

    def _paste(self, pane: _Pane, text: str) -> bytes:
        data = text.encode()
        if pane.screen.mode(2004):
            return b"\x1b[200~" + data + b"\x1b[201~"
        return data

    async def _pane_send_keys(self, params: dict[str, Any]) -> dict[str, Any]:
        pane = self._pane(params["pane_id"])
        await self._write(pane, self._keys(pane, params["keys"]))
        return {"type": "ok"}

    async def _pane_send_input(self, params: dict[str, Any]) -> dict[str, Any]:
        pane = self._pane(params["pane_id"])
        keys = self._keys(pane, params.get("keys") or [])
        text = params.get("text")
        data = (self._paste(pane, text) if text else b"") + keys
        if data:
            await self._write(pane, data)
        return {"type": "ok"}

    async def _pane_scroll(self, params: dict[str, Any]) -> dict[str, Any]:
        pane = self._pane(params["pane_id"])
        self._scroll_to(pane, params["offset_from_bottom"])
        return {"type": "pane_info", "pane": self._pane_info(pane)}

    @staticmethod
    def _scroll_to(pane: _Pane, offset_from_bottom: int) -> None:
        """Herdr clamps an offset past the oldest row to the top."""
        screen = pane.screen
        offset = min(offset_from_bottom, _scroll_info(screen)["max_offset_from_bottom"])
        screen.scroll_to_bottom()
        if offset:
            screen.scroll_viewport(-offset)
        pane.notify()

    def _agent_target(self, target: str) -> _Pane:
        pane = self._panes.get(target)
        if pane is None:
            pane = next((p for p in self._panes.values() if p.agent_name == target), None)
        if pane is None:
            raise _ApiError("agent_not_found", f"agent target {target} not found")
        return pane

    async def _agent_send(self, params: dict[str, Any]) -> dict[str, Any]:
        pane = self._agent_target(params["target"])
        await self._write(pane, params["text"].encode())
        return {"type": "ok"}

    async def _agent_prompt(self, params: dict[str, Any]) -> dict[str, Any]:
        # The order of Herdr's checks (handle_agent_prompt, src/app/api/agents.rs 0.8.2):
        # an empty text, the target, a blocked agent, no agent recognised on its
        # screen, then a launch still pending.
        target: str = params["target"]
        if not params["text"]:
            raise _ApiError("empty_agent_prompt", "agent prompt must not be empty")
        pane = self._agent_target(target)
        if pane.agent_status == "blocked":
            raise _ApiError(
                "agent_blocked", f"agent {target} is blocked and requires interactive input"
            )
        if pane.agent is None or pane.launch_pending:
            raise _ApiError("agent_not_ready", f"agent {target} is not an active named agent")
        self.prompts.append((pane.pane_id, params["text"]))
        result = {"type": "agent_prompted", "agent": self._agent_info(pane)}
        seq, status = pane.state_change_seq, pane.agent_status
        await self._write(pane, self._paste(pane, params["text"]))
        assert self._nursery is not None
        self._nursery.start_soon(self._submit_later, pane)
        wait = params.get("wait")
        if wait is None:
            return result
        return await self._wait_after_prompt(pane, wait, seq, status)

    async def _wait_after_prompt(
        self, pane: _Pane, wait: Mapping[str, Any], seq: int, status: str
    ) -> dict[str, Any]:
        """``agent.prompt`` with ``wait``: a state change within 5 s, then a settled status."""
        until = wait.get("until") or ["idle", "done", "blocked"]
        timeout_ms = wait.get("timeout_ms")
        deadline = trio.current_time() + (timeout_ms / 1000 if timeout_ms is not None else 1e9)
        if status != "working":
            stall = min(deadline, trio.current_time() + _PROMPT_STALL_SECONDS)
            with trio.move_on_at(stall):
                await self._until(pane, lambda: pane.state_change_seq != seq)
            if pane.state_change_seq == seq and pane.alive:
                if timeout_ms is not None and timeout_ms <= _PROMPT_STALL_SECONDS * 1000:
                    raise _ApiError("timeout", "timed out waiting for agent status")
                raise _ApiError(
                    "agent_prompt_stalled",
                    "agent prompt produced no observed state change within 5000 ms; "
                    f"status is {pane.agent_status} and state_change_seq remained {seq}",
                )
        with trio.move_on_at(deadline):
            await self._until(pane, lambda: pane.agent_status in until)
        if not pane.alive:
            raise _ApiError("agent_not_running", "agent is no longer running in the target pane")
        if pane.agent_status not in until:
            raise _ApiError("timeout", "timed out waiting for agent status")
        return {"type": "agent_prompted", "agent": self._agent_info(pane)}

    @staticmethod
    async def _until(pane: _Pane, condition: Callable[[], bool]) -> None:
        while pane.alive and not condition():
            await pane.changed.wait()

    async def _submit_later(self, pane: _Pane) -> None:
        await trio.sleep(_PROMPT_ENTER_DELAY)
        if pane.alive:
            with contextlib.suppress(_ApiError):
                await self._write(pane, b"\r")

    async def _agent_get(self, params: dict[str, Any]) -> dict[str, Any]:
        target: str = params["target"]
        pane = self._agent_target(target)
        if not (pane.agent or pane.agent_name):
            raise _ApiError("agent_not_found", f"agent target {target} not found")
        return {"type": "agent_info", "agent": self._agent_info(pane)}

    async def _agent_list(self, params: dict[str, Any]) -> dict[str, Any]:
        panes = [p for p in self._all_panes() if p.agent or p.agent_name]
        return {"type": "agent_list", "agents": [self._agent_info(p) for p in panes]}

    async def _agent_start(self, params: dict[str, Any]) -> dict[str, Any]:
        # start_agent's order of checks (src/app/agents.rs 0.8.2): the name, the
        # name taken, the pane, a pane that is not a free shell, then the timeout.
        name: str = params["name"]
        kind: str = params["kind"]
        if not _AGENT_NAME.fullmatch(name):
            raise _ApiError(
                "invalid_agent_name",
                "agent name must start with a lowercase letter and contain only lowercase "
                "letters, digits, '-' or '_' (1-32 characters)",
            )
        taken = next((p for p in self._panes.values() if p.agent_name == name), None)
        if taken is not None:
            raise _ApiError(
                "agent_name_taken",
                f"agent name {name} is already used; candidates: "
                f"terminal_id={taken.terminal_id} pane_id={taken.pane_id}",
            )
        pane_id: str = params["pane_id"]
        pane = self._panes.get(pane_id)
        if pane is None:
            raise _ApiError("agent_pane_not_found", f"agent target pane {pane_id} not found")
        if pane.agent or pane.agent_name:
            raise _ApiError(
                "agent_pane_busy", f"agent target pane {pane_id} is not an available shell"
            )
        timeout = params.get("timeout_ms")
        if timeout is not None and not 3000 < timeout <= 300_000:
            raise _ApiError(
                "invalid_agent_timeout",
                "agent start timeout must be greater than 3000ms and at most 300000ms",
            )
        argv = [kind.lower(), *params.get("args", [])]
        # begin_managed_agent (src/terminal/state.rs 0.8.2): the name is taken at
        # once (an agent terminal from now on), the launch is pending; what runs
        # is recognised on its screen later. ``agent`` stays absent until then.
        pane.agent_name = name
        pane.launch_pending = True
        pane.interactive_ready = False
        self.launches += 1
        await self._write(pane, shlex.join(argv).encode() + b"\r")
        self._emit("pane_updated", {"pane": self._pane_info(pane)})
        assert self._nursery is not None
        seconds = (timeout if timeout is not None else _AGENT_START_TIMEOUT_MS) / 1000
        self._nursery.start_soon(self._managed_launch, pane, name, kind.lower(), seconds)
        return {"type": "agent_started", "agent": self._agent_info(pane), "argv": argv}

    def _seen_status(self, pane: _Pane) -> str:
        """An idle agent's status: ``done`` until its pane is looked at (pane_agent_status,
        src/app/api_helpers.rs 0.8.2); a background tab's pane is not."""
        return "idle" if self._is_focused(pane) else "done"

    async def _managed_launch(self, pane: _Pane, name: str, kind: str, timeout: float) -> None:
        """reconcile_managed_agent_at (src/terminal/state.rs 0.8.2) on a clock.

        The agent is recognised idle after ``agent_detected_after`` (the launch
        still pending: ``launch_pending`` on, ``interactive_ready`` left out);
        once the settle delay (``agent_ready_after``) has passed it becomes
        active (``interactive_ready`` on, ``launch_pending`` left out). Past the
        start deadline, or with ``agent_launch="exit"``, the managed launch is
        dropped instead (clear_agent_name): no name, neither flag; an agent that
        exited is no longer recognised either (``recent_agent_process_exit``).
        """
        started = trio.current_time()
        deadline = started + timeout
        detect_at = started + self.agent_detected_after
        settle = self.agent_ready_after
        ready_at = deadline if settle is None else max(started + settle, detect_at)

        def still_launching() -> bool:
            return pane.alive and pane.agent_name == name and pane.launch_pending

        await trio.sleep_until(min(detect_at, deadline))
        if not still_launching():
            return
        if detect_at < deadline:
            pane.agent = kind
            pane.agent_status = self._seen_status(pane)
            pane.state_change_seq += 1
            self._status_changed(pane)
        await trio.sleep_until(min(ready_at, deadline))
        if not still_launching():
            return
        pane.launch_pending = False
        if ready_at < deadline and self.agent_launch == "ready":
            pane.interactive_ready = True
        else:
            pane.agent_name = None
        if self.agent_launch == "exit":
            pane.agent = None
            pane.agent_status = "unknown"
            pane.state_change_seq += 1
            self._status_changed(pane)
        else:
            self._emit("pane_updated", {"pane": self._pane_info(pane)})
        pane.notify()


# ---------------------------------------------------------------- by hand


async def _stop_on_signal(fake: FakeHerdr, scope: trio.CancelScope) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
        async for _ in signals:
            await fake.stop()
            scope.cancel()
            return


async def _serve_demo(args: argparse.Namespace) -> None:
    fake = FakeHerdr(args.socket, protocol=args.protocol, snapshot=not args.no_snapshot)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_stop_on_signal, fake, nursery.cancel_scope)
        await nursery.start(fake.serve)
        workspace = fake.add_workspace("demo", cwd=os.getcwd())
        tab = fake.add_tab(workspace)
        for command in args.panes or ["bash"]:
            pane_id = await fake.add_pane(tab, command, columns=args.columns, rows=args.rows)
            print(
                f"pane {pane_id} ({fake.terminal_id(pane_id)}): {command}",
                file=sys.stderr,
                flush=True,
            )
        print(
            f"fake Herdr {fake.version} (protocol {fake.protocol}) on {fake.socket_path}; "
            "Ctrl-C stops it",
            file=sys.stderr,
            flush=True,
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.fakes.herdr_fake", description="Serve a fake Herdr socket API."
    )
    parser.add_argument("--socket", required=True, help="Unix socket path to listen on")
    parser.add_argument("--protocol", type=int, choices=PROTOCOLS, default=22)
    parser.add_argument(
        "--no-snapshot", action="store_true", help="an old server without session.snapshot"
    )
    parser.add_argument(
        "--pane", action="append", dest="panes", metavar="COMMAND", help="(repeatable)"
    )
    parser.add_argument("--columns", type=int, default=80)
    parser.add_argument("--rows", type=int, default=24)
    args = parser.parse_args(argv)
    trio.run(_serve_demo, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
