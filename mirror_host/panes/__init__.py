"""Pane sources: the seam (``model``, ``source``) and the concrete sources."""

from __future__ import annotations
