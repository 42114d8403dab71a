"""One accepted socket's TLS handshake: the deadline, the alert, the reason in words. I/O.

:func:`tls_handshake` runs the server side of TLS-PSK over an accepted TCP stream
and says how it ended (:class:`Handshake`): finished, with the PSK identity the
callback bound to this task; failed, with the reason in words (not OpenSSL's
reason names) after the alert was sent; or out of time.

The alert: when OpenSSL refuses a handshake it queues an alert for the peer
(``unknown_psk_identity``, ``bad_record_mac``), which is what Prowl's clients
show the user. ``trio.SSLStream`` marks the stream broken without writing it,
which would leave the peer with a bare end of file, so :meth:`Handshake.send_alert`
sends it, from the outgoing BIO the stream's TLS object writes to
(:meth:`mirror_host.host.tls.ServerContext.take_outgoing`). ``tests/unit/test_handshake.py``
fails if Trio stops making its TLS object through ``SSLContext.wrap_bio``.
"""

from __future__ import annotations

import os
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field

import trio

from mirror_host.host.tls import (
    ServerContext,
    attempted_identity,
    negotiated_identity,
    reset_negotiated_identity,
)
from mirror_host.streams import send_or_gone

__all__ = [
    "ALERT_SECONDS",
    "Handshake",
    "peer_at_fault",
    "tls_handshake",
    "tls_reason",
    "tune_keepalive",
]

#: Sending the alert of a failed handshake; past it, TCP closes without it.
ALERT_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class Handshake:
    """How one handshake ended.

    ``identity`` when it finished; ``failure`` (why, in words) when it did not,
    and then :meth:`send_alert` tells the peer; ``timed_out`` when the deadline
    passed first (not the peer's fault: not a failure).

    ``peer_at_fault``: TLS refused what the peer sent (a wrong key, an unknown
    identity, no TLS 1.2, garbage), which counts toward the address's lock-out.
    A peer that only left (end of file or a reset mid-handshake, as a client
    does that gave up while its connection waited in the accept queue of a host
    short of descriptors) got nothing wrong, and is not counted; nor is one that
    had already gone when TLS refused what it left behind, unless that was a
    key it offered (Prowl's Android app, giving up, sends its ClientHello and then
    an alert before it closes, which OpenSSL reads as a record of the wrong
    version: see :func:`peer_at_fault`).
    """

    stream: trio.SSLStream[trio.SocketStream]
    identity: str | None = None
    failure: str | None = None
    timed_out: bool = False
    peer_at_fault: bool = False
    #: Where the stream's TLS object wrote what the peer has not been sent.
    outgoing: ssl.MemoryBIO | None = field(default=None, repr=False)

    async def send_alert(self) -> None:
        """Send what OpenSSL queued when it refused the handshake: the alert."""
        pending = self.outgoing.read() if self.outgoing is not None else b""
        if pending:
            with trio.move_on_after(ALERT_SECONDS):
                await send_or_gone(self.stream.transport_stream, pending)


def tune_keepalive(stream: trio.SocketStream) -> None:
    """TCP keep-alive with a 15 s idle time, as Prowl's peers use."""
    try:
        stream.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        if hasattr(socket, "TCP_KEEPIDLE"):
            stream.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 15)
    except OSError:
        pass


async def tls_handshake(
    transport: trio.SocketStream, tls: ServerContext, *, seconds: float
) -> Handshake:
    """Run TLS over ``transport`` for at most ``seconds``; see :class:`Handshake`.

    A cancellation from outside (the listener evicting a pending handshake)
    propagates as usual.
    """
    stream = trio.SSLStream(transport, tls.context, server_side=True)
    outgoing = tls.take_outgoing()  # no await since the stream made its TLS object
    reset_negotiated_identity()
    try:
        with trio.move_on_after(seconds):
            await stream.do_handshake()
            return Handshake(stream, identity=negotiated_identity())
    except trio.BrokenResourceError as exc:
        attempted = attempted_identity()
        reason = tls_reason(exc, attempted)
        at_fault = peer_at_fault(
            exc, offered_key=attempted is not None, gone=lambda: peer_gone(transport)
        )
        return Handshake(stream, failure=reason, peer_at_fault=at_fault, outgoing=outgoing)
    return Handshake(stream, timed_out=True)


def peer_at_fault(
    exc: BaseException, *, offered_key: bool = False, gone: Callable[[], bool] = lambda: False
) -> bool:
    """Whether a handshake that broke with ``exc`` broke on something the peer sent
    (OpenSSL refused it), not on the peer going away (see :class:`Handshake`).

    ``offered_key``: the peer reached the PSK callback (it named an identity and so
    tried a key): a refusal then always counts. Otherwise ``gone()`` is asked: a
    refusal of what a peer that already closed left behind (a client that gave up
    in the accept queue) does not count.
    """
    cause = exc.__cause__
    if not isinstance(cause, ssl.SSLError):
        return False  # the transport broke under TLS: a reset, a closed socket
    if isinstance(cause, ssl.SSLEOFError | ssl.SSLZeroReturnError | ssl.SSLSyscallError):
        return False  # the peer closed (with or without a word)
    reason = str(getattr(cause, "reason", None) or cause).upper()
    if "UNEXPECTED_EOF" in reason:
        return False
    return offered_key or not gone()


def peer_gone(transport: trio.SocketStream) -> bool:
    """Whether the peer has closed its end (an end of file or a reset is waiting),
    looked at without reading anything or waiting."""
    try:
        peek = socket.socket(fileno=os.dup(transport.socket.fileno()))
    except OSError:
        return True  # the socket is closed already
    with peek:
        try:
            return peek.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except BlockingIOError:
            return False  # still there, nothing more sent
        except OSError:
            return True  # reset


def tls_reason(exc: BaseException, attempted: str | None) -> str:
    """Why a handshake failed, in words (not OpenSSL's reason names).

    ``attempted``: the kind of identity the client offered (``pair``, ``device``,
    ``unknown``), which tells a wrong pairing code from a revoked device.
    """
    cause = exc.__cause__
    if cause is None:
        return "the client closed the connection during the handshake"
    if isinstance(cause, OSError) and not isinstance(cause, ssl.SSLError):
        return f"the connection broke during the handshake ({cause.strerror or cause})"
    reason = str(getattr(cause, "reason", None) or cause).upper().replace(" ", "_")
    if "PSK_IDENTITY_NOT_FOUND" in reason:
        if attempted == "pair":
            return "a pairing code, but no pairing window is open (it expired, or was used)"
        return "unknown or revoked device"
    if "BAD_RECORD_MAC" in reason or "DECRYPT" in reason:
        if attempted == "pair":
            return "wrong or expired pairing code"
        return "wrong key for a paired device (its credential does not match this host's)"
    for name, words in _TLS_REASONS.items():
        if name in reason:
            return words
    return f"TLS error ({reason})"


#: OpenSSL's reasons a client that is no Prowl client (or a broken one) gets.
_TLS_REASONS = {
    "UNSUPPORTED_PROTOCOL": "the client does not offer TLS 1.2, the only version Prowl uses",
    "WRONG_VERSION_NUMBER": "the client does not offer TLS 1.2, the only version Prowl uses",
    "NO_SHARED_CIPHER": "the client does not offer ECDHE-PSK-CHACHA20-POLY1305",
    "HTTP_REQUEST": "an HTTP request, not a Prowl client",
    "UNEXPECTED_EOF": "the client closed the connection during the handshake",
}
