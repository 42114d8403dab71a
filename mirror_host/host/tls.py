"""The TLS-PSK server context and the identity each connection negotiated. I/O edge.

Prowl's peers speak TLS 1.2 with exactly one suite, ECDHE-PSK-CHACHA20-POLY1305
(0xCCAC), and no certificates (docs/protocol.md §1). The PSK for an identity comes
from an in-memory table (:class:`PskTable`) that is swapped whole when devices are
paired or revoked, so the OpenSSL callback is a dictionary lookup and never waits.

Where the PSK callback comes from:

* Python 3.13+: the standard library, ``SSLContext.set_psk_server_callback``.
* Python 3.11/3.12: the ``sslpsk3`` extension. Its own ``SSLObject`` re-installs
  the callback on every ``do_handshake()`` call, and Trio calls ``do_handshake()``
  again each time the non-blocking BIO needs more bytes; the second install
  resets OpenSSL's state mid-handshake (``UNEXPECTED_MESSAGE``). Our object
  subclass installs it exactly once per connection.

Binding the identity to the connection: ``SSLObject`` has no accessor for the
PSK identity, so the callback records it in a :class:`contextvars.ContextVar`.
The callback runs synchronously inside ``do_handshake()``, which Trio calls from
the connection's own task, so each task sees only its own value
(``tests/integration/test_tls.py`` pins this down).
"""

from __future__ import annotations

import contextvars
import ssl
import sys
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from mirror_host.auth.pairing import PAIR_IDENTITY
from mirror_host.errors import TLSUnsupported

__all__ = [
    "CIPHER",
    "PskTable",
    "attempted_identity",
    "build_server_context",
    "negotiated_identity",
    "psk_backend",
    "reset_negotiated_identity",
    "use_sslpsk3",
]

CIPHER = "ECDHE-PSK-CHACHA20-POLY1305"

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
    """``"stdlib"`` on Python 3.13+, ``"sslpsk3"`` before."""
    return "stdlib" if sys.version_info >= (3, 13) else "sslpsk3"


class ServerContext:
    """An ``ssl.SSLContext`` for Prowl peers plus the table its callback reads."""

    def __init__(self, context: ssl.SSLContext, holder: _TableHolder) -> None:
        self.context = context
        self._holder = holder

    @property
    def table(self) -> PskTable:
        """The table handshakes use now."""
        return self._holder.table

    def set_table(self, table: PskTable) -> None:
        """Swap in a new table; handshakes already past the callback are unaffected."""
        self._holder.table = table


def _base_context() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    context.set_ciphers(CIPHER)
    context.options |= ssl.OP_NO_TICKET | ssl.OP_NO_COMPRESSION
    context.verify_mode = ssl.CERT_NONE
    return context


def build_server_context() -> ServerContext:
    """A TLS 1.2, ECDHE-PSK-CHACHA20-POLY1305-only server context with an empty table.

    Raises:
        TLSUnsupported: no TLS-PSK support in this interpreter (3.11/3.12 without
            ``sslpsk3``), with the fix in the message.
    """
    holder = _TableHolder()
    if psk_backend() == "stdlib":
        context = _base_context()
        context.set_psk_server_callback(holder.callback)  # type: ignore[attr-defined,unused-ignore]
        return ServerContext(context, holder)
    return ServerContext(_sslpsk3_context(holder), holder)


def _sslpsk3_context(holder: _TableHolder) -> ssl.SSLContext:
    class _Shim:
        """What sslpsk3's C callback looks up per connection."""

        psk_server_callback = staticmethod(holder.callback)

    def setup(native: Any, raw: Any) -> int:
        ssl_id: int = native.sslpsk3_set_accept_state(raw)
        native.sslpsk3_set_psk_server_callback(raw)
        native.sslpsk3_use_psk_identity_hint(raw, "")
        return ssl_id

    context = _base_context()
    use_sslpsk3(context, _Shim(), setup)
    return context


def use_sslpsk3(context: ssl.SSLContext, shim: object, setup: Callable[[Any, Any], int]) -> None:
    """Give ``context`` SSL objects that run sslpsk3's per-connection ``setup`` once.

    ``setup(native, ssl_pointer)`` installs the callbacks and returns the id under
    which sslpsk3's C code looks up ``shim`` (the object holding the callback).
    Once, because Trio retries ``do_handshake`` on its non-blocking BIO and a
    second setup breaks the handshake (UNEXPECTED_MESSAGE). Used by the host and
    the test client alike.

    Raises:
        TLSUnsupported: sslpsk3 is not installed, with the fix in the message.
    """
    try:
        from sslpsk3 import sslpsk3 as psk
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise TLSUnsupported(
            "TLS-PSK needs Python 3.13+ or the sslpsk3 package on Python 3.11/3.12: "
            "pip install sslpsk3"
        ) from exc

    native: Any = psk._sslpsk3
    registry: dict[int, Any] = psk.psk_contexts

    def forget(ssl_id: int) -> None:
        # The id is the SSL* address, which OpenSSL may reuse for a later
        # connection: only remove the entry if it is still ours.
        if registry.get(ssl_id) is shim:
            del registry[ssl_id]

    class _PskSSLObject(ssl.SSLObject):
        _psk_ready = False

        def do_handshake(self) -> None:
            if not self._psk_ready:
                self._psk_ready = True
                ssl_id = setup(native, psk.get_ssl_socket(self))
                registry[ssl_id] = shim
                weakref.finalize(self, forget, ssl_id)
            super().do_handshake()

    context.sslobject_class = _PskSSLObject
