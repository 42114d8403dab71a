"""The source-bound requests of a connection: list, input, scroll, commands. I/O (Trio).

:meth:`Hub.handle_event <mirror_host.host.hub.Hub.handle_event>` hands each one
here and returns at once, so the connection's reader never waits for a pane
source. The work runs in the connection's own tasks
(:meth:`Connection.start_soon`), in the order Prowl's clients rely on:

* ``list`` and ``subscribe`` go through one ordered lane
  (:meth:`SourceRequests.in_order`), so a ``panes`` reply never overtakes the
  ``subscribed`` of a subscribe sent before it;
* input bytes go through another, so a pane receives keystrokes in the order
  they were typed, however slow one write is;
* a scroll runs in its own task; the session already allows only one pending
  scroll (``SCROLL_BUSY`` for another);
* a command goes to the command service, which runs each in its own task.

Every source call has a deadline, and one that passes it ends in the protocol's
own answer for that request (an empty ``panes``, ``SCROLL_UNAVAILABLE``, input
dropped and logged), never in a closed connection.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol
from uuid import UUID

import trio

from mirror_host.capture.values import Capability
from mirror_host.commands.handler import CommandHandler
from mirror_host.control import PaneDescriptor
from mirror_host.errors import InputRefused, PaneNotFound, PaneSourceError
from mirror_host.host.connection import Connection
from mirror_host.host.lanes import Lane
from mirror_host.panes.source import PaneSource
from mirror_host.session.events import (
    CommandRequested,
    InputReceived,
    ReceiptRequested,
    ScrollRequested,
)

__all__ = [
    "BASE_CAPABILITIES",
    "INPUT_SECONDS",
    "LIST_SECONDS",
    "MAX_PENDING_INPUT_BYTES",
    "SCROLL_SECONDS",
    "Leases",
    "SourceRequests",
]

logger = logging.getLogger(__name__)

BASE_CAPABILITIES = ("vt-v1", "text-v1", "takeover", "refresh")

# Deadlines for source calls. Each ends in the protocol's own answer to the
# request it serves; none closes the connection.
#: Listing panes (every source keeps its list in memory; this is a safety net).
LIST_SECONDS = 5.0
#: Applying a scroll; past it, ``SCROLL_UNAVAILABLE: Host could not scroll``.
SCROLL_SECONDS = 5.0
#: Writing one input message to the pane; past it, that message is dropped
#: (logged) and the next one is written.
INPUT_SECONDS = 10.0
#: Input waiting for a slow pane; more is dropped (logged) instead of queued.
MAX_PENDING_INPUT_BYTES = 1024 * 1024
#: ``list``/``subscribe`` requests waiting in one connection's lane.
_MAX_PENDING_CONTROL = 64


class Leases(Protocol):
    """The hub's leases, as the requests see them."""

    def is_held(self, pane_id: UUID) -> bool:
        """Somebody holds ``pane_id`` (``busy`` in ``panes``)."""
        ...

    def pane_closed(self, connection: Connection) -> None:
        """The source says the connection's pane is gone: end its lease."""
        ...

    def scrolled(self, connection: Connection) -> None:
        """A scroll was applied: the connection's sampler has new deadlines."""
        ...


@dataclass(eq=False)
class _Lanes:
    """One connection's ordered work."""

    control: Lane
    input: Lane
    #: Input was dropped since the last message about it (log once per episode).
    input_dropped: bool = False


class SourceRequests:
    """List, input, scroll and commands for every connection of one host."""

    def __init__(
        self, source: PaneSource, commands: CommandHandler, leases: Leases, *, host_run_id: UUID
    ) -> None:
        self.source = source
        self.commands = commands
        self.leases = leases
        self.host_run_id = host_run_id
        self._lanes: dict[Connection, _Lanes] = {}

    @property
    def capabilities(self) -> tuple[str, ...]:
        """What ``panes.capabilities`` advertises, in Prowl's order."""
        optional = tuple(c for c in Capability.ORDER if c in self.source.capabilities)
        return BASE_CAPABILITIES + tuple(self.commands.capabilities) + optional

    def release(self, connection: Connection) -> None:
        """The connection closed: forget its lanes (their tasks end with it)."""
        self._lanes.pop(connection, None)

    def _lanes_of(self, connection: Connection) -> _Lanes:
        lanes = self._lanes.get(connection)
        if lanes is None:
            lanes = _Lanes(
                control=Lane(connection, max_pending=_MAX_PENDING_CONTROL),
                input=Lane(connection, max_pending=MAX_PENDING_INPUT_BYTES),
            )
            self._lanes[connection] = lanes
        return lanes

    # ------------------------------------------------------------ list (and subscribe)

    def in_order(self, connection: Connection, work: Callable[[], Awaitable[None]]) -> None:
        """Queue a ``list`` or ``subscribe`` behind the ones before it."""
        if not self._lanes_of(connection).control.push(work):
            # Each of these waits for an answer before the next; 64 at once is a flood.
            connection.session.close("too many list/subscribe requests waiting")

    async def list(self, connection: Connection) -> None:
        """Answer ``list``: the panes sorted by title (none past :data:`LIST_SECONDS`)."""
        panes = []
        with trio.move_on_after(LIST_SECONDS) as deadline:
            try:
                panes = await self.source.list_panes()
            except PaneSourceError as exc:
                logger.warning("listing panes failed: %s", exc)
        if deadline.cancelled_caught:
            logger.warning("listing panes took more than %g s; answered with none", LIST_SECONDS)
        descriptors = tuple(
            PaneDescriptor(
                id=pane.id,
                title=pane.title,
                directory=pane.directory,
                busy=self.leases.is_held(pane.id),
                project_name=pane.project_name,
                subtitle=pane.subtitle,
            )
            for pane in sorted(panes, key=lambda p: p.title)
        )
        connection.session.send_panes(descriptors, self.capabilities, self.host_run_id)

    # ------------------------------------------------------------ input

    def input(self, connection: Connection, event: InputReceived) -> None:
        """Queue input for the pane, in the order typed (dropped, logged, past 1 MiB)."""
        lanes = self._lanes_of(connection)

        async def write() -> None:
            await self._write_input(connection, event)

        if lanes.input.push(write, cost=len(event.data)):
            lanes.input_dropped = False
        elif not lanes.input_dropped:
            lanes.input_dropped = True
            logger.warning(
                "%s: the pane is not taking input (%d bytes waiting); dropping input",
                connection.label,
                lanes.input.pending,
            )

    async def _write_input(self, connection: Connection, event: InputReceived) -> None:
        with trio.move_on_after(INPUT_SECONDS) as deadline:
            try:
                await self.source.write(event.pane_id, event.data)
            except PaneNotFound:
                self.leases.pane_closed(connection)
            except InputRefused as exc:
                logger.warning("%s input not written: %s", connection.label, exc)
            except PaneSourceError as exc:
                # Nobody can say how much went: never "not written", never sent again.
                logger.warning(
                    "%s input may be partly written (%d bytes, not sent again): %s",
                    connection.label,
                    len(event.data),
                    exc,
                )
        if deadline.cancelled_caught:
            logger.warning(
                "%s input not finished within %g s and abandoned; it may be partly written "
                "(%d bytes, not sent again)",
                connection.label,
                INPUT_SECONDS,
                len(event.data),
            )

    # ------------------------------------------------------------ scroll

    async def scroll(self, connection: Connection, event: ScrollRequested) -> None:
        """Apply a scroll; the frame after it settles completes it (session/lease.py)."""
        session = connection.session
        problem: str | None = None
        with trio.move_on_after(SCROLL_SECONDS) as deadline:
            try:
                await self.source.scroll(event.pane_id, event.direction)
            except PaneNotFound:
                self.leases.pane_closed(connection)
                return
            except PaneSourceError as exc:
                problem = str(exc)
        if deadline.cancelled_caught:
            problem = f"no answer within {SCROLL_SECONDS:g} s"
        if problem is not None:
            logger.info("%s scroll failed: %s", connection.label, problem)
            session.scroll_failed(event.request_id)
            return
        session.scroll_applied(event.request_id, trio.current_time())
        self.leases.scrolled(connection)  # the settle and force deadlines start now

    # ------------------------------------------------------------ commands

    async def command(
        self, connection: Connection, event: CommandRequested | ReceiptRequested
    ) -> None:
        """Hand a command or receipt query to the command service (it never waits)."""
        if isinstance(event, CommandRequested):
            self.commands.handle(connection.session, event)
        else:
            self.commands.receipt(connection.session, event)
