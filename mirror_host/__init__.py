"""mirror-host: a Prowl remote-mirror host for Herdr, tmux and local PTY panes."""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
