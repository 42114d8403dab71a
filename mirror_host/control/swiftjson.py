"""Strict JSON in, Foundation-style JSON out (docs/protocol.md §3). Pure.

Prowl's peers are Swift programs using ``JSONEncoder``/``JSONDecoder`` with default
settings. This module reproduces the parts that matter on the wire:

* output is compact, members keep the order they are given (we use declaration
  order), ``/`` is written as ``\\/``, non-ASCII is raw UTF-8, and a Double whose
  description ends in ``.0`` loses it (``3.0`` → ``3``);
* input must be UTF-8 JSON; unlike Python's :mod:`json` we refuse ``NaN`` and
  ``Infinity`` (and numbers that overflow to them), duplicate member names, and
  lone UTF-16 surrogates, none of which a Swift peer can produce.
"""

from __future__ import annotations

import json
import math
import re
from typing import NoReturn

from mirror_host.errors import LocalProtocolError, MalformedControlMessage

__all__ = ["JSONValue", "dump_json", "format_double", "parse_json"]

#: Any JSON value, as :func:`parse_json` returns it.
JSONValue = None | bool | int | float | str | list["JSONValue"] | dict[str, "JSONValue"]

# A \uD800-\uDFFF escape may produce a lone surrogate; only then do we walk the
# parsed value to look for one (paired escapes are combined by the parser).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


class _Reject(ValueError):
    pass


def _reject_constant(name: str) -> NoReturn:
    raise _Reject(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Reject(f"number {text[:40]} is out of range")
    return value


def _unique_members(pairs: list[tuple[str, JSONValue]]) -> dict[str, JSONValue]:
    result: dict[str, JSONValue] = {}
    for key, value in pairs:
        if key in result:
            raise _Reject(f"duplicate member {key!r}")
        result[key] = value
    return result


_DECODER = json.JSONDecoder(
    object_pairs_hook=_unique_members,
    parse_constant=_reject_constant,
    parse_float=_finite_float,
)


def parse_json(data: bytes) -> JSONValue:
    """Parse UTF-8 JSON strictly.

    Raises:
        MalformedControlMessage: not UTF-8, not JSON, a non-finite number, a
            duplicate member name, a lone surrogate, or nesting too deep.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedControlMessage(f"control message is not valid UTF-8 ({exc.reason})") from exc
    try:
        value: JSONValue = _DECODER.decode(text)
    except _Reject as exc:
        raise MalformedControlMessage(f"invalid JSON: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise MalformedControlMessage(f"invalid JSON: {exc.msg} at offset {exc.pos}") from exc
    except (ValueError, RecursionError) as exc:
        raise MalformedControlMessage(f"invalid JSON: {exc.__class__.__name__}") from exc
    if _SURROGATE_ESCAPE.search(data) and _has_lone_surrogate(value):
        raise MalformedControlMessage("invalid JSON: a string holds a lone UTF-16 surrogate")
    return value


def _has_lone_surrogate(value: JSONValue) -> bool:
    stack: list[JSONValue] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if any("\ud800" <= ch <= "\udfff" for ch in item):
                return True
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
    return False


def format_double(value: float) -> str:
    """Write a Double as Swift's ``JSONEncoder`` does: shortest round-trip, no ``.0``.

    Raises:
        LocalProtocolError: ``value`` is NaN or infinite (Swift refuses those too).
    """
    if not math.isfinite(value):
        raise LocalProtocolError(f"cannot encode non-finite number {value!r}")
    text = repr(value)
    return text[:-2] if text.endswith(".0") else text


def _dump_string(text: str, slashes: bool = True) -> str:
    encoded = json.dumps(text, ensure_ascii=False)
    return encoded.replace("/", "\\/") if slashes else encoded


def _dump(value: JSONValue, out: list[str], slashes: bool = True) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        out.append(format_double(value))
    elif isinstance(value, str):
        out.append(_dump_string(value, slashes))
    elif isinstance(value, list):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _dump(item, out, slashes)
        out.append("]")
    else:
        out.append("{")
        for index, (key, item) in enumerate(value.items()):
            if index:
                out.append(",")
            out.append(_dump_string(key, slashes))
            out.append(":")
            _dump(item, out, slashes)
        out.append("}")


def dump_json(value: JSONValue, *, escape_slashes: bool = True) -> bytes:
    """Encode ``value`` compactly, in the given member order, as UTF-8.

    ``/`` is written ``\\/``, as Swift's ``JSONEncoder`` writes it, unless
    ``escape_slashes`` is false (output for people, such as ``wire decode``'s).

    Raises:
        LocalProtocolError: a non-finite float, or a string that is not valid
            Unicode (a lone surrogate).
    """
    out: list[str] = []
    _dump(value, out, escape_slashes)
    try:
        return "".join(out).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise LocalProtocolError("cannot encode a string holding a lone surrogate") from exc
