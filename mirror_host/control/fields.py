"""Field codecs: Swift Codable scalar rules and struct (de)serialisation. Pure.

A control payload is a frozen dataclass whose fields carry their JSON name and a
codec in ``dataclasses.field(metadata=...)`` (see :func:`wire_field`). One
generic reader and writer then handle every struct, so the per-message code is
only the field list, written in declaration order (which is also our output
order, docs/protocol.md §3.3).

Decoding follows Swift's synthesized ``Decodable``: unknown members are ignored;
a missing member or ``null`` means "absent" for optionals and is an error for
required fields; a JSON ``true`` is not a number and ``1`` is not a boolean.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import enum
import math
import re
from collections.abc import Callable
from typing import Any, Generic, TypeVar, cast
from uuid import UUID

from mirror_host.control.swiftjson import JSONValue
from mirror_host.errors import LocalProtocolError, MalformedControlMessage

__all__ = [
    "ANY",
    "BOOL",
    "DATA",
    "DOUBLE",
    "INT",
    "STRING",
    "UINT64",
    "UUID_",
    "Codec",
    "EnumCodec",
    "ListCodec",
    "StructCodec",
    "decode_struct",
    "encode_struct",
    "expect_object",
    "format_uuid",
    "wire_field",
]

T = TypeVar("T")
E = TypeVar("E", bound=enum.Enum)

_UUID_TEXT = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}\Z")


def _fail(path: str, reason: str) -> MalformedControlMessage:
    return MalformedControlMessage(f"{path}: {reason}")


def _type_name(value: JSONValue) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


class Codec(Generic[T]):
    """Converts one field between its JSON form and its Python value."""

    def __init__(
        self,
        name: str,
        decode: Callable[[JSONValue, str], T],
        encode: Callable[[T], JSONValue],
        *,
        accepts_null: bool = False,
    ) -> None:
        #: ``null`` is a value of this type (free-form JSON), not "absent".
        self.accepts_null = accepts_null
        self.name = name
        self._decode = decode
        self._encode = encode

    def decode(self, value: JSONValue, path: str) -> T:
        """Decode ``value`` found at ``path`` (used in the error message)."""
        return self._decode(value, path)

    def encode(self, value: T) -> JSONValue:
        """Encode ``value`` as Swift would."""
        return self._encode(value)


def _decode_string(value: JSONValue, path: str) -> str:
    if not isinstance(value, str):
        raise _fail(path, f"expected a string, got {_type_name(value)}")
    return value


def _integer(value: JSONValue, path: str, low: int, high: int, what: str) -> int:
    # bool is an int subclass in Python; Swift never reads true/false as a number.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _fail(path, f"expected {what}, got {_type_name(value)}")
    if isinstance(value, float):
        # Foundation reads 42.0 as the integer 42 but refuses 42.5.
        if not (math.isfinite(value) and value.is_integer()):
            raise _fail(path, f"expected {what}, got the fraction {value!r}")
        value = int(value)
    if not low <= value <= high:
        raise _fail(path, f"{value} is out of range for {what}")
    return value


def _decode_bool(value: JSONValue, path: str) -> bool:
    if not isinstance(value, bool):
        raise _fail(path, f"expected a boolean, got {_type_name(value)}")
    return value


def _decode_double(value: JSONValue, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _fail(path, f"expected a number, got {_type_name(value)}")
    result = float(value)
    if not math.isfinite(result):
        raise _fail(path, "number is out of range for a Double")
    return result


def _decode_uuid(value: JSONValue, path: str) -> UUID:
    if not isinstance(value, str) or not _UUID_TEXT.match(value):
        shown = value if isinstance(value, str) else _type_name(value)
        raise _fail(path, f"expected a UUID in 8-4-4-4-12 form, got {str(shown)[:60]!r}")
    return UUID(value)


def format_uuid(value: UUID) -> str:
    """Foundation's ``uuidString``: canonical and upper-case."""
    return str(value).upper()


def _decode_data(value: JSONValue, path: str) -> bytes:
    if not isinstance(value, str):
        raise _fail(path, f"expected base64 data, got {_type_name(value)}")
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise _fail(path, "not standard padded base64") from exc


def _encode_data(value: bytes) -> JSONValue:
    return base64.b64encode(value).decode("ascii")


def _pass_str(value: str) -> JSONValue:
    return value


def _pass_bool(value: bool) -> JSONValue:
    return value


def _pass_any(value: JSONValue) -> JSONValue:
    return value


def _any(value: JSONValue, path: str) -> JSONValue:
    return value


def _integer_codec(name: str, low: int, high: int, what: str) -> Codec[int]:
    def decode(value: JSONValue, path: str) -> int:
        return _integer(value, path, low, high, what)

    def encode(value: int) -> JSONValue:
        if isinstance(value, bool) or not low <= value <= high:
            raise LocalProtocolError(f"{value!r} is out of range for {what}")
        return value

    return Codec(name, decode, encode)


def _encode_double(value: float) -> JSONValue:
    if not math.isfinite(value):
        raise LocalProtocolError(f"cannot encode non-finite number {value!r}")
    return float(value)


STRING: Codec[str] = Codec("String", _decode_string, _pass_str)
BOOL: Codec[bool] = Codec("Bool", _decode_bool, _pass_bool)
DOUBLE: Codec[float] = Codec("Double", _decode_double, _encode_double)
UINT64 = _integer_codec("UInt64", 0, (1 << 64) - 1, "a UInt64")
INT = _integer_codec("Int", -(1 << 63), (1 << 63) - 1, "an Int")
UUID_: Codec[UUID] = Codec("UUID", _decode_uuid, format_uuid)
DATA: Codec[bytes] = Codec("Data", _decode_data, _encode_data)
ANY: Codec[JSONValue] = Codec("JSON", _any, _pass_any, accepts_null=True)


class EnumCodec(Codec[E]):
    """A String-raw Swift enum: the raw value on the wire; unknown values fail."""

    def __init__(self, enum_type: type[E]) -> None:
        def decode(value: JSONValue, path: str) -> E:
            raw = _decode_string(value, path)
            try:
                return enum_type(raw)
            except ValueError:
                allowed = ", ".join(repr(member.value) for member in enum_type)
                raise _fail(path, f"{raw[:60]!r} is not one of {allowed}") from None

        super().__init__(enum_type.__name__, decode, lambda member: cast(JSONValue, member.value))


class ListCodec(Codec[tuple[T, ...]]):
    """A Swift array, held as a tuple so messages stay immutable."""

    def __init__(self, item: Codec[T]) -> None:
        def decode(value: JSONValue, path: str) -> tuple[T, ...]:
            if not isinstance(value, list):
                raise _fail(path, f"expected an array, got {_type_name(value)}")
            return tuple(item.decode(element, f"{path}[{i}]") for i, element in enumerate(value))

        super().__init__(f"[{item.name}]", decode, lambda values: [item.encode(v) for v in values])


class StructCodec(Codec[T]):
    """A nested Codable struct (a dataclass built with :func:`wire_field`)."""

    def __init__(self, struct_type: type[T]) -> None:
        super().__init__(
            struct_type.__name__,
            lambda value, path: decode_struct(struct_type, value, path),
            encode_struct,
        )


def wire_field(json_name: str, codec: Codec[Any], *, optional: bool = False) -> Any:
    """Declare a dataclass field's JSON name and codec; optionals default to ``None``."""
    metadata = {"json": json_name, "codec": codec, "optional": optional}
    if optional:
        return dataclasses.field(default=None, metadata=metadata)
    return dataclasses.field(metadata=metadata)


def expect_object(value: JSONValue, path: str) -> dict[str, JSONValue]:
    """Return ``value`` as an object or raise naming ``path``."""
    if not isinstance(value, dict):
        raise _fail(path, f"expected an object, got {_type_name(value)}")
    return value


def decode_struct(struct_type: type[T], value: JSONValue, path: str) -> T:
    """Build ``struct_type`` from a JSON object, Swift-style.

    Raises:
        MalformedControlMessage: not an object, a required member missing or
            null, or a member of the wrong type or range.
    """
    members = expect_object(value, path)
    kwargs: dict[str, Any] = {}
    for field in dataclasses.fields(cast(Any, struct_type)):
        json_name: str = field.metadata["json"]
        codec: Codec[Any] = field.metadata["codec"]
        raw = members.get(json_name)
        if raw is None and codec.accepts_null and json_name in members:
            kwargs[field.name] = None
            continue
        if raw is None:  # absent and null are the same to Swift
            if field.metadata["optional"]:
                kwargs[field.name] = None
                continue
            raise _fail(f"{path}.{json_name}", "required member is missing")
        kwargs[field.name] = codec.decode(raw, f"{path}.{json_name}")
    return struct_type(**kwargs)


def encode_struct(value: Any) -> JSONValue:
    """Encode a :func:`wire_field` dataclass; ``None`` optionals are omitted.

    Raises:
        LocalProtocolError: a required field is ``None``.
    """
    out: dict[str, JSONValue] = {}
    for field in dataclasses.fields(value):
        item = getattr(value, field.name)
        json_name: str = field.metadata["json"]
        if item is None and not field.metadata["codec"].accepts_null:
            if field.metadata["optional"]:
                continue
            raise LocalProtocolError(f"{type(value).__name__}.{field.name} is required")
        out[json_name] = field.metadata["codec"].encode(item)
    return out
