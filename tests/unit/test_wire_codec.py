"""The binary framing: round trips, any chunking, limits before buffering."""

from __future__ import annotations

import struct
from uuid import UUID

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mirror_host.errors import (
    IncompletePacket,
    LocalProtocolError,
    MalformedPacket,
    PacketLengthError,
    PayloadTooLarge,
)
from mirror_host.wire import (
    MAX_PAYLOAD_BYTES,
    ControlPacket,
    PacketDecoder,
    TextFramePacket,
    VTFramePacket,
    decode_payload,
    encode_packet,
    encode_payload,
)
from tests.strategies import packets

SUB = UUID("11111111-2222-3333-4444-555555555555")


def decode_all(data: bytes, chunks: list[int] | None = None) -> list[object]:
    decoder = PacketDecoder()
    out: list[object] = []
    pos = 0
    for size in chunks or [len(data)]:
        decoder.feed(data[pos : pos + size])
        pos += size
        while (packet := decoder.next_packet()) is not None:
            out.append(packet)
    decoder.feed(data[pos:])
    decoder.feed_eof()
    while (packet := decoder.next_packet()) is not None:
        out.append(packet)
    return out


@given(packets)
def test_decode_of_encode_is_identity(packet: object) -> None:
    assert decode_all(encode_packet(packet)) == [packet]  # type: ignore[arg-type]


@given(st.lists(packets, min_size=1, max_size=6), st.data())
def test_any_split_of_a_stream_yields_the_same_packets(
    items: list[object], data: st.DataObject
) -> None:
    stream = b"".join(encode_packet(p) for p in items)  # type: ignore[arg-type]
    sizes = data.draw(st.lists(st.integers(0, 40), max_size=40))
    assert decode_all(stream, sizes) == items


@given(st.binary(max_size=300))
def test_arbitrary_bytes_raise_only_codec_errors(blob: bytes) -> None:
    try:
        decode_all(blob)
    except MalformedPacket:
        pass


@given(st.binary(max_size=300))
def test_arbitrary_payloads_raise_only_codec_errors(blob: bytes) -> None:
    try:
        decode_payload(blob)
    except MalformedPacket:
        pass


def test_decoder_rejects_oversized_length_before_any_body_arrives() -> None:
    decoder = PacketDecoder()
    with pytest.raises(PacketLengthError) as info:
        decoder.feed(struct.pack(">I", MAX_PAYLOAD_BYTES + 1))
    assert info.value.declared == MAX_PAYLOAD_BYTES + 1
    assert decoder.buffered_bytes == 0
    with pytest.raises(PacketLengthError):  # broken for good
        decoder.feed(b"\x00")


def test_decoder_rejects_zero_length_header() -> None:
    with pytest.raises(PacketLengthError):
        PacketDecoder().feed(b"\x00\x00\x00\x00")


def test_decoder_waits_for_a_maximal_body_without_error() -> None:
    decoder = PacketDecoder()
    decoder.feed(struct.pack(">I", MAX_PAYLOAD_BYTES) + b"\x01")
    assert decoder.next_packet() is None


def test_stream_ending_mid_packet_is_incomplete() -> None:
    decoder = PacketDecoder()
    decoder.feed(b"\x00\x00\x00\x05\x00{}")
    decoder.feed_eof()
    with pytest.raises(IncompletePacket, match="3 of 5"):
        decoder.next_packet()


def test_stream_ending_mid_header_is_incomplete() -> None:
    decoder = PacketDecoder()
    decoder.feed(b"\x00\x00")
    decoder.feed_eof()
    with pytest.raises(IncompletePacket, match="2 of the 4"):
        decoder.next_packet()


def test_decoder_compacts_consumed_bytes() -> None:
    decoder = PacketDecoder()
    one = encode_packet(ControlPacket(b'{"ping":{}}'))
    for _ in range(1000):
        decoder.feed(one)
        assert decoder.next_packet() == ControlPacket(b'{"ping":{}}')
    assert decoder.buffered_bytes == 0
    assert len(decoder._buffer) < 100


@pytest.mark.parametrize(
    ("packet", "message"),
    [
        (VTFramePacket(SUB, 0, 80, 24, b""), "sequence"),
        (VTFramePacket(SUB, 1, 0, 24, b""), "columns"),
        (VTFramePacket(SUB, 1, 80, 1001, b""), "rows"),
        (TextFramePacket(SUB, 1, 1001, 0, False, ""), "columns"),
        (TextFramePacket(SUB, 1 << 64, 1, 1, False, ""), "sequence"),
        (TextFramePacket(SUB, 1, 1, 1, False, "\ud800"), "UTF-8"),
    ],
)
def test_encoder_refuses_what_the_decoder_refuses(packet: object, message: str) -> None:
    with pytest.raises(LocalProtocolError, match=message):
        encode_packet(packet)  # type: ignore[arg-type]


def test_encoder_refuses_payload_over_the_limit() -> None:
    big = VTFramePacket(SUB, 1, 80, 24, b"x" * MAX_PAYLOAD_BYTES)
    with pytest.raises(PayloadTooLarge):
        encode_payload(big)
    fits = VTFramePacket(SUB, 1, 80, 24, b"x" * (MAX_PAYLOAD_BYTES - 33))
    assert len(encode_payload(fits)) == MAX_PAYLOAD_BYTES


def test_text_frame_layout_is_exact() -> None:
    packet = TextFramePacket(UUID(int=1), 1, 80, 24, True, "A")
    assert encode_packet(packet).hex() == (
        "00000023" "02" "00000000000000000000000000000001" "0000000000000001"
        "00000050" "00000018" "01" "41"
    )  # fmt: skip


def test_empty_text_frame_is_a_real_frame() -> None:
    packet = TextFramePacket(SUB, 2, 80, 24, False, "")
    assert decode_all(encode_packet(packet)) == [packet]


def test_the_packet_log_splits_each_direction_into_whole_packets() -> None:
    from mirror_host.host.packet_log import split_packets

    one = bytes.fromhex("0000000c007b226c697374223a7b7d7d")
    buffer = bytearray(one + one[:5])
    assert split_packets(buffer) == [one]
    assert buffer == one[:5]
    buffer += one[5:] + one
    assert split_packets(buffer) == [one, one] and buffer == b""
    broken = bytearray(b"\x00\x00\x00\x00rest")  # a length no packet has: the rest in one
    assert split_packets(broken) == [b"\x00\x00\x00\x00rest"] and broken == b""
