"""Prowl's binary packet framing: kinds 0 (control), 1 (VT frame), 2 (text frame).

Pure: imports nothing that performs I/O. See docs/protocol.md §2.
"""

from __future__ import annotations

from mirror_host.wire.codec import (
    PacketDecoder,
    check_length,
    decode_payload,
    encode_packet,
    encode_payload,
)
from mirror_host.wire.constants import MAX_GRID, MAX_PAYLOAD_BYTES
from mirror_host.wire.packets import ControlPacket, Packet, TextFramePacket, VTFramePacket

__all__ = [
    "MAX_GRID",
    "MAX_PAYLOAD_BYTES",
    "ControlPacket",
    "Packet",
    "PacketDecoder",
    "TextFramePacket",
    "VTFramePacket",
    "check_length",
    "decode_payload",
    "encode_packet",
    "encode_payload",
]
