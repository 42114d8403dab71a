"""TLS-PSK client contexts, as Prowl's clients configure them. I/O edge.

TLS 1.2, ECDHE-PSK-CHACHA20-POLY1305 only, no certificate checks (the PSK is the
authentication). On Python 3.11/3.12 the callback comes from ``sslpsk3``, set up
once per connection for the same reason as on the server (see
:mod:`mirror_host.host.tls`).
"""

from __future__ import annotations

import ssl
from typing import Any

from mirror_host.host.tls import CIPHER, psk_backend, use_sslpsk3

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

    class _Shim:
        psk_client_callback = staticmethod(callback)

    def setup(native: Any, raw: Any) -> int:
        ssl_id: int = native.sslpsk3_set_psk_client_callback(raw)
        return ssl_id

    use_sslpsk3(context, _Shim(), setup)
    return context
