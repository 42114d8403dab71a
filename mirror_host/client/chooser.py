"""Choosing a pane and wording what happened, for ``mirror-host attach``. Pure."""

from __future__ import annotations

import re
from collections.abc import Sequence

from mirror_host.control import EndReason, PaneDescriptor

__all__ = [
    "BACKOFF_SECONDS",
    "DETACH_KEY",
    "LOCKED_OUT",
    "NOT_PROWL",
    "backoff",
    "describe_end",
    "find_pane",
    "format_pane_list",
    "key_name",
    "parse_choice",
    "parse_detach_key",
    "short_ids",
]

#: The default detach key, Ctrl-] (as telnet and ssh-like tools use).
DETACH_KEY = b"\x1d"

#: What a host that closes the connection before TLS means (after "ADDRESS "): Prowl
#: hosts refuse an address that way for a while after too many failures.
LOCKED_OUT = (
    "closed the connection before TLS began: it refuses an address for up to 60 s after "
    "12 failed handshakes or logins within a minute; wait a minute, then try again"
)

#: What a TLS failure that is no PSK failure means (after "ADDRESS "): the wrong port.
NOT_PROWL = (
    "does not speak Prowl's TLS (TLS 1.2 with a pre-shared key): is a Prowl mirror "
    "host listening on that port? (mirror-host's default is 7880)"
)

#: Waits between reconnection attempts; the last one repeats.
BACKOFF_SECONDS = (1.0, 2.0, 4.0, 8.0, 15.0)


def find_pane(panes: Sequence[PaneDescriptor], choice: str) -> PaneDescriptor | None:
    """``--pane``: a 1-based index into the list, a pane id, or a unique id prefix."""
    text = choice.strip()
    if text.isdigit():
        index = int(text)
        if 1 <= index <= len(panes):
            return panes[index - 1]
        # Not an index: maybe an id prefix that happens to be all digits.
    wanted = text.upper()
    exact = [p for p in panes if str(p.id).upper() == wanted]
    if exact:
        return exact[0]
    matches = [p for p in panes if str(p.id).upper().startswith(wanted)] if len(wanted) >= 4 else []
    return matches[0] if len(matches) == 1 else None


def short_ids(panes: Sequence[PaneDescriptor], *, minimum: int = 8) -> list[str]:
    """Each pane's id cut to the shortest length (at least ``minimum``) that keeps
    them apart: what ``--pane`` takes as a prefix."""
    ids = [str(pane.id).upper() for pane in panes]
    for length in range(minimum, 37):
        cut = [pane_id[:length] for pane_id in ids]
        if len(set(cut)) == len(cut):
            return cut
    return ids


def format_pane_list(panes: Sequence[PaneDescriptor], *, with_ids: bool = False) -> list[str]:
    """``  1) title  (directory) [busy]`` for each pane; ``with_ids`` adds ``  id 3F2A9C1B``."""
    width = len(str(len(panes)))
    ids = short_ids(panes) if with_ids else ["" for _ in panes]
    lines = []
    for index, (pane, short) in enumerate(zip(panes, ids, strict=True), start=1):
        busy = "  [mirrored by another device]" if pane.busy else ""
        shown = f"  id {short}" if short else ""
        lines.append(f"  {index:>{width}}) {pane.title}  ({pane.directory}){shown}{busy}")
    return lines


_CONTROL_KEY = re.compile(r"(?:ctrl-|ctrl\+|c-|\^)(.)", re.IGNORECASE)
#: Control keys that cannot detach: Escape starts every arrow and function key,
#: and Enter must reach the pane.
_RESERVED_KEYS = {0x1B: "Escape", 0x0D: "Enter", 0x0A: "Enter"}


def parse_detach_key(text: str) -> bytes:
    """``ctrl-]``, ``C-]`` or ``^]`` (any case) as the byte the terminal sends.

    Raises:
        ValueError: not a control key, or one the pane needs (Escape, Enter).
    """
    match = _CONTROL_KEY.fullmatch(text.strip())
    char = match.group(1).upper() if match else ""
    if not "@" <= char <= "_":
        raise ValueError(f"expected a control key such as ctrl-] or ctrl-q, got {text!r}")
    code = ord(char) - 0x40
    if code in _RESERVED_KEYS:
        raise ValueError(
            f"{text.strip()} is {_RESERVED_KEYS[code]}, which the pane needs: choose another"
        )
    return bytes([code])


def key_name(key: bytes) -> str:
    """``Ctrl-]`` for ``b"\x1d"``."""
    return "Ctrl-" + chr(key[0] + 0x40)


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
    # `ended takenOver` names nobody: it may be another attach of this same device.
    EndReason.TAKEN_OVER: (
        "the pane was taken over, by another device or another `mirror-host attach` of this one"
    ),
    EndReason.HOST_STOPPED: "the host stopped",
    EndReason.PANE_CLOSED: "the pane was closed on the host",
}


def describe_end(reason: EndReason) -> str:
    """``ended`` in plain words."""
    return _ENDED[reason]
