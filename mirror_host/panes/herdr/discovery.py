"""Which panes a Herdr session has: snapshots, the event stream, reconnects. I/O.

``session.snapshot`` (or ``workspace.list`` + ``tab.list`` + ``pane.list`` on
servers without it) is read on every (re)connect, again whenever the long-lived
``events.subscribe`` stream reports a lifecycle change (debounced), and
otherwise every few seconds as a safety net: Herdr sends no event when the
attached client resizes a pane, so only a fresh snapshot shows that. Lifecycle
events never change state by themselves: the snapshot is the truth. The one
exception is ``pane.scroll_changed`` (followed for the panes the source
mirrors): it carries the pane's new scroll position, which is handed to the
``on_scroll`` callback at once, so scroll bounds stay live between snapshots.

Each snapshot is handed to the ``on_listed`` callback, which reconciles what
the source mirrors. Polls (discovery's own, and the source's after a create or
a pane not found) run one at a time, so snapshots are applied in the order
they were read. Pane ids come from :class:`~mirror_host.panes.herdr.identity.PaneIdentities`
(public pane ids, kept across Herdr restarts). An unreachable or refusing Herdr
is retried with capped backoff, complaining once per outage.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import UUID

import trio

from mirror_host.errors import PaneSourceError
from mirror_host.panes.follow import Follower
from mirror_host.panes.herdr.client import HerdrClient
from mirror_host.panes.herdr.identity import PaneIdentities
from mirror_host.panes.herdr.protocol import (
    HerdrError,
    HerdrPane,
    HerdrUnknownMethod,
    ScrollChange,
    Snapshot,
    pane_labels,
    parse_scroll_changed,
    parse_snapshot,
)
from mirror_host.panes.model import PaneInfo

__all__ = ["LIFECYCLE_EVENTS", "SCROLL_EVENT", "HerdrDiscovery", "Listed"]

logger = logging.getLogger(__name__)

#: Herdr's lifecycle subscriptions (herdr.md §1.4). Servers that lack one reject
#: the whole subscribe; discovery then drops the named type and tries again.
LIFECYCLE_EVENTS = (
    "workspace.created", "workspace.updated", "workspace.metadata_updated", "workspace.renamed",
    "workspace.moved", "workspace.reordered", "workspace.closed", "workspace.focused",
    "worktree.created", "worktree.opened", "worktree.removed",
    "tab.created", "tab.closed", "tab.focused", "tab.renamed", "tab.moved",
    "pane.created", "pane.closed", "pane.updated", "pane.focused", "pane.moved", "pane.exited",
    "pane.agent_detected", "layout.updated",
)  # fmt: skip

#: Pane-scoped: the new scroll position of a pane (since Herdr 0.7.2).
SCROLL_EVENT = "pane.scroll_changed"

_DEBOUNCE_SECONDS = 0.1
_SAFETY_POLL_SECONDS = 10.0
_FAST_POLL_SECONDS = 2.0
_KNOWN_PROTOCOLS = (16, 17, 19, 20, 22)

#: Called after every snapshot read with the snapshot and the time the read began
#: (anything learnt from Herdr after that is newer than the snapshot).
Listed = Callable[[Snapshot, float], None]
#: Called with each ``pane.scroll_changed`` of a followed pane.
ScrollChanged = Callable[[ScrollChange], None]


class HerdrDiscovery:
    """Follows one Herdr session's panes; the latest snapshot and labels in memory."""

    def __init__(
        self, client: HerdrClient, on_listed: Listed, on_scroll: ScrollChanged | None = None
    ) -> None:
        self.client = client
        self.protocol: int | None = None
        self.version: str | None = None
        self.snapshot: Snapshot | None = None
        #: Listed panes in workspace → tab → pane order, by their stable id.
        self.labels: dict[UUID, tuple[HerdrPane, PaneInfo]] = {}
        #: The stable id of each listed pane, by its ``terminal_id``.
        self.ids: dict[str, UUID] = {}
        self.identities = PaneIdentities(str(client.socket_path))
        #: Whether this server has ``pane.scroll`` (``None`` until probed).
        self.has_scroll: bool | None = None
        self._on_listed = on_listed
        self._on_scroll = on_scroll
        #: Panes whose ``pane.scroll_changed`` the stream follows (Herdr pane ids).
        self._scroll_panes: frozenset[str] = frozenset()
        #: False once the server rejected the scroll event type (older than 0.7.2).
        self._scroll_events = True
        self._repoll = trio.Event()
        #: Held from a snapshot's read until it is applied (``poll``).
        self._poll_lock = trio.Lock()
        self._listed = trio.Event()
        self._events_healthy = False
        self._has_snapshot: bool | None = None
        self._event_types = list(LIFECYCLE_EVENTS)
        self._agent_panes: frozenset[str] = frozenset()
        #: Cancelled when the agent panes change, so the event stream is renewed.
        self._resubscribe = trio.CancelScope()
        #: Retries Herdr not running, restarting or refusing; knows why.
        self._follower = Follower()

    @property
    def socket_path(self) -> Path:
        return self.client.socket_path

    @property
    def problem(self) -> str | None:
        """Why Herdr cannot be followed right now (``None``: it can, or not tried yet)."""
        return self._follower.problem

    async def run(self) -> None:
        """Follow Herdr until cancelled, reconnecting with capped backoff."""
        await self._follower.run(self._follow, on_failure=self._listed.set)

    async def wait_listed(self) -> None:
        """Wait for the first discovery attempt (tests and start-up)."""
        await self._listed.wait()

    async def poll(self) -> None:
        """Read the whole session once and hand it to ``on_listed``.

        Raises:
            PaneSourceError: Herdr could not be read.
        """
        # One poll at a time (discovery, create, a pane that moved each poll): a
        # snapshot read before another but applied after it would take the panes
        # created meanwhile for closed ones, and PaneIdentities retires their ids.
        async with self._poll_lock:
            started = trio.current_time()
            snapshot = await self._read_snapshot()
            self.snapshot = snapshot
            self.ids = self.identities.assign(snapshot.panes)
            self.labels = {info.id: (pane, info) for pane, info in pane_labels(snapshot, self.ids)}
            self._on_listed(snapshot, started)
        agents = frozenset(p.pane_id for p in snapshot.panes if p.agent)
        if agents != self._agent_panes:
            self._agent_panes = agents
            self._resubscribe.cancel()  # the event stream must follow the new agent panes
        self._listed.set()

    def follow_scroll(self, pane_ids: frozenset[str]) -> None:
        """Follow ``pane.scroll_changed`` for exactly these panes (renews the stream)."""
        if pane_ids != self._scroll_panes:
            self._scroll_panes = pane_ids
            self._resubscribe.cancel()

    def _followed_scroll(self) -> frozenset[str]:
        return self._scroll_panes if self._scroll_events else frozenset()

    async def _follow(self) -> None:
        pong = await self.client.call("ping")
        self.version = pong.get("version") if isinstance(pong.get("version"), str) else None
        protocol = pong.get("protocol")
        self.protocol = protocol if isinstance(protocol, int) else None
        if self.protocol not in _KNOWN_PROTOCOLS:
            logger.info("Herdr protocol %s is unknown to mirror-host; carrying on", self.protocol)
        logger.info(
            "connected to Herdr %s (protocol %s) at %s",
            self.version,
            self.protocol,
            self.socket_path,
        )
        await self._detect_scroll()
        await self.poll()
        self._follower.reached()  # read whole again: the next outage is news
        failure: PaneSourceError | None = None
        async with trio.open_nursery() as inner:
            inner.start_soon(self._follow_events)
            try:
                while True:
                    self._repoll = trio.Event()
                    interval = _SAFETY_POLL_SECONDS if self._events_healthy else _FAST_POLL_SECONDS
                    with trio.move_on_after(interval):
                        await self._repoll.wait()
                        await trio.sleep(_DEBOUNCE_SECONDS)
                    await self.poll()
            except PaneSourceError as exc:
                # Raised outside the nursery, so run() sees the error itself and
                # not an exception group around it.
                failure = exc
                inner.cancel_scope.cancel()
        if failure is not None:
            raise failure

    async def _detect_scroll(self) -> None:
        if self.has_scroll is not None:
            return
        try:
            await self.client.call(
                "pane.scroll", {"pane_id": "mirror-host-probe", "offset_from_bottom": 0}
            )
            self.has_scroll = True
        except HerdrUnknownMethod:
            self.has_scroll = False
        except HerdrError:
            self.has_scroll = True  # it knows the method; the probe pane just does not exist

    async def _read_snapshot(self) -> Snapshot:
        if self._has_snapshot is not False:
            try:
                result = await self.client.call("session.snapshot")
                self._has_snapshot = True
                snap = result.get("snapshot")
                snap = snap if isinstance(snap, dict) else {}
                protocol = snap.get("protocol")
                return parse_snapshot(
                    workspaces=snap.get("workspaces"),
                    tabs=snap.get("tabs"),
                    panes=snap.get("panes"),
                    layouts=snap.get("layouts"),
                    protocol=protocol if isinstance(protocol, int) else None,
                )
            except HerdrUnknownMethod:
                logger.info(
                    "this Herdr has no session.snapshot; listing workspaces, tabs and panes"
                )
                self._has_snapshot = False
        workspaces = await self.client.call("workspace.list")
        tabs = await self.client.call("tab.list")
        panes = await self.client.call("pane.list")
        return parse_snapshot(
            workspaces=workspaces.get("workspaces"),
            tabs=tabs.get("tabs"),
            panes=panes.get("panes"),
            protocol=self.protocol,
        )

    async def _follow_events(self) -> None:
        while True:
            agents = self._agent_panes
            scrolled = self._followed_scroll()
            subscriptions: list[dict[str, Any]] = [{"type": t} for t in self._event_types]
            subscriptions += [
                {"type": "pane.agent_status_changed", "pane_id": pane_id}
                for pane_id in sorted(agents)
            ]
            subscriptions += [{"type": SCROLL_EVENT, "pane_id": p} for p in sorted(scrolled)]
            try:
                with trio.CancelScope() as self._resubscribe:
                    if self._agent_panes != agents or self._followed_scroll() != scrolled:
                        continue  # changed while we were (re)connecting
                    async with self.client.subscribe(subscriptions) as events:
                        self._events_healthy = True
                        async for event in events:
                            change = parse_scroll_changed(event)
                            if change is None:
                                self._repoll.set()
                            elif self._on_scroll is not None:
                                self._on_scroll(change)
                if self._resubscribe.cancelled_caught:
                    continue  # the followed panes changed: subscribe again with them
            except HerdrUnknownMethod:
                logger.info(
                    "this Herdr has no event stream; polling every %g s", _FAST_POLL_SECONDS
                )
                self._events_healthy = False
                return
            except HerdrError as exc:
                dropped = self._drop_unknown_event_type(exc)
                if not dropped:
                    logger.info("Herdr refused the event subscription: %s", exc)
                    self._events_healthy = False
                    await trio.sleep(_FAST_POLL_SECONDS)
                continue
            except PaneSourceError as exc:  # unreachable, or a malformed stream
                logger.debug("Herdr event stream ended: %s", exc)
                self._events_healthy = False
                self._repoll.set()
                await trio.sleep(1.0)
                continue
            self._events_healthy = False
            self._repoll.set()

    def _drop_unknown_event_type(self, exc: HerdrError) -> bool:
        # "unknown variant `workspace.reordered`": an older server; drop that type.
        message = exc.message
        if self._scroll_events and f"`{SCROLL_EVENT}`" in message and "unknown variant" in message:
            self._scroll_events = False
            logger.debug("this Herdr has no %s event; bounds follow snapshots", SCROLL_EVENT)
            return True
        for name in list(self._event_types):
            if f"`{name}`" in exc.message and "unknown variant" in exc.message:
                self._event_types.remove(name)
                logger.debug("this Herdr does not know the %s event; subscribing without it", name)
                return True
        return False
