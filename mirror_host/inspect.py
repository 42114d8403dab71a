"""``mirror-host wire decode``: hex in, one JSON line per packet out. Pure.

The tool users reach for when a capture looks wrong. It runs the same decoders
the host runs, so "accepted here" means "accepted by the host". Besides whole
packets it can judge a payload without its prefix, a bare length header, a JSON
object of a named type, a pairing code or a QR pairing payload, which is how
Prowl's own test vectors are stated (docs/protocol.md, "Vectors").
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator
from typing import cast

from mirror_host.auth.pairing import InvalidPairingCode, normalize_code
from mirror_host.auth.qr import InvalidPairingPayload, parse_pairing_payload
from mirror_host.control import (
    CommandRequest,
    PaneDescriptor,
    decode_control,
    encode_control_value,
    format_uuid,
    parse_json,
)
from mirror_host.control.fields import decode_struct, encode_struct
from mirror_host.control.swiftjson import JSONValue, dump_json
from mirror_host.errors import InvalidHex, InvalidInput, MirrorHostError
from mirror_host.wire import (
    ControlPacket,
    Packet,
    PacketDecoder,
    TextFramePacket,
    check_length,
    decode_payload,
)
from mirror_host.wire.constants import HEADER

__all__ = ["INPUT_KINDS", "TEXT_KINDS", "InvalidHex", "decode_hex", "describe", "read_input"]

#: What the hex on stdin holds.
INPUT_KINDS = (
    "packets",  # one or more complete packets, length prefixes included
    "payload",  # one payload: kind byte and body, no prefix
    "header",  # a 4-byte length prefix on its own
    "pane",  # a JSON pane descriptor (panes[] entry)
    "command-request",  # a JSON commandRequest (requestID + request)
    "pairing-code",  # a typed pairing code (UTF-8 text)
    "qr",  # a QR / pasted pairing payload (UTF-8 JSON)
)

#: The kinds given as they are written (JSON, a typed code); their hex is accepted too.
TEXT_KINDS = ("pane", "command-request", "pairing-code", "qr")

_NOT_HEX = re.compile(r"[^0-9a-fA-F]")


def read_input(text: str, kind: str) -> bytes:
    """The bytes ``wire decode --as kind`` judges, from what was typed or piped in.

    Packets, payloads and headers are hex. The text kinds are taken as text,
    unless the input is the hex of such a text (a JSON object, or a printable
    code), which is how Prowl's test vectors state them.

    Raises:
        InvalidHex: a hex kind that is not hex.
    """
    if kind not in TEXT_KINDS:
        return decode_hex(text)
    try:
        decoded = decode_hex(text)
    except InvalidHex:
        decoded = b""
    if kind == "pairing-code":
        is_hex_of_text = bool(decoded) and all(0x20 < byte < 0x7F for byte in decoded)
    else:
        is_hex_of_text = decoded.lstrip()[:1] == b"{"
    return decoded if is_hex_of_text else text.strip().encode("utf-8")


def decode_hex(text: str) -> bytes:
    """Hex digits with any whitespace in between.

    Raises:
        InvalidHex: another character, or an odd number of digits.
    """
    digits = "".join(text.split())
    bad = _NOT_HEX.search(digits)
    if bad:
        raise InvalidHex(f"input is not hex: unexpected {bad.group()!r}")
    if len(digits) % 2:
        raise InvalidHex(f"input has an odd number of hex digits ({len(digits)})")
    return binascii.unhexlify(digits)


def describe_packet(packet: Packet) -> dict[str, JSONValue]:
    """The JSON line for one decoded packet.

    Raises:
        MalformedControlMessage: a kind-0 body that is not one control message.
    """
    if isinstance(packet, ControlPacket):
        message = decode_control(packet.body)
        return {"kind": 0, "message": cast(JSONValue, encode_control_value(message))}
    common: dict[str, JSONValue] = {
        "kind": 2 if isinstance(packet, TextFramePacket) else 1,
        "subscriptionID": format_uuid(packet.subscription_id),
        "sequence": packet.sequence,
        "columns": packet.columns,
        "rows": packet.rows,
    }
    if isinstance(packet, TextFramePacket):
        common["truncated"] = packet.truncated
        common["text"] = packet.text
    else:
        common["bytes"] = base64.b64encode(packet.data).decode("ascii")
    return common


def _packets(data: bytes) -> Iterator[dict[str, JSONValue]]:
    decoder = PacketDecoder()
    decoder.feed(data)
    decoder.feed_eof()
    while (packet := decoder.next_packet()) is not None:
        yield describe_packet(packet)
    if not data:
        raise InvalidHex("no input: expected at least one packet")


def _lines(data: bytes, kind: str, *, now: float) -> Iterator[dict[str, JSONValue]]:
    if kind == "packets":
        yield from _packets(data)
    elif kind == "payload":
        yield describe_packet(decode_payload(data))
    elif kind == "header":
        if len(data) != HEADER.size:
            raise InvalidHex(f"a length header is exactly 4 bytes, got {len(data)}")
        (length,) = HEADER.unpack(data)
        check_length(length)
        yield {"length": length}
    elif kind == "pane":
        pane = decode_struct(PaneDescriptor, parse_json(data), "pane")
        yield {"pane": encode_struct(pane)}
    elif kind == "command-request":
        request = decode_struct(CommandRequest, parse_json(data), "commandRequest")
        yield {"commandRequest": encode_struct(request)}
    elif kind == "pairing-code":
        yield {"code": normalize_code(data.decode("utf-8"))}
    elif kind == "qr":
        yield {"pairing": encode_struct(parse_pairing_payload(data, now=now))}
    else:
        raise InvalidInput(f"unknown input kind {kind!r}")


def describe(data: bytes, kind: str = "packets", *, now: float) -> Iterator[bytes]:
    """Yield one JSON line (bytes, no newline) per decoded item.

    The first invalid item yields ``{"error": "<reason>"}`` and ends the output;
    the caller can tell by the ``error`` key. ``now`` (Unix seconds) is the
    clock used to judge a QR payload's expiry.
    """
    try:
        for line in _lines(data, kind, now=now):
            # For people: `/` as it is, not Swift's `\/` (the hex holds the real bytes).
            yield dump_json(line, escape_slashes=False)
    except (
        MirrorHostError,
        InvalidHex,
        InvalidPairingCode,
        InvalidPairingPayload,
        UnicodeDecodeError,
    ) as exc:
        yield dump_json({"error": str(exc) or type(exc).__name__}, escape_slashes=False)
