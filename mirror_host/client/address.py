"""``HOST:PORT`` as the client tools take it. Pure.

Unlike the host's listen address this may be a host name (``mini.local``), as
Prowl's Mac client accepts since PR #804; IPv6 literals go in brackets.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["HostAddress", "parse_address"]

_FORM = re.compile(r"\[([0-9A-Fa-f:.%a-zA-Z]+)\]:(\d{1,5})|([A-Za-z0-9._-]+):(\d{1,5})")


@dataclass(frozen=True, slots=True)
class HostAddress:
    """Where a host listens."""

    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def key(self) -> str:
        """The spelling credentials are filed under (host names are case-blind)."""
        return str(HostAddress(self.host.lower(), self.port))


def parse_address(text: str) -> HostAddress:
    """Parse ``HOST:PORT`` or ``[IPv6]:PORT``.

    Raises:
        ValueError: any other form, or a port outside 1 … 65535.
    """
    match = _FORM.fullmatch(text.strip())
    if not match:
        raise ValueError(f"expected HOST:PORT or [IPv6]:PORT, got {text!r}")
    host = match.group(1) or match.group(3)
    port = int(match.group(2) or match.group(4))
    if not 1 <= port <= 65535:
        raise ValueError(f"port {port} is outside 1 … 65535")
    return HostAddress(host, port)
