"""A pane's mirror, and the one refcounted watch every pane source uses. I/O (Trio).

While anybody watches a pane, its source keeps a *mirror* of it: the watchers'
change callbacks, and whatever a capture reads from memory (a libghostty
screen fed by the PTY, tmux's ``%output`` or Herdr's observe stream;
agliteterm's last styled rows). :class:`PaneMirror` is what every mirror has;
a source subclasses it with what it keeps.

:class:`MirrorTable` counts the watchers, in one place for every source:

* the first watcher of a pane *creates* its mirror, which is in the table
  before anything is awaited, then *starts* it (a first read, a seed). A
  second watcher arriving meanwhile, however slow that read is, joins that
  mirror and waits for its start instead of starting another: a pane never has
  two mirrors. If the start fails with a ``PaneSourceError`` (``PaneNotFound``
  included), the waiters fail the same way; if it ends any other way (the
  watcher starting it went away, or an unexpected error), the next waiter
  starts it anew;
* a source that feeds its mirrors itself (an observe stream, a poll loop)
  gives a *feed*, run in the table's nursery under the mirror's scope until
  the mirror stops or its pane goes; a feed that fails is said once
  (:meth:`PaneMirror.hiccup`), retried a second later, and its recovery said
  too (:meth:`PaneMirror.fed`);
* the last watcher to leave *stops* it (pause the pane, close its
  connections), shielded from cancellation: each source bounds its own stop;
* a pane that goes away ends its mirror (:meth:`PaneMirror.vanish`): its
  watchers are told, and find it gone at their next look.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, NoReturn, TypeVar
from uuid import UUID

import trio

from mirror_host.errors import PaneNotFound, PaneSourceError
from mirror_host.panes.model import Watchers

__all__ = ["HICCUP_SECONDS", "MirrorTable", "PaneMirror"]

logger = logging.getLogger(__name__)

#: After a feed failed, wait this long before feeding the mirror again.
HICCUP_SECONDS = 1.0


@dataclass(eq=False, kw_only=True)
class PaneMirror:
    """What a source keeps of one watched pane; subclassed with the rest."""

    uuid: UUID
    watchers: Watchers = field(default_factory=Watchers)
    #: The pane went away for good (its watchers were told).
    gone: bool = False
    #: The feed's scope: cancelled when the mirror stops or its pane goes.
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    #: Set (then renewed) to read a polled pane now rather than at the next tick.
    poll_now: trio.Event = field(default_factory=trio.Event)
    #: A feed failed and that was said; the next success is said too.
    failing: bool = False
    #: Set once the start finished, either way (watchers that joined wait on it).
    started: trio.Event = field(default_factory=trio.Event)
    #: Why the start failed, for the watchers that waited on it.
    failure: PaneSourceError | None = None

    def label(self) -> str:
        """The pane in log lines (a source names it its own way)."""
        return f"pane {self.uuid}"

    def changed(self) -> None:
        """Tell every watcher the pane may have changed."""
        self.watchers.notify()

    def vanish(self) -> None:
        """The pane is gone for good: stop feeding it and tell the watchers."""
        if not self.gone:
            self.gone = True
            self.scope.cancel()
            self.watchers.notify()

    def hiccup(self, problem: PaneSourceError) -> None:
        """Reading the pane failed; said once until it works again (the last screen stays)."""
        if not self.failing:
            self.failing = True
            logger.warning(
                "mirroring %s: %s; showing its last screen meanwhile", self.label(), problem
            )

    def fed(self) -> None:
        """Reading the pane worked: if it had been failing, say that it is over."""
        if self.failing:
            self.failing = False
            logger.info("mirroring %s again", self.label())


M = TypeVar("M", bound=PaneMirror)


class MirrorTable(Generic[M]):
    """The mirrors of the watched panes of one source, and the refcounted watch.

    Args:
        noun: how the source's panes are named in "… is gone" (``"Herdr pane"``).
        create: a new mirror of a listed pane, made without awaiting.
            Raises PaneNotFound when the pane is not listed.
        start: the mirror's first read or seed (none: nothing to read).
        stop: undo what watching started, after the last watcher left (or a
            start failed).
        feed: keeps the mirror fed until it stops; needs :meth:`run`.
    """

    def __init__(
        self,
        noun: str,
        *,
        create: Callable[[UUID], M],
        start: Callable[[M], Awaitable[None]] | None = None,
        stop: Callable[[M], Awaitable[None]] | None = None,
        feed: Callable[[M], Awaitable[None]] | None = None,
    ) -> None:
        self._noun = noun
        self._create = create
        #: What a source may leave out (``None``): nothing to read, undo or feed.
        self._start_hook, self._stop_hook, self._feed = start, stop, feed
        self._mirrors: dict[UUID, M] = {}
        self._nursery: trio.Nursery | None = None
        #: Mirrors started since the source began: one per pane and watch period,
        #: however many watchers joined it.
        self.starts = 0

    # ------------------------------------------------------------ reading

    def get(self, pane_id: UUID) -> M | None:
        """The pane's mirror while it is watched, gone or not."""
        return self._mirrors.get(pane_id)

    def live(self, pane_id: UUID) -> M | None:
        """The pane's mirror while it is watched and not gone."""
        mirror = self._mirrors.get(pane_id)
        return None if mirror is None or mirror.gone else mirror

    def require(self, pane_id: UUID) -> M:
        """The pane's live mirror.

        Raises:
            PaneNotFound: it is not watched, or it is gone.
        """
        mirror = self._mirrors.get(pane_id)
        if mirror is None or mirror.gone:
            raise PaneNotFound(f"{self._noun} {pane_id} is gone")
        return mirror

    def __iter__(self) -> Iterator[M]:
        return iter(list(self._mirrors.values()))

    def __len__(self) -> int:
        return len(self._mirrors)

    def statistics(self) -> dict[str, Any]:
        """The figures every source reports: how many panes it mirrors now."""
        return {"watching": len(self._mirrors)}

    # ------------------------------------------------------------ running

    async def run(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> NoReturn:
        """Run the feeds until cancelled (a source with a feed runs this in its ``run``)."""
        try:
            async with trio.open_nursery() as self._nursery:
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None  # a watch now is refused, not started in a closed nursery

    # ------------------------------------------------------------ watching

    @asynccontextmanager
    async def watch(self, pane_id: UUID, on_change: Callable[[], None]) -> AsyncIterator[None]:
        """Keep the pane mirrored while the context is open; ``on_change`` is told of changes.

        Raises (on enter):
            PaneNotFound: the pane is not listed, or went while its mirror started.
            PaneSourceError: the mirror could not start.
        """
        mirror = await self._join(pane_id)
        mirror.watchers.add(on_change)
        try:
            yield
        finally:
            mirror.watchers.discard(on_change)
            if not mirror.watchers:
                await self._stop(pane_id, mirror)

    async def _join(self, pane_id: UUID) -> M:
        """The pane's started mirror: the one there is, or a new one."""
        while True:
            mirror = self._mirrors.get(pane_id)
            if mirror is None or mirror.gone:
                return await self._start(pane_id)
            await mirror.started.wait()
            if mirror.failure is not None:
                raise _again(mirror.failure)
            if mirror.gone:
                raise PaneNotFound(f"{self._noun} {pane_id} is gone")
            if self._mirrors.get(pane_id) is mirror:
                return mirror
            # Its start was abandoned (the watcher starting it went away), or it
            # stopped before this watcher joined: start it anew.

    async def _start(self, pane_id: UUID) -> M:
        if self._feed is not None and self._nursery is None:
            raise PaneSourceError(f"the source of {self._noun} {pane_id} is not running")
        mirror = self._create(pane_id)
        # In the table before the first await: a watcher arriving while the start
        # is under way joins this mirror rather than starting another.
        self._mirrors[pane_id] = mirror
        self.starts += 1
        try:
            if self._start_hook is not None:
                await self._start_hook(mirror)
            if mirror.gone:
                raise PaneNotFound(f"{self._noun} {pane_id} is gone")
        except BaseException as exc:
            if isinstance(exc, PaneSourceError):
                mirror.failure = exc
            await self._stop(pane_id, mirror)
            raise
        finally:
            mirror.started.set()
        if self._feed is not None and self._nursery is not None:
            self._nursery.start_soon(self._feeding, mirror, self._feed)
        return mirror

    async def _feeding(self, mirror: M, feed: Callable[[M], Awaitable[None]]) -> None:
        with mirror.scope:
            while not mirror.gone:
                try:
                    await feed(mirror)
                except PaneSourceError as exc:
                    # The backend hiccuped: never the host's end, nor the watchers'.
                    mirror.hiccup(exc)
                    await trio.sleep(HICCUP_SECONDS)

    async def _stop(self, pane_id: UUID, mirror: M) -> None:
        mirror.scope.cancel()
        if self._mirrors.get(pane_id) is not mirror:
            return  # a newer mirror of the pane took its place: that one is watched
        del self._mirrors[pane_id]
        if self._stop_hook is not None:
            with trio.CancelScope(shield=True):
                await self._stop_hook(mirror)


def _again(failure: PaneSourceError) -> PaneSourceError:
    """The failure of a start another watcher waited on, raised anew for this one."""
    if isinstance(failure, PaneNotFound):
        return PaneNotFound(str(failure))
    return PaneSourceError(str(failure))
