"""Bytes ↔ packets for Prowl's mirror framing (docs/protocol.md §2). Pure: no I/O.

Framing: ``length`` (u32 BE, counts the kind byte and the body, 1 … 8,388,608),
then ``kind`` (u8), then ``length - 1`` body bytes.

The encoder and the decoder enforce the same ranges, so whatever
:func:`encode_packet` produces, :class:`PacketDecoder` accepts, and the encoder
refuses (with :class:`~mirror_host.errors.LocalProtocolError`) exactly what the
decoder would refuse (with :class:`~mirror_host.errors.MalformedPacket`).
"""

from __future__ import annotations

from typing import NoReturn
from uuid import UUID

from mirror_host.errors import (
    IncompletePacket,
    LocalProtocolError,
    MalformedPacket,
    PacketLengthError,
    PayloadTooLarge,
)
from mirror_host.wire.constants import (
    FRAME_HEADER,
    HEADER,
    KIND_CONTROL,
    KIND_TEXT_FRAME,
    KIND_VT_FRAME,
    MAX_GRID,
    MAX_PAYLOAD_BYTES,
    MIN_VT_GRID,
    TEXT_FRAME_BODY_OFFSET,
    VT_FRAME_BODY_OFFSET,
)
from mirror_host.wire.packets import ControlPacket, Packet, TextFramePacket, VTFramePacket

__all__ = [
    "PacketDecoder",
    "check_length",
    "decode_payload",
    "encode_packet",
    "encode_payload",
]

_MAX_U64 = (1 << 64) - 1


def check_length(declared: int, *, max_payload_bytes: int = MAX_PAYLOAD_BYTES) -> None:
    """Validate a decoded length prefix.

    Raises:
        PacketLengthError: ``declared`` is 0 or above ``max_payload_bytes``.
    """
    if not 1 <= declared <= max_payload_bytes:
        raise PacketLengthError(declared, max_payload_bytes)


# --------------------------------------------------------------------------- decoding


def decode_payload(payload: bytes | bytearray | memoryview) -> Packet:
    """Decode one payload (kind byte plus body, without the length prefix).

    Raises:
        MalformedPacket: empty payload, unknown kind, short frame header,
            sequence 0, a grid out of range, a truncated flag other than 0/1,
            or text that is not valid UTF-8.
    """
    view = memoryview(payload)
    if len(view) == 0:
        raise MalformedPacket("empty payload: a packet needs at least its kind byte")
    kind = view[0]
    if kind == KIND_CONTROL:
        return ControlPacket(bytes(view[1:]))
    if kind == KIND_VT_FRAME:
        return _decode_vt(view)
    if kind == KIND_TEXT_FRAME:
        return _decode_text(view)
    raise MalformedPacket(f"unknown packet kind {kind} (expected 0, 1 or 2)")


def _frame_header(view: memoryview, minimum: int, what: str) -> tuple[UUID, int, int, int]:
    if len(view) < minimum:
        raise MalformedPacket(f"{what} payload is {len(view)} bytes; its header needs {minimum}")
    raw_id, sequence, columns, rows = FRAME_HEADER.unpack_from(view, 1)
    if sequence == 0:
        raise MalformedPacket(f"{what} sequence is 0; sequences start at 1")
    return UUID(bytes=bytes(raw_id)), sequence, columns, rows


def _decode_vt(view: memoryview) -> VTFramePacket:
    subscription_id, sequence, columns, rows = _frame_header(view, VT_FRAME_BODY_OFFSET, "VT frame")
    _check_grid("VT frame", columns, rows, minimum=MIN_VT_GRID, error=MalformedPacket)
    return VTFramePacket(
        subscription_id, sequence, columns, rows, bytes(view[VT_FRAME_BODY_OFFSET:])
    )


def _decode_text(view: memoryview) -> TextFramePacket:
    subscription_id, sequence, columns, rows = _frame_header(
        view, TEXT_FRAME_BODY_OFFSET, "text frame"
    )
    _check_grid("text frame", columns, rows, minimum=0, error=MalformedPacket)
    flag = view[VT_FRAME_BODY_OFFSET]
    if flag not in (0, 1):
        raise MalformedPacket(f"text frame truncated flag is {flag}; it must be 0 or 1")
    try:
        text = bytes(view[TEXT_FRAME_BODY_OFFSET:]).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedPacket(f"text frame text is not valid UTF-8 ({exc.reason})") from exc
    return TextFramePacket(subscription_id, sequence, columns, rows, flag == 1, text)


def _check_grid(
    what: str,
    columns: int,
    rows: int,
    *,
    minimum: int,
    error: type[MalformedPacket] | type[LocalProtocolError],
) -> None:
    for name, value in (("columns", columns), ("rows", rows)):
        if not minimum <= value <= MAX_GRID:
            raise error(f"{what} {name} is {value}; it must be {minimum} … {MAX_GRID}")


class PacketDecoder:
    """Split a byte stream into packets. Performs no I/O.

    Call :meth:`feed` with bytes as they arrive (any chunking), then
    :meth:`next_packet` until it returns ``None``. Call :meth:`feed_eof` when
    the stream ends; a packet left half-read then raises
    :class:`~mirror_host.errors.IncompletePacket`.

    The length prefix is validated the moment its four bytes are present, in
    :meth:`feed` itself, so a hostile length never makes the decoder wait for (or
    hold) a body it will refuse. After any error the decoder is broken and
    raises the same error again.
    """

    def __init__(self, *, max_payload_bytes: int = MAX_PAYLOAD_BYTES) -> None:
        self._max = max_payload_bytes
        self._buffer = bytearray()
        self._start = 0  # bytes before this offset are consumed
        self._declared: int | None = None  # length of the packet being read
        self._eof = False
        self._error: MalformedPacket | None = None

    @property
    def buffered_bytes(self) -> int:
        """Bytes received but not yet returned as packets."""
        return len(self._buffer) - self._start

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Append received bytes.

        Raises:
            PacketLengthError: a length prefix completed by ``data`` is out of range.
            MalformedPacket: the decoder already failed, or data came after EOF.
        """
        self._raise_if_broken()
        if self._eof:
            self._fail(MalformedPacket("data received after end of stream"))
        self._buffer += data
        self._read_header()

    def feed_eof(self) -> None:
        """Mark the end of the stream. Remaining whole packets can still be read."""
        self._eof = True

    def next_packet(self) -> Packet | None:
        """Return the next complete packet, or ``None`` when more bytes are needed.

        Raises:
            MalformedPacket: the packet is invalid (see :func:`decode_payload`).
            IncompletePacket: the stream ended inside a packet.
        """
        self._raise_if_broken()
        self._read_header()
        declared = self._declared
        if declared is None or self.buffered_bytes < HEADER.size + declared:
            if self._eof and self.buffered_bytes:
                self._fail(self._incomplete())
            return None
        body_start = self._start + HEADER.size
        end = body_start + declared
        # Copy the payload out so no view of the buffer outlives this call
        # (a live export would stop the buffer from being resized).
        payload = bytes(self._buffer[body_start:end])
        try:
            packet = decode_payload(payload)
        except MalformedPacket as exc:
            self._fail(exc)
        self._start = end
        self._declared = None
        self._compact()
        return packet

    def _incomplete(self) -> IncompletePacket:
        have = self.buffered_bytes
        if self._declared is None:
            return IncompletePacket(f"stream ended after {have} of the 4 length-prefix bytes")
        got = have - HEADER.size
        return IncompletePacket(f"stream ended after {got} of {self._declared} payload bytes")

    def _read_header(self) -> None:
        if self._declared is not None or self.buffered_bytes < HEADER.size:
            return
        (declared,) = HEADER.unpack_from(self._buffer, self._start)
        try:
            check_length(declared, max_payload_bytes=self._max)
        except PacketLengthError as exc:
            self._fail(exc)
        self._declared = declared

    def _compact(self) -> None:
        # Drop consumed bytes once they dominate the buffer, so a long-lived
        # connection does not keep every byte it ever received.
        if self._start and self._start * 2 >= len(self._buffer):
            del self._buffer[: self._start]
            self._start = 0

    def _fail(self, error: MalformedPacket) -> NoReturn:
        self._error = error
        self._buffer.clear()
        self._start = 0
        raise error

    def _raise_if_broken(self) -> None:
        if self._error is not None:
            raise self._error


# --------------------------------------------------------------------------- encoding


def encode_payload(packet: Packet, *, max_payload_bytes: int = MAX_PAYLOAD_BYTES) -> bytes:
    """Encode one packet's payload (kind byte plus body, no length prefix).

    Raises:
        LocalProtocolError: a field is out of range (sequence 0, grid, text).
        PayloadTooLarge: the payload would exceed ``max_payload_bytes``.
    """
    return b"".join(_payload_parts(packet, max_payload_bytes))


def _payload_parts(packet: Packet, max_payload_bytes: int) -> list[bytes]:
    """The payload as its pieces (header, body), so a frame's body is copied only once."""
    if isinstance(packet, ControlPacket):
        parts = [bytes((KIND_CONTROL,)), packet.body]
    elif isinstance(packet, VTFramePacket):
        _check_grid(
            "VT frame", packet.columns, packet.rows, minimum=MIN_VT_GRID, error=LocalProtocolError
        )
        prefix = _frame_prefix(
            KIND_VT_FRAME, packet.subscription_id, packet.sequence, packet.columns, packet.rows
        )
        parts = [prefix, packet.data]
    else:
        _check_grid("text frame", packet.columns, packet.rows, minimum=0, error=LocalProtocolError)
        try:
            text = packet.text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise LocalProtocolError("text frame text cannot be encoded as UTF-8") from exc
        prefix = _frame_prefix(
            KIND_TEXT_FRAME, packet.subscription_id, packet.sequence, packet.columns, packet.rows
        )
        parts = [prefix, b"\x01" if packet.truncated else b"\x00", text]
    size = sum(len(part) for part in parts)
    if size > max_payload_bytes:
        raise PayloadTooLarge(f"payload of {size} bytes exceeds the {max_payload_bytes}-byte limit")
    return parts


def _frame_prefix(
    kind: int, subscription_id: UUID, sequence: int, columns: int, rows: int
) -> bytes:
    if not 1 <= sequence <= _MAX_U64:
        raise LocalProtocolError(f"frame sequence {sequence} is outside 1 … 2^64-1")
    return bytes((kind,)) + FRAME_HEADER.pack(subscription_id.bytes, sequence, columns, rows)


def encode_packet(packet: Packet, *, max_payload_bytes: int = MAX_PAYLOAD_BYTES) -> bytes:
    """Encode one packet with its length prefix. Raises as :func:`encode_payload`."""
    parts = _payload_parts(packet, max_payload_bytes)
    return b"".join([HEADER.pack(sum(len(part) for part in parts)), *parts])
