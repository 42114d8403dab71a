"""The Herdr pane source (``--source herdr``). I/O.

Discovery: ``session.snapshot`` (or ``workspace.list`` + ``tab.list`` +
``pane.list`` on servers without it), read again whenever the long-lived
``events.subscribe`` stream reports a lifecycle change (debounced), on every
reconnect, and otherwise only every few seconds as a safety net. Events never
change state by themselves: the snapshot is the truth.

Frames, push first: while a pane is subscribed, ``herdr terminal session observe``
streams ``terminal.frame`` lines whose ANSI bytes feed the pane's libghostty
screen (a ``full`` frame starts from a reset screen). The subprocess exists only
while someone is subscribed and is stopped by its pid when they leave. Where no
``herdr`` program exists or the stream keeps failing, the pane is polled instead:
``pane.read`` with ``source: visible, format: ansi`` every 200 ms, rows split on
``\\r\\n``, change detected by content (Herdr's ``revision`` is always 0).

Never a ``recent`` read with ``format: text``: that makes Herdr scroll the
operator's own screen to harvest history. History uses ``recent`` with ``ansi``.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import shutil
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

import trio

from mirror_host.control import Representation, ScrollDirection
from mirror_host.errors import (
    PaneNotFound,
    PaneSourceError,
    PaneSourceUnavailable,
    UnsupportedOperation,
)
from mirror_host.panes.herdr.client import HerdrClient, LineReader
from mirror_host.panes.herdr.protocol import (
    HerdrError,
    HerdrPane,
    HerdrPaneNotFound,
    HerdrUnknownMethod,
    Snapshot,
    frame_from_rows,
    grid_size,
    pane_labels,
    parse_pane,
    parse_snapshot,
    scroll_bounds,
    split_rows,
    strip_escapes,
)
from mirror_host.panes.model import (
    POLL_SECONDS,
    Capability,
    HistoryCapture,
    PaneInfo,
    TextCapture,
    VTCapture,
    Watchers,
)
from mirror_host.terminal import Screen

__all__ = ["LIFECYCLE_EVENTS", "HerdrSource"]

logger = logging.getLogger(__name__)

#: Herdr's lifecycle subscriptions (herdr.md §1.4). Servers that lack one reject
#: the whole subscribe; the source then drops the named type and tries again.
LIFECYCLE_EVENTS = (
    "workspace.created", "workspace.updated", "workspace.metadata_updated", "workspace.renamed",
    "workspace.moved", "workspace.reordered", "workspace.closed", "workspace.focused",
    "worktree.created", "worktree.opened", "worktree.removed",
    "tab.created", "tab.closed", "tab.focused", "tab.renamed", "tab.moved",
    "pane.created", "pane.closed", "pane.updated", "pane.focused", "pane.moved", "pane.exited",
    "pane.agent_detected", "layout.updated",
)  # fmt: skip

_DEBOUNCE_SECONDS = 0.1
_SAFETY_POLL_SECONDS = 10.0
_FAST_POLL_SECONDS = 2.0
_MAX_BACKOFF_SECONDS = 30.0
_HISTORY_LINES = 1000
_OBSERVE_FAILURES_BEFORE_POLLING = 3
_OBSERVE_RETRY_SECONDS = 30.0
#: How long a scroll waits for the observe stream to show where it landed.
_SCROLL_FRAME_SECONDS = 0.5


@dataclass(eq=False)
class _Mirror:
    """One subscribed pane: its latest record, screen and watchers."""

    uuid: UUID
    pane: HerdrPane
    screen: Screen
    watchers: Watchers = field(default_factory=Watchers)
    gone: bool = False
    last_text: str | None = None
    poll_now: trio.Event = field(default_factory=trio.Event)
    restart: trio.Event = field(default_factory=trio.Event)
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    mode: str = "starting"
    #: Observe frames applied so far, and an event set (then renewed) by each.
    frames: int = 0
    frame_arrived: trio.Event = field(default_factory=trio.Event)
    #: Scrolls applied so far: a poll read begun before one is stale.
    scrolls: int = 0

    def frame_applied(self) -> None:
        self.frames += 1
        self.frame_arrived.set()
        self.frame_arrived = trio.Event()


class HerdrSource:
    """A :class:`~mirror_host.panes.source.PaneSource` over a Herdr session."""

    #: The source samples itself (observe stream, or its own 200 ms poll) and
    #: reports changes, so the host never needs a timer for it.
    pushes_changes = True

    def __init__(
        self,
        socket_path: Path,
        *,
        herdr_bin: str | None = None,
        poll_seconds: float = POLL_SECONDS,
    ) -> None:
        self.socket_path = socket_path
        self.client = HerdrClient(socket_path)
        self.capabilities: frozenset[str] = frozenset({Capability.HISTORY, Capability.SCROLL_STATE})
        self.protocol: int | None = None
        self.version: str | None = None
        self.snapshot: Snapshot | None = None
        self._herdr_bin = herdr_bin
        self._poll_seconds = poll_seconds
        self._labels: dict[UUID, tuple[HerdrPane, PaneInfo]] = {}
        self._mirrors: dict[UUID, _Mirror] = {}
        self._repoll = trio.Event()
        self._listed = trio.Event()
        self._events_healthy = False
        self._has_snapshot: bool | None = None
        self._has_scroll: bool | None = None
        self._event_types = list(LIFECYCLE_EVENTS)
        self._agent_panes: frozenset[str] = frozenset()
        #: Cancelled when the agent panes change, so the event stream is renewed.
        self._resubscribe = trio.CancelScope()
        self._nursery: trio.Nursery | None = None
        self._complained = False

    # ------------------------------------------------------------ discovery

    async def run(self) -> None:
        """Follow Herdr until cancelled, reconnecting with capped backoff."""
        backoff = 1.0
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            while True:
                try:
                    await self._follow()
                except PaneSourceError as exc:  # not running, restarting, or refusing
                    if not self._complained:
                        logger.warning("%s; retrying (up to every %g s)", exc, _MAX_BACKOFF_SECONDS)
                        self._complained = True
                    self._listed.set()
                    await trio.sleep(backoff)
                    backoff = min(backoff * 2, _MAX_BACKOFF_SECONDS)

    async def wait_listed(self) -> None:
        """Wait for the first discovery attempt (tests and start-up)."""
        await self._listed.wait()

    async def _follow(self) -> None:
        pong = await self.client.call("ping")
        self.version = pong.get("version") if isinstance(pong.get("version"), str) else None
        protocol = pong.get("protocol")
        self.protocol = protocol if isinstance(protocol, int) else None
        if self.protocol not in (16, 17, 19, 20, 22):
            logger.info("Herdr protocol %s is unknown to mirror-host; carrying on", self.protocol)
        logger.info(
            "connected to Herdr %s (protocol %s) at %s",
            self.version,
            self.protocol,
            self.socket_path,
        )
        await self._detect_scroll()
        await self.poll()
        self._complained = False  # read whole again: the next outage is news
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
        if self._has_scroll is not None:
            return
        try:
            await self.client.call(
                "pane.scroll", {"pane_id": "mirror-host-probe", "offset_from_bottom": 0}
            )
            self._has_scroll = True
        except HerdrUnknownMethod:
            self._has_scroll = False
        except HerdrError:
            self._has_scroll = True  # it knows the method; the probe pane just does not exist
        if self._has_scroll:
            self.capabilities = self.capabilities | {Capability.REMOTE_SCROLL}

    async def poll(self) -> None:
        """Read the whole session once and reconcile the pane list."""
        snapshot = await self._read_snapshot()
        # The old size comes from the old snapshot: a layout change alone resizes.
        previous, self.snapshot = self.snapshot or snapshot, snapshot
        labels = {pane.uuid: (pane, info) for pane, info in pane_labels(snapshot)}
        for key, mirror in list(self._mirrors.items()):
            entry = labels.get(key)
            if entry is None:
                self._vanish(mirror)
            else:
                old, mirror.pane = mirror.pane, entry[0]
                if old.pane_id != mirror.pane.pane_id or grid_size(old, previous) != grid_size(
                    mirror.pane, snapshot
                ):
                    mirror.restart.set()
        self._labels = labels
        agents = frozenset(p.pane_id for p in snapshot.panes if p.agent)
        if agents != self._agent_panes:
            self._agent_panes = agents
            self._resubscribe.cancel()  # the event stream must follow the new agent panes
        self._listed.set()

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
            subscriptions: list[dict[str, Any]] = [{"type": t} for t in self._event_types]
            subscriptions += [
                {"type": "pane.agent_status_changed", "pane_id": pane_id}
                for pane_id in sorted(agents)
            ]
            try:
                with trio.CancelScope() as self._resubscribe:
                    if self._agent_panes != agents:
                        continue  # changed while we were (re)connecting
                    async with self.client.subscribe(subscriptions) as events:
                        self._events_healthy = True
                        async for _event in events:
                            self._repoll.set()
                if self._resubscribe.cancelled_caught:
                    continue  # the agent panes changed: subscribe again with them
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
        for name in list(self._event_types):
            if f"`{name}`" in exc.message and "unknown variant" in exc.message:
                self._event_types.remove(name)
                logger.debug("this Herdr does not know the %s event; subscribing without it", name)
                return True
        return False

    def _vanish(self, mirror: _Mirror) -> None:
        if not mirror.gone:
            mirror.gone = True
            mirror.scope.cancel()
            mirror.watchers.notify()

    # ------------------------------------------------------------ PaneSource

    async def list_panes(self) -> list[PaneInfo]:
        """Panes of the last snapshot, in workspace → tab → pane order; reads no contents."""
        return [info for _, info in self._labels.values()]

    def is_listed(self, pane_id: UUID) -> bool:
        try:
            self.pane_record(pane_id)
        except PaneNotFound:
            return False
        return True

    def pane_record(self, pane_id: UUID) -> HerdrPane:
        """The latest Herdr record of a listed pane.

        Raises:
            PaneNotFound: not in the last snapshot.
        """
        mirror = self._mirrors.get(pane_id)
        if mirror is not None and not mirror.gone:
            return mirror.pane
        entry = self._labels.get(pane_id)
        if entry is None:
            raise PaneNotFound(f"Herdr pane {pane_id} is gone")
        return entry[0]

    @asynccontextmanager
    async def watch(self, pane_id: UUID, on_change: Callable[[], None]) -> AsyncIterator[None]:
        """Mirror the pane (observe stream or polling) while anybody watches it."""
        mirror = self._mirrors.get(pane_id)
        if mirror is None or mirror.gone:
            mirror = await self._start_mirror(pane_id)
        mirror.watchers.add(on_change)
        try:
            yield
        finally:
            mirror.watchers.discard(on_change)
            if not mirror.watchers:
                mirror.scope.cancel()
                if self._mirrors.get(pane_id) is mirror:
                    del self._mirrors[pane_id]

    async def _start_mirror(self, pane_id: UUID) -> _Mirror:
        pane = self.pane_record(pane_id)
        assert self.snapshot is not None and self._nursery is not None
        text = await self._read_visible(pane)
        mirror = _Mirror(pane_id, pane, self._draw(pane, text), last_text=text)
        self._mirrors[pane_id] = mirror
        self._nursery.start_soon(self._run_mirror, mirror)
        return mirror

    def _draw(self, pane: HerdrPane, text: str, screen: Screen | None = None) -> Screen:
        """A screen showing ``pane.read`` rows (reusing ``screen`` if the size holds)."""
        assert self.snapshot is not None
        rows = split_rows(text)
        size = grid_size(pane, self.snapshot, rows)
        if screen is None or screen.size != size:
            screen = Screen(*size)
        else:
            screen.reset()
        screen.feed(frame_from_rows(rows))
        return screen

    async def _read_visible(self, pane: HerdrPane) -> str:
        result = await self.client.call(
            "pane.read", {"pane_id": pane.pane_id, "source": "visible", "format": "ansi"}
        )
        read = result.get("read")
        text = read.get("text") if isinstance(read, dict) else None
        return text if isinstance(text, str) else ""

    async def _run_mirror(self, mirror: _Mirror) -> None:
        with mirror.scope:
            while not mirror.gone:
                try:
                    await self._mirror_until_gone(mirror)
                except PaneSourceError as exc:
                    # A Herdr hiccup must never take the host down: wait and go on.
                    logger.warning("mirroring Herdr pane %s: %s", mirror.pane.pane_id, exc)
                    await trio.sleep(1.0)

    async def _mirror_until_gone(self, mirror: _Mirror) -> None:
        failures = 0
        while not mirror.gone:
            program = self._observer_program()
            if program is not None and failures < _OBSERVE_FAILURES_BEFORE_POLLING:
                mirror.mode = "observe"
                outcome = await self._observe(mirror, program)
                if outcome == "gone":
                    await self._confirm_gone(mirror)
                elif outcome == "failed":
                    failures += 1
                    await trio.sleep(min(2.0 * failures, 5.0))
                else:
                    failures = 0
                continue
            if mirror.mode != "poll":
                reason = "no herdr program found" if program is None else "observe kept failing"
                logger.info(
                    "polling Herdr pane %s every %g s (%s)",
                    mirror.pane.pane_id,
                    self._poll_seconds,
                    reason,
                )
            mirror.mode = "poll"
            # With a herdr program, try its stream again now and then.
            retry_at = trio.current_time() + _OBSERVE_RETRY_SECONDS if program else None
            await self._poll_pane(mirror, until=retry_at)
            failures = 0

    def _observer_program(self) -> str | None:
        if self._herdr_bin:
            return shutil.which(self._herdr_bin) or (
                self._herdr_bin if os.access(self._herdr_bin, os.X_OK) else None
            )
        return shutil.which("herdr")

    async def _observe(self, mirror: _Mirror, program: str) -> str:
        """Run one observe stream; say why it ended: gone, restart or failed."""
        assert self.snapshot is not None
        columns, rows = grid_size(mirror.pane, self.snapshot)
        command = [
            program, "terminal", "session", "observe", mirror.pane.terminal_id,
            "--cols", str(columns), "--rows", str(rows),
        ]  # fmt: skip
        env = {**os.environ, "HERDR_SOCKET_PATH": str(self.socket_path)}
        mirror.restart = trio.Event()
        outcome = "failed"
        try:
            process = await trio.lowlevel.open_process(
                command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
            )
        except OSError as exc:
            logger.warning("cannot run %s: %s", program, exc)
            return "failed"
        try:
            async with trio.open_nursery() as nursery:

                async def restart_on_request() -> None:
                    await mirror.restart.wait()
                    nursery.cancel_scope.cancel()

                nursery.start_soon(restart_on_request)
                outcome = await self._read_frames(mirror, process)
                nursery.cancel_scope.cancel()
            if mirror.restart.is_set():
                outcome = "restart"
        finally:
            with trio.CancelScope(shield=True):
                if process.returncode is None:
                    process.terminate()
                    with trio.move_on_after(2):
                        await process.wait()
                    if process.returncode is None:
                        process.kill()
                        await process.wait()
        return outcome

    async def _read_frames(self, mirror: _Mirror, process: trio.Process) -> str:
        assert process.stdout is not None
        reader = LineReader(process.stdout)
        while True:
            try:
                line = await reader.next()
            except (trio.BrokenResourceError, trio.ClosedResourceError, PaneSourceError):
                return "failed"  # including a line past the size limit
            if line is None:
                return "failed"  # EOF without terminal.closed: Herdr went away
            outcome = self._apply_observe_line(mirror, line)
            if outcome is not None:
                return outcome

    def _apply_observe_line(self, mirror: _Mirror, line: bytes) -> str | None:
        try:
            record = json.loads(line)
        except (UnicodeDecodeError, json.JSONDecodeError):
            return None
        if not isinstance(record, dict):
            return None
        kind = record.get("type")
        if kind == "terminal.frame":
            try:
                data = base64.b64decode(str(record.get("bytes", "")), validate=True)
            except (binascii.Error, ValueError):
                return None
            width, height = record.get("width"), record.get("height")
            if record.get("full") is True:
                size = (width, height)
                if (
                    isinstance(width, int)
                    and isinstance(height, int)
                    and size != mirror.screen.size
                ):
                    mirror.screen = Screen(max(1, min(width, 1000)), max(1, min(height, 1000)))
                else:
                    mirror.screen.reset()
            mirror.screen.feed(data)
            mirror.frame_applied()
            mirror.watchers.notify()
            return None
        if kind == "terminal.closed":
            reason = str(record.get("reason") or "")
            if "not found" in reason:
                return "gone"
            logger.info(
                "Herdr ended the observe stream of %s: %s",
                mirror.pane.pane_id,
                reason or "no reason",
            )
            return "restart" if "reconnect" in reason or "handoff" in reason else "failed"
        return None

    async def _confirm_gone(self, mirror: _Mirror) -> None:
        # The terminal may only have moved (new pane id): trust the snapshot.
        try:
            await self.poll()
        except PaneSourceError:
            return
        if mirror.uuid not in self._labels:
            self._vanish(mirror)

    async def _poll_pane(self, mirror: _Mirror, *, until: float | None = None) -> None:
        while not mirror.gone and (until is None or trio.current_time() < until):
            scrolls = mirror.scrolls
            try:
                text = await self._read_visible(mirror.pane)
            except HerdrPaneNotFound:
                await self._confirm_gone(mirror)
                continue
            except PaneSourceUnavailable:
                # Herdr restarting: keep the pane until a snapshot says otherwise.
                await trio.sleep(1.0)
                continue
            if mirror.scrolls != scrolls:
                continue  # begun before a scroll landed: it may show the old view
            if text != mirror.last_text:  # change is known by content: revision is always 0
                mirror.last_text = text
                mirror.screen = self._draw(mirror.pane, text, mirror.screen)
                mirror.watchers.notify()
            mirror.poll_now = trio.Event()
            with trio.move_on_after(self._poll_seconds):
                await mirror.poll_now.wait()

    def _mirror(self, pane_id: UUID) -> _Mirror:
        mirror = self._mirrors.get(pane_id)
        if mirror is None or mirror.gone:
            raise PaneNotFound(f"Herdr pane {pane_id} is gone")
        return mirror

    async def capture(
        self,
        pane_id: UUID,
        representation: Representation,
        *,
        with_viewport_text: bool = False,
        with_scroll_bounds: bool = False,
        with_styled_scrollback: bool = False,  # not advertised: never asked
    ) -> VTCapture | TextCapture:
        """The mirrored screen (Herdr renders a scrolled-back pane scrolled back)."""
        mirror = self._mirror(pane_id)
        bounds = scroll_bounds(mirror.pane) if with_scroll_bounds else None
        return mirror.screen.capture(representation, bounds=bounds)

    async def write(self, pane_id: UUID, data: bytes) -> None:
        """``pane.send_text`` with the bytes as they are (already encoded by the client).

        Raises:
            PaneSourceError: the bytes are not UTF-8 (Herdr's API carries text only).
        """
        pane = self.pane_record(pane_id)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PaneSourceError(
                "input is not UTF-8; Herdr's send_text carries text only"
            ) from exc
        await self.client.call("pane.send_text", {"pane_id": pane.pane_id, "text": text})

    async def scroll(self, pane_id: UUID, direction: ScrollDirection) -> None:
        """``pane.scroll`` by rows − 3 (protocol 22); elsewhere unsupported."""
        if not self._has_scroll:
            raise UnsupportedOperation("this Herdr has no pane.scroll")
        mirror = self._mirror(pane_id)
        pane = mirror.pane
        rows = pane.viewport_rows or mirror.screen.size[1]
        step = max(1, rows - 3)
        offset = pane.offset_from_bottom or 0
        target = offset + step if direction is ScrollDirection.UP else max(0, offset - step)
        if pane.max_offset_from_bottom is not None:
            target = min(target, pane.max_offset_from_bottom)
        frames_before = mirror.frames
        result = await self.client.call(
            "pane.scroll", {"pane_id": pane.pane_id, "offset_from_bottom": target}
        )
        mirror.scrolls += 1
        record = result.get("pane")
        updated = parse_pane(record) if isinstance(record, dict) else None
        if updated is not None:
            mirror.pane = updated
        # The frame that completes this scroll must show where it landed.
        if mirror.mode == "observe":
            # Herdr streams the scrolled view: wait (briefly) for it, unless a
            # frame already came while pane.scroll was answered. Never redraw
            # from a read here: that would drop the stream's cursor and modes.
            if mirror.frames == frames_before:
                with trio.move_on_after(_SCROLL_FRAME_SECONDS):
                    await mirror.frame_arrived.wait()
        else:
            await self._redraw_after_scroll(mirror)
        mirror.poll_now.set()
        mirror.watchers.notify()

    async def _redraw_after_scroll(self, mirror: _Mirror) -> None:
        """Polling: read the viewport now rather than at the next 200 ms poll."""
        try:
            text = await self._read_visible(mirror.pane)
        except PaneNotFound:
            raise
        except PaneSourceError as exc:
            logger.debug("re-reading Herdr pane %s after a scroll: %s", mirror.pane.pane_id, exc)
            return
        if not mirror.gone:
            mirror.last_text = text
            mirror.screen = self._draw(mirror.pane, text, mirror.screen)

    async def history(self, pane_id: UUID) -> HistoryCapture:
        """A passive ``recent`` read in ANSI format, styles stripped."""
        pane = self.pane_record(pane_id)
        result = await self.client.call(
            "pane.read",
            {
                "pane_id": pane.pane_id,
                "source": "recent",
                "format": "ansi",
                "lines": _HISTORY_LINES,
            },
        )
        read = result.get("read")
        read = read if isinstance(read, dict) else {}
        raw = read.get("text")
        text = "\n".join(
            strip_escapes(row) for row in split_rows(raw if isinstance(raw, str) else "")
        )
        return HistoryCapture.newest(text, truncated=read.get("truncated") is True)

    def statistics(self) -> dict[str, Any]:
        """Counters for ``mirror-host status`` and the benchmarks."""
        modes = [m.mode for m in self._mirrors.values()]
        return {
            "herdrRequests": self.client.requests,
            "protocol": self.protocol,
            "observing": modes.count("observe"),
            "polling": modes.count("poll"),
        }

    def mirror_mode(self, pane_id: UUID) -> str | None:
        """``observe`` or ``poll`` for a mirrored pane (for tests and status)."""
        mirror = self._mirrors.get(pane_id)
        return mirror.mode if mirror is not None else None
