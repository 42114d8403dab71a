"""Which panes an agliteterm instance has: ``ping``, the ``tree``, the ``events`` cursor. I/O.

agliteterm pushes nothing, so discovery polls, cheaply:

* ``ping`` on every (re)connect names the product (lite or the full app);
* ``events {since}`` about every second: one short answer while nothing
  happens. Any new entry (a session created or closed, a status, a tree
  change) has the tree read again; so does a cursor that went **backwards**
  (agliteterm restarted, its in-memory log began again) and a gap (entries
  fell off its 1000-entry ring before we read them);
* ``tree`` then, and also every second while somebody watches a pane (a
  window resize changes the grid without an event) and every 15 s otherwise
  as a safety net. A build without ``events`` gets the tree every second.

What the build offers (:class:`~mirror_host.panes.agliteterm.offer.Offer`:
styles, a screen-only read, the grid, status times) is learned from its
answers, here from the tree and from the source's reads; what it lacks is said
once in the log, with what a newer build would add.

The tree is the truth; events only say when to read it. An unreachable or
failing agliteterm is retried with capped backoff, complaining once per
outage; panes stay listed meanwhile (it may only be restarting), and the
next tree read drops the ones that are really gone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from uuid import UUID

import trio

from mirror_host.panes.agliteterm.client import AgliteClient
from mirror_host.panes.agliteterm.offer import Offer
from mirror_host.panes.agliteterm.protocol import (
    AgliteError,
    AgliteUnknownCommand,
    Dialect,
    SessionPane,
    dialect_of,
    pane_uuid,
    parse_events,
    parse_tree,
)
from mirror_host.panes.follow import Follower

__all__ = ["EVENTS_SECONDS", "AgliteDiscovery", "Listed"]

logger = logging.getLogger(__name__)

#: How often the events cursor is read.
EVENTS_SECONDS = 1.0
#: How often the tree is read while a pane is watched (its grid may change silently).
WATCHED_TREE_SECONDS = 1.0
#: How often the tree is read anyway.
SAFETY_TREE_SECONDS = 15.0
_LANE = "discovery"

#: Called after every tree read with the panes (by id, in tree order) and the
#: time the read began.
Listed = Callable[[dict[UUID, SessionPane], float], None]


class AgliteDiscovery:
    """Follows one agliteterm instance's panes; the latest tree in memory."""

    def __init__(
        self, client: AgliteClient, on_listed: Listed, *, watching: Callable[[], bool]
    ) -> None:
        self.client = client
        self.dialect: Dialect | None = None
        self.version: str | None = None
        #: Listed panes in tree order, by their stable id.
        self.panes: dict[UUID, SessionPane] = {}
        #: Whether this build answers ``events`` (``None`` until asked).
        self.has_events: bool | None = None
        self.cursor = 0
        self.restarts_seen = 0
        #: What this agliteterm offers, as its answers showed.
        self.offer = Offer()
        self._said: tuple[str, ...] = ()
        self._on_listed = on_listed
        self._watching = watching
        self._repoll = trio.Event()
        self._listed = trio.Event()
        #: Retries agliteterm not running, restarting or failing; knows why.
        self._follower = Follower(f"agliteterm at {client.endpoint}")

    @property
    def problem(self) -> str | None:
        """Why agliteterm cannot be followed now (``None`` while it can)."""
        return self._follower.problem

    async def run(self) -> None:
        """Follow agliteterm until cancelled, reconnecting with capped backoff (a
        :meth:`request_poll` meanwhile tries again at once)."""
        await self._follower.run(
            self._follow, on_failure=self._listed.set, wake=lambda: self._repoll
        )

    async def wait_listed(self) -> None:
        """Wait for the first discovery attempt (tests and start-up)."""
        await self._listed.wait()

    def request_poll(self) -> None:
        """Read the tree again soon (a pane seemed gone, a size seemed wrong)."""
        self._repoll.set()

    async def poll(self, *, lane: str = _LANE) -> None:
        """Read the tree once and hand it to ``on_listed``.

        Raises:
            PaneSourceError: agliteterm could not be read.
        """
        started = trio.current_time()
        result = await self.client.call("tree", lane=lane)
        self.learn(self.offer.with_tree(result))
        endpoint = self.client.endpoint
        self.panes = {pane_uuid(endpoint, pane.pane_id): pane for pane in parse_tree(result)}
        self._on_listed(self.panes, started)
        self._listed.set()

    async def _follow(self) -> None:
        self._repoll = trio.Event()  # a retry asked for is this one
        try:
            pong = await self.client.call("ping", lane=_LANE)
        except AgliteError as exc:  # answers, but not ping: take it for lite
            logger.debug("agliteterm refused ping: %s", exc)
            pong = None
        dialect = dialect_of(pong)
        self.version = pong if isinstance(pong, str) else None
        if dialect is not self.dialect or self._follower.in_outage:
            logger.info(
                "connected to %s (%s dialect) at %s",
                self.version or "agliteterm",
                dialect.value,
                self.client.endpoint,
            )
        self.dialect = dialect
        self.learn(self.offer.connected(dialect, self.version))
        await self._read_events(first=True)
        await self.poll()
        self._follower.reached()  # read whole again: the next outage is news
        last_tree = trio.current_time()
        while True:
            self._repoll = trio.Event()
            with trio.move_on_after(EVENTS_SECONDS):
                await self._repoll.wait()
            changed = await self._read_events() or self._repoll.is_set()
            now = trio.current_time()
            due = now - last_tree >= (
                WATCHED_TREE_SECONDS if self._watching() else SAFETY_TREE_SECONDS
            )
            if changed or due:
                await self.poll()
                last_tree = trio.current_time()

    def learn(self, offer: Offer) -> None:
        """Keep what an answer showed; say once what this build lacks, when that is new."""
        self.offer = offer
        missing = offer.missing()
        if missing and any(gap not in self._said for gap in missing):
            logger.warning(
                "%s at %s is an older build; a newer one would add: %s",
                offer.version or "agliteterm",
                self.client.endpoint,
                "; ".join(missing),
            )
            self._said = tuple(dict.fromkeys((*self._said, *missing)))

    async def _read_events(self, *, first: bool = False) -> bool:
        """Read the log after the cursor; whether the tree must be read again."""
        if self.has_events is False:
            return True
        since = self.cursor
        try:
            batch = parse_events(
                await self.client.call("events", args={"since": since}, lane=_LANE)
            )
        except AgliteUnknownCommand:
            logger.info("this agliteterm has no events verb; reading its tree every second")
            self.has_events = False
            return True
        except AgliteError as exc:
            logger.debug("agliteterm refused events: %s", exc)
            return True
        self.has_events = True
        self.cursor = batch.cursor
        if batch.restarted(since):
            self.restarts_seen += 1
            logger.info(
                "agliteterm's event cursor went back from %d to %d (it restarted); "
                "reading its sessions again",
                since,
                batch.cursor,
            )
            return True
        if first:
            return True
        if batch.missed(since):
            logger.info("missed agliteterm events %d…%d; reading its sessions again", since + 1,
                        batch.events[0].seq - 1)  # fmt: skip
            return True
        return bool(batch.events)
