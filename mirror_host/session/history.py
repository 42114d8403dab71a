"""History snapshots, their 200-line pages and the requests for them
(docs/protocol.md §4.5). Pure.

A snapshot keeps the newest 2 MiB of UTF-8 (a split leading character is
dropped), is split on ``\\n`` and never changes. Pages are the 200 lines just
before an offset, so a client walking backwards sees contiguous pages that end
exactly where the previous one began. A lease's :class:`HistoryDesk` answers
the requests in the order they came, queueing them behind a capture, and
remembers when the request behind the capture under way arrived (the client's
timer starts then).

:class:`HistoryReads` decides, per pane, whether a new snapshot starts a source
read, waits for the one under way, or takes one that finished after its asker
had been told ``HISTORY_UNAVAILABLE`` (Android gives up at 8 s, so the host
answers within 6 s and lets a slow read finish in the background).
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar
from uuid import UUID

from mirror_host.capture.values import utf8_text
from mirror_host.control import History, HistoryPage
from mirror_host.errors import ProtocolViolation
from mirror_host.limits import MAX_HISTORY_BYTES

__all__ = [
    "MAX_SNAPSHOT_BYTES",
    "MAX_WAITING_HISTORY_REQUESTS",
    "PAGE_LINES",
    "HistoryDesk",
    "HistoryPlan",
    "HistoryReads",
    "HistorySnapshot",
    "HistoryStep",
    "ReadAction",
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
        """Freeze ``text`` (as valid UTF-8). An empty history is one empty line (``total`` = 1)."""
        kept, cut = keep_newest_utf8(utf8_text(text))
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
        #: When the request the capture under way answers arrived (while capturing).
        self.asked_at: float | None = None
        #: That request's ``offset``: its page of the new snapshot ends there, as
        #: Prowl's host pages a new snapshot too (``None``: the newest page).
        self._capture_offset: int | None = None
        #: Requests waiting behind the capture, each with when it arrived.
        self._waiting: deque[tuple[History, float]] = deque()

    def request(self, message: History, now: float) -> HistoryPage | HistoryStep:
        """Take a ``history`` message that arrived at ``now``: its page now, or what it needs.

        Raises:
            ProtocolViolation: too many requests waiting, an unknown snapshot, or
                an offset outside it.
        """
        if self.capturing:
            if len(self._waiting) >= MAX_WAITING_HISTORY_REQUESTS:
                raise ProtocolViolation("too many history requests waiting for a capture")
            self._waiting.append((message, now))
            return HistoryStep.WAIT
        return self._answer(message, now)

    def finish(self, snapshot: HistorySnapshot | None) -> list[HistoryPage]:
        """The capture under way is done: ``snapshot``, or ``None`` if it failed.

        Returns the new snapshot's page for the request that asked for it (the
        newest page, or the one before its ``offset``), then the answers to the
        requests that waited, in order, up to one that asks for yet another
        snapshot (the desk is then capturing again). A failed capture's
        ``HISTORY_UNAVAILABLE`` is the caller's to send, before these (its
        request's ``offset`` is then never judged, as in Prowl's host).

        Raises:
            ProtocolViolation: the request's ``offset`` is outside the new
                snapshot, or a waiting request is invalid once its turn comes.
        """
        self.capturing = False
        pages: list[HistoryPage] = []
        if snapshot is not None:
            self.snapshot = snapshot
            pages.append(self._page(snapshot, self._capture_offset))
        while self._waiting and not self.capturing:
            answer = self._answer(*self._waiting.popleft())
            if isinstance(answer, HistoryPage):
                pages.append(answer)
        return pages

    def _answer(self, message: History, arrived: float) -> HistoryPage | HistoryStep:
        if message.history_id is None:
            self.capturing = True
            self.asked_at = arrived
            self._capture_offset = message.offset
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


T = TypeVar("T")


class ReadAction(enum.Enum):
    """What one new-snapshot request does about the pane's source read."""

    #: Nothing under way or kept: start a read (``HistoryPlan.read`` names it).
    START = "start"
    #: A read is under way: wait for that one (never a second read of the pane).
    JOIN = "join"
    #: A read finished after its askers stopped waiting: answer with it at once.
    READY = "ready"


@dataclass(frozen=True, slots=True)
class HistoryPlan(Generic[T]):
    """The answer of :meth:`HistoryReads.ask`."""

    action: ReadAction
    #: The read to start or join (``START``, ``JOIN``).
    read: int = 0
    #: The kept result (``READY``).
    result: T | None = None


@dataclass(slots=True)
class _Pending:
    read: int
    waiters: int


@dataclass(frozen=True, slots=True)
class _Kept(Generic[T]):
    result: T
    until: float


class HistoryReads(Generic[T]):
    """Per pane, at most one source read under way and one finished result kept.

    A read's askers each wait a bounded time; whoever is still waiting when it
    finishes gets its result. A read that finishes with nobody waiting (they
    were all answered ``HISTORY_UNAVAILABLE``) is kept for ``keep_seconds``
    and answers the next request for that pane at once, which takes it. A
    failed read keeps nothing. The caller runs the reads and calls
    :meth:`finish` for each; :meth:`expire` drops what outlived its time.
    """

    def __init__(self, *, keep_seconds: float) -> None:
        self.keep_seconds = keep_seconds
        self._pending: dict[Hashable, _Pending] = {}
        self._kept: dict[Hashable, _Kept[T]] = {}
        self._reads = 0

    def ask(self, pane: Hashable, now: float) -> HistoryPlan[T]:
        """A new snapshot is asked for ``pane``: start, join, or take a kept result."""
        self.expire(now)
        kept = self._kept.pop(pane, None)
        if kept is not None:
            return HistoryPlan(ReadAction.READY, result=kept.result)
        pending = self._pending.get(pane)
        if pending is not None:
            pending.waiters += 1
            return HistoryPlan(ReadAction.JOIN, read=pending.read)
        self._reads += 1
        self._pending[pane] = _Pending(self._reads, waiters=1)
        return HistoryPlan(ReadAction.START, read=self._reads)

    def give_up(self, pane: Hashable, read: int) -> None:
        """One asker of ``read`` stopped waiting (answered without it, or gone)."""
        pending = self._pending.get(pane)
        if pending is not None and pending.read == read and pending.waiters > 0:
            pending.waiters -= 1

    def finish(self, pane: Hashable, read: int, result: T | None, now: float) -> float | None:
        """``read`` ended with ``result`` (``None``: it failed).

        Returns when the result stops being kept, if it is kept (nobody was
        still waiting for it); ``None`` when the waiters take it or it failed.
        """
        pending = self._pending.get(pane)
        if pending is None or pending.read != read:
            return None
        del self._pending[pane]
        if pending.waiters > 0 or result is None:
            return None
        until = now + self.keep_seconds
        self._kept[pane] = _Kept(result, until)
        return until

    def expire(self, now: float) -> None:
        """Drop kept results whose time is up."""
        for pane in [p for p, kept in self._kept.items() if kept.until <= now]:
            del self._kept[pane]

    def pending(self, pane: Hashable) -> bool:
        """Whether a read of ``pane`` is under way."""
        return pane in self._pending

    def kept(self, pane: Hashable) -> bool:
        """Whether a finished result for ``pane`` waits to be taken."""
        return pane in self._kept
