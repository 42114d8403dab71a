"""The session's states and the one table of what each accepts. Pure.

Theory of operation
-------------------

Rule 1: which client message a state accepts, and the state it leads to, is
written in :data:`CLIENT_TRANSITIONS` and nowhere else; which host decision a
state allows, in :data:`HOST_TRANSITIONS`. Handlers never ask the state again:
a handler runs only for a message its state accepts (h11's ``_state.py`` is the
model).

Rule 2: anything missing from a table ends the session. A client message that
its state does not list is a protocol violation and closes the connection
silently (:func:`refusal` says why, for the log). A host decision its state
does not list is a bug in the host (``LocalProtocolError``), except on a
closed session: the end can overtake any decision the host has under way (a
pairing whose store write was slow, a subscribe whose first capture was), so
there every decision is a no-op.

Rule 3: a state that accepts no message reads no packet. While the host
verifies a login or stores a new device, what the peer sends meanwhile waits in
the decoder and is read once the verdict is in.

``CLOSED`` is entered from every state (a violation, a timeout, the outbound
bound, the host's ``close``/``revoke``), so the tables only name it where a
session ends by design. Nothing leaves it.

::

    AUTHENTICATING --authenticate--> VERIFYING --accept--> AUTHENTICATED
          |                              +--reject--> CLOSED
          +--pair--> PAIRING --paired--> CLOSED (after `paired`)
                        +--reject--> CLOSED
                        +--pairing failed--> CLOSED (after `failure`: not saved)
    (the 5 s login deadline runs in AUTHENTICATING and VERIFYING)

    AUTHENTICATED --subscribe--> SUBSCRIBING --grant--> SUBSCRIBED --ended--> CLOSED
          ^                           |                            (after `ended`)
          +-------- pane busy --------+-- first capture failed --> CLOSED
    (host stop: `ended hostStopped` from all three, then CLOSED)

Four smaller pieces of state run beside these, each with one owner: the
command slot (one command in flight,
:class:`~mirror_host.session.logged_in.CommandSlot`), and within a lease the
frame gate and the scroll tracker (:mod:`mirror_host.session.lease`) and the
history desk (idle or capturing, :class:`~mirror_host.session.history.HistoryDesk`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Final, TypeGuard

from mirror_host.control import (
    Acknowledge,
    Authenticate,
    Command,
    CommandReceipt,
    ControlMessage,
    History,
    Input,
    ListPanes,
    Pair,
    Ping,
    Pong,
    Refresh,
    Scroll,
    Subscribe,
)

__all__ = [
    "CLIENT_TRANSITIONS",
    "HOST_TRANSITIONS",
    "LEASE_BOUND",
    "LOGIN_DEADLINE_PHASES",
    "LOGIN_PHASES",
    "ClientMessage",
    "Decision",
    "LoginMessage",
    "Phase",
    "SessionMessage",
    "accepted",
    "refusal",
]


class Phase(enum.Enum):
    """Where a connection is in its life: the states of the table."""

    #: ``challenge`` sent; only ``authenticate`` or ``pair`` may follow.
    AUTHENTICATING = "authenticating"
    #: ``authenticate`` received; further packets wait for the host's verdict.
    VERIFYING = "verifying"
    #: ``pair`` received; the host is storing the new device.
    PAIRING = "pairing"
    #: Logged in, holding no lease (yet, or after a ``PANE_BUSY``).
    AUTHENTICATED = "authenticated"
    #: ``subscribe`` received; the host is taking the pane and its first capture.
    SUBSCRIBING = "subscribing"
    #: Holding the connection's one lease.
    SUBSCRIBED = "subscribed"
    CLOSED = "closed"

    # Looked up in the table on every packet: hash by identity, as ``==`` already
    # compares (Enum's own ``__hash__`` is Python code hashing the name).
    __hash__ = object.__hash__


#: Messages a client may send in any state that reads packets.
LinkMessage = Ping | Pong
#: Messages that log a connection in.
LoginMessage = Authenticate | Pair
#: Messages of a logged-in connection.
SessionMessage = (
    ListPanes
    | Subscribe
    | Acknowledge
    | Refresh
    | Input
    | Scroll
    | History
    | Command
    | CommandReceipt
)
#: Everything a client may ever send as a control message.
ClientMessage = LinkMessage | LoginMessage | SessionMessage

_A = Phase.AUTHENTICATED
_S = Phase.SUBSCRIBING
_H = Phase.SUBSCRIBED

#: THE table: the client messages each state accepts and the state each leads to.
CLIENT_TRANSITIONS: Final[Mapping[Phase, Mapping[type[ClientMessage], Phase]]] = {
    Phase.AUTHENTICATING: {
        Ping: Phase.AUTHENTICATING,
        Pong: Phase.AUTHENTICATING,
        Authenticate: Phase.VERIFYING,
        Pair: Phase.PAIRING,
    },
    Phase.VERIFYING: {},
    Phase.PAIRING: {},
    Phase.AUTHENTICATED: {Ping: _A, Pong: _A, ListPanes: _A, Command: _A, Subscribe: _S},
    Phase.SUBSCRIBING: {Ping: _S, Pong: _S, ListPanes: _S, Command: _S},
    Phase.SUBSCRIBED: {
        Ping: _H,
        Pong: _H,
        ListPanes: _H,
        Command: _H,
        Acknowledge: _H,
        Refresh: _H,
        Input: _H,
        Scroll: _H,
        History: _H,
        CommandReceipt: _H,
    },
    Phase.CLOSED: {},
}


class Decision(enum.Enum):
    """The host's decisions that move a session (named as the session's methods)."""

    ACCEPT = "accept_authentication"
    REJECT = "reject"
    PAIRED = "send_paired"
    #: The host could not store the new device: ``failure`` (which Prowl's apps
    #: show), then the close; the host's fault, so no failure is counted.
    PAIRING_FAILED = "pairing_failed"
    GRANT = "grant_lease"
    PANE_BUSY = "send_pane_busy"
    SUBSCRIBE_FAILED = "subscribe_failed"
    #: ``ended`` for the lease (``takenOver``, ``paneClosed``): only its holder.
    ENDED = "send_ended"
    #: ``ended hostStopped``: every logged-in session, holding a lease or not
    #: (Prowl's host tells every established peer; Android does not reconnect).
    HOST_STOPPED = "send_ended(hostStopped)"


#: The host decisions each state allows and where they lead. ``close`` and
#: ``revoke`` are allowed everywhere and lead to ``CLOSED`` (Rule 2's exception).
HOST_TRANSITIONS: Final[Mapping[Phase, Mapping[Decision, Phase]]] = {
    Phase.VERIFYING: {Decision.ACCEPT: Phase.AUTHENTICATED, Decision.REJECT: Phase.CLOSED},
    Phase.PAIRING: {
        Decision.PAIRED: Phase.CLOSED,
        Decision.REJECT: Phase.CLOSED,
        Decision.PAIRING_FAILED: Phase.CLOSED,
    },
    Phase.AUTHENTICATED: {Decision.HOST_STOPPED: Phase.CLOSED},
    Phase.SUBSCRIBING: {
        Decision.GRANT: Phase.SUBSCRIBED,
        Decision.PANE_BUSY: Phase.AUTHENTICATED,
        Decision.SUBSCRIBE_FAILED: Phase.CLOSED,
        Decision.HOST_STOPPED: Phase.CLOSED,
    },
    Phase.SUBSCRIBED: {Decision.ENDED: Phase.CLOSED, Decision.HOST_STOPPED: Phase.CLOSED},
}

#: Before login: a violation here counts toward the address's lockout.
LOGIN_PHASES: Final = frozenset({Phase.AUTHENTICATING, Phase.VERIFYING, Phase.PAIRING})
#: Where the 5 s login deadline runs (pairing stops it: the host is saving).
LOGIN_DEADLINE_PHASES: Final = frozenset({Phase.AUTHENTICATING, Phase.VERIFYING})
#: Messages that need the lease: accepted only once subscribed.
LEASE_BOUND: Final = frozenset(CLIENT_TRANSITIONS[_H]) - frozenset(CLIENT_TRANSITIONS[_A])


def accepted(message: ControlMessage, phase: Phase) -> TypeGuard[ClientMessage]:
    """Whether ``phase`` accepts ``message`` (Rule 1)."""
    return type(message) in CLIENT_TRANSITIONS[phase]


def refusal(phase: Phase, message: ControlMessage) -> str:
    """Why ``phase`` refuses ``message``, for the log (Rule 2)."""
    kind = type(message)
    if phase in LOGIN_PHASES:
        return f"{message.CASE} before authentication"
    if kind is Subscribe:
        return "a second subscribe on one connection"
    if kind in LEASE_BOUND:
        return "lease-bound message without a subscription"
    return f"{message.CASE} is not accepted from a client"
