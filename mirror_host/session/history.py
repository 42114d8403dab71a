"""History snapshots, their 200-line pages and the requests for them
(docs/protocol.md §4.5). Pure.

A snapshot keeps the newest 2 MiB of UTF-8 (a split leading character is
dropped), is split on ``\\n`` and never changes. Pages are the 200 lines just
before an offset, so a client walking backwards sees contiguous pages that end
exactly where the previous one began. A lease's :class:`HistoryDesk` answers
the requests in the order they came, queueing them behind a capture.
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass
from uuid import UUID

from mirror_host.control import History, HistoryPage
from mirror_host.errors import ProtocolViolation
from mirror_host.panes.model import MAX_HISTORY_BYTES

__all__ = [
    "MAX_SNAPSHOT_BYTES",
    "MAX_WAITING_HISTORY_REQUESTS",
    "PAGE_LINES",
    "HistoryDesk",
    "HistorySnapshot",
    "HistoryStep",
    "keep_newest_utf8",
]

MAX_SNAPSHOT_BYTES = MAX_HISTORY_BYTES
PAGE_LINES = 200
#: History requests queued behind a capture in progress; more is a flood.
MAX_WAITING_HISTORY_REQUESTS = 64


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


class HistoryStep(enum.Enum):
    """What a ``history`` request needs when it is not answered with a page at once."""

    #: A new snapshot: the host captures one (the desk is now capturing).
    CAPTURE = "capture"
    #: It waits behind the capture under way.
    WAIT = "wait"


class HistoryDesk:
    """One lease's snapshot and the history requests waiting for a capture.

    Two states. *Idle*: a page of the current snapshot is answered at once and
    a request for a new snapshot starts a capture. *Capturing* (the host is
    reading the pane): every request waits, at most
    :data:`MAX_WAITING_HISTORY_REQUESTS` of them, and they are answered in the
    order they came once the capture is in, so a page request sent after a new
    snapshot's request is judged against that new snapshot, as Prowl's clients
    expect.
    """

    def __init__(self, subscription_id: UUID) -> None:
        self.subscription_id = subscription_id
        self.snapshot: HistorySnapshot | None = None
        #: True while the host reads a new snapshot (the *capturing* state).
        self.capturing = False
        self._waiting: deque[History] = deque()

    def request(self, message: History) -> HistoryPage | HistoryStep:
        """Take a ``history`` message: its page now, or what it needs.

        Raises:
            ProtocolViolation: too many requests waiting, an unknown snapshot, or
                an offset outside it.
        """
        if self.capturing:
            if len(self._waiting) >= MAX_WAITING_HISTORY_REQUESTS:
                raise ProtocolViolation("too many history requests waiting for a capture")
            self._waiting.append(message)
            return HistoryStep.WAIT
        return self._answer(message)

    def finish(self, snapshot: HistorySnapshot | None) -> list[HistoryPage]:
        """The capture under way is done: ``snapshot``, or ``None`` if it failed.

        Returns the new snapshot's newest page, then the answers to the requests
        that waited, in order, up to one that asks for yet another snapshot (the
        desk is then capturing again). A failed capture's ``HISTORY_UNAVAILABLE``
        is the caller's to send, before these.

        Raises:
            ProtocolViolation: a waiting request is invalid once its turn comes.
        """
        self.capturing = False
        pages: list[HistoryPage] = []
        if snapshot is not None:
            self.snapshot = snapshot
            pages.append(self._page(snapshot, None))
        while self._waiting and not self.capturing:
            answer = self._answer(self._waiting.popleft())
            if isinstance(answer, HistoryPage):
                pages.append(answer)
        return pages

    def _answer(self, message: History) -> HistoryPage | HistoryStep:
        if message.history_id is None:
            self.capturing = True
            return HistoryStep.CAPTURE
        snapshot = self.snapshot
        if snapshot is None or message.history_id != snapshot.id:
            raise ProtocolViolation("history names an unknown snapshot")
        return self._page(snapshot, message.offset)

    def _page(self, snapshot: HistorySnapshot, offset: int | None) -> HistoryPage:
        start, lines = snapshot.page_before(offset)
        return HistoryPage(
            history_id=snapshot.id,
            offset=start,
            lines=lines,
            total=snapshot.total,
            subscription_id=self.subscription_id,
            captured_at=snapshot.captured_at,
            truncated=snapshot.truncated,
        )
