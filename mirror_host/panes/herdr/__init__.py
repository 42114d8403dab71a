"""The Herdr pane source: protocol values (pure), a Trio client, the source."""

from __future__ import annotations
