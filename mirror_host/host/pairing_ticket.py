"""What ``mirror-host pair`` shows for an open window: code, expiry, port, QR payload. I/O.

The QR payload needs an address a phone can reach, read from this machine's
interfaces unless one is given (:mod:`mirror_host.host.addresses`); when there
is none, the ticket says why instead, and the code can still be typed by hand.
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass

from mirror_host.auth.qr import InvalidPairingPayload, PairingPayload, build_pairing_payload
from mirror_host.auth.window import PairingWindow
from mirror_host.host.addresses import advertised_address

__all__ = ["PairingTicket", "pairing_ticket"]


@dataclass(frozen=True, slots=True)
class PairingTicket:
    """What ``mirror-host pair`` shows: the code and, if possible, the QR payload."""

    code: str
    expires_at: int
    payload: PairingPayload | None
    payload_error: str | None
    #: The TCP port clients dial, for typing the code by hand.
    port: int | None = None
    #: The window's number, to ask later what became of it (the admin ``pairing`` op).
    number: int = 0
    #: ``HOST:PORT`` a client on this machine dials (``attach``), once bound.
    local_endpoint: str | None = None
    #: The host listens on a loopback address: no other machine reaches it.
    loopback: bool = False


def pairing_ticket(
    window: PairingWindow,
    number: int,
    *,
    seconds: float,
    listen_host: str,
    advertise: str | None,
    port: int | None,
) -> PairingTicket:
    """The ticket for window ``number``, open for ``seconds``, on ``port`` (once bound)."""
    payload: PairingPayload | None = None
    address, reason = advertised_address(listen_host, advertise)
    error = reason or None
    if address is not None and port is not None:
        try:
            payload = build_pairing_payload(
                address=address,
                port=port,
                code=window.code,
                window_start=window.opened_at_unix,
                window_seconds=seconds,
            )
        except InvalidPairingPayload as exc:
            error = str(exc)
    expires_at = math.ceil(window.opened_at_unix + seconds)
    listening = ipaddress.ip_address(listen_host)
    return PairingTicket(
        window.code,
        expires_at,
        payload,
        error,
        port,
        number,
        local_endpoint=None if port is None else _local_endpoint(listening, port),
        loopback=listening.is_loopback,
    )


def _local_endpoint(listening: ipaddress.IPv4Address | ipaddress.IPv6Address, port: int) -> str:
    """Where a client on this machine reaches a host listening on ``listening``."""
    if listening.is_unspecified:  # every interface: loopback among them
        listening = ipaddress.ip_address("127.0.0.1" if listening.version == 4 else "::1")
    return f"[{listening}]:{port}" if listening.version == 6 else f"{listening}:{port}"
