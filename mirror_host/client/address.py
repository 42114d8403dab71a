"""``HOST:PORT`` as the client tools take it. Pure.

Unlike the host's listen address (:func:`~mirror_host.config.parse_endpoint`)
this may be a host name (``mini.local``), as Prowl's Mac client accepts since
PR #804; IPv6 literals go in brackets. The split and the printed form are the
listen address's own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mirror_host.config import Endpoint, split_host_port

__all__ = ["HostAddress", "parse_address"]

#: What a host may be: a name, an IPv4 address or (bracketed) an IPv6 one.
_HOST = re.compile(r"[0-9A-Fa-f:.%]+|[A-Za-z0-9._-]+")


@dataclass(frozen=True, slots=True)
class HostAddress(Endpoint):
    """Where a host listens."""

    @property
    def key(self) -> str:
        """The spelling credentials are filed under (host names are case-blind)."""
        return str(HostAddress(self.host.lower(), self.port))


def parse_address(text: str) -> HostAddress:
    """Parse ``HOST:PORT`` or ``[IPv6]:PORT``.

    Raises:
        ValueError: any other form, or a port outside 1 … 65535.
    """
    host, port = split_host_port(text)
    if not _HOST.fullmatch(host) or not 1 <= port <= 65535:
        raise ValueError(
            f"expected HOST:PORT or [IPv6]:PORT with a port of 1 … 65535, got {text!r}"
        )
    return HostAddress(host, port)
