"""Shells: OSC 133 prompt marks (:mod:`.marks`), the integration that emits them and
takes phones' command lines (:mod:`.integration`), the host's side of that exchange
(:mod:`.exchange`) and the verdict before it (:mod:`.verdict`). Pure, but for the I/O
modules :mod:`.inject` (writes the snippets to disk and starts shells with them),
:mod:`.login`, :mod:`.nonce` and :mod:`.directory` (the private directory the
exchange goes through).
"""

from __future__ import annotations

from mirror_host.shell.marks import Mark, MarkKind, MarkScanner, PromptMarks

__all__ = ["Mark", "MarkKind", "MarkScanner", "PromptMarks"]
