"""The agliteterm pane source (``--source agliteterm``): a poller over the control API. I/O.

agliteterm has no output stream, no modes and no revision, so a mirror polls
and diffs (``../shared/spec/agliteterm.md``, verdict):

* ``discovery.py`` follows the sessions (``events`` every second, ``tree`` on
  change) and is the only thing that talks to agliteterm while nobody watches;
* a **watched** pane is read with ``session.text {styles:true, lines:0}``
  every 100 ms, every 30 ms for a second after input (so typing echoes
  quickly), and at once after a scroll; a read that shows the same rows,
  cursor and grid as the last one is no change and sends no frame;
* a build that answers every read with its **whole buffer** (agliteterm
  0.17.7: plain text, arguments ignored) is read no more often than four times
  what a read takes, and a quiet pane's reads back off to one a second; only
  the screen's lines are kept (and, while scrolled back, a copy of at most
  :data:`SCROLL_COPY_LINES`); a build without styles is mirrored as plain
  text, at a grid estimated from its text when it reports none
  (``offer.py``);
* frames are built from the styled rows in pure Python (``render.py``): no
  libghostty for this source;
* input goes through ``session.type`` with ``allow-control`` (a Mac's keys
  include escapes and DEL); a refusal that wrote nothing because the pane's
  input was busy is retried for up to 3 s, anything that may have been
  partly written never is;
* remote scroll pages through the host's copy of the scrollback
  (``scrollback.py``); history is the plain ``session.text {all:true}``;
* a pane's connections (its **lanes**: screen polls, input, scroll copy,
  history, a command's reads) close when its last watcher goes, when it
  leaves the tree, and, for a pane nobody watches (``create``'s first
  prompt, a phone's prompt to a pane it does not mirror), once they have been
  idle for :data:`IDLE_LANE_SECONDS`: so a delivery's reads, paste and Enter
  share them, and none is kept (with ``--agliteterm-command``, a relay
  process) for a pane nobody uses.

Every call has a deadline. A read that fails or is slow keeps the last
screen and is tried again; nothing here ever fails a subscriber for it: only
a pane that is really gone (agliteterm says ``session not found`` and the
tree agrees) ends its lease.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import trio

from mirror_host.capture.values import (
    SCREEN_ONLY,
    Capability,
    Capture,
    CaptureOptions,
    HistoryCapture,
    ScrollBounds,
    TextCapture,
    VTCapture,
)
from mirror_host.control import Representation, ScrollDirection
from mirror_host.errors import InputRefused, PaneNotFound, PaneSourceError
from mirror_host.panes.activity import InputActivity
from mirror_host.panes.agliteterm.client import AgliteClient
from mirror_host.panes.agliteterm.discovery import AgliteDiscovery
from mirror_host.panes.agliteterm.offer import whole_read_interval
from mirror_host.panes.agliteterm.protocol import (
    AgliteError,
    AgliteSessionNotFound,
    AgliteUnknownCommand,
    Dialect,
    InputNotWritten,
    Row,
    SessionPane,
    StyledScreen,
    grid_size,
    parse_metrics,
    parse_styled,
    plain_buffer,
    plain_history,
    plain_screen,
    plain_text,
    widest_line,
)
from mirror_host.panes.agliteterm.render import (
    RowCache,
    screen_lines,
    text_frame,
    vt_frame,
)
from mirror_host.panes.agliteterm.scrollback import ScrolledView, scroll_step
from mirror_host.panes.agliteterm.transport import Transport
from mirror_host.panes.follow import follow_health
from mirror_host.panes.mirrors import MirrorTable, PaneMirror
from mirror_host.panes.model import PaneInfo
from mirror_host.panes.source import Health

__all__ = ["AgliteSource", "Mirror"]

logger = logging.getLogger(__name__)

#: A watched pane is read this often …
POLL_SECONDS = 0.1
#: … and this often for FAST_SECONDS after input, so the echo shows quickly.
FAST_POLL_SECONDS = 0.03
FAST_SECONDS = 1.0
#: Deadlines: one screen read; the wait for a new subscriber's first screen.
READ_SECONDS = 3.0
FIRST_READ_SECONDS = 2.0
#: The full app's grid (``session.metrics``) is read this often while watched.
METRICS_SECONDS = 1.0
#: Reading the whole styled scrollback for the first scroll, and history.
SNAPSHOT_SECONDS = 10.0
HISTORY_SECONDS = 15.0
#: A client's keystrokes (under the hub's 10 s input deadline) and the host's own
#: paste or Enter (agliteterm answers those within about 22 s).
INPUT_SECONDS = 8.0
HOST_INPUT_SECONDS = 25.0
#: How long input refused as "busy or reserved" (nothing written) is retried.
BUSY_RETRY_SECONDS = 3.0
_BUSY_RETRY_PAUSE = 0.1
#: Lines asked for by a build that refuses ``all`` (the session keeps 2 MiB anyway).
HISTORY_LINES = 20_000
#: The most lines of a plain answer kept as the scroll copy (Prowl's own bound on
#: the history a source reads).
SCROLL_COPY_LINES = 10_000
#: Each pane's lanes (``<kind>:<agliteterm pane id>``): screen polls, input, the
#: scroll copy, history, a command's screen reads.
PANE_LANES = ("pane", "input", "scroll", "history", "agent")
#: A pane nobody watches keeps the connections of its one-off calls this long
#: after the last one ended (a delivery's reads, paste and Enter share them).
IDLE_LANE_SECONDS = 5.0


@dataclass(eq=False)
class Mirror(PaneMirror):
    """One watched pane: its latest tree record, screen and grid (watchers: :class:`PaneMirror`)."""

    pane: SessionPane
    screen: StyledScreen
    size: tuple[int, int]
    fast_until: float = float("-inf")
    #: The host's frozen copy while scrolled back, else ``None``.
    view: ScrolledView | None = None
    #: ``session.metrics`` (full app) and when it was read.
    metrics: tuple[int, int] | None = None
    metrics_at: float = float("-inf")
    cache: RowCache = field(default_factory=RowCache)
    reads: int = 0
    #: What the last read took, and how many reads in a row showed nothing new.
    read_seconds: float = 0.0
    unchanged: int = 0
    #: A grid estimated from plain text (no grid reported): widest line, line count.
    estimate: tuple[int, int] | None = None

    def label(self) -> str:
        return f"agliteterm pane {self.pane.pane_id}"

    def hurry(self, now: float) -> None:
        """Read now, and quickly for a while (input was just written)."""
        self.fast_until = now + FAST_SECONDS
        self.poll_now.set()


class AgliteSource:
    """A :class:`~mirror_host.panes.source.PaneSource` over one agliteterm instance."""

    def __init__(
        self,
        transport: Transport,
        *,
        poll_seconds: float = POLL_SECONDS,
        fast_poll_seconds: float = FAST_POLL_SECONDS,
        idle_lane_seconds: float = IDLE_LANE_SECONDS,
    ) -> None:
        self.client = AgliteClient(transport)
        self.idle_lane_seconds = idle_lane_seconds
        self.capabilities: frozenset[str] = frozenset(
            {Capability.HISTORY, Capability.REMOTE_SCROLL, Capability.SCROLL_STATE}
        )
        self.poll_seconds = poll_seconds
        self.fast_poll_seconds = fast_poll_seconds
        self.discovery = AgliteDiscovery(
            self.client, self._reconcile, watching=lambda: len(self.mirrors) > 0
        )
        #: The watched panes: each read at once, then polled (``_poll_once``).
        self.mirrors = MirrorTable(
            "agliteterm pane",
            create=self._new_mirror,
            start=self._first_read,
            stop=self._close_lanes,
            feed=self._poll_once,
        )
        self._nursery: trio.Nursery | None = None
        #: ``session.text`` selections this agliteterm refused (``screen``, ``all``).
        self._refused_forms: set[str] = set()
        #: When each pane last got raw input from a client (agent delivery checks it).
        self.input_activity = InputActivity()
        #: One-off calls under way, and when the last one ended, by agliteterm pane id.
        self._one_offs: Counter[str] = Counter()
        self._idle_since: dict[str, float] = {}
        self._idle_changed = trio.Event()

    @property
    def endpoint(self) -> str:
        return self.client.endpoint

    # ------------------------------------------------------------ running

    async def run(self) -> None:
        """Follow agliteterm and read the watched panes until cancelled."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._close_idle_lanes)
                await nursery.start(self.mirrors.run)
                await self.discovery.run()
                nursery.cancel_scope.cancel()
        finally:
            self._nursery = None
            with trio.CancelScope(shield=True):
                await self.client.aclose()

    async def wait_listed(self) -> None:
        """Wait for the first discovery attempt (tests and start-up)."""
        await self.discovery.wait_listed()

    def _reconcile(self, panes: dict[UUID, SessionPane], read_started: float) -> None:
        """A new tree: follow renames and resizes, drop mirrors whose pane went,
        close the connections of every pane that went."""
        for mirror in self.mirrors:
            fresh = panes.get(mirror.uuid)
            if fresh is None:
                logger.info("agliteterm pane %s is gone", mirror.pane.pane_id)
                mirror.vanish()
                continue
            mirror.pane = fresh
            self._settle_size(mirror)
        listed = {pane.pane_id for pane in panes.values()}
        for name in self.client.lane_names():
            kind, _, pane_id = name.partition(":")
            if kind in PANE_LANES and pane_id not in listed and self._nursery is not None:
                self._idle_since.pop(pane_id, None)
                self._nursery.start_soon(self.client.close_lane, name)

    # ------------------------------------------------------------ lanes

    @asynccontextmanager
    async def _one_off(self, pane: SessionPane) -> AsyncIterator[None]:
        """A call on the pane's lanes outside its polling (input, a command's read,
        history): once none is under way for a while, an unwatched pane's lanes close."""
        key = pane.pane_id
        self._one_offs[key] += 1
        self._idle_since.pop(key, None)
        try:
            yield
        finally:
            self._one_offs[key] -= 1
            if not self._one_offs[key]:
                del self._one_offs[key]
                self._idle_since[key] = trio.current_time()
                self._idle_changed.set()

    def _still_idle(self, key: str) -> bool:
        """Whether an expired pane's lanes may still close: no call and no watch
        started on it, and no new idle period began, since it expired."""
        return key not in self._idle_since and key not in self._one_offs and not self._watched(key)

    def _watched(self, pane_id: str) -> bool:
        return any(m.pane.pane_id == pane_id and not m.gone for m in self.mirrors)

    async def _close_idle_lanes(self) -> None:
        """Close the lanes of unwatched panes idle for ``idle_lane_seconds`` (until cancelled);
        a watched pane's close when its watch ends."""
        while True:
            self._idle_changed = trio.Event()
            now = trio.current_time()
            # Taken out all at once, before any await: a one-off (or _reconcile)
            # may change the table while a lane closes.
            expired = [
                key for key, since in self._idle_since.items()
                if now - since >= self.idle_lane_seconds
            ]  # fmt: skip
            for key in expired:
                del self._idle_since[key]
            for key in expired:
                for kind in PANE_LANES:
                    if not self._still_idle(key):
                        break  # in use again (or idle anew) since it expired
                    await self.client.close_lane(f"{kind}:{key}")
            if not self._idle_since:
                await self._idle_changed.wait()
                continue
            with trio.move_on_at(min(self._idle_since.values()) + self.idle_lane_seconds):
                await self._idle_changed.wait()

    # ------------------------------------------------------------ PaneSource

    async def list_panes(self) -> list[PaneInfo]:
        """Every pane of the last tree, in tree order; reads no contents."""
        panes = []
        now = time.time()  # statusChangedAt is agliteterm's wall clock, in epoch seconds
        for key, pane in self.discovery.panes.items():
            panes.append(
                PaneInfo(
                    id=key,
                    title=pane.label,
                    directory=pane.directory or "",
                    project_name=pane.workspace_name or None,
                    subtitle=pane.subtitle(now),
                )
            )
        return panes

    def is_listed(self, pane_id: UUID) -> bool:
        mirror = self.mirrors.get(pane_id)
        if mirror is not None and mirror.gone:
            return False
        return pane_id in self.discovery.panes

    def pane_record(self, pane_id: UUID) -> SessionPane:
        """The latest tree record of a listed pane.

        Raises:
            PaneNotFound: it is not in the last tree.
        """
        mirror = self.mirrors.live(pane_id)
        if mirror is not None:
            return mirror.pane
        pane = self.discovery.panes.get(pane_id)
        if pane is None:
            raise PaneNotFound(f"agliteterm pane {pane_id} is gone")
        return pane

    def watch(
        self, pane_id: UUID, on_change: Callable[[], None]
    ) -> AbstractAsyncContextManager[None]:
        """Read the pane (its first screen, then every 100 ms) while anybody watches it."""
        return self.mirrors.watch(pane_id, on_change)

    async def _close_lanes(self, mirror: Mirror) -> None:
        """Nobody watches the pane any more: close its connections."""
        for lane in PANE_LANES:
            await self.client.close_lane(f"{lane}:{mirror.pane.pane_id}")

    @staticmethod
    def _lane(mirror: Mirror) -> str:
        return f"pane:{mirror.pane.pane_id}"

    def _new_mirror(self, pane_id: UUID) -> Mirror:
        pane = self.pane_record(pane_id)
        blank = StyledScreen(columns=pane.columns or 0, rows={}, cursor=(0, 0))
        return Mirror(pane, blank, grid_size(pane, None), uuid=pane_id)

    async def _first_read(self, mirror: Mirror) -> None:
        """The first screen, waited for a while (a slow or failed read starts blank)."""
        with trio.move_on_after(FIRST_READ_SECONDS):
            try:
                try:
                    await self._read_into(mirror)
                except AgliteSessionNotFound:
                    await self._confirm_gone(mirror)
            except PaneSourceError as exc:
                mirror.hiccup(exc)

    async def _poll_once(self, mirror: Mirror) -> None:
        """Wait for the next read (sooner after input), then read the pane.

        Raises:
            PaneSourceError: agliteterm slow, restarting or refusing: the last
                screen stays (nobody is failed for it) and the read is tried again.
        """
        now = trio.current_time()
        fast = now < mirror.fast_until
        interval = self.fast_poll_seconds if fast else self.poll_seconds
        if self.discovery.offer.whole_buffer_reads:
            interval = whole_read_interval(
                interval, mirror.read_seconds, mirror.unchanged, fast=fast
            )
        with trio.move_on_after(interval):
            await mirror.poll_now.wait()
        # Renewed before the read: input written during it asks for the next.
        mirror.poll_now = trio.Event()
        try:
            await self._read_into(mirror)
        except AgliteSessionNotFound:
            await self._confirm_gone(mirror)

    async def _read_into(self, mirror: Mirror) -> None:
        """One read of the pane's screen (and, in the full app, its grid); change if new."""
        if self.discovery.dialect is Dialect.FULL and mirror.pane.columns is None:
            await self._read_metrics(mirror)
        started = trio.current_time()
        result = await self._session_text(
            mirror.pane, lane=self._lane(mirror), timeout=READ_SECONDS, whole=False
        )
        mirror.read_seconds = trio.current_time() - started
        mirror.reads += 1
        mirror.fed()
        screen, mirror.estimate = self._screen_read(
            result, mirror.pane, mirror.metrics, mirror.estimate
        )
        if mirror.gone:
            return
        if screen != mirror.screen:
            mirror.unchanged = 0
            mirror.screen = screen
            # Scrolled back, the frames show the frozen copy (ScrolledView): new output
            # changes nothing a subscriber sees until it returns to the live screen.
            self._settle_size(mirror, changed=mirror.view is None)
        else:
            mirror.unchanged += 1
            self._settle_size(mirror)

    def _screen_read(
        self,
        result: object,
        pane: SessionPane,
        metrics: tuple[int, int] | None,
        estimate: tuple[int, int] | None,
    ) -> tuple[StyledScreen, tuple[int, int] | None]:
        """A screen read as a screen, and the grid estimate a plain answer updates;
        what the answer shows of the build is learned (``offer.py``).

        Raises:
            PaneSourceError: neither styled rows nor text.
        """
        discovery = self.discovery
        if _styled(result):
            styled = parse_styled(result, columns=grid_size(pane, None, metrics, estimate)[0])
            discovery.learn(
                discovery.offer.with_screen_read(styled=True, history_rows=styled.history_rows)
            )
            return styled, estimate
        text = plain_text(result)
        if text is None:
            raise PaneSourceError(
                "agliteterm's session.text answer is neither styled rows nor text"
            )
        discovery.learn(discovery.offer.with_screen_read(styled=False, history_rows=0))
        lines = plain_history(text).split("\n") if text else []
        known_columns, known_rows = estimate or (0, 0)
        # The full app's plain answer is the screen: its line count is a floor for
        # the rows; lite's is the whole buffer, which says nothing of them.
        counted = len(lines) if discovery.dialect is Dialect.FULL else 0
        estimate = (widest_line(lines, known_columns), max(known_rows, counted))
        columns, rows = grid_size(pane, None, metrics, estimate)
        return plain_screen(text, rows, columns), estimate

    async def _read_metrics(self, mirror: Mirror) -> None:
        now = trio.current_time()
        if now - mirror.metrics_at < METRICS_SECONDS:
            return
        mirror.metrics_at = now
        try:
            result = await self.client.call(
                "session.metrics",
                target=mirror.pane.pane_id,
                lane=self._lane(mirror),
                timeout=READ_SECONDS,
            )
        except AgliteUnknownCommand:
            mirror.metrics_at = float("inf")  # this build has none: the width from the text
            self.discovery.learn(self.discovery.offer.with_metrics(False))
            return
        mirror.metrics = parse_metrics(result) or mirror.metrics
        self.discovery.learn(self.discovery.offer.with_metrics(mirror.metrics is not None))

    def _settle_size(self, mirror: Mirror, *, changed: bool = False) -> None:
        size = grid_size(mirror.pane, mirror.screen, mirror.metrics, mirror.estimate)
        if size != mirror.size:
            mirror.size = size
            mirror.cache.forget_below(size[1])
            mirror.view = None  # a scrolled copy of another grid no longer lines up
            changed = True
            pane_columns = mirror.pane.columns
            if pane_columns is not None and pane_columns != size[0]:
                self.discovery.request_poll()  # the tree is behind a resize
        if changed:
            mirror.changed()

    async def _confirm_gone(self, mirror: Mirror) -> None:
        """agliteterm says ``session not found``: the tree decides whether it is gone.

        Raises:
            PaneSourceError: the tree could not be read (the feed's loop reports it
                and tries again, as for any failed read).
        """
        await self.discovery.poll()
        if mirror.uuid not in self.discovery.panes:
            mirror.vanish()

    def _view(self, mirror: Mirror) -> tuple[list[Row], tuple[int, int] | None, ScrollBounds]:
        if mirror.view is not None:
            return mirror.view.lines(), None, mirror.view.bounds()
        lines = screen_lines(mirror.screen, mirror.size[1])
        return lines, mirror.screen.cursor, ScrollBounds(at_bottom=True)

    async def capture(
        self, pane_id: UUID, kind: Representation, *, options: CaptureOptions = SCREEN_ONLY
    ) -> Capture:
        """The pane as last read, or the scrolled copy; from memory, never awaiting."""
        mirror = self.mirrors.require(pane_id)
        columns, rows = mirror.size
        lines, cursor, bounds = self._view(mirror)
        shown = bounds if options.scroll_bounds else None
        if kind is Representation.TEXT:
            text = text_frame(lines)
            return TextCapture(columns=columns, rows=rows, text=text, scroll_bounds=shown)
        cache = mirror.cache if mirror.view is None else None
        data = vt_frame(lines, columns, cursor=cursor, cache=cache)
        return VTCapture(columns=columns, rows=rows, data=data, scroll_bounds=shown)

    async def write(self, pane_id: UUID, data: bytes) -> None:
        """A client's keystrokes, through ``session.type`` with ``allow-control``.

        Raises:
            PaneNotFound: the pane is gone.
            PaneSourceError: not UTF-8 (the API carries text only), refused, or
                written only in part (never retried).
        """
        pane = self.pane_record(pane_id)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PaneSourceError(
                "input is not UTF-8; agliteterm's session.type carries text only"
            ) from exc
        if not text:
            return
        self.input_activity.note(pane_id, time.monotonic())
        mirror = self.mirrors.get(pane_id)
        if mirror is not None and mirror.view is not None:
            mirror.view = None  # typing returns to the live screen, as in a terminal
            mirror.changed()
        try:
            await self._input(
                "session.type",
                pane,
                {"text": text, "allow-control": True},
                timeout=INPUT_SECONDS,
            )
        finally:
            self.poke(pane_id)

    async def type_for_host(
        self,
        pane_id: UUID,
        text: str,
        *,
        allow_control: bool,
        authorized: Callable[[], bool] = lambda: True,
    ) -> None:
        """``session.type`` on the host's own behalf (agent delivery's Enter, markers);
        ``authorized`` is asked before each try.

        Raises:
            InputRefused: ``authorized`` said no (nothing was written).
            PaneNotFound, InputNotWritten, InputIncomplete, PaneSourceError.
        """
        args: dict[str, Any] = {"text": text}
        if allow_control:
            args["allow-control"] = True
        try:
            await self._input(
                "session.type",
                self.pane_record(pane_id),
                args,
                timeout=HOST_INPUT_SECONDS,
                authorized=authorized,
            )
        finally:
            self.poke(pane_id)

    async def paste(
        self, pane_id: UUID, text: str, authorized: Callable[[], bool] = lambda: True
    ) -> None:
        """``session.paste`` of non-empty ``text`` (agliteterm brackets it if the
        program asked for bracketed paste); ``authorized`` is asked before each try.

        Raises:
            InputRefused: ``authorized`` said no (nothing was written).
            PaneNotFound, InputNotWritten, InputIncomplete, PaneSourceError.
        """
        if not text:
            raise InputNotWritten(
                "session.paste", "an empty paste would paste the Windows clipboard", retryable=False
            )
        try:
            await self._input(
                "session.paste",
                self.pane_record(pane_id),
                {"text": text},
                timeout=HOST_INPUT_SECONDS,
                authorized=authorized,
            )
        finally:
            self.poke(pane_id)

    async def _input(
        self,
        cmd: str,
        pane: SessionPane,
        args: dict[str, Any],
        *,
        timeout: float,
        authorized: Callable[[], bool] = lambda: True,
    ) -> None:
        give_up = trio.current_time() + BUSY_RETRY_SECONDS
        async with self._one_off(pane):
            while True:
                if not authorized():  # asked again before every try: tries wait
                    raise InputRefused("the lease went before the input")
                try:
                    await self.client.call(
                        cmd, target=pane.pane_id, args=args, lane=f"input:{pane.pane_id}",
                        timeout=timeout,
                    )  # fmt: skip
                    return
                except InputNotWritten as exc:
                    # Another write holds the pane's input; nothing of ours went.
                    if not exc.retryable or trio.current_time() >= give_up:
                        raise
                await trio.sleep(_BUSY_RETRY_PAUSE)

    def poke(self, pane_id: UUID) -> None:
        """Input went to the pane: read it now and quickly for a second."""
        mirror = self.mirrors.get(pane_id)
        if mirror is not None:
            mirror.hurry(trio.current_time())

    async def scroll(self, pane_id: UUID, direction: ScrollDirection) -> None:
        """Page the host's copy of the scrollback by rows − 3 (``scrollback.py``).

        Raises:
            PaneNotFound: the pane is gone.
            PaneSourceError: the scrollback could not be read (SCROLL_UNAVAILABLE).
        """
        mirror = self.mirrors.require(pane_id)
        columns, rows = mirror.size
        step = scroll_step(rows)
        if direction is ScrollDirection.DOWN:
            if mirror.view is None:
                return
            lower = mirror.view.moved(-step)
            mirror.view = lower if lower.offset > 0 else None
            mirror.changed()
            return
        view = mirror.view
        if view is None:
            try:
                result = await self._session_text(
                    mirror.pane,
                    lane=f"scroll:{mirror.pane.pane_id}",
                    timeout=SNAPSHOT_SECONDS,
                    whole=True,
                )
            except AgliteSessionNotFound:
                await self._confirm_gone(mirror)
                raise
            if _styled(result):
                copy = parse_styled(result, columns=columns)
            else:
                # A build without styles: its plain buffer, the newest lines only
                # (agwinterm 0.17.5 answers the screen alone: nothing to scroll to).
                text = plain_text(result)
                if text is None:
                    raise PaneSourceError("agliteterm's scrollback answer is not text")
                copy = plain_buffer(text, rows=rows, columns=columns, keep=SCROLL_COPY_LINES)
            view = ScrolledView(copy, rows)
            if mirror.gone:
                raise PaneNotFound(f"agliteterm pane {mirror.pane.pane_id} is gone")
            if mirror.size != (columns, rows):
                raise PaneSourceError("the pane's grid changed while its scrollback was read")
        moved = view.moved(step)
        mirror.view = moved if moved.offset > 0 else None
        mirror.changed()

    async def history(self, pane_id: UUID) -> HistoryCapture:
        """Plain scrollback and screen, ``session.text {all:true}`` (the session keeps 2 MiB)."""
        pane = self.pane_record(pane_id)
        async with self._one_off(pane):
            result = await self._session_text(
                pane,
                lane=f"history:{pane.pane_id}",
                timeout=HISTORY_SECONDS,
                whole=True,
                styles=False,
            )
        if plain_text(result) is None:
            raise PaneSourceError("agliteterm's plain session.text answer is not text")
        return HistoryCapture(text=plain_history(result))

    async def _session_text(
        self, pane: SessionPane, *, lane: str, timeout: float, whole: bool, styles: bool = True
    ) -> object:
        """``session.text`` of the screen (``lines:0``) or of everything (``all``).

        A build that refuses that selection (an older lite without ``lines``)
        is asked its own way from then on: the bare form for the screen (lite's
        whole buffer: the screen rows are picked out), ``lines:N`` for all.
        """
        form = "all" if whole else "screen"
        base: dict[str, Any] = {"styles": True} if styles else {}
        if form not in self._refused_forms:
            args = {**base, "all": True} if whole else {**base, "lines": 0}
            try:
                return await self.client.call(
                    "session.text", target=pane.pane_id, args=args, lane=lane, timeout=timeout
                )
            except (AgliteSessionNotFound, AgliteUnknownCommand):
                raise
            except AgliteError as exc:
                logger.info("agliteterm refused session.text %s (%s); asking another way", args,
                            exc.message)  # fmt: skip
                self._refused_forms.add(form)
        args = {**base, "lines": HISTORY_LINES} if whole else base
        return await self.client.call(
            "session.text", target=pane.pane_id, args=args, lane=lane, timeout=timeout
        )

    # ------------------------------------------------------------ for commands

    async def fresh_record(self, pane_id: UUID) -> SessionPane:
        """The pane's record from a tree read now (status, name, grid).

        Raises:
            PaneNotFound, PaneSourceError.
        """
        await self.discovery.poll(lane="commands")
        return self.pane_record(pane_id)

    async def read_screen(self, pane_id: UUID) -> tuple[StyledScreen, tuple[int, int]]:
        """The pane's screen read now (not the mirror's, up to a poll old) and its grid.

        Raises:
            PaneNotFound, PaneSourceError.
        """
        pane = self.pane_record(pane_id)
        mirror = self.mirrors.get(pane_id)
        metrics = mirror.metrics if mirror is not None else None
        estimate = mirror.estimate if mirror is not None else None
        async with self._one_off(pane):  # AgliteSessionNotFound is a PaneNotFound
            result = await self._session_text(
                pane, lane=f"agent:{pane.pane_id}", timeout=READ_SECONDS, whole=False
            )
        screen, estimate = self._screen_read(result, pane, metrics, estimate)
        return screen, grid_size(pane, screen, metrics, estimate)

    def mirrored_screen(self, pane_id: UUID) -> tuple[StyledScreen, tuple[int, int]] | None:
        """The watched pane's last screen and grid, else ``None`` (nothing is read)."""
        mirror = self.mirrors.live(pane_id)
        if mirror is None or not mirror.reads:
            return None
        return mirror.screen, mirror.size

    def health(self) -> Health:
        """The source's state for ``mirror-host status``: ``kind``, ``state``, ``detail``
        (the build, and what a newer one would add)."""
        discovery = self.discovery
        return follow_health(
            "agliteterm",
            discovery.problem,
            waiting=f"connecting to {self.endpoint}" if discovery.dialect is None else None,
            following=lambda: f"{discovery.offer.describe()} at {self.endpoint}",
        )

    def statistics(self) -> dict[str, Any]:
        """Counters for ``mirror-host status`` and the benchmarks."""
        return {
            "agliteterm": self.discovery.version,
            "dialect": self.discovery.dialect.value if self.discovery.dialect else None,
            "requests": dict(self.client.requests),
            **self.mirrors.statistics(),
            "connections": self.client.lanes_open(),
            "restartsSeen": self.discovery.restarts_seen,
        }


def _styled(result: object) -> bool:
    return isinstance(result, Mapping) and isinstance(result.get("rows"), list)
