"""New history snapshots: answered by a deadline, read in the background. I/O (Trio).

History is answered within :data:`HISTORY_SECONDS` of its request, because
Android gives up at 8 s and then treats a late answer as fatal. The source read
itself runs in this reader's own nursery, which lives as long as the hub (a read
must outlive the request, and the connection that asked: Android reconnects):
past the answer deadline the client gets ``HISTORY_UNAVAILABLE`` while the read
goes on for up to :data:`HISTORY_READ_SECONDS`; a read that finishes unwanted is
kept for :data:`HISTORY_KEEP_SECONDS` and answers the next history request for
that pane at once. :class:`~mirror_host.session.history.HistoryReads` (pure)
decides; at most one read under way and one result kept per pane.

Requests that arrive while a snapshot is being captured wait in the session
(its ``HistoryDesk``) and are answered in order after it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from uuid import UUID

import trio

from mirror_host.capture.values import Capability, HistoryCapture
from mirror_host.errors import PaneSourceError
from mirror_host.host.connection import Connection
from mirror_host.panes.source import PaneSource
from mirror_host.session.history import HistoryReads, ReadAction

__all__ = [
    "HISTORY_KEEP_SECONDS",
    "HISTORY_READ_SECONDS",
    "HISTORY_SECONDS",
    "HistoryReader",
]

logger = logging.getLogger(__name__)

#: A new history snapshot is answered within this long of its request; past it,
#: ``HISTORY_UNAVAILABLE`` (Android gives up at 8 s and treats a later answer as
#: fatal), while the read itself goes on in the background.
HISTORY_SECONDS = 6.0
#: The source read behind a snapshot (a big Herdr scrollback can take seconds,
#: and Herdr holds an ANSI read back while another client's text harvest runs,
#: up to 20 s). Above the Herdr client's 30 s for such reads, so a slow read
#: finishes for the next request, and that limit's precise error is what gets logged.
HISTORY_READ_SECONDS = 35.0
#: A read that finished after its askers were answered is kept this long for
#: the next request for the pane (a retry a few seconds later gets it at once).
HISTORY_KEEP_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class _HistoryRead:
    """What one background history read found, and when (the snapshot's ``capturedAt``)."""

    capture: HistoryCapture
    captured_at: float


@dataclass(eq=False)
class _ReadUnderWay:
    done: trio.Event = field(default_factory=trio.Event)
    result: _HistoryRead | None = None


class HistoryReader:
    """New history snapshots for every connection of one host."""

    def __init__(self, source: PaneSource, *, wall_clock: Callable[[], float]) -> None:
        self.source = source
        self._wall_clock = wall_clock
        self.reads: HistoryReads[_HistoryRead] = HistoryReads(keep_seconds=HISTORY_KEEP_SECONDS)
        self._under_way: dict[int, _ReadUnderWay] = {}
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Host the background reads until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    async def answer(
        self, connection: Connection, pane_of: Callable[[Connection], UUID | None]
    ) -> None:
        """Capture snapshots until no request waits for another (session order).

        ``pane_of`` says which pane the connection holds now (none: the lease ended).
        """
        session = connection.session
        another = True
        while another:
            pane_id = pane_of(connection)
            read = None
            if pane_id is not None and Capability.HISTORY in self.source.capabilities:
                asked = session.history_asked_at
                answer_by = (asked if asked is not None else trio.current_time()) + HISTORY_SECONDS
                read = await self._read(connection, pane_id, answer_by)
            if read is None:
                another = session.history_unavailable()
            else:
                another = session.history_captured(
                    uuid.uuid4(),
                    read.capture.text,
                    truncated=read.capture.truncated,
                    captured_at=read.captured_at,
                )

    async def _read(
        self, connection: Connection, pane_id: UUID, answer_by: float
    ) -> _HistoryRead | None:
        """The pane's history by ``answer_by``, or ``None`` (the read may go on without us)."""
        plan = self.reads.ask(pane_id, trio.current_time())
        if plan.action is ReadAction.READY:
            return plan.result
        if plan.action is ReadAction.START:
            assert self._nursery is not None, "requests come only once the hub runs"
            under_way = self._under_way[plan.read] = _ReadUnderWay()
            self._nursery.start_soon(self._background, pane_id, plan.read, under_way)
        else:
            under_way = self._under_way[plan.read]
        try:
            with trio.move_on_at(answer_by):
                await under_way.done.wait()
        finally:
            if not under_way.done.is_set():  # late, or this connection went away
                self.reads.give_up(pane_id, plan.read)
        if not under_way.done.is_set():
            logger.info(
                "%s history unavailable: no answer within %g s; the read goes on for the next"
                " request",
                connection.label,
                HISTORY_SECONDS,
            )
            return None
        return under_way.result

    async def _background(self, pane_id: UUID, read_number: int, under_way: _ReadUnderWay) -> None:
        """One source read, in the reader's nursery; its result is kept a while if nobody waits."""
        with trio.move_on_after(HISTORY_READ_SECONDS) as deadline:
            try:
                capture = await self.source.history(pane_id)
                under_way.result = _HistoryRead(capture, self._wall_clock())
            except PaneSourceError as exc:
                logger.info("history of pane %s unavailable: %s", pane_id, exc)
            except Exception:
                # This task belongs to the hub: a source bug must not take the host down.
                logger.exception("reading the history of pane %s failed", pane_id)
        if deadline.cancelled_caught:
            logger.info(
                "history of pane %s unavailable: no answer within %g s",
                pane_id,
                HISTORY_READ_SECONDS,
            )
        del self._under_way[read_number]
        kept_until = self.reads.finish(pane_id, read_number, under_way.result, trio.current_time())
        under_way.done.set()
        if kept_until is not None:
            # Bounded: whatever nobody takes is dropped when its time is up.
            await trio.sleep_until(kept_until)
            self.reads.expire(trio.current_time())
