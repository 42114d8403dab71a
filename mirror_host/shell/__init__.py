"""Shells: OSC 133 prompt marks (:mod:`.marks`) and the integration that emits them. Pure.

The snippets ``mirror-host shell-init`` prints and the local source injects
live in :mod:`.integration`; :mod:`.inject` (I/O) writes them to disk and
starts shells with them.
"""

from __future__ import annotations

from mirror_host.shell.marks import InputMark, Mark, MarkKind, MarkScanner, PromptMarks

__all__ = ["InputMark", "Mark", "MarkKind", "MarkScanner", "PromptMarks"]
