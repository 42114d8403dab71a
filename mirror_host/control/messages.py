"""The control messages (kind 0) as frozen dataclasses (docs/protocol.md §4). Pure.

Each class is one case of Prowl's message enum. ``CASE`` is the JSON case name
and ``SHAPE`` says how the associated value is written:

* ``EMPTY``: no value, written ``{"list":{}}``;
* ``STRUCT``: the fields inside ``_0``: ``{"subscribe":{"_0":{…}}}``;
* ``VALUE``: a single bare value in ``_0``: ``{"authenticated":{"_0":"UUID"}}``.

Fields are declared in Prowl's declaration order, which is also the order we
write them. Python names are snake_case; the JSON names are in ``wire_field``.
The two frame cases (``frame``, ``textFrame``) have no class here: frames travel
only as binary kinds 1 and 2 (``mirror_host.wire``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import ClassVar
from uuid import UUID

from mirror_host.control.commands import COMMAND_REQUEST, CommandRequest, CommandResponse
from mirror_host.control.fields import (
    BOOL,
    DATA,
    DOUBLE,
    INT,
    STRING,
    UINT64,
    UUID_,
    EnumCodec,
    ListCodec,
    StructCodec,
    wire_field,
)

__all__ = [
    "FRAME_CASES",
    "MESSAGE_TYPES",
    "Acknowledge",
    "Authenticate",
    "Authenticated",
    "Challenge",
    "Command",
    "CommandReceipt",
    "CommandResult",
    "ControlMessage",
    "EndReason",
    "Ended",
    "Failure",
    "History",
    "HistoryPage",
    "Input",
    "Intent",
    "ListPanes",
    "Pair",
    "Paired",
    "PaneDescriptor",
    "Panes",
    "Ping",
    "Pong",
    "Refresh",
    "Representation",
    "Scroll",
    "ScrollDirection",
    "ScrollResult",
    "ScrollState",
    "Shape",
    "StyledScrollback",
    "Subscribe",
    "Subscribed",
    "Viewport",
]


class Shape(enum.Enum):
    """How a case's associated value appears in JSON."""

    EMPTY = "empty"
    STRUCT = "struct"
    VALUE = "value"


class Representation(enum.Enum):
    """How a subscriber wants frames: VT bytes (Mac) or text (phones)."""

    VT = "vt-v1"
    TEXT = "text-v1"


class Intent(enum.Enum):
    """What ``subscribe`` does when the pane already has a subscriber."""

    TAKEOVER = "takeover"
    IF_FREE = "ifFree"


class EndReason(enum.Enum):
    """Why the host ended a subscription (always followed by a close)."""

    TAKEN_OVER = "takenOver"
    HOST_STOPPED = "hostStopped"
    PANE_CLOSED = "paneClosed"


class ScrollDirection(enum.Enum):
    """Direction of a remote scroll request."""

    UP = "up"
    DOWN = "down"


# ---------------------------------------------------------------- nested structs


@dataclass(frozen=True, slots=True, kw_only=True)
class PaneDescriptor:
    """One entry of ``panes.panes`` (docs/protocol.md §5)."""

    id: UUID = wire_field("id", UUID_)
    title: str = wire_field("title", STRING)
    directory: str = wire_field("directory", STRING)
    busy: bool = wire_field("busy", BOOL)
    project_name: str | None = wire_field("projectName", STRING, optional=True)
    subtitle: str | None = wire_field("subtitle", STRING, optional=True)
    role: str | None = wire_field("role", STRING, optional=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class StyledScrollback:
    """``viewport.styledScrollback``: a VT archive of native scrollback rows."""

    data: bytes = wire_field("bytes", DATA)
    row_offset: int = wire_field("rowOffset", INT)


# ---------------------------------------------------------------- authentication


@dataclass(frozen=True, slots=True, kw_only=True)
class Challenge:
    """H→C, first message on every connection: the host's id and a fresh nonce."""

    CASE: ClassVar[str] = "challenge"
    SHAPE: ClassVar[Shape] = Shape.STRUCT
    host_id: UUID = wire_field("hostID", UUID_)
    nonce: bytes = wire_field("nonce", DATA)


@dataclass(frozen=True, slots=True, kw_only=True)
class Authenticate:
    """C→H: log in as a paired device with an HMAC proof over the nonce."""

    CASE: ClassVar[str] = "authenticate"
    SHAPE: ClassVar[Shape] = Shape.STRUCT
    device_id: UUID = wire_field("deviceID", UUID_)
    proof: bytes = wire_field("proof", DATA)


@dataclass(frozen=True, slots=True, kw_only=True)
class Pair:
    """C→H on a ``pair``-identity connection: enrol a new device."""

    CASE: ClassVar[str] = "pair"
    SHAPE: ClassVar[Shape] = Shape.STRUCT
    name: str = wire_field("name", STRING)
    proof: bytes = wire_field("proof", DATA)


@dataclass(frozen=True, slots=True, kw_only=True)
class Paired:
    """H→C: the new device credential; the host closes right after."""

    CASE: ClassVar[str] = "paired"
    SHAPE: ClassVar[Shape] = Shape.STRUCT
    host_id: UUID = wire_field("hostID", UUID_)
    device_id: UUID = wire_field("deviceID", UUID_)
    key: bytes = wire_field("key", DATA)


@dataclass(frozen=True, slots=True, kw_only=True)
class Authenticated:
    """H→C: login accepted; the value is the host id."""

    CASE: ClassVar[str] = "authenticated"
    SHAPE: ClassVar[Shape] = Shape.VALUE
    host_id: UUID = wire_field("_0", UUID_)


# ---------------------------------------------------------------- discovery


@dataclass(frozen=True, slots=True, kw_only=True)
class ListPanes:
    """C→H: ask for the pane list (the ``list`` case)."""

    CASE: ClassVar[str] = "list"
    SHAPE: ClassVar[Shape] = Shape.EMPTY


@dataclass(frozen=True, slots=True, kw_only=True)
class Panes:
    """H→C: the pane list, the host's capabilities and this run's id."""

    CASE: ClassVar[str] = "panes"
    SHAPE: ClassVar[Shape] = Shape.STRUCT
    panes: tuple[PaneDescriptor, ...] = wire_field("panes", ListCodec(StructCodec(PaneDescriptor)))
    capabilities: tuple[str, ...] = wire_field("capabilities", ListCodec(STRING))
    host_run_id: UUID = wire_field("hostRunID", UUID_)


# ---------------------------------------------------------------- subscription


@dataclass(frozen=True, slots=True, kw_only=True)
class Subscribe:
    """C→H: take the one lease this connection may hold."""

    CASE: ClassVar[str] = "subscribe"
    SHAPE: ClassVar[Shape] = Shape.STRUCT
    pane_id: UUID = wire_field("paneID", UUID_)
    representation: Representation = wire_field("representation", EnumCodec(Representation))
    intent: Intent = wire_field("intent", EnumCodec(Intent))
    include_viewport_text: bool | None = wire_field("includeViewportText", BOOL, optional=True)
    include_scroll_state: bool | None = wire_field("includeScrollState", BOOL, optional=True)
    include_styled_scrollback: bool | None = wire_field(
        "includeStyledScrollback", BOOL, optional=True
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Subscribed:
    """H→C: the lease was granted; always precedes the first frame."""

    CASE: ClassVar[str] = "subscribed"
    SHAPE: ClassVar[Shape] = Shape.STRUCT
    pane_id: UUID = wire_field("paneID", UUID_)
    subscription_id: UUID = wire_field("subscriptionID", UUID_)
    host_run_id: UUID = wire_field("hostRunID", UUID_)


@dataclass(frozen=True, slots=True, kw_only=True)
class Viewport:
    """H→C before a VT frame of an opted-in lease: the scrolled viewport text."""

    CASE: ClassVar[str] = "viewport"
    SHAPE: ClassVar[Shape] = Shape.STRUCT
    styled_scrollback: StyledScrollback | None = wire_field(
        "styledScrollback", StructCodec(StyledScrollback), optional=True
    )
    text: str | None = wire_field("text", STRING, optional=True)
    sequence: int = wire_field("sequence", UINT64)
    subscription_id: UUID = wire_field("subscriptionID", UUID_)


@dataclass(frozen=True, slots=True, kw_only=True)
class ScrollState:
    """H→C before each frame of an opted-in lease; only ``True`` is a boundary."""

    CASE: ClassVar[str] = "scrollState"
    SHAPE: ClassVar[Shape] = Shape.STRUCT
    at_top: bool | None = wire_field("atTop", BOOL, optional=True)
    at_bottom: bool | None = wire_field("atBottom", BOOL, optional=True)
    sequence: int = wire_field("sequence", UINT64)
    subscription_id: UUID = wire_field("subscriptionID", UUID_)


@dataclass(frozen=True, slots=True, kw_only=True)
class Acknowledge:
    """C→H: the outstanding frame was applied; the next one may be sent."""

    CASE: ClassVar[str] = "acknowledge"
    SHAPE: ClassVar[Shape] = Shape.STRUCT
    sequence: int = wire_field("sequence", UINT64)
    subscription_id: UUID = wire_field("subscriptionID", UUID_)


@dataclass(frozen=True, slots=True, kw_only=True)
class Input:
    """C→H on a ``vt-v1`` lease: already-encoded bytes for the pane."""

    CASE: ClassVar[str] = "input"
    SHAPE: ClassVar[Shape] = Shape.STRUCT
    data: bytes = wire_field("bytes", DATA)
    subscription_id: UUID = wire_field("subscriptionID", UUID_)


@dataclass(frozen=True, slots=True, kw_only=True)
class Refresh:
    """C→H: forget the last frame so the next sample is sent even if unchanged."""

    CASE: ClassVar[str] = "refresh"
    SHAPE: ClassVar[Shape] = Shape.STRUCT
    subscription_id: UUID = wire_field("subscriptionID", UUID_)


@dataclass(frozen=True, slots=True, kw_only=True)
class Ended:
    """H→C: the subscription is over; the host closes right after."""

    CASE: ClassVar[str] = "ended"
    SHAPE: ClassVar[Shape] = Shape.STRUCT
    reason: EndReason = wire_field("reason", EnumCodec(EndReason))


# ---------------------------------------------------------------- scroll and history


@dataclass(frozen=True, slots=True, kw_only=True)
class Scroll:
    """C→H: scroll the host pane by about a page."""

    CASE: ClassVar[str] = "scroll"
    SHAPE: ClassVar[Shape] = Shape.STRUCT
    request_id: UUID = wire_field("requestID", UUID_)
    direction: ScrollDirection = wire_field("direction", EnumCodec(ScrollDirection))
    subscription_id: UUID = wire_field("subscriptionID", UUID_)


@dataclass(frozen=True, slots=True, kw_only=True)
class ScrollResult:
    """H→C right after the frame that completes a scroll."""

    CASE: ClassVar[str] = "scrollResult"
    SHAPE: ClassVar[Shape] = Shape.STRUCT
    request_id: UUID = wire_field("requestID", UUID_)
    sequence: int = wire_field("sequence", UINT64)
    subscription_id: UUID = wire_field("subscriptionID", UUID_)


@dataclass(frozen=True, slots=True, kw_only=True)
class History:
    """C→H: a new history snapshot (no id) or the page before ``offset``."""

    CASE: ClassVar[str] = "history"
    SHAPE: ClassVar[Shape] = Shape.STRUCT
    history_id: UUID | None = wire_field("historyID", UUID_, optional=True)
    offset: int | None = wire_field("offset", INT, optional=True)
    subscription_id: UUID = wire_field("subscriptionID", UUID_)


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryPage:
    """H→C: up to 200 lines of a frozen history snapshot, ending at the request."""

    CASE: ClassVar[str] = "historyPage"
    SHAPE: ClassVar[Shape] = Shape.STRUCT
    history_id: UUID = wire_field("historyID", UUID_)
    offset: int = wire_field("offset", INT)
    lines: tuple[str, ...] = wire_field("lines", ListCodec(STRING))
    total: int = wire_field("total", INT)
    subscription_id: UUID = wire_field("subscriptionID", UUID_)
    captured_at: float = wire_field("capturedAt", DOUBLE)
    truncated: bool = wire_field("truncated", BOOL)


# ---------------------------------------------------------------- status and heartbeats


@dataclass(frozen=True, slots=True, kw_only=True)
class Failure:
    """H→C: a non-fatal refusal (or the last word before a host disconnect)."""

    CASE: ClassVar[str] = "failure"
    SHAPE: ClassVar[Shape] = Shape.STRUCT
    error: str = wire_field("error", STRING)
    subscription_id: UUID | None = wire_field("subscriptionID", UUID_, optional=True)
    request_id: UUID | None = wire_field("requestID", UUID_, optional=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class Ping:
    """Either way, every 2 s; answered by ``pong`` in any phase."""

    CASE: ClassVar[str] = "ping"
    SHAPE: ClassVar[Shape] = Shape.EMPTY


@dataclass(frozen=True, slots=True, kw_only=True)
class Pong:
    """The answer to ``ping``."""

    CASE: ClassVar[str] = "pong"
    SHAPE: ClassVar[Shape] = Shape.EMPTY


# ---------------------------------------------------------------- commands


@dataclass(frozen=True, slots=True, kw_only=True)
class Command:
    """C→H: a public-CLI command; targeted ones carry the lease."""

    CASE: ClassVar[str] = "command"
    SHAPE: ClassVar[Shape] = Shape.STRUCT
    subscription_id: UUID | None = wire_field("subscriptionID", UUID_, optional=True)
    command_request: CommandRequest = wire_field("commandRequest", COMMAND_REQUEST)


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandResult:
    """H→C: the CLI-shaped JSON answer to a command or a receipt query."""

    CASE: ClassVar[str] = "commandResult"
    SHAPE: ClassVar[Shape] = Shape.STRUCT
    command_response: CommandResponse = wire_field("commandResponse", StructCodec(CommandResponse))


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandReceipt:
    """C→H: ask again for the result of an earlier pane-targeted mutation."""

    CASE: ClassVar[str] = "commandReceipt"
    SHAPE: ClassVar[Shape] = Shape.STRUCT
    subscription_id: UUID = wire_field("subscriptionID", UUID_)
    command_receipt_id: UUID = wire_field("commandReceiptID", UUID_)


ControlMessage = (
    Challenge
    | Authenticate
    | Pair
    | Paired
    | Authenticated
    | ListPanes
    | Panes
    | Subscribe
    | Subscribed
    | Viewport
    | Acknowledge
    | Input
    | History
    | HistoryPage
    | Failure
    | Ping
    | Pong
    | Ended
    | Refresh
    | Scroll
    | ScrollResult
    | ScrollState
    | Command
    | CommandResult
    | CommandReceipt
)

#: Every JSON-capable case, by its case name.
MESSAGE_TYPES: dict[str, type[ControlMessage]] = {
    cls.CASE: cls
    for cls in (
        Challenge, Authenticate, Pair, Paired, Authenticated, ListPanes, Panes, Subscribe,
        Subscribed, Viewport, Acknowledge, Input, History, HistoryPage, Failure, Ping, Pong,
        Ended, Refresh, Scroll, ScrollResult, ScrollState, Command, CommandResult, CommandReceipt,
    )
}  # fmt: skip

#: The two cases that exist in Prowl's enum but may never travel as JSON.
FRAME_CASES = frozenset({"frame", "textFrame"})
