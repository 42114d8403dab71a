"""Frozen history snapshots and their 200-line pages (docs/protocol.md §4.5). Pure.

A snapshot keeps the newest 2 MiB of UTF-8 (a split leading character is
dropped), is split on ``\\n`` and never changes. Pages are the 200 lines just
before an offset, so a client walking backwards sees contiguous pages that end
exactly where the previous one began.
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from mirror_host.errors import ProtocolViolation
from mirror_host.panes.model import MAX_HISTORY_BYTES

__all__ = ["MAX_SNAPSHOT_BYTES", "PAGE_LINES", "HistorySnapshot", "keep_newest_utf8"]

MAX_SNAPSHOT_BYTES = MAX_HISTORY_BYTES
PAGE_LINES = 200


def keep_newest_utf8(text: str, limit: int = MAX_SNAPSHOT_BYTES) -> tuple[str, bool]:
    """The last ``limit`` UTF-8 bytes of ``text`` and whether anything was cut.

    A character split by the cut is dropped whole (its continuation bytes are
    discarded), never replaced.
    """
    if len(text) * 4 <= limit:  # cannot be longer: skip the encoding
        return text, False
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text, False
    tail = data[-limit:]
    start = 0
    while start < len(tail) and (tail[start] & 0xC0) == 0x80:
        start += 1
    return tail[start:].decode("utf-8"), True


@dataclass(frozen=True, slots=True)
class HistorySnapshot:
    """One frozen capture: its id, lines, capture time and truncation flag."""

    id: UUID
    lines: tuple[str, ...]
    captured_at: float
    truncated: bool

    @classmethod
    def build(
        cls, history_id: UUID, text: str, *, captured_at: float, source_truncated: bool
    ) -> HistorySnapshot:
        """Freeze ``text``. An empty history is one empty line (``total`` = 1)."""
        kept, cut = keep_newest_utf8(text)
        return cls(history_id, tuple(kept.split("\n")), captured_at, source_truncated or cut)

    @property
    def total(self) -> int:
        """The number of lines."""
        return len(self.lines)

    def page_before(self, offset: int | None) -> tuple[int, tuple[str, ...]]:
        """``(start, lines)``: up to 200 lines ending just before ``offset``.

        ``offset`` defaults to the line count (the newest page).

        Raises:
            ProtocolViolation: ``offset`` is outside ``0 … total``.
        """
        end = self.total if offset is None else offset
        if not 0 <= end <= self.total:
            raise ProtocolViolation(f"history offset {end} is outside 0 … {self.total}")
        start = max(0, end - PAGE_LINES)
        return start, self.lines[start:end]
