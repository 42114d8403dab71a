"""Terminal emulation on libghostty-vt: frames, text, history and scrolling."""

from __future__ import annotations

from mirror_host.terminal.screen import Cell, Screen

__all__ = ["Cell", "Screen"]
