"""The control file the scripted agents of the tests are steered by. Standard library only.

A test writes JSON (``{"state": "blocked"}`` …) to the file; the agent looks
at it between reads of its terminal and takes the settings whenever the file
changed (modification time or size), ignoring a half-written one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["ControlFile"]


class ControlFile:
    """One JSON control file, read again only when it changed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[float, int] | None = None

    def changed(self) -> dict[str, Any] | None:
        """The new settings if the file changed since the last call, else ``None``."""
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return None
        stamp = (stat.st_mtime, stat.st_size)
        if stamp == self._stamp:
            return None
        try:
            settings = json.loads(self.path.read_text() or "{}")
        except json.JSONDecodeError:
            return None  # half written: read again next time
        self._stamp = stamp
        return settings if isinstance(settings, dict) else {}
