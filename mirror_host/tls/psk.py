"""TLS-PSK as Prowl's peers speak it, for both ends: this Python's PSK route,
the contexts, the start-up self-check. I/O edge.

Prowl's peers speak TLS 1.2 with exactly one suite, ECDHE-PSK-CHACHA20-POLY1305
(0xCCAC), and no certificates (docs/protocol.md §1). The host's server context
(:mod:`mirror_host.host.tls`: the table of keys, the identity a connection
negotiated) and the client's (:func:`client_context`, for ``attach``, the
conformance suite, tests and benchmarks) are both made here.

Where the PSK callbacks come from (:func:`psk_backend`), with nothing to compile
on any supported Python, and ``trio.SSLStream`` over ``ssl.SSLContext`` the one
TLS path on all of them:

* Python 3.13+: the standard library, ``SSLContext.set_psk_server_callback``.
* Python 3.11/3.12: the same OpenSSL calls made through ctypes on the standard
  library's own context (:mod:`mirror_host.tls.psk_ctypes`).

:func:`check_psk_route` proves, once per process (and per server context class)
before the first context is handed out, that the route really works: a handshake
in memory with a throwaway key must negotiate exactly this suite over TLS 1.2,
the server callback must see the identity from the calling task's own context
(the host binds a connection's identity that way), and a wrong key and an
unknown identity must each be refused by TLS (a handshake that merely never
finishes proves nothing and fails the check). The host runs it with its own
context class. Anything else is :class:`TLSUnsupported` with one message.

The server context also refuses renegotiation (``OP_NO_RENEGOTIATION``, where
the ssl module has it): Prowl's clients never renegotiate, and a peer that asks
gets an alert instead of another handshake through the PSK callback. It issues
no session tickets and keeps no session cache (where this Python's
``SSLContext`` layout is known: 3.11 to 3.13), so every connection makes a full
handshake through the PSK callback and nothing of a closed one stays behind.
"""

from __future__ import annotations

import contextvars
import logging
import secrets
import ssl
import sys

from mirror_host.errors import TLSUnsupported
from mirror_host.tls import psk_ctypes
from mirror_host.tls.psk_ctypes import ClientCallback, ServerCallback

__all__ = [
    "CIPHER",
    "TLS_VERSION",
    "ClientCallback",
    "HandshakeStalled",
    "ServerCallback",
    "check_psk_route",
    "client_base_context",
    "client_context",
    "memory_handshake",
    "psk_backend",
    "server_context",
    "set_client_psk",
    "set_server_psk",
]

logger = logging.getLogger(__name__)

CIPHER = "ECDHE-PSK-CHACHA20-POLY1305"
TLS_VERSION = "TLSv1.2"
#: Renegotiation off where this ssl module can say so (OpenSSL 1.1.0h and later).
_NO_RENEGOTIATION: int = getattr(ssl, "OP_NO_RENEGOTIATION", 0)


class HandshakeStalled(ssl.SSLError):
    """A handshake in memory that neither finished nor failed: no verdict at all."""


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


def server_context(
    callback: ServerCallback, *, context_class: type[ssl.SSLContext] = ssl.SSLContext
) -> ssl.SSLContext:
    """A TLS 1.2, ECDHE-PSK-CHACHA20-POLY1305-only server context whose PSK
    callback is ``callback`` (no route check: see :func:`check_psk_route`).

    ``context_class`` lets the listener use a subclass that keeps hold of what
    each TLS object would send (``host/tls.py``)."""
    context = context_class(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    context.set_ciphers(CIPHER)
    context.options |= ssl.OP_NO_TICKET | ssl.OP_NO_COMPRESSION | _NO_RENEGOTIATION
    context.verify_mode = ssl.CERT_NONE
    set_server_psk(context, callback)
    try:
        # No Prowl client resumes a session, and OpenSSL would otherwise keep
        # thousands of them for peers that are gone (psk_ctypes, 4).
        psk_ctypes.disable_session_cache(context)
    except TLSUnsupported as exc:
        logger.debug("the TLS session cache stays on: %s", exc)
    return context


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


def _offering(context: ssl.SSLContext, identity: str, key: bytes) -> ssl.SSLContext:
    def callback(hint: str | None) -> tuple[str | None, bytes]:
        return identity, key

    set_client_psk(context, callback)
    return context


def client_context(
    identity: str,
    key: bytes,
    *,
    cipher: str = CIPHER,
    minimum: ssl.TLSVersion = ssl.TLSVersion.TLSv1_2,
    maximum: ssl.TLSVersion = ssl.TLSVersion.TLSv1_2,
) -> ssl.SSLContext:
    """A client context that offers ``identity`` with ``key``.

    ``cipher`` and the version bounds exist so tests can offer what the host
    must refuse.

    Raises:
        TLSUnsupported: this Python cannot do TLS-PSK (see :func:`check_psk_route`).
    """
    check_psk_route()
    context = client_base_context(cipher=cipher, minimum=minimum, maximum=maximum)
    return _offering(context, identity, key)


def memory_handshake(
    server_context: ssl.SSLContext, client_context: ssl.SSLContext, *, rounds: int = 8
) -> tuple[ssl.SSLObject, ssl.SSLObject]:
    """Run one handshake between the two contexts over memory BIOs, in this task.

    Returns the (server, client) objects once both sides finished.

    Raises:
        HandshakeStalled: it did not finish within ``rounds`` exchanges, and
            neither side refused it.
        ssl.SSLError: either side refused the handshake (the client's error when
            both did).
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
    raise HandshakeStalled(f"the handshake did not finish in {rounds} exchanges")


#: The route's description, by the server context class the check ran with.
_checked: dict[type[ssl.SSLContext], str] = {}
#: The identity the self-check's server callback saw, read back in the same task.
_seen: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "mirror_host_psk_self_check", default=None
)


def check_psk_route(context_class: type[ssl.SSLContext] = ssl.SSLContext) -> str:
    """Prove once per process (and per ``context_class``, the server context's
    class) that this Python's PSK route works; describe it.

    A throwaway identity and random key (never shown) must complete a handshake
    in memory with exactly TLS 1.2 and ECDHE-PSK-CHACHA20-POLY1305 on both
    sides, the server callback must bind the identity to the calling task, and
    a client with a wrong key, and one with an unknown identity, must each be
    refused (not merely left unfinished).

    Raises:
        TLSUnsupported: with one message saying what failed and what to do.
    """
    if context_class not in _checked:
        # In a copy of the context, so nothing the check binds leaks into the
        # caller's task.
        described = contextvars.copy_context().run(_self_check, context_class)
        if described not in _checked.values():
            # Debug: a start-up that fails later (a busy port) stays one line. Said
            # once: serve checks the route, then the host with its own context class.
            logger.debug("TLS-PSK ready: %s", described)
        _checked[context_class] = described
    return _checked[context_class]


def _self_check(context_class: type[ssl.SSLContext]) -> str:
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

    def lookup(offered: str | None) -> bytes:
        # As the host's callback does: bind what it saw to the calling task.
        _seen.set(offered if offered == identity else None)
        return key if offered == identity else b""

    def client(offered: bytes, name: str = identity) -> ssl.SSLContext:
        return _offering(client_base_context(), name, offered)

    try:
        checked = server_context(lookup, context_class=context_class)
        server, peer = memory_handshake(checked, client(key))
    except TLSUnsupported as exc:
        raise fail(str(exc)) from exc
    except ssl.SSLError as exc:
        raise fail(f"a handshake with the right key failed ({exc.reason or exc})") from exc
    for side, obj in (("server", server), ("client", peer)):
        cipher = obj.cipher()
        if cipher is None or cipher[0] != CIPHER or obj.version() != TLS_VERSION:
            raise fail(f"the {side} negotiated {cipher} over {obj.version()}")
    if _seen.get() != identity:
        raise fail("the server callback did not record the client's identity")
    for what, stranger in (
        ("the wrong key", client(secrets.token_bytes(32))),
        ("an unknown identity", client(key, "mirror-host-self-check-unknown")),
    ):
        try:
            memory_handshake(checked, stranger)
        except HandshakeStalled:
            raise fail(f"a handshake with {what} neither failed nor finished") from None
        except ssl.SSLError:
            pass
        else:
            raise fail(f"a handshake with {what} succeeded")
    where = "" if route == "stdlib" else f" via {psk_ctypes.library_location()}"
    return f"{CIPHER} over TLS 1.2, {route} route{where} ({ssl.OPENSSL_VERSION})"
