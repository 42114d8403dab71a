"""Polling: a mirror fed by ``pane.read`` (``visible``, ``ansi``) every POLL_SECONDS. I/O.

Used where no ``herdr`` program exists or its observe stream keeps failing.
Rows come back separated by ``\\r\\n``, trimmed, SGR only; they are drawn on
the mirror's screen at the pane's size from the snapshot. Change is detected by
content: Herdr's ``revision`` is always 0. Never a ``recent`` read with
``format: text``: that makes Herdr scroll the operator's own screen. A read
Herdr holds back while another client's harvest runs is waited for
(``READ_SECONDS``): the poll is late, the frame comes when it comes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

from mirror_host.errors import PaneSourceUnavailable
from mirror_host.panes.herdr.client import READ_SECONDS, HerdrClient
from mirror_host.panes.herdr.mirror import Mirror
from mirror_host.panes.herdr.protocol import (
    HerdrPane,
    HerdrPaneNotFound,
    Snapshot,
    frame_from_rows,
    grid_size,
    split_rows,
)
from mirror_host.terminal import Screen

__all__ = ["VisiblePoller", "draw_rows"]

#: How long to wait before reading again while Herdr is unreachable.
_UNAVAILABLE_RETRY_SECONDS = 1.0


def draw_rows(
    pane: HerdrPane, snapshot: Snapshot, text: str, screen: Screen | None = None
) -> Screen:
    """A screen showing ``pane.read`` rows (reusing ``screen`` if the size holds)."""
    rows = split_rows(text)
    size = grid_size(pane, snapshot, rows)
    if screen is None or screen.size != size:
        screen = Screen(*size)
    else:
        screen.reset()
    screen.feed(frame_from_rows(rows))
    return screen


class VisiblePoller:
    """Reads panes' visible rows and keeps polled mirrors up to date."""

    def __init__(
        self,
        client: HerdrClient,
        snapshot: Callable[[], Snapshot],
        confirm_gone: Callable[[Mirror], Awaitable[None]],
        *,
        poll_seconds: float,
    ) -> None:
        """
        Args:
            client: the Herdr client.
            snapshot: the latest snapshot (for grid sizes).
            confirm_gone: called when Herdr says a polled pane is not found; it
                reads a snapshot and vanishes the mirror if the pane really went.
            poll_seconds: time between two reads of one pane.
        """
        self.client = client
        self.poll_seconds = poll_seconds
        self._snapshot = snapshot
        self._confirm_gone = confirm_gone

    async def read(self, pane: HerdrPane) -> str:
        """The pane's visible rows as ``pane.read`` gives them (``\\r\\n``-separated ANSI)."""
        result = await self.client.call(
            "pane.read",
            {"pane_id": pane.pane_id, "source": "visible", "format": "ansi"},
            timeout=READ_SECONDS,
        )
        read = result.get("read")
        text = read.get("text") if isinstance(read, dict) else None
        return text if isinstance(text, str) else ""

    def draw(self, pane: HerdrPane, text: str, screen: Screen | None = None) -> Screen:
        """:func:`draw_rows` at the latest snapshot's size."""
        return draw_rows(pane, self._snapshot(), text, screen)

    async def redraw(self, mirror: Mirror) -> None:
        """Read and draw the mirror now, rather than at its next poll."""
        text = await self.read(mirror.pane)
        if not mirror.gone:
            mirror.last_text = text
            mirror.screen = self.draw(mirror.pane, text, mirror.screen)

    async def run(self, mirror: Mirror, *, until: float | None = None) -> None:
        """Poll ``mirror`` until it is gone or (if given) the clock reaches ``until``."""
        while not mirror.gone and (until is None or trio.current_time() < until):
            scrolls = mirror.scrolls
            try:
                text = await self.read(mirror.pane)
            except HerdrPaneNotFound:
                await self._confirm_gone(mirror)
                continue
            except PaneSourceUnavailable:
                # Herdr restarting: keep the pane until a snapshot says otherwise.
                await trio.sleep(_UNAVAILABLE_RETRY_SECONDS)
                continue
            mirror.fed()
            if mirror.scrolls != scrolls:
                continue  # begun before a scroll landed: it may show the old view
            if text != mirror.last_text:
                mirror.last_text = text
                mirror.screen = self.draw(mirror.pane, text, mirror.screen)
                mirror.watchers.notify()
            mirror.poll_now = trio.Event()
            with trio.move_on_after(self.poll_seconds):
                await mirror.poll_now.wait()
