"""Ordered work for one connection, done beside its reader. I/O (Trio).

A connection's reader must never wait for a pane source, yet some requests must
be carried out in the order they arrived: input bytes for a pane, and a ``list``
followed by a ``subscribe``. A :class:`Lane` is a queue of such work with one
task draining it, started on demand in the connection's own nursery (so it ends
with the connection) and bounded, so a source that stops answering cannot make
a peer's requests pile up without limit.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from typing import Protocol

__all__ = ["Lane", "TaskStarter"]

Work = Callable[[], Awaitable[None]]


class TaskStarter(Protocol):
    """Where a lane starts its drain task (a connection's ``start_soon``)."""

    def start_soon(self, work: Callable[[], Awaitable[object]]) -> None: ...


class Lane:
    """Work items run one at a time, oldest first."""

    def __init__(self, owner: TaskStarter, *, max_pending: int) -> None:
        self._owner = owner
        self.max_pending = max_pending
        self._queue: deque[tuple[Work, int]] = deque()
        #: The cost of everything queued or running.
        self.pending = 0
        self._draining = False

    def push(self, work: Work, *, cost: int = 1) -> bool:
        """Queue ``work``; False (and nothing queued) if it would exceed the bound."""
        if self.pending + cost > self.max_pending:
            return False
        self._queue.append((work, cost))
        self.pending += cost
        if not self._draining:
            self._draining = True
            self._owner.start_soon(self._drain)
        return True

    async def _drain(self) -> None:
        try:
            while self._queue:
                work, cost = self._queue.popleft()
                try:
                    await work()
                finally:
                    self.pending -= cost
        finally:
            self._draining = False
