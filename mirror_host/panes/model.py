"""Pane descriptions and their subscribers, as the sources and the host see them. Pure values.

The captures a source hands over (``VTCapture``, ``TextCapture`` …) are
:mod:`mirror_host.capture.values`', below both the sources and the session;
the limits on them are :mod:`mirror_host.limits`'.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from uuid import UUID

# Kept importable from here for host/ (hub.py imports them from this module):
# new code imports them from mirror_host.capture.values and mirror_host.limits.
from mirror_host.capture.values import (
    Capability,
    Capture,
    HistoryCapture,
    ScrollBounds,
    StyledArchive,
    TextCapture,
    VTCapture,
)
from mirror_host.limits import (
    MAX_ARCHIVE_BYTES,
    MAX_ARCHIVE_CELLS,
    MAX_ARCHIVE_ROWS,
    MAX_HISTORY_BYTES,
    MAX_TEXT_BYTES,
    MAX_VT_BYTES,
    POLL_SECONDS,
)

__all__ = [
    "MAX_ARCHIVE_BYTES",
    "MAX_ARCHIVE_CELLS",
    "MAX_ARCHIVE_ROWS",
    "MAX_HISTORY_BYTES",
    "MAX_TEXT_BYTES",
    "MAX_VT_BYTES",
    "POLL_SECONDS",
    "Capability",
    "Capture",
    "HistoryCapture",
    "PaneInfo",
    "ScrollBounds",
    "StyledArchive",
    "TextCapture",
    "VTCapture",
    "Watchers",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class PaneInfo:
    """One pane as listed: a stable id and its labels."""

    id: UUID
    title: str
    directory: str
    project_name: str | None = None
    subtitle: str | None = None


class Watchers:
    """The change callbacks of one pane's subscribers (every source keeps one per pane)."""

    def __init__(self) -> None:
        self._callbacks: set[Callable[[], None]] = set()

    def add(self, callback: Callable[[], None]) -> None:
        self._callbacks.add(callback)

    def discard(self, callback: Callable[[], None]) -> None:
        self._callbacks.discard(callback)

    def __bool__(self) -> bool:
        return bool(self._callbacks)

    def notify(self) -> None:
        """Tell every subscriber the pane may have changed (a callback may unsubscribe)."""
        for callback in list(self._callbacks):
            callback()
