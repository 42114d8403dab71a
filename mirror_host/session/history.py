"""Frozen history snapshots, their 200-line pages, and the reads behind them. Pure.

A snapshot keeps the newest 2 MiB of UTF-8 (a split leading character is
dropped), is split on ``\\n`` and never changes. Pages are the 200 lines just
before an offset, so a client walking backwards sees contiguous pages that end
exactly where the previous one began (docs/protocol.md §4.5).

:class:`HistoryReads` decides, per pane, whether a new snapshot starts a source
read, waits for the one under way, or takes one that finished after its asker
had been told ``HISTORY_UNAVAILABLE`` (Android gives up at 8 s, so the host
answers within 6 s and lets a slow read finish in the background).
"""

from __future__ import annotations

import enum
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar
from uuid import UUID

from mirror_host.errors import ProtocolViolation
from mirror_host.panes.model import MAX_HISTORY_BYTES

__all__ = [
    "MAX_SNAPSHOT_BYTES",
    "PAGE_LINES",
    "HistoryPlan",
    "HistoryReads",
    "HistorySnapshot",
    "ReadAction",
    "keep_newest_utf8",
]

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
