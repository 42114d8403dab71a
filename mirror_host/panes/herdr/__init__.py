"""The Herdr pane source: protocol values (pure), a Trio client, discovery, the
observe stream, polling, and the source over them (``source.HerdrSource``)."""

from __future__ import annotations
