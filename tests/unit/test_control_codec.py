"""Control messages: Swift Codable shape, strict decoding, round trips."""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mirror_host import control as c
from mirror_host.control.swiftjson import dump_json, format_double, parse_json
from mirror_host.errors import LocalProtocolError, MalformedControlMessage
from tests.strategies import json_values, message_of, messages

SUB = UUID("11111111-2222-3333-4444-555555555555")


@given(messages)
def test_decode_of_encode_is_identity(message: Any) -> None:
    assert c.decode_control(c.encode_control(message)) == message


@pytest.mark.parametrize("cls", list(c.MESSAGE_TYPES.values()), ids=lambda k: k.CASE)
@given(data=st.data())
def test_every_case_round_trips(cls: type, data: st.DataObject) -> None:
    message = data.draw(message_of(cls))
    encoded = c.encode_control(message)
    assert list(json.loads(encoded)) == [cls.CASE]  # exactly one top-level member
    assert c.decode_control(encoded) == message


@given(st.binary(max_size=200))
def test_arbitrary_bytes_raise_only_the_codec_error(blob: bytes) -> None:
    try:
        c.decode_control(blob)
    except MalformedControlMessage:
        pass


@given(json_values)
def test_arbitrary_json_raises_only_the_codec_error(value: Any) -> None:
    try:
        c.decode_control(dump_json(value))
    except MalformedControlMessage:
        pass


@given(st.sampled_from(sorted(c.MESSAGE_TYPES)), json_values)
def test_arbitrary_payloads_for_known_cases_raise_only_the_codec_error(
    case: str, value: Any
) -> None:
    try:
        c.decode_control(dump_json({case: {"_0": value}}))
    except MalformedControlMessage:
        pass


def test_cases_without_value_encode_as_empty_object() -> None:
    assert c.encode_control(c.ListPanes()) == b'{"list":{}}'
    assert c.encode_control(c.Ping()) == b'{"ping":{}}'
    assert c.encode_control(c.Pong()) == b'{"pong":{}}'


def test_optional_fields_are_omitted_and_members_keep_declaration_order() -> None:
    message = c.Failure(error="PANE_BUSY: This pane already has a remote mirror.")
    assert c.encode_control(message) == (
        b'{"failure":{"_0":{"error":"PANE_BUSY: This pane already has a remote mirror."}}}'
    )
    state = c.ScrollState(at_top=True, sequence=7, subscription_id=SUB)
    assert c.encode_control(state) == (
        b'{"scrollState":{"_0":{"atTop":true,"sequence":7,'
        b'"subscriptionID":"11111111-2222-3333-4444-555555555555"}}}'
    )


def test_uuids_are_upper_case_and_slashes_escaped() -> None:
    pane = c.PaneDescriptor(id=UUID(int=0xABC), title="t", directory="/a/b", busy=False)
    message = c.Panes(panes=(pane,), capabilities=("vt-v1",), host_run_id=UUID(int=0xDEF))
    encoded = c.encode_control(message)
    assert b'"directory":"\\/a\\/b"' in encoded
    assert b"00000000-0000-0000-0000-000000000ABC" in encoded


def test_non_ascii_is_raw_utf8() -> None:
    encoded = c.encode_control(c.Failure(error="屏幕 · é"))
    assert "屏幕 · é".encode() in encoded


def test_doubles_follow_swift_description() -> None:
    assert format_double(3.0) == "3"
    assert format_double(1800000000.25) == "1800000000.25"
    assert format_double(-0.5) == "-0.5"
    assert dump_json({"count": 3.0, "n": 3}) == b'{"count":3,"n":3}'
    with pytest.raises(LocalProtocolError):
        format_double(float("nan"))


def test_integral_double_is_read_as_integer() -> None:
    message = c.decode_control(
        b'{"acknowledge":{"_0":{"sequence":42.0,"subscriptionID":"%s"}}}' % str(SUB).encode()
    )
    assert message == c.Acknowledge(sequence=42, subscription_id=SUB)


@pytest.mark.parametrize(
    "text",
    [
        b'{"ping":{},"pong":{}}',
        b'{"hello":{}}',
        b'{"list":null}',
        b'{"frame":{"_0":{}}}',
        b'{"textFrame":{}}',
        b'{"ping":{}',
        b"",
        b'{"ping":{}}\x00',
        b'{"ping":{"a":1,"a":2}}',
        b'{"failure":{"_0":{"error":"\\ud800"}}}',
        b'{"failure":{"_0":{"error":1e999}}}',
        b"[" * 100_000,
        b'{"authenticate":{"_0":{"deviceID":"%s","proof":"not base64!"}}}' % str(SUB).encode(),
    ],
)
def test_rejections(text: bytes) -> None:
    with pytest.raises(MalformedControlMessage):
        c.decode_control(text)


def test_rejection_says_where_and_why() -> None:
    with pytest.raises(MalformedControlMessage, match=r"subscribe\._0\.intent: 'x' is not one of"):
        c.decode_control(
            b'{"subscribe":{"_0":{"paneID":"%s","representation":"vt-v1","intent":"x"}}}'
            % str(SUB).encode()
        )


def test_paired_surrogates_are_fine() -> None:
    message = c.decode_control(b'{"failure":{"_0":{"error":"\\ud83d\\ude00"}}}')
    assert message == c.Failure(error="\U0001f600")


def test_command_request_send_missing_fields_cannot_decode() -> None:
    text = (
        b'{"requestID":"03F5535A-D08C-498C-B70B-C665AC8D02CB",\n "request":{"output":"json",'
        b'"command":{"send":{"_0":{"text":"unsafe"}}}}}'
    )
    from mirror_host.control.fields import decode_struct

    with pytest.raises(MalformedControlMessage, match="selector"):
        decode_struct(c.CommandRequest, parse_json(text), "commandRequest")


@pytest.mark.parametrize("output", ["text", "", "JSON", " json", "j" * 4096])
def test_a_command_whose_output_is_not_json_cannot_decode(output: str) -> None:
    """Outside the remote allowlist, like an unknown case: the connection closes."""
    request = c.CommandRequest(
        request_id=SUB, request=c.CommandEnvelope(output=output, command=c.ListCommand())
    )
    encoded = c.encode_control(c.Command(command_request=request))  # a faulty client can send it
    with pytest.raises(MalformedControlMessage, match="output"):
        c.decode_control(encoded)


def test_command_envelope_shapes() -> None:
    request = c.CommandRequest(
        request_id=SUB,
        request=c.CommandEnvelope(
            output="json",
            command=c.CreateCommand(
                resource="tab",
                worktree_id="w1",
                launch=c.Launch(profile="claude"),
                background=True,
            ),
        ),
    )
    encoded = c.encode_control(c.Command(command_request=request))
    assert encoded == (
        b'{"command":{"_0":{"commandRequest":{"requestID":"11111111-2222-3333-4444-555555555555",'
        b'"request":{"output":"json","command":{"create":{"_0":{"resource":"tab","selector":'
        b'{"worktree":{"_0":"w1"}},"launch":{"profile":"claude"},"background":true}}}}}}}}'
    )
    assert c.decode_control(encoded) == c.Command(command_request=request)
