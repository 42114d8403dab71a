"""What a :class:`~mirror_host.session.connection.Session` reports to the host. Pure.

Requests are things the host must act on (verify a proof, list panes, write
input); facts are past-tense (``ConnectionClosed``). The session has already
checked everything it can check alone (its state table, the lease, sizes)
before it emits an event, so the host never re-validates the peer's message.
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from mirror_host.control import Command, CommandReceipt, ScrollDirection, Subscribe

__all__ = [
    "AuthenticateRequested",
    "CommandRequested",
    "ConnectionClosed",
    "Event",
    "FrameAcknowledged",
    "HistoryRequested",
    "InputReceived",
    "ListRequested",
    "PairRequested",
    "ReceiptRequested",
    "RefreshRequested",
    "ScrollRequested",
    "SubscribeRequested",
]


@dataclass(frozen=True, slots=True)
class AuthenticateRequested:
    """The peer wants to log in as ``device_id``; the host checks ``proof``."""

    device_id: UUID
    proof: bytes


@dataclass(frozen=True, slots=True)
class PairRequested:
    """The peer (on a ``pair`` TLS identity) wants to enrol as ``name``."""

    name: str
    proof: bytes


@dataclass(frozen=True, slots=True)
class ListRequested:
    """``list``: the host answers with :meth:`Session.send_panes`."""


@dataclass(frozen=True, slots=True)
class SubscribeRequested:
    """``subscribe`` on a connection without a lease."""

    request: Subscribe


@dataclass(frozen=True, slots=True)
class FrameAcknowledged:
    """The outstanding frame was acknowledged: the gate is open again."""

    subscription_id: UUID


@dataclass(frozen=True, slots=True)
class RefreshRequested:
    """``refresh``: the gate forgot its last frame; sample again."""

    subscription_id: UUID


@dataclass(frozen=True, slots=True)
class InputReceived:
    """Bytes for the leased pane (checked: ``vt-v1`` lease, 1 … 65,536 bytes)."""

    subscription_id: UUID
    pane_id: UUID
    data: bytes


@dataclass(frozen=True, slots=True)
class ScrollRequested:
    """A new scroll request the host must apply to the pane."""

    subscription_id: UUID
    pane_id: UUID
    request_id: UUID
    direction: ScrollDirection


@dataclass(frozen=True, slots=True)
class HistoryRequested:
    """A new history snapshot is needed (``history`` without ``historyID``)."""

    subscription_id: UUID
    pane_id: UUID


@dataclass(frozen=True, slots=True)
class CommandRequested:
    """A ``command`` that passed the lease and in-flight rules."""

    message: Command


@dataclass(frozen=True, slots=True)
class ReceiptRequested:
    """A ``commandReceipt`` on the current lease."""

    message: CommandReceipt


@dataclass(frozen=True, slots=True)
class ConnectionClosed:
    """The session is over. ``reason`` is for logs only, never sent.

    ``is_failure`` marks authentication failures and protocol violations
    before login, which count toward the address's lockout.
    """

    reason: str
    is_failure: bool = False


Event = (
    AuthenticateRequested
    | PairRequested
    | ListRequested
    | SubscribeRequested
    | FrameAcknowledged
    | RefreshRequested
    | InputReceived
    | ScrollRequested
    | HistoryRequested
    | CommandRequested
    | ReceiptRequested
    | ConnectionClosed
)
