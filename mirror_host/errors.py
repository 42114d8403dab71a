"""The one exception tree of mirror-host.

Every error a room raises on purpose is one of these classes, so callers can tell
*who is at fault* and *what to do* from the type alone:

* ``RemoteProtocolError``: the peer sent something the protocol forbids. Prowl's
  rule (docs/protocol.md, "What closes a connection") is to close the connection
  without sending anything; the exception text is for our logs only.
* ``LocalProtocolError``: we were asked to encode or send something illegal. In
  the host this means a frame that cannot be sent (for example one over the 8 MiB
  payload limit); the connection that asked for it is closed.
* ``AuthError``: a failed pairing or authentication. Closes silently and counts
  as a failure for the peer's address.
* ``PaneSourceError``: a pane source (Herdr, tmux, a PTY) failed. Transient
  failures are retried; a vanished pane ends its subscription.
* ``ConfigError`` / ``StoreError`` / ``ListenError``: bad settings, an
  unreadable device store or a listen address that cannot be bound; these stop
  the program with a message naming the key, file or address.
* ``InvalidArgument``: a value our own code built is outside its limits (a
  bug, caught where it would otherwise go on the wire or to tmux).
* ``InvalidInput``: text a person handed a command (hex to decode, a pairing
  payload) is not what it should be; the command prints why and exits.
* ``GhosttyFailure``: libghostty returned an error code (a bug or exhaustion);
  the pane that hit it is treated as unavailable.
* ``ClientError``: the client side of the protocol (our own client, ``attach``,
  ``conformance``) lost or was refused its connection; ``NoHostRunning``: the
  admin commands found no host to talk to.

Pure rooms raise only these classes: a ``KeyError`` or ``struct.error`` escaping
a codec is a bug.
"""

from __future__ import annotations

__all__ = [
    "AuthError",
    "ClientClosed",
    "ClientError",
    "ConfigError",
    "GhosttyFailure",
    "IncompletePacket",
    "InvalidArgument",
    "InvalidHex",
    "InvalidInput",
    "InvalidPairingPayload",
    "InputRefused",
    "ListenError",
    "TLSUnsupported",
    "LocalProtocolError",
    "MalformedControlMessage",
    "MalformedPacket",
    "MirrorHostError",
    "NoHostRunning",
    "PacketLengthError",
    "PaneNotFound",
    "PaneSourceError",
    "PaneSourceUnavailable",
    "PayloadTooLarge",
    "ProtocolError",
    "ProtocolViolation",
    "RemoteProtocolError",
    "ServiceError",
    "StoreError",
    "UnsupportedOperation",
]


class MirrorHostError(Exception):
    """Base of every error mirror-host raises on purpose. Never raised itself."""


class ProtocolError(MirrorHostError):
    """Base of wire and session errors."""


class RemoteProtocolError(ProtocolError):
    """The peer broke the protocol. The connection is closed without a message."""


class MalformedPacket(RemoteProtocolError):
    """A binary packet (header, kind byte or frame body) is invalid."""


class PacketLengthError(MalformedPacket):
    """The length prefix is outside 1 … 8,388,608.

    Raised as soon as the four header bytes are present, before any of the
    declared payload is awaited.
    """

    def __init__(self, declared: int, maximum: int) -> None:
        super().__init__(f"length prefix {declared} is outside 1 … {maximum}")
        self.declared = declared
        self.maximum = maximum


class IncompletePacket(MalformedPacket):
    """The stream ended inside a packet (a short header or a short body)."""


class MalformedControlMessage(RemoteProtocolError):
    """A kind-0 payload is not exactly one valid control message."""


class ProtocolViolation(RemoteProtocolError):
    """A well-formed message that is not allowed here (wrong phase, lease, ACK …)."""


class LocalProtocolError(ProtocolError):
    """We tried to encode or send something the protocol forbids."""


class PayloadTooLarge(LocalProtocolError):
    """An outgoing packet would exceed the 8 MiB payload limit."""


class AuthError(MirrorHostError):
    """Pairing or device authentication failed. Detail is for logs only."""


class PaneSourceError(MirrorHostError):
    """A pane source failed to answer."""


class PaneSourceUnavailable(PaneSourceError):
    """The source is not reachable right now (socket missing, server stopped)."""


class InputRefused(PaneSourceError):
    """Nothing was written: the input was refused before any of it reached the pane
    (by the source, by the target's own rules, or because the lease was gone).

    The one exception that says so, for raw input and guarded delivery alike;
    its text says why. Any other :class:`PaneSourceError` from a write leaves it
    unknown how much of the input went (none, part or all)."""


class PaneNotFound(PaneSourceError):
    """The pane no longer exists in its source."""


class UnsupportedOperation(PaneSourceError):
    """The source does not support this operation (scroll, history …)."""


class ConfigError(MirrorHostError):
    """A setting is unknown or invalid.

    Attributes:
        key: the dotted setting name (``server.listen``) or the env/flag name.
        origin: where the value came from (a file path, ``environment``, ``flag``).
    """

    def __init__(self, key: str, reason: str, *, origin: str | None = None) -> None:
        where = f" (in {origin})" if origin else ""
        super().__init__(f"{key}: {reason}{where}")
        self.key = key
        self.reason = reason
        self.origin = origin


class StoreError(MirrorHostError):
    """The device store on disk cannot be read or written."""


class ListenError(MirrorHostError):
    """The listen address cannot be bound (in use, not ours, not allowed)."""


class ServiceError(MirrorHostError):
    """``mirror-host service`` cannot do what was asked here; the message says why."""


class TLSUnsupported(MirrorHostError):
    """This Python cannot do TLS-PSK (its start-up check failed); the message says why."""


class InvalidArgument(MirrorHostError, ValueError):
    """Our own code passed a value outside what a function or value takes: a bug
    in the caller (an archive over 2 MiB, a command line of no commands)."""


class InvalidInput(MirrorHostError, ValueError):
    """Text given to a command is malformed; the message says why."""


class InvalidHex(InvalidInput):
    """``wire decode`` input is not hex (or not whole packets)."""


class InvalidPairingPayload(InvalidInput):
    """A QR pairing payload a Prowl client would refuse; the message says why."""


class GhosttyFailure(MirrorHostError):
    """libghostty returned an error code."""


class ClientError(MirrorHostError):
    """Our client could not complete an exchange with a host."""


class ClientClosed(ClientError):
    """The host closed the connection (or TLS failed)."""


class NoHostRunning(MirrorHostError):
    """Nothing answers on the admin socket."""
