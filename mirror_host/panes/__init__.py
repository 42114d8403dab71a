"""Pane sources: the seam (``model``, ``source``) and the concrete sources.

The captures they hand over are :mod:`mirror_host.capture`'s, below them.
"""

from __future__ import annotations
