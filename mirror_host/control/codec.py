"""Control message JSON ↔ typed messages (docs/protocol.md §3–§4). Pure.

:func:`decode_control` takes a kind-0 body and returns exactly one message or
raises :class:`~mirror_host.errors.MalformedControlMessage`; :func:`encode_control`
writes the Swift Codable shape: one top-level member named after the case.
"""

from __future__ import annotations

from typing import cast

from mirror_host.control.commands import decode_enum_case
from mirror_host.control.fields import decode_struct, encode_struct, expect_object
from mirror_host.control.messages import (
    FRAME_CASES,
    MESSAGE_TYPES,
    ControlMessage,
    Shape,
)
from mirror_host.control.swiftjson import JSONValue, dump_json, parse_json
from mirror_host.errors import MalformedControlMessage

__all__ = ["decode_control", "decode_control_value", "encode_control", "encode_control_value"]

_ALL_CASES = frozenset(MESSAGE_TYPES) | FRAME_CASES


def decode_control(body: bytes) -> ControlMessage:
    """Decode a kind-0 payload body (the JSON after the kind byte).

    Raises:
        MalformedControlMessage: invalid UTF-8 or JSON, not exactly one known
            case, a frame case in JSON, or a payload that does not fit its case.
    """
    return decode_control_value(parse_json(body))


def decode_control_value(value: JSONValue) -> ControlMessage:
    """Decode an already-parsed JSON value as one control message.

    Raises:
        MalformedControlMessage: as :func:`decode_control`.
    """
    case, inner = decode_enum_case(value, "message", _ALL_CASES)
    if case in FRAME_CASES:
        raise MalformedControlMessage(
            f"message.{case}: frames travel only as binary packets (kinds 1 and 2), never as JSON"
        )
    cls = MESSAGE_TYPES[case]
    if cls.SHAPE is Shape.EMPTY:
        return cls()
    payload = inner.get("_0")
    path = f"message.{case}._0"
    if payload is None:
        raise MalformedControlMessage(f"{path}: required member is missing")
    if cls.SHAPE is Shape.VALUE:
        # A single bare value: decode it as the struct's one field named "_0".
        return decode_struct(cls, inner, f"message.{case}")
    expect_object(payload, path)
    return decode_struct(cls, payload, path)


def encode_control_value(message: ControlMessage) -> dict[str, JSONValue]:
    """The JSON value of ``message`` in Swift's enum shape."""
    if message.SHAPE is Shape.EMPTY:
        inner: JSONValue = {}
    elif message.SHAPE is Shape.VALUE:
        inner = encode_struct(message)
    else:
        inner = {"_0": encode_struct(message)}
    return {message.CASE: inner}


def encode_control(message: ControlMessage) -> bytes:
    """Encode ``message`` as compact Foundation-style JSON (no kind byte).

    Raises:
        LocalProtocolError: a required field is missing or a value is out of range.
    """
    return dump_json(cast(JSONValue, encode_control_value(message)))
