"""Hard limits of the binary framing (docs/protocol.md §2). Pure constants."""

from __future__ import annotations

import struct

__all__ = [
    "HEADER",
    "KIND_CONTROL",
    "KIND_TEXT_FRAME",
    "KIND_VT_FRAME",
    "MAX_GRID",
    "MAX_PAYLOAD_BYTES",
    "MIN_VT_GRID",
    "FRAME_HEADER",
    "TEXT_FRAME_BODY_OFFSET",
    "VT_FRAME_BODY_OFFSET",
]

#: The largest legal ``length`` (kind byte plus body): 8 × 1024 × 1024.
MAX_PAYLOAD_BYTES = 8 * 1024 * 1024

#: The 4-byte big-endian length prefix.
HEADER = struct.Struct(">I")

KIND_CONTROL = 0
KIND_VT_FRAME = 1
KIND_TEXT_FRAME = 2

#: Both frame kinds share this header after the kind byte: raw subscription UUID,
#: sequence (u64), columns (u32), rows (u32).
FRAME_HEADER = struct.Struct(">16sQII")

#: Offsets of the frame body within the payload (the kind byte is offset 0).
VT_FRAME_BODY_OFFSET = 1 + FRAME_HEADER.size  # 33
TEXT_FRAME_BODY_OFFSET = VT_FRAME_BODY_OFFSET + 1  # 34: one truncated byte first

#: Grid bounds: VT frames need 1 … 1000, text frames allow 0 (unspecified) … 1000.
MAX_GRID = 1000
MIN_VT_GRID = 1
