"""Pane descriptions and their subscribers, as the sources and the host see them. Pure values.

The captures a source hands over (``VTCapture``, ``TextCapture`` …) are
:mod:`mirror_host.capture.values`', below both the sources and the session;
the limits on them are :mod:`mirror_host.limits`'.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from uuid import UUID

__all__ = [
    "PaneInfo",
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
