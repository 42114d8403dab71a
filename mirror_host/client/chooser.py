"""Choosing a pane and wording what happened, for ``mirror-host attach``. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from mirror_host.control import EndReason, PaneDescriptor

__all__ = [
    "BACKOFF_SECONDS",
    "backoff",
    "describe_end",
    "find_pane",
    "format_pane_list",
    "parse_choice",
]

#: Waits between reconnection attempts; the last one repeats.
BACKOFF_SECONDS = (1.0, 2.0, 4.0, 8.0, 15.0)


def find_pane(panes: Sequence[PaneDescriptor], choice: str) -> PaneDescriptor | None:
    """``--pane``: a 1-based index into the list, a pane id, or a unique id prefix."""
    text = choice.strip()
    if text.isdigit():
        index = int(text)
        return panes[index - 1] if 1 <= index <= len(panes) else None
    wanted = text.upper()
    exact = [p for p in panes if str(p.id).upper() == wanted]
    if exact:
        return exact[0]
    matches = [p for p in panes if str(p.id).upper().startswith(wanted)] if len(wanted) >= 4 else []
    return matches[0] if len(matches) == 1 else None


def format_pane_list(panes: Sequence[PaneDescriptor]) -> list[str]:
    """``  1) title  (directory) [busy]`` for each pane."""
    width = len(str(len(panes)))
    lines = []
    for index, pane in enumerate(panes, start=1):
        busy = "  [mirrored by another device]" if pane.busy else ""
        lines.append(f"  {index:>{width}}) {pane.title}  ({pane.directory}){busy}")
    return lines


def parse_choice(text: str, count: int) -> int | None:
    """The 0-based index a typed number picks, or ``None``."""
    text = text.strip()
    if not text.isdigit():
        return None
    number = int(text)
    return number - 1 if 1 <= number <= count else None


def backoff(attempt: int) -> float:
    """Seconds to wait before reconnection attempt ``attempt`` (1-based)."""
    return BACKOFF_SECONDS[min(max(attempt, 1), len(BACKOFF_SECONDS)) - 1]


_ENDED = {
    EndReason.TAKEN_OVER: "another device took over the pane",
    EndReason.HOST_STOPPED: "the host stopped",
    EndReason.PANE_CLOSED: "the pane was closed on the host",
}


def describe_end(reason: EndReason) -> str:
    """``ended`` in plain words."""
    return _ENDED[reason]
