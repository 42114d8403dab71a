"""TLS-PSK client contexts, as Prowl's clients configure them. I/O edge.

TLS 1.2, ECDHE-PSK-CHACHA20-POLY1305 only, no certificate checks (the PSK is the
authentication). The PSK callback comes from the same route as the server's
(:mod:`mirror_host.host.tls`): the standard library on Python 3.13+, ctypes on
3.11/3.12.
"""

from __future__ import annotations

import ssl

from mirror_host.host.tls import CIPHER, check_psk_route, client_base_context, set_client_psk

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

    Raises:
        TLSUnsupported: this Python cannot do TLS-PSK (see
            :func:`mirror_host.host.tls.check_psk_route`).
    """
    check_psk_route()
    context = client_base_context(cipher=cipher, minimum=minimum, maximum=maximum)

    def callback(hint: str | None) -> tuple[str | None, bytes]:
        return identity, key

    set_client_psk(context, callback)
    return context
