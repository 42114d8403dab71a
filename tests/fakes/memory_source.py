"""An in-memory pane source with injectable delays, for the hub's own tests.

Each pane is a real libghostty :class:`~mirror_host.terminal.Screen` (native, no
I/O). Input written to a pane is echoed onto its screen, as a shell with echo
on would, so a test sees typed text come back as a frame. Every source call can
be made slow (``delays["history"] = 10.0``) or made to fail, which is how the
hub is shown never to wait on a source where the protocol is read.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import trio

from mirror_host.capture.values import (
    SCREEN_ONLY,
    Capability,
    CaptureOptions,
    HistoryCapture,
    TextCapture,
    VTCapture,
)
from mirror_host.control import Representation, ScrollDirection
from mirror_host.errors import PaneNotFound, PaneSourceError
from mirror_host.panes.mirrors import MirrorTable, PaneMirror
from mirror_host.panes.model import PaneInfo, Watchers
from mirror_host.panes.source import Health
from mirror_host.terminal import Screen

__all__ = ["MemoryPane", "MemorySource"]


@dataclass(eq=False)
class MemoryPane:
    id: UUID
    title: str
    screen: Screen
    watchers: Watchers = field(default_factory=Watchers)
    written: bytearray = field(default_factory=bytearray)
    scrolls: list[ScrollDirection] = field(default_factory=list)
    #: Captures served so far (the first is the subscribe's).
    captures: int = 0


class MemorySource:
    """A :class:`~mirror_host.panes.source.PaneSource` over in-memory screens.

    ``delays`` maps an operation (``watch``: a mirror's start, ``first_capture``,
    ``capture``, ``write``, ``scroll``, ``history``) to seconds it takes;
    ``failures`` maps it to an exception it raises (after its delay). A pane's
    mirror (:class:`~mirror_host.panes.mirrors.MirrorTable`, as every source's)
    shares the pane's watchers.
    """

    capabilities = frozenset(
        {Capability.HISTORY, Capability.REMOTE_SCROLL, Capability.SCROLL_STATE}
    )

    def __init__(self) -> None:
        self.panes: dict[UUID, MemoryPane] = {}
        self.delays: dict[str, float] = {}
        self.failures: dict[str, PaneSourceError] = {}
        #: (operation, pane) in the order calls started, for ordering checks.
        self.calls: list[tuple[str, UUID]] = []
        self.mirrors = MirrorTable("pane", create=self._mirror_of, start=self._start)

    def add_pane(self, title: str = "pane", *, columns: int = 40, rows: int = 10) -> UUID:
        pane_id = uuid.uuid4()
        self.panes[pane_id] = MemoryPane(pane_id, title, Screen(columns, rows))
        return pane_id

    def output(self, pane_id: UUID, data: bytes) -> None:
        """The pane's program wrote ``data``."""
        pane = self.panes[pane_id]
        pane.screen.feed(data)
        pane.watchers.notify()

    def close_pane(self, pane_id: UUID) -> None:
        self.panes.pop(pane_id)
        mirror = self.mirrors.get(pane_id)
        if mirror is not None:
            mirror.vanish()

    async def _call(self, operation: str, pane_id: UUID) -> MemoryPane:
        self.calls.append((operation, pane_id))
        delay = self.delays.get(operation, 0.0)
        if delay:
            await trio.sleep(delay)
        failure = self.failures.get(operation)
        if failure is not None:
            raise failure
        pane = self.panes.get(pane_id)
        if pane is None:
            raise PaneNotFound(f"pane {pane_id} is gone")
        return pane

    # ------------------------------------------------------------ PaneSource

    async def run(self) -> None:
        await trio.sleep_forever()

    async def list_panes(self) -> list[PaneInfo]:
        return [PaneInfo(id=p.id, title=p.title, directory="/") for p in self.panes.values()]

    def is_listed(self, pane_id: UUID) -> bool:
        return pane_id in self.panes

    def watch(
        self, pane_id: UUID, on_change: Callable[[], None]
    ) -> AbstractAsyncContextManager[None]:
        return self.mirrors.watch(pane_id, on_change)

    def _mirror_of(self, pane_id: UUID) -> PaneMirror:
        pane = self.panes.get(pane_id)
        if pane is None:
            raise PaneNotFound(f"pane {pane_id} is gone")
        return PaneMirror(uuid=pane_id, watchers=pane.watchers)

    async def _start(self, mirror: PaneMirror) -> None:
        await self._call("watch", mirror.uuid)

    def health(self) -> Health:
        count = len(self.panes)
        return {"kind": "memory", "state": "running", "detail": f"{count} panes in memory"}

    def statistics(self) -> dict[str, Any]:
        return self.mirrors.statistics()

    async def capture(
        self,
        pane_id: UUID,
        representation: Representation,
        *,
        options: CaptureOptions = SCREEN_ONLY,
    ) -> VTCapture | TextCapture:
        pane = self.panes.get(pane_id)
        first = pane is not None and pane.captures == 0
        pane = await self._call("first_capture" if first else "capture", pane_id)
        pane.captures += 1
        bounds = pane.screen.scroll_bounds() if options.scroll_bounds else None
        return pane.screen.capture(representation, bounds=bounds)

    async def write(self, pane_id: UUID, data: bytes) -> None:
        pane = await self._call("write", pane_id)
        pane.written += data
        self.output(pane_id, data)  # echo, as a terminal with echo on does

    async def scroll(self, pane_id: UUID, direction: ScrollDirection) -> None:
        pane = await self._call("scroll", pane_id)
        pane.scrolls.append(direction)
        rows = pane.screen.size[1]
        step = max(1, rows - 3)
        pane.screen.scroll_viewport(-step if direction is ScrollDirection.UP else step)
        pane.watchers.notify()

    async def history(self, pane_id: UUID) -> HistoryCapture:
        # Read when asked, answered after the delay (a slow source's reply is old).
        pane = self.panes.get(pane_id)
        text = pane.screen.history_text() if pane is not None else ""
        await self._call("history", pane_id)
        return HistoryCapture(text=text)
