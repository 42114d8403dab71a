"""``--log-packets``: each packet a logged-in connection exchanges, as hex. I/O (logging).

For looking at what really went over the wire, after TLS: every line ends in one
whole packet (length prefix included) in hex, which ``mirror-host wire decode``
reads back. Off by default, because after login the packets *are* the panes:
every screen sent and every key typed (passwords included) lands in the log
(docs/security.md).

Never logged, at any setting: the packets of a connection before it logged in
(the ``challenge`` nonce, the ``authenticate`` and ``pair`` proofs) and every
packet of a pairing connection (``paired`` carries the new device's key). Those
are noted by direction and size only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from mirror_host.wire.constants import HEADER, MAX_PAYLOAD_BYTES

__all__ = ["PacketLog", "split_packets"]

logger = logging.getLogger("mirror_host.packets")


def split_packets(buffer: bytearray) -> list[bytes]:
    """Take every complete packet (prefix and payload) off the front of ``buffer``.

    A length prefix no packet may have ends the framing: the rest is taken as one
    piece (the session closes such a connection anyway).
    """
    packets: list[bytes] = []
    while len(buffer) >= HEADER.size:
        (length,) = HEADER.unpack_from(buffer)
        if not 1 <= length <= MAX_PAYLOAD_BYTES:
            packets.append(bytes(buffer))
            buffer.clear()
            break
        end = HEADER.size + length
        if len(buffer) < end:
            break
        packets.append(bytes(buffer[:end]))
        del buffer[:end]
    return packets


class PacketLog:
    """The packets of one connection, each direction framed on its own."""

    def __init__(self, label: Callable[[], str]) -> None:
        self._label = label
        self._buffers = {"in": bytearray(), "out": bytearray()}

    def received(self, data: bytes, *, logged_in: bool) -> None:
        """Bytes read from the peer; ``logged_in``: the connection had logged in before."""
        self._log("in", data, logged_in)

    def sent(self, data: bytes, *, logged_in: bool) -> None:
        """Bytes written to the peer."""
        self._log("out", data, logged_in)

    def _log(self, direction: str, data: bytes, logged_in: bool) -> None:
        buffer = self._buffers[direction]
        buffer += data
        for packet in split_packets(buffer):
            if logged_in:
                logger.info("%s %s %s", self._label(), direction, packet.hex())
            else:
                logger.info(
                    "%s %s withheld, %d bytes (before login: nonces, proofs and keys)",
                    self._label(),
                    direction,
                    len(packet),
                )
