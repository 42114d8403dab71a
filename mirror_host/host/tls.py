"""The host's side of TLS-PSK: the table of keys, the identity a connection negotiated. I/O edge.

The PSK for an identity comes from an in-memory table (:class:`PskTable`) that
is swapped whole when devices are paired or revoked, so the OpenSSL callback is
a dictionary lookup and never waits. The context itself, this Python's PSK
route and its start-up self-check are :mod:`mirror_host.tls.psk`'s, shared with
the client.

Binding the identity to the connection: ``SSLObject`` has no accessor for the
PSK identity, so the callback records it in a :class:`contextvars.ContextVar`.
The callback runs synchronously inside ``do_handshake()``, which Trio calls from
the connection's own task, so each task sees only its own value
(``tests/integration/test_tls.py`` pins this down for every route).
"""

from __future__ import annotations

import contextvars
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from mirror_host.auth.pairing import PAIR_IDENTITY
from mirror_host.tls.psk import check_psk_route, server_context

__all__ = [
    "PskTable",
    "ServerContext",
    "attempted_identity",
    "build_server_context",
    "negotiated_identity",
    "reset_negotiated_identity",
]

_identity: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "mirror_host_psk_identity", default=None
)
#: What kind of identity the current task's last handshake offered (for the log
#: line of a failed handshake): ``pair``, ``device`` (one with a key) or ``unknown``.
#: Never the identity itself: a failed one may be any string an attacker chose.
_attempted: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "mirror_host_psk_attempted", default=None
)


@dataclass(frozen=True, slots=True)
class PskTable:
    """Identity → PSK, immutable. Replace the whole table to change it."""

    keys: Mapping[str, bytes] = field(default_factory=lambda: MappingProxyType({}))

    def lookup(self, identity: str | None) -> bytes:
        """The PSK for ``identity``, or ``b""`` (which fails the handshake)."""
        if identity is None:
            return b""
        return self.keys.get(identity, b"")


class _TableHolder:
    """The current table, read by the callback on every handshake."""

    def __init__(self) -> None:
        self.table = PskTable()

    def callback(self, identity: str | None) -> bytes:
        key = self.table.lookup(identity)
        # Record only identities that have a key: a failed lookup ends the
        # handshake anyway, and an attacker-chosen string is never stored.
        _identity.set(identity if key else None)
        _attempted.set("pair" if identity == PAIR_IDENTITY else "device" if key else "unknown")
        return key


def negotiated_identity() -> str | None:
    """The PSK identity the current task's last handshake used."""
    return _identity.get()


def attempted_identity() -> str | None:
    """What the current task's last handshake offered: ``pair``, ``device``, ``unknown``
    (``None``: it never reached the PSK callback)."""
    return _attempted.get()


def reset_negotiated_identity() -> None:
    """Forget the identity before a new handshake in this task."""
    _identity.set(None)
    _attempted.set(None)


class _ServerSSLContext(ssl.SSLContext):
    """An ``SSLContext`` that remembers the outgoing BIO of the TLS object it made last.

    ``trio.SSLStream`` makes its TLS object with :meth:`wrap_bio` (the standard
    library's public way to run TLS over memory) in its constructor, and when a
    handshake fails it leaves the alert OpenSSL queued in that BIO unsent. This is
    how the listener reaches the alert without Trio's private attributes
    (:func:`mirror_host.host.handshake.tls_handshake` sends it).
    """

    last_outgoing: ssl.MemoryBIO | None = None

    def wrap_bio(
        self,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
        server_side: bool = False,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLObject:
        self.last_outgoing = outgoing
        return super().wrap_bio(
            incoming,
            outgoing,
            server_side=server_side,
            server_hostname=server_hostname,
            session=session,
        )


class ServerContext:
    """An ``ssl.SSLContext`` for Prowl peers plus the table its callback reads."""

    def __init__(self, context: ssl.SSLContext, holder: _TableHolder) -> None:
        self.context = context
        self._holder = holder

    def take_outgoing(self) -> ssl.MemoryBIO | None:
        """The outgoing BIO of the TLS object made from :attr:`context` last (once).

        Call it right after constructing a ``trio.SSLStream`` on this context, with
        no ``await`` in between, to get that stream's BIO.
        """
        context = self.context
        if not isinstance(context, _ServerSSLContext):
            return None
        outgoing, context.last_outgoing = context.last_outgoing, None
        return outgoing

    @property
    def table(self) -> PskTable:
        """The table handshakes use now."""
        return self._holder.table

    def set_table(self, table: PskTable) -> None:
        """Swap in a new table; handshakes already past the callback are unaffected."""
        self._holder.table = table


def build_server_context() -> ServerContext:
    """A TLS 1.2, ECDHE-PSK-CHACHA20-POLY1305-only server context with an empty table.

    Raises:
        TLSUnsupported: this Python cannot do TLS-PSK (see
            :func:`mirror_host.tls.psk.check_psk_route`).
    """
    check_psk_route(_ServerSSLContext)  # the route, with the very class the host uses
    holder = _TableHolder()
    return ServerContext(server_context(holder.callback, context_class=_ServerSSLContext), holder)
