"""Command envelopes carried by ``command`` / ``commandResult`` (docs/protocol.md §6). Pure.

A remote command is ``{"requestID": UUID, "request": {"output": "json",
"command": <case>}}`` where ``<case>`` is one of six Swift enum cases, each with
its payload under ``_0``. Anything else, or a known case with a required member
missing, cannot be decoded, and an undecodable ``command`` closes the
connection: this is how Prowl's allowlist works.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar
from uuid import UUID

from mirror_host.control.fields import (
    ANY,
    BOOL,
    STRING,
    UUID_,
    Codec,
    StructCodec,
    decode_struct,
    encode_struct,
    expect_object,
    wire_field,
)
from mirror_host.control.swiftjson import JSONValue
from mirror_host.errors import MalformedControlMessage

__all__ = [
    "COMMAND_REQUEST",
    "MUTATING_COMMANDS",
    "PANE_TARGETED_COMMANDS",
    "AgentsDispatchCommand",
    "AgentsInputCommand",
    "CommandEnvelope",
    "CommandRequest",
    "CommandResponse",
    "CreateCommand",
    "Launch",
    "ListCommand",
    "ProfilesCommand",
    "RemoteCommand",
    "SendCommand",
    "decode_enum_case",
]


def decode_enum_case(
    value: JSONValue, path: str, cases: frozenset[str] | set[str]
) -> tuple[str, dict[str, JSONValue]]:
    """Pick the one known case out of a Swift enum object.

    Members whose names are not cases are ignored (Foundation's keyed container
    never sees them); two known cases, none, or a non-object value are errors.

    Raises:
        MalformedControlMessage: as above.
    """
    members = expect_object(value, path)
    found = [key for key in members if key in cases]
    if not found:
        shown = ", ".join(sorted(members)[:5]) or "none"
        raise MalformedControlMessage(f"{path}: no known case (members: {shown})")
    if len(found) > 1:
        raise MalformedControlMessage(f"{path}: more than one case ({', '.join(found)})")
    name = found[0]
    return name, expect_object(members[name], f"{path}.{name}")


def _payload(inner: dict[str, JSONValue], path: str) -> JSONValue:
    if inner.get("_0") is None:
        raise MalformedControlMessage(f"{path}._0: required member is missing")
    return inner["_0"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ListCommand:
    """``list``: the workspace/tab/pane catalogue (prowl.cli.list.v1)."""

    NAME: ClassVar[str] = "list"


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfilesCommand:
    """``profiles``: the launchable agent profiles."""

    NAME: ClassVar[str] = "profiles"


@dataclass(frozen=True, slots=True, kw_only=True)
class Launch:
    """``create.launch``: which profile to start, with an optional first prompt."""

    profile: str = wire_field("profile", STRING)
    prompt: str | None = wire_field("prompt", STRING, optional=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateCommand:
    """``create``: a background tab in a worktree, with an agent or a plain shell."""

    NAME: ClassVar[str] = "create"
    resource: str
    worktree_id: str
    launch: Launch | None
    background: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentsInputCommand:
    """``agentsInput``: the phone's reply box, delivered to the subscribed agent pane."""

    NAME: ClassVar[str] = "agentsInput"
    pane: str = wire_field("pane", STRING)
    prompt: str = wire_field("prompt", STRING)


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentsDispatchCommand:
    """``agentsDispatch``: the automation variant of agent input."""

    NAME: ClassVar[str] = "agentsDispatch"
    pane: str = wire_field("pane", STRING)
    prompt: str = wire_field("prompt", STRING)


@dataclass(frozen=True, slots=True, kw_only=True)
class SendCommand:
    """``send``: one command line for a shell pane. Run only where the pane's own
    shell takes it into its empty command line (local and tmux panes:
    :mod:`mirror_host.commands.shell_input`); refused with Prowl's own words
    everywhere else (Herdr, agliteterm, ``--no-shell-send``)."""

    NAME: ClassVar[str] = "send"
    pane: str
    text: str
    trailing_enter: bool
    source: str
    wait: bool
    capture_output: bool


RemoteCommand = (
    ListCommand
    | ProfilesCommand
    | CreateCommand
    | AgentsInputCommand
    | AgentsDispatchCommand
    | SendCommand
)

_CASES = frozenset({"list", "profiles", "create", "agentsInput", "agentsDispatch", "send"})

#: Commands retained by requestID and answered by ``commandReceipt``.
MUTATING_COMMANDS = frozenset({"create", "agentsInput", "agentsDispatch", "send"})
#: Commands that name a pane and therefore need the matching lease.
PANE_TARGETED_COMMANDS = frozenset({"agentsInput", "agentsDispatch", "send"})


def _selector_value(value: JSONValue, path: str, case: str) -> str:
    _, inner = decode_enum_case(value, path, {case})
    return STRING.decode(_payload(inner, f"{path}.{case}"), f"{path}.{case}._0")


def _required(members: dict[str, JSONValue], name: str, path: str) -> JSONValue:
    value = members.get(name)
    if value is None:
        raise MalformedControlMessage(f"{path}.{name}: required member is missing")
    return value


def _decode_command(value: JSONValue, path: str) -> RemoteCommand:
    name, inner = decode_enum_case(value, path, _CASES)
    path = f"{path}.{name}._0"
    payload = expect_object(_payload(inner, path[:-3]), path)
    if name == "list":
        return ListCommand()
    if name == "profiles":
        return ProfilesCommand()
    if name == "agentsInput":
        return decode_struct(AgentsInputCommand, payload, path)
    if name == "agentsDispatch":
        return decode_struct(AgentsDispatchCommand, payload, path)
    if name == "create":
        launch_raw = payload.get("launch")
        return CreateCommand(
            resource=STRING.decode(_required(payload, "resource", path), f"{path}.resource"),
            worktree_id=_selector_value(
                _required(payload, "selector", path), f"{path}.selector", "worktree"
            ),
            launch=None
            if launch_raw is None
            else decode_struct(Launch, launch_raw, f"{path}.launch"),
            background=BOOL.decode(_required(payload, "background", path), f"{path}.background"),
        )
    return SendCommand(
        pane=_selector_value(_required(payload, "selector", path), f"{path}.selector", "pane"),
        text=STRING.decode(_required(payload, "text", path), f"{path}.text"),
        trailing_enter=BOOL.decode(
            _required(payload, "trailing_enter", path), f"{path}.trailing_enter"
        ),
        source=STRING.decode(_required(payload, "source", path), f"{path}.source"),
        wait=BOOL.decode(_required(payload, "wait", path), f"{path}.wait"),
        capture_output=BOOL.decode(
            _required(payload, "capture_output", path), f"{path}.capture_output"
        ),
    )


def _encode_command(command: RemoteCommand) -> JSONValue:
    payload: JSONValue
    if isinstance(command, ListCommand | ProfilesCommand):
        payload = {}
    elif isinstance(command, AgentsInputCommand | AgentsDispatchCommand):
        payload = encode_struct(command)
    elif isinstance(command, CreateCommand):
        create: dict[str, JSONValue] = {
            "resource": command.resource,
            "selector": {"worktree": {"_0": command.worktree_id}},
        }
        if command.launch is not None:
            create["launch"] = encode_struct(command.launch)
        create["background"] = command.background
        payload = create
    else:
        payload = {
            "selector": {"pane": {"_0": command.pane}},
            "text": command.text,
            "trailing_enter": command.trailing_enter,
            "source": command.source,
            "wait": command.wait,
            "capture_output": command.capture_output,
        }
    return {command.NAME: {"_0": payload}}


_COMMAND: Codec[RemoteCommand] = Codec("Command", _decode_command, _encode_command)


#: The one output format a remote command may ask for.
JSON_OUTPUT = "json"


def _decode_output(value: JSONValue, path: str) -> str:
    # The remote scope allows JSON output only; anything else is outside the
    # allowlist and fails to decode, so the connection closes (prowl-host.md §8).
    output = STRING.decode(value, path)
    if output != JSON_OUTPUT:
        raise MalformedControlMessage(f"{path}: only {JSON_OUTPUT!r} output is allowed")
    return output


#: ``request.output``: exactly ``json``. Encoding passes anything, so that a
#: conformance client can send what a faulty client would.
_OUTPUT: Codec[str] = Codec("Output", _decode_output, STRING.encode)


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandEnvelope:
    """``request``: the output format (always ``json``) and the command."""

    output: str = wire_field("output", _OUTPUT)
    command: RemoteCommand = wire_field("command", _COMMAND)


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandRequest:
    """``commandRequest``: a request id and the envelope."""

    request_id: UUID = wire_field("requestID", UUID_)
    request: CommandEnvelope = wire_field("request", StructCodec(CommandEnvelope))


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandResponse:
    """``commandResponse``: the request id and the CLI-shaped JSON result."""

    request_id: UUID = wire_field("requestID", UUID_)
    response: JSONValue = wire_field("response", ANY)


COMMAND_REQUEST: Codec[CommandRequest] = StructCodec(CommandRequest)
