"""Prowl's control messages: the 27 enum cases, their JSON shape and command envelopes.

Pure: imports nothing that performs I/O. See docs/protocol.md §3–§6.
"""

from __future__ import annotations

from mirror_host.control import commands, messages
from mirror_host.control.codec import (
    decode_control,
    decode_control_value,
    encode_control,
    encode_control_value,
)

# Every message case and command envelope, re-exported as its module lists it
# (one list to keep, not two).
from mirror_host.control.commands import *  # noqa: F403
from mirror_host.control.fields import format_uuid
from mirror_host.control.messages import *  # noqa: F403
from mirror_host.control.swiftjson import JSONValue, dump_json, parse_json

__all__ = [
    *messages.__all__,
    *commands.__all__,
    "JSONValue",
    "decode_control",
    "decode_control_value",
    "dump_json",
    "encode_control",
    "encode_control_value",
    "format_uuid",
    "parse_json",
]
