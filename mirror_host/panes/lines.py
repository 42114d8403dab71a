"""Newline-delimited lines out of a byte stream, with a bound. Pure.

Herdr's socket, its observe program's output and tmux control mode all speak
one line per record. Every reader of those streams cuts them with this one
splitter, so the size bound and the end-of-stream rule are the same everywhere.
"""

from __future__ import annotations

from mirror_host.errors import PaneSourceError

__all__ = ["LineSplitter", "LineTooLong"]


class LineTooLong(PaneSourceError):
    """A line grew past the splitter's bound without ending."""


class LineSplitter:
    """Feed bytes, take complete lines (without their ``\\n``).

    ``max_line`` bounds the unfinished line held in memory; a peer that never
    sends a newline gets :class:`LineTooLong` instead of our memory.
    """

    def __init__(self, max_line: int) -> None:
        self.max_line = max_line
        self._buffer = bytearray()

    def feed(self, data: bytes | bytearray) -> list[bytes]:
        """Add ``data``; return the lines it completed, oldest first.

        Only ``data`` is searched for a newline: a long unfinished line is not
        scanned again on every read. When there is one, the buffer is split in
        one go (the usual case for control mode: many short lines per read).

        Raises:
            LineTooLong: the unfinished line is longer than ``max_line``.
        """
        buffer = self._buffer
        if b"\n" not in data:
            buffer += data
            if len(buffer) > self.max_line:
                raise LineTooLong(f"a line longer than {self.max_line} bytes")
            return []
        buffer += data
        *lines, rest = bytes(buffer).split(b"\n")
        self._buffer = bytearray(rest)
        if len(rest) > self.max_line:
            raise LineTooLong(f"a line longer than {self.max_line} bytes")
        return lines

    def finish(self) -> bytes | None:
        """End of stream: the unterminated last line, if any."""
        if not self._buffer:
            return None
        line = bytes(self._buffer)
        self._buffer.clear()
        return line

    @property
    def pending(self) -> int:
        """Bytes held for an unfinished line."""
        return len(self._buffer)
