"""TLS-PSK contexts, this Python's PSK route, the identity a connection negotiated. I/O edge.

Prowl's peers speak TLS 1.2 with exactly one suite, ECDHE-PSK-CHACHA20-POLY1305
(0xCCAC), and no certificates (docs/protocol.md §1). The PSK for an identity comes
from an in-memory table (:class:`PskTable`) that is swapped whole when devices are
paired or revoked, so the OpenSSL callback is a dictionary lookup and never waits.

Where the PSK callbacks come from (:func:`psk_backend`), with nothing to compile
on any supported Python, and ``trio.SSLStream`` over ``ssl.SSLContext`` the one
TLS path on all of them:

* Python 3.13+: the standard library, ``SSLContext.set_psk_server_callback``.
* Python 3.11/3.12: the same OpenSSL calls made through ctypes on the standard
  library's own context (:mod:`mirror_host.host.psk_ctypes`).

:func:`check_psk_route` proves, once per process and before the first context is
handed out, that the route really works: a handshake in memory with a throwaway
key must negotiate exactly this suite over TLS 1.2 and bind the identity, and a
wrong key must fail. Anything else is :class:`TLSUnsupported` with one message.

Binding the identity to the connection: ``SSLObject`` has no accessor for the
PSK identity, so the callback records it in a :class:`contextvars.ContextVar`.
The callback runs synchronously inside ``do_handshake()``, which Trio calls from
the connection's own task, so each task sees only its own value
(``tests/integration/test_tls.py`` pins this down for every route).
"""

from __future__ import annotations

import contextvars
import logging
import secrets
import ssl
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from mirror_host.auth.pairing import PAIR_IDENTITY
from mirror_host.errors import TLSUnsupported
from mirror_host.host import psk_ctypes
from mirror_host.host.psk_ctypes import ClientCallback, ServerCallback

__all__ = [
    "CIPHER",
    "PskTable",
    "attempted_identity",
    "build_server_context",
    "check_psk_route",
    "client_base_context",
    "memory_handshake",
    "negotiated_identity",
    "psk_backend",
    "reset_negotiated_identity",
    "set_client_psk",
    "set_server_psk",
]

logger = logging.getLogger(__name__)

CIPHER = "ECDHE-PSK-CHACHA20-POLY1305"
TLS_VERSION = "TLSv1.2"

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


def psk_backend() -> str:
    """``"stdlib"`` on Python 3.13+, ``"ctypes"`` on 3.11/3.12."""
    return "stdlib" if sys.version_info >= (3, 13) else "ctypes"


def set_server_psk(context: ssl.SSLContext, callback: ServerCallback) -> None:
    """Install ``callback`` as ``context``'s PSK server callback, on this Python's route."""
    if psk_backend() == "stdlib":
        context.set_psk_server_callback(callback)  # type: ignore[attr-defined,unused-ignore]
    else:
        psk_ctypes.install_server_callback(context, callback)


def set_client_psk(context: ssl.SSLContext, callback: ClientCallback) -> None:
    """Install ``callback`` as ``context``'s PSK client callback, on this Python's route."""
    if psk_backend() == "stdlib":
        context.set_psk_client_callback(callback)  # type: ignore[attr-defined,unused-ignore]
    else:
        psk_ctypes.install_client_callback(context, callback)


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


def _server_context(holder: _TableHolder) -> ssl.SSLContext:
    context = _ServerSSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    context.set_ciphers(CIPHER)
    context.options |= ssl.OP_NO_TICKET | ssl.OP_NO_COMPRESSION
    context.verify_mode = ssl.CERT_NONE
    set_server_psk(context, holder.callback)
    return context


def build_server_context() -> ServerContext:
    """A TLS 1.2, ECDHE-PSK-CHACHA20-POLY1305-only server context with an empty table.

    Raises:
        TLSUnsupported: this Python cannot do TLS-PSK (see :func:`check_psk_route`).
    """
    check_psk_route()
    holder = _TableHolder()
    return ServerContext(_server_context(holder), holder)


def client_base_context(
    *,
    cipher: str = CIPHER,
    minimum: ssl.TLSVersion = ssl.TLSVersion.TLSv1_2,
    maximum: ssl.TLSVersion = ssl.TLSVersion.TLSv1_2,
) -> ssl.SSLContext:
    """A client context as Prowl's clients make it, before its PSK callback.

    TLS 1.2 only, ``cipher`` only, no certificate checks (the PSK is the
    authentication). ``cipher`` and the version bounds exist so tests can offer
    what the host must refuse.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.minimum_version = minimum
    context.maximum_version = maximum
    if maximum >= ssl.TLSVersion.TLSv1_2 and minimum <= ssl.TLSVersion.TLSv1_2:
        context.set_ciphers(cipher)
    return context


def memory_handshake(
    server_context: ssl.SSLContext, client_context: ssl.SSLContext, *, rounds: int = 8
) -> tuple[ssl.SSLObject, ssl.SSLObject]:
    """Run one handshake between the two contexts over memory BIOs, in this task.

    Returns the (server, client) objects once both sides finished.

    Raises:
        ssl.SSLError: either side refused the handshake (the client's error when
            both did), or it did not finish within ``rounds`` exchanges.
    """
    server_in, server_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    client_in, client_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    server = server_context.wrap_bio(server_in, server_out, server_side=True)
    client = client_context.wrap_bio(client_in, client_out, server_side=False)
    sides = ((client, client_out, server_in), (server, server_out, client_in))
    for _ in range(rounds):
        finished = 0
        for obj, outgoing, peer_incoming in sides:
            try:
                obj.do_handshake()
                finished += 1
            except ssl.SSLWantReadError:
                pass
            pending = outgoing.read()
            if pending:
                peer_incoming.write(pending)
        if finished == len(sides):
            return server, client
    raise ssl.SSLError(f"the handshake did not finish in {rounds} exchanges")


_route_checked: str | None = None


def check_psk_route() -> str:
    """Prove once per process that this Python's PSK route works; describe it.

    A throwaway identity and random key (never shown) must complete a handshake
    in memory with exactly TLS 1.2 and ECDHE-PSK-CHACHA20-POLY1305 on both
    sides, the server callback must bind the identity, and a client with a
    wrong key must be refused.

    Raises:
        TLSUnsupported: with one message saying what failed and what to do.
    """
    global _route_checked
    if _route_checked is None:
        # In a copy of the context, so the check's identity never leaks into
        # the caller's task.
        _route_checked = contextvars.copy_context().run(_self_check)
        # Debug: a start-up that fails later (a busy port) stays one line.
        logger.debug("TLS-PSK ready: %s", _route_checked)
    return _route_checked


def _self_check() -> str:
    version = ".".join(map(str, sys.version_info[:3]))
    route = psk_backend()
    identity = "mirror-host-self-check"
    key = secrets.token_bytes(32)

    advice = (
        "run mirror-host on Python 3.13 or newer, or on a CPython 3.11/3.12 whose ssl "
        "module loads OpenSSL as a shared library (Linux distributions, pyenv, python.org)"
        if route == "ctypes"
        else "run mirror-host on a Python whose ssl module has OpenSSL's PSK support"
    )

    def fail(detail: str) -> TLSUnsupported:
        return TLSUnsupported(
            f"TLS-PSK does not work on this Python ({version}, {ssl.OPENSSL_VERSION}, "
            f"{route} route): {detail}. Prowl's clients need TLS 1.2 with {CIPHER}; {advice}"
        )

    def client(offered: bytes) -> ssl.SSLContext:
        context = client_base_context()
        set_client_psk(context, lambda _hint: (identity, offered))
        return context

    holder = _TableHolder()
    holder.table = PskTable(MappingProxyType({identity: key}))
    try:
        server_context = _server_context(holder)
        server, peer = memory_handshake(server_context, client(key))
    except TLSUnsupported as exc:
        raise fail(str(exc)) from exc
    except ssl.SSLError as exc:
        raise fail(f"a handshake with the right key failed ({exc.reason or exc})") from exc
    for side, obj in (("server", server), ("client", peer)):
        cipher = obj.cipher()
        if cipher is None or cipher[0] != CIPHER or obj.version() != TLS_VERSION:
            raise fail(f"the {side} negotiated {cipher} over {obj.version()}")
    if negotiated_identity() != identity:
        raise fail("the server callback did not record the client's identity")
    try:
        memory_handshake(server_context, client(secrets.token_bytes(32)))
    except ssl.SSLError:
        pass
    else:
        raise fail("a handshake with the wrong key succeeded")
    where = "" if route == "stdlib" else f" via {psk_ctypes.library_location()}"
    return f"{CIPHER} over TLS 1.2, {route} route{where} ({ssl.OPENSSL_VERSION})"
