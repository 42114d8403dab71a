"""The seam between the host and wherever panes come from. Typing only.

The host depends on this protocol and nothing else; the command line builds the
concrete source (local PTYs, tmux, Herdr, agliteterm) and hands it over, so every
test can run the whole host against any source. The same source goes to its
command backend, which types against a Protocol of its own (``commands/``).

Sampling contract: the host reads a pane (``capture``) only while somebody is
subscribed to it, and it does so inside ``watch(pane_id, on_change)``. The
source calls ``on_change`` whenever the pane may have changed (and when it
goes), and the host sends the next frame as soon as the client's gate is open;
the host keeps no poll timer of its own. A source whose program cannot push its
output polls it itself, inside ``watch``, at a rate that program affords (Herdr
without an observe stream every 200 ms, agliteterm by how busy a pane is).
``watch`` is also where a source starts such per-pane machinery (an observe
stream, a poll) and where it stops it when the last subscriber leaves: every
source here does that through the one refcounted watch of
:mod:`mirror_host.panes.mirrors`.

Two methods feed ``mirror-host status``: ``health()``, which says why a source
lists no panes (no tmux server, Herdr not running, every local pane exited), and
``statistics()``, counters of its own (at least ``watching``, the panes it
mirrors now).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, TypedDict
from uuid import UUID

from mirror_host.capture.values import (
    SCREEN_ONLY,
    Capture,
    CaptureOptions,
    HistoryCapture,
)
from mirror_host.control import Representation, ScrollDirection
from mirror_host.panes.model import PaneInfo

__all__ = ["Health", "PaneSource"]


class Health(TypedDict):
    """A source's state for ``mirror-host status`` (``source  kind, state: detail``)."""

    #: ``local``, ``tmux``, ``herdr``, ``agliteterm`` …
    kind: str
    #: One word: ``running``, ``following``, ``starting``, ``unreachable``, ``empty`` …
    state: str
    #: What it means, in words (why there are no panes, what to do).
    detail: str


class PaneSource(Protocol):
    """Panes the host can list, mirror, type into, scroll and page back through."""

    #: Optional capability strings this source really implements (``history``,
    #: ``remote-scroll``, ``viewport-text-v1``, ``styled-scrollback-v1``,
    #: ``scroll-state-v1``).
    capabilities: frozenset[str]

    async def list_panes(self) -> list[PaneInfo]:
        """The current panes, without reading any terminal contents."""
        ...

    def is_listed(self, pane_id: UUID) -> bool:
        """Whether ``pane_id`` is among the current panes; in memory, never awaits."""
        ...

    def watch(
        self, pane_id: UUID, on_change: Callable[[], None]
    ) -> AbstractAsyncContextManager[None]:
        """Keep ``pane_id`` observed while the context is open (one mirror of the
        pane however many watch it; none once the last left).

        Raises (on enter):
            PaneNotFound: the pane is gone.
            PaneSourceError: its mirror could not start (a first read failed).
        """
        ...

    async def capture(
        self, pane_id: UUID, kind: Representation, *, options: CaptureOptions = SCREEN_ONLY
    ) -> Capture:
        """The pane's screen now, as ``kind`` asks (VT bytes or text).

        ``options`` says what the capture carries besides the screen; a source
        is asked only for what its capabilities advertise (viewport text and
        the styled archive around a scrolled-back viewport: VT captures only).

        Raises:
            PaneNotFound: the pane is gone.
            PaneSourceError: any other failure (closes the subscriber).
        """
        ...

    async def write(self, pane_id: UUID, data: bytes) -> None:
        """Write already-encoded input bytes to the pane, unchanged.

        Raises:
            PaneNotFound, PaneSourceError.
        """
        ...

    async def scroll(self, pane_id: UUID, direction: ScrollDirection) -> None:
        """Scroll the pane's viewport by about a page (rows − 3, at least 1).

        Raises:
            UnsupportedOperation: the source cannot scroll.
            PaneNotFound, PaneSourceError.
        """
        ...

    async def history(self, pane_id: UUID) -> HistoryCapture:
        """Retained text, scrollback and screen, styles stripped (the session cuts 2 MiB).

        Raises:
            UnsupportedOperation, PaneNotFound, PaneSourceError.
        """
        ...

    async def run(self) -> None:
        """Background work (spawn PTYs, follow discovery); runs until cancelled."""
        ...

    def health(self) -> Health:
        """Whether the source can list panes now, and if not, why; in memory."""
        ...

    def statistics(self) -> dict[str, Any]:
        """Counters of its own for ``mirror-host status`` and the benchmarks (JSON
        values), at least ``watching``; in memory."""
        ...
