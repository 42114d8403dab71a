"""The three packet kinds as frozen values (docs/protocol.md §2.2). Pure."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

__all__ = ["ControlPacket", "Packet", "TextFramePacket", "VTFramePacket"]


@dataclass(frozen=True, slots=True)
class ControlPacket:
    """Kind 0: a UTF-8 JSON control message, still undecoded.

    The wire room does not know JSON; ``mirror_host.control`` decodes ``body``.
    """

    body: bytes


@dataclass(frozen=True, slots=True)
class VTFramePacket:
    """Kind 1: a full redraw of a pane's active screen as VT bytes (``vt-v1``)."""

    subscription_id: UUID
    sequence: int
    columns: int
    rows: int
    data: bytes


@dataclass(frozen=True, slots=True)
class TextFramePacket:
    """Kind 2: a pane's viewport as plain UTF-8 text (``text-v1``).

    Empty ``text`` is a real frame: it replaces the client's view with nothing.
    """

    subscription_id: UUID
    sequence: int
    columns: int
    rows: int
    truncated: bool
    text: str


Packet = ControlPacket | VTFramePacket | TextFramePacket
