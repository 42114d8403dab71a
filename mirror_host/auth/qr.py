"""The version-1 QR / paste pairing payload (docs/protocol.md §9). Pure.

``{"type":"prowl-mirror-pairing","version":1,"address":…,"port":…,"code":…,"expiresAt":…}``
as plain UTF-8 JSON of at most 2048 bytes. :func:`parse_pairing_payload` applies
the client's rules, so the host can check what it is about to show.
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass

from mirror_host.auth.pairing import InvalidPairingCode, normalize_code
from mirror_host.control.fields import INT, STRING, decode_struct, encode_struct, wire_field
from mirror_host.control.swiftjson import JSONValue, dump_json, parse_json
from mirror_host.errors import InvalidPairingPayload, MalformedControlMessage

__all__ = [
    "MAX_PAYLOAD_TEXT_BYTES",
    "PAYLOAD_TYPE",
    "InvalidPairingPayload",
    "PairingPayload",
    "address_problem",
    "build_pairing_payload",
    "encode_pairing_payload",
    "parse_pairing_payload",
]

PAYLOAD_TYPE = "prowl-mirror-pairing"
MAX_PAYLOAD_TEXT_BYTES = 2048


@dataclass(frozen=True, slots=True, kw_only=True)
class PairingPayload:
    """The decoded payload (field order is the order we write)."""

    type: str = wire_field("type", STRING)
    version: int = wire_field("version", INT)
    address: str = wire_field("address", STRING)
    port: int = wire_field("port", INT)
    code: str = wire_field("code", STRING)
    expires_at: int = wire_field("expiresAt", INT)


def address_problem(address: str) -> str | None:
    """Why ``address`` cannot be advertised, or ``None`` when it can.

    It must be a numeric IPv4 or IPv6 literal without a zone, and neither
    loopback nor all-zero (including their IPv4-mapped forms).
    """
    if "%" in address:
        return f"{address!r} has a zone id; Prowl clients refuse scoped addresses"
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return f"{address!r} is not a numeric IPv4 or IPv6 address"
    candidates: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = [ip]
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        candidates.append(ip.ipv4_mapped)
    for candidate in candidates:
        if candidate.is_loopback:
            return f"{address} is a loopback address; a phone cannot reach it"
        if candidate.is_unspecified:
            return f"{address} is the unspecified (all-zero) address"
    return None


def build_pairing_payload(
    *, address: str, port: int, code: str, window_start: float, window_seconds: float = 60.0
) -> PairingPayload:
    """The payload for a window opened at ``window_start`` (Unix seconds).

    Raises:
        InvalidPairingPayload: the address or port cannot be advertised.
    """
    problem = address_problem(address)
    if problem:
        raise InvalidPairingPayload(problem)
    if not 1 <= port <= 65535:
        raise InvalidPairingPayload(f"port {port} is outside 1 … 65535")
    return PairingPayload(
        type=PAYLOAD_TYPE,
        version=1,
        address=address,
        port=port,
        code=normalize_code(code),
        expires_at=math.ceil(window_start + window_seconds),
    )


def encode_pairing_payload(payload: PairingPayload) -> bytes:
    """Compact JSON in declaration order."""
    return dump_json(encode_struct(payload))


def parse_pairing_payload(text: bytes, *, now: float) -> PairingPayload:
    """Parse and validate a payload as a Prowl client would at time ``now``.

    Raises:
        InvalidPairingPayload: too long, not JSON, a missing or mistyped field, a
            wrong type or version, an unusable address, a port outside 1 … 65535,
            a code that is not already normalised, or an expiry not after ``now``.
    """
    if len(text) > MAX_PAYLOAD_TEXT_BYTES:
        raise InvalidPairingPayload(f"payload is {len(text)} bytes; the limit is 2048")
    try:
        value: JSONValue = parse_json(text)
        payload = decode_struct(PairingPayload, value, "pairing")
    except MalformedControlMessage as exc:
        raise InvalidPairingPayload(str(exc)) from exc
    if payload.type != PAYLOAD_TYPE:
        raise InvalidPairingPayload(f"type is {payload.type!r}, not {PAYLOAD_TYPE!r}")
    if payload.version != 1:
        raise InvalidPairingPayload(f"version {payload.version} is not supported (only 1)")
    problem = address_problem(payload.address)
    if problem:
        raise InvalidPairingPayload(problem)
    if not 1 <= payload.port <= 65535:
        raise InvalidPairingPayload(f"port {payload.port} is outside 1 … 65535")
    try:
        normalized = normalize_code(payload.code)
    except InvalidPairingCode as exc:
        raise InvalidPairingPayload(f"code: {exc}") from exc
    if normalized != payload.code:
        raise InvalidPairingPayload("code is not in normalised form (8 symbols, no hyphen)")
    if payload.expires_at <= 0 or payload.expires_at <= now:
        raise InvalidPairingPayload("the pairing payload has expired")
    return payload
