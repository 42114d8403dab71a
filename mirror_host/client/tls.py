"""TLS-PSK client contexts, as Prowl's clients configure them. I/O edge.

TLS 1.2, ECDHE-PSK-CHACHA20-POLY1305 only, no certificate checks (the PSK is the
authentication). On Python 3.11/3.12 the callback comes from ``sslpsk3``, set up
once per connection for the same reason as on the server (see
:mod:`mirror_host.host.tls`).
"""

from __future__ import annotations

import ssl
import weakref
from typing import Any

from mirror_host.host.tls import CIPHER, psk_backend

__all__ = ["client_context"]


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
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.minimum_version = minimum
    context.maximum_version = maximum
    if maximum >= ssl.TLSVersion.TLSv1_2 and minimum <= ssl.TLSVersion.TLSv1_2:
        context.set_ciphers(cipher)

    def callback(hint: str | None) -> tuple[str | None, bytes]:
        return identity, key

    if psk_backend() == "stdlib":
        context.set_psk_client_callback(callback)  # type: ignore[attr-defined,unused-ignore]
        return context
    from sslpsk3 import sslpsk3 as psk

    native: Any = psk._sslpsk3
    registry: dict[int, Any] = psk.psk_contexts

    class _Shim:
        psk_client_callback = staticmethod(callback)

    shim = _Shim()

    def _forget(ssl_id: int) -> None:
        if registry.get(ssl_id) is shim:
            del registry[ssl_id]

    class _PskClientObject(ssl.SSLObject):
        _psk_ready = False

        def do_handshake(self) -> None:
            if not self._psk_ready:
                self._psk_ready = True
                ssl_id = native.sslpsk3_set_psk_client_callback(psk.get_ssl_socket(self))
                registry[ssl_id] = shim
                weakref.finalize(self, _forget, ssl_id)
            super().do_handshake()

    context.sslobject_class = _PskClientObject
    return context
