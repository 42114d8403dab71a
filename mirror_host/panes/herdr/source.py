"""The Herdr pane source (``--source herdr``): the ``PaneSource`` over the parts. I/O.

* ``discovery.py`` knows which panes exist (snapshots, events, reconnects);
* ``observe.py`` feeds a subscribed pane from ``herdr terminal session observe``;
* ``polling.py`` feeds it from ``pane.read`` where there is no such program, or
  its stream keeps failing (with a program, the stream is tried again later);
* this module mirrors a pane while anybody watches it, captures, types, scrolls
  (``pane.scroll``, protocol 22) and reads history (a passive ``recent`` read in
  ANSI format, never ``recent`` text, which moves the operator's screen).

The host's pane ids come from Herdr's public pane ids (``identity.py``), so a
pane keeps its id when Herdr restarts with its session restored or hands off
live (every ``terminal_id`` new, the same public ids), and when it moves to another
workspace (a new public id, the same terminal). Whatever is sent to a pane
(input, a scroll) goes to the Herdr id of the latest record and, when Herdr
says that pane is not found, once more after a fresh snapshot under its new
id; an observe stream follows the pane to its new terminal. Scroll bounds
follow ``pane.scroll_changed`` for mirrored panes, so they are live between
scrolls.

An ANSI read can be slow: Herdr holds it while another client's text harvest
of the pane runs (up to 20 s). The client waits long enough for it
(``READ_SECONDS``), nothing the protocol reads waits on it, and its frame comes
when it comes. An observe program that speaks another Herdr client version
cannot work: it is reported once and not run again until the program or the
Herdr server changes; the panes are polled meanwhile.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any
from uuid import UUID

import trio

from mirror_host.capture.values import (
    SCREEN_ONLY,
    Capability,
    Capture,
    CaptureOptions,
    HistoryCapture,
)
from mirror_host.control import Representation, ScrollDirection
from mirror_host.errors import PaneNotFound, PaneSourceError, UnsupportedOperation
from mirror_host.limits import POLL_SECONDS
from mirror_host.panes.follow import follow_health
from mirror_host.panes.herdr.client import READ_SECONDS, HerdrClient
from mirror_host.panes.herdr.discovery import LIFECYCLE_EVENTS, HerdrDiscovery
from mirror_host.panes.herdr.mirror import Mirror, MirrorMode, Refused, StreamEnd
from mirror_host.panes.herdr.observe import find_herdr_program, observe
from mirror_host.panes.herdr.polling import VisiblePoller
from mirror_host.panes.herdr.protocol import (
    HerdrPane,
    HerdrPaneNotFound,
    ScrollChange,
    Snapshot,
    grid_size,
    pane_uuid,
    parse_pane,
    scroll_bounds,
    split_rows,
    strip_escapes,
)
from mirror_host.panes.mirrors import MirrorTable
from mirror_host.panes.model import PaneInfo
from mirror_host.panes.source import Health
from mirror_host.terminal import Screen

__all__ = ["LIFECYCLE_EVENTS", "HerdrSource"]

logger = logging.getLogger(__name__)

_HISTORY_LINES = 1000
_OBSERVE_FAILURES_BEFORE_POLLING = 3
_OBSERVE_RETRY_SECONDS = 30.0
#: How long a scroll waits for the observe stream to show where it landed.
_SCROLL_FRAME_SECONDS = 0.5
#: How long a scroll waits for the polled view after it (a read may be held back).
_SCROLL_READ_SECONDS = 2.0


@dataclasses.dataclass(frozen=True, slots=True)
class _Refusal:
    """An observe program the running Herdr server refused, and what it said."""

    #: The program file as it was (path, inode, size, time) and the server (version,
    #: protocol): a new program or another server is worth another try.
    key: tuple[object, ...]
    message: str


class HerdrSource:
    """A :class:`~mirror_host.panes.source.PaneSource` over a Herdr session."""

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
        self.discovery = HerdrDiscovery(self.client, self._reconcile, self._scroll_changed)
        self._poller = VisiblePoller(
            self.client, self._current_snapshot, self._confirm_gone, poll_seconds=poll_seconds
        )
        self._herdr_bin = herdr_bin
        #: The watched panes: each read once, then observed or polled (``_feed``).
        self.mirrors = MirrorTable(
            "Herdr pane",
            create=self._new_mirror,
            start=self._first_read,
            stop=self._unwatched,
            feed=self._feed,
        )
        #: The observe program the server refused, while it stays the same.
        self._refusal: _Refusal | None = None

    # ------------------------------------------------------------ discovery

    @property
    def protocol(self) -> int | None:
        """Herdr's protocol number from ``ping`` (``None`` before the first contact)."""
        return self.discovery.protocol

    @property
    def version(self) -> str | None:
        return self.discovery.version

    @property
    def snapshot(self) -> Snapshot | None:
        """The latest snapshot (``None`` before Herdr was first read)."""
        return self.discovery.snapshot

    async def run(self) -> None:
        """Follow Herdr and feed the mirrored panes until cancelled."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self.mirrors.run)
            await self.discovery.run()

    async def wait_listed(self) -> None:
        """Wait for the first discovery attempt (tests and start-up)."""
        await self.discovery.wait_listed()

    async def poll(self) -> None:
        """Read the whole session once and reconcile the pane list.

        Raises:
            PaneSourceError: Herdr could not be read.
        """
        await self.discovery.poll()

    def _current_snapshot(self) -> Snapshot:
        snapshot = self.discovery.snapshot
        assert snapshot is not None, "a pane is mirrored only after Herdr was listed"
        return snapshot

    def _reconcile(self, snapshot: Snapshot, read_started: float) -> None:
        """A new snapshot: follow moves and resizes, drop mirrors whose pane went."""
        if self.discovery.has_scroll:
            self.capabilities = self.capabilities | {Capability.REMOTE_SCROLL}
        labels = self.discovery.labels
        for mirror in self.mirrors:
            entry = labels.get(mirror.uuid)
            if entry is None:
                mirror.vanish()
                continue
            fresh = entry[0]
            if mirror.scroll_read_at > read_started:
                # A scroll was answered after this snapshot was asked for: its
                # position is the newer one.
                fresh = dataclasses.replace(
                    fresh,
                    offset_from_bottom=mirror.pane.offset_from_bottom,
                    max_offset_from_bottom=mirror.pane.max_offset_from_bottom,
                )
            # A new public id (a move), or a new terminal (a Herdr restart, a hand-off).
            moved = (mirror.pane.pane_id, mirror.pane.terminal_id) != (
                fresh.pane_id,
                fresh.terminal_id,
            )
            mirror.pane = fresh
            resized = mirror.stream_size not in (None, grid_size(fresh, snapshot))
            if moved or resized:
                mirror.restart.set()
        self._follow_scroll()

    def _follow_scroll(self) -> None:
        """Follow ``pane.scroll_changed`` for the panes mirrored now, by their current ids."""
        self.discovery.follow_scroll(frozenset(m.pane.pane_id for m in self.mirrors if not m.gone))

    def _scroll_changed(self, change: ScrollChange) -> None:
        """A mirrored pane's viewport moved (Herdr's event): its bounds, live."""
        for mirror in self.mirrors:
            if mirror.gone or mirror.pane.pane_id != change.pane_id:
                continue
            before = scroll_bounds(mirror.pane)
            mirror.pane = dataclasses.replace(
                mirror.pane,
                offset_from_bottom=change.offset_from_bottom,
                max_offset_from_bottom=change.max_offset_from_bottom,
                viewport_rows=change.viewport_rows or mirror.pane.viewport_rows,
            )
            mirror.scroll_read_at = trio.current_time()
            if scroll_bounds(mirror.pane) != before:
                mirror.watchers.notify()  # the next frame's scrollState changes

    async def _confirm_gone(self, mirror: Mirror) -> None:
        # The terminal may only have moved (new pane id): trust the snapshot.
        try:
            await self.discovery.poll()
        except PaneSourceError:
            return
        if mirror.uuid not in self.discovery.labels:
            mirror.vanish()

    # ------------------------------------------------------------ PaneSource

    async def list_panes(self) -> list[PaneInfo]:
        """Panes of the last snapshot, in workspace → tab → pane order; reads no contents."""
        return [info for _, info in self.discovery.labels.values()]

    def is_listed(self, pane_id: UUID) -> bool:
        try:
            self.pane_record(pane_id)
        except PaneNotFound:
            return False
        return True

    def uuid_of(self, pane: HerdrPane) -> UUID:
        """The id the host lists ``pane`` under (for a pane not listed yet, the one its
        public id gives it)."""
        key = self.discovery.ids.get(pane.terminal_id)
        return key if key is not None else pane_uuid(str(self.socket_path), pane.pane_id)

    def pane_record(self, pane_id: UUID) -> HerdrPane:
        """The latest Herdr record of a listed pane.

        Raises:
            PaneNotFound: not in the last snapshot.
        """
        mirror = self.mirrors.live(pane_id)
        if mirror is not None:
            return mirror.pane
        entry = self.discovery.labels.get(pane_id)
        if entry is None:
            raise PaneNotFound(f"Herdr pane {pane_id} is gone")
        return entry[0]

    def watch(
        self, pane_id: UUID, on_change: Callable[[], None]
    ) -> AbstractAsyncContextManager[None]:
        """Mirror the pane (observe stream or polling) while anybody watches it."""
        return self.mirrors.watch(pane_id, on_change)

    def _new_mirror(self, pane_id: UUID) -> Mirror:
        pane = self.pane_record(pane_id)
        return Mirror(pane, self._poller.draw(pane, ""), uuid=pane_id)

    async def _first_read(self, mirror: Mirror) -> None:
        """The pane's visible rows, drawn before the first capture (and before its feed)."""
        await self._poller.redraw(mirror)
        self._follow_scroll()

    async def _unwatched(self, mirror: Mirror) -> None:
        self._follow_scroll()  # its scroll events are no longer wanted

    async def _feed(self, mirror: Mirror) -> None:
        """Observe the pane while a ``herdr`` program works; poll it otherwise."""
        failures = 0
        while not mirror.gone:
            program = find_herdr_program(self._herdr_bin)
            refused = program is not None and self._refused(program)
            if program is not None and not refused and failures < _OBSERVE_FAILURES_BEFORE_POLLING:
                mirror.mode = MirrorMode.OBSERVE
                size = grid_size(mirror.pane, self._current_snapshot())
                end = await observe(mirror, program, self.socket_path, size)
                if isinstance(end, Refused):
                    self._refuse(program, end.message)
                elif end is StreamEnd.GONE:
                    await self._confirm_gone(mirror)
                elif end is StreamEnd.FAILED:
                    failures += 1
                    await trio.sleep(min(2.0 * failures, 5.0))
                else:
                    failures = 0
                continue
            if mirror.mode is not MirrorMode.POLL:
                reason = (
                    "no herdr program found"
                    if program is None
                    else "the herdr program cannot observe this Herdr"
                    if refused
                    else "observe kept failing"
                )
                logger.info(
                    "polling Herdr pane %s every %g s (%s)",
                    mirror.pane.pane_id,
                    self._poller.poll_seconds,
                    reason,
                )
            mirror.mode = MirrorMode.POLL
            # With a herdr program, try its stream again now and then.
            retry_at = trio.current_time() + _OBSERVE_RETRY_SECONDS if program else None
            await self._poller.run(mirror, until=retry_at)
            failures = 0

    def _program_key(self, program: str) -> tuple[object, ...]:
        """What a refusal holds for: this program file, this Herdr server."""
        try:
            stat = os.stat(program)
        except OSError:
            return (program,)
        file = (os.path.realpath(program), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
        return (*file, self.discovery.version, self.discovery.protocol)

    def _refused(self, program: str) -> bool:
        """Whether ``program`` is the one the server refused, unchanged, on the same server."""
        refusal = self._refusal
        return refusal is not None and refusal.key == self._program_key(program)

    def _refuse(self, program: str, message: str) -> None:
        """Remember (and say, once) that the server refused ``program``'s protocol version."""
        refusal = _Refusal(self._program_key(program), message)
        if self._refusal == refusal:
            return  # another pane's stream said the same meanwhile
        self._refusal = refusal
        server = f"Herdr {self.discovery.version or '(version unknown)'}"
        logger.warning(
            "the herdr program %s cannot observe this Herdr server (%s): %s. Mirroring its "
            "panes by polling pane.read every %g s instead (slower output, no cursor). Install "
            "the herdr program of the same version as the running server (%s), or point "
            "--herdr-bin (herdr.bin in the settings) at one; it is tried again when the "
            "program or the server changes.",
            program,
            server,
            message,
            self._poller.poll_seconds,
            server,
        )

    async def capture(
        self, pane_id: UUID, kind: Representation, *, options: CaptureOptions = SCREEN_ONLY
    ) -> Capture:
        """The mirrored screen (Herdr renders a scrolled-back pane scrolled back).

        Never torn: the screen changes only between awaits, whole frames at a
        time, and is read here without one.
        """
        mirror = self.mirrors.require(pane_id)
        bounds = scroll_bounds(mirror.pane) if options.scroll_bounds else None
        return mirror.screen.capture(kind, bounds=bounds)

    async def write(self, pane_id: UUID, data: bytes) -> None:
        """``pane.send_text`` with the bytes as they are (already encoded by the client).

        Sent to the pane's current id, once more if it only moved (module docstring).

        Raises:
            PaneSourceError: the bytes are not UTF-8 (Herdr's API carries text only).
            PaneNotFound: the pane is really gone.
        """
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PaneSourceError(
                "input is not UTF-8; Herdr's send_text carries text only"
            ) from exc
        await self.call_on_pane(pane_id, "pane.send_text", {"text": text})

    async def call_on_pane(
        self, pane_id: UUID, method: str, params: Mapping[str, Any]
    ) -> dict[str, Any]:
        """``method`` on a listed pane by its current Herdr id; once more if it only moved.

        Raises:
            PaneNotFound: the pane is not listed, or really gone.
            PaneSourceError: Herdr failed.
        """
        mirror = self.mirrors.live(pane_id)
        if mirror is not None:
            return await self._call_on_pane(mirror, method, params)
        pane = self.pane_record(pane_id)
        try:
            return await self.client.call(method, {"pane_id": pane.pane_id, **params})
        except HerdrPaneNotFound:
            await self.discovery.poll()
            current = self.pane_record(pane_id)  # PaneNotFound when it is gone for good
            if current.pane_id == pane.pane_id:
                raise
            return await self.client.call(method, {"pane_id": current.pane_id, **params})

    async def scroll(self, pane_id: UUID, direction: ScrollDirection) -> None:
        """``pane.scroll`` by rows − 3 from where the pane is now (protocol 22).

        The position comes from ``pane.get`` first: the snapshot may be seconds
        old, and a pane scrolled back drifts away from the bottom as output
        arrives (its viewport stays on the same rows). The target is not clamped
        here: Herdr clamps an offset past the oldest row to the top itself
        (``set_scroll_offset_from_bottom`` takes the smaller of the two), which a
        bound read a moment earlier could not do. The scroll bounds the client
        sees come from ``pane.scroll``'s own answer.

        Raises:
            UnsupportedOperation: this Herdr has no ``pane.scroll``.
            PaneNotFound: the pane is gone.
            PaneSourceError: Herdr failed.
        """
        if not self.discovery.has_scroll:
            raise UnsupportedOperation("this Herdr has no pane.scroll")
        mirror = self.mirrors.require(pane_id)
        here = self._remember(mirror, await self._call_on_pane(mirror, "pane.get", {}))
        rows = here.viewport_rows or mirror.screen.size[1]
        step = max(1, rows - 3)
        offset = here.offset_from_bottom or 0
        target = offset + step if direction is ScrollDirection.UP else max(0, offset - step)
        frames_before = mirror.frames
        result = await self._call_on_pane(mirror, "pane.scroll", {"offset_from_bottom": target})
        mirror.scrolls += 1
        self._remember(mirror, result)
        # The frame that completes this scroll must show where it landed.
        if mirror.mode is MirrorMode.OBSERVE:
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

    async def _call_on_pane(
        self, mirror: Mirror, method: str, params: Mapping[str, Any]
    ) -> dict[str, Any]:
        """``method`` on the mirrored pane; once more if it only moved (new pane id).

        Raises:
            PaneNotFound: the pane is really gone.
        """
        try:
            return await self.client.call(method, {"pane_id": mirror.pane.pane_id, **params})
        except HerdrPaneNotFound:
            await self._confirm_gone(mirror)
            if mirror.gone:
                raise
            return await self.client.call(method, {"pane_id": mirror.pane.pane_id, **params})

    @staticmethod
    def _remember(mirror: Mirror, result: Mapping[str, Any]) -> HerdrPane:
        """Keep the pane record of a ``pane_info`` answer; the record now in use."""
        record = result.get("pane")
        fresh = parse_pane(record) if isinstance(record, Mapping) else None
        # Asked by the pane's Herdr id: the answer is that pane, under the same id
        # (after a Herdr restart, with a new terminal) or the same terminal.
        if fresh is not None and (
            fresh.pane_id == mirror.pane.pane_id or fresh.terminal_id == mirror.pane.terminal_id
        ):
            mirror.pane = fresh
            mirror.scroll_read_at = trio.current_time()
        return mirror.pane

    async def _redraw_after_scroll(self, mirror: Mirror) -> None:
        """Polling: read the viewport now rather than at the next 200 ms poll.

        Not for long: Herdr may hold the read back (a harvest); the poll that
        follows brings the view then, and the scroll is answered meanwhile.
        """
        try:
            with trio.move_on_after(_SCROLL_READ_SECONDS):
                await self._poller.redraw(mirror)
        except PaneNotFound:
            raise
        except PaneSourceError as exc:
            logger.debug("re-reading Herdr pane %s after a scroll: %s", mirror.pane.pane_id, exc)

    async def read_screen(self, pane: HerdrPane) -> Screen:
        """The pane's visible rows read now (``pane.read``), drawn as polling draws them.

        Raises:
            HerdrPaneNotFound: the pane is gone.
            PaneSourceError: Herdr failed.
        """
        return self._poller.draw(pane, await self._poller.read(pane))

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
            timeout=READ_SECONDS,
        )
        read = result.get("read")
        read = read if isinstance(read, dict) else {}
        raw = read.get("text")
        text = "\n".join(
            strip_escapes(row) for row in split_rows(raw if isinstance(raw, str) else "")
        )
        return HistoryCapture(text=text, truncated=read.get("truncated") is True)

    def health(self) -> Health:
        """The source's state for ``mirror-host status``: ``kind``, ``state``, ``detail``."""
        discovery = self.discovery
        return follow_health(
            "herdr",
            discovery.problem,
            waiting=(
                f"connecting to {discovery.socket_path}" if discovery.snapshot is None else None
            ),
            following=self._following,
        )

    def _following(self) -> str:
        """The followed server, and polling while it refuses the observe program."""
        discovery = self.discovery
        where = discovery.socket_path
        detail = f"Herdr {discovery.version} (protocol {discovery.protocol}) at {where}"
        refusal = self._refusal
        program = find_herdr_program(self._herdr_bin) if refusal is not None else None
        # Only while it still holds: a new program or another server is tried again.
        if refusal is not None and program is not None and self._refused(program):
            detail += f"; polling: the herdr program was refused ({refusal.message})"
        return detail

    def statistics(self) -> dict[str, Any]:
        """Counters for ``mirror-host status`` and the benchmarks."""
        modes = [m.mode for m in self.mirrors]
        return {
            **self.mirrors.statistics(),
            "herdrRequests": self.client.requests,
            "protocol": self.protocol,
            "observing": modes.count(MirrorMode.OBSERVE),
            "polling": modes.count(MirrorMode.POLL),
        }

    def mirror_mode(self, pane_id: UUID) -> str | None:
        """``observe`` or ``poll`` for a mirrored pane (for tests and status)."""
        mirror = self.mirrors.get(pane_id)
        return mirror.mode.value if mirror is not None else None
