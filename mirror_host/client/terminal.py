"""The user's terminal for ``mirror-host attach``: raw mode and the alternate screen. I/O.

The terminal is opened as ``/dev/tty`` (its own open file, so making it
non-blocking for Trio never touches the shell's stdin or stdout). On the way
out everything is put back: the modes frames set, the main screen, and the
exact termios settings found on the way in.
"""

from __future__ import annotations

import os
import termios
import tty
from collections.abc import Iterator
from contextlib import contextmanager

import trio

from mirror_host.errors import ClientError
from mirror_host.streams import STREAM_GONE

__all__ = ["ALT_SCREEN_OFF", "ALT_SCREEN_ON", "LocalTerminal", "TerminalUnavailable"]

ALT_SCREEN_ON = b"\x1b[?1049h\x1b[H\x1b[2J"
ALT_SCREEN_OFF = b"\x1b[?1049l"


#: The characters the line discipline acts on before a program sees them.
_SPECIAL_CHARACTERS = tuple(
    getattr(termios, name)
    for name in (
        "VINTR", "VQUIT", "VSUSP", "VERASE", "VKILL", "VEOF", "VWERASE",
        "VLNEXT", "VREPRINT", "VDISCARD", "VSTART", "VSTOP", "VDSUSP", "VSTATUS",
    )
    if hasattr(termios, name)
)  # fmt: skip


class TerminalUnavailable(ClientError):
    """There is no terminal to draw in (attach needs one)."""


class LocalTerminal:
    """``/dev/tty``, read and written through Trio."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._stream: trio.lowlevel.FdStream | None = None

    @classmethod
    def open(cls, path: str = "/dev/tty") -> LocalTerminal:
        """Open the controlling terminal.

        Raises:
            TerminalUnavailable: there is none (attach needs an interactive terminal).
        """
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
        except OSError as exc:
            raise TerminalUnavailable(
                f"attach needs an interactive terminal ({path}: {exc.strerror})"
            ) from exc
        if not os.isatty(fd):
            os.close(fd)
            raise TerminalUnavailable(f"attach needs an interactive terminal ({path} is not one)")
        return cls(fd)

    def size(self) -> tuple[int, int]:
        """``(columns, rows)`` now (80x24 if the terminal does not say)."""
        try:
            size = os.get_terminal_size(self.fd)
        except OSError:
            return 80, 24
        return max(1, size.columns or 80), max(1, size.lines or 24)

    @contextmanager
    def raw(self) -> Iterator[None]:
        """Raw mode (every key, Ctrl-C included, is a byte for the pane) until exit."""
        saved = termios.tcgetattr(self.fd)
        try:
            tty.setraw(self.fd, termios.TCSANOW)
            yield
        finally:
            termios.tcsetattr(self.fd, termios.TCSADRAIN, saved)

    @contextmanager
    def key_ends_line(self, key: bytes) -> Iterator[None]:
        """While a line is typed (the pane prompt), ``key`` also ends it, with no Enter.

        The terminal's second end-of-line character (``VEOL``) is set to ``key``, so
        a line read from this terminal comes back at once, holding ``key``. A key
        the line discipline would take for itself first (Ctrl-Q and Ctrl-S for flow
        control, Ctrl-U to erase the line …) loses that meaning meanwhile.
        """
        saved = termios.tcgetattr(self.fd)
        changed = termios.tcgetattr(self.fd)
        characters = changed[6]
        disabled = bytes([os.fpathconf(self.fd, "PC_VDISABLE") & 0xFF])
        for index in _SPECIAL_CHARACTERS:
            if characters[index] == key:
                characters[index] = disabled
        if key in (b"\x11", b"\x13"):  # Ctrl-Q, Ctrl-S: XON/XOFF
            changed[0] &= ~termios.IXON
        characters[termios.VEOL] = key
        try:
            termios.tcsetattr(self.fd, termios.TCSANOW, changed)
            yield
        finally:
            termios.tcsetattr(self.fd, termios.TCSANOW, saved)

    @property
    def stream(self) -> trio.lowlevel.FdStream:
        if self._stream is None:
            self._stream = trio.lowlevel.FdStream(os.dup(self.fd))
        return self._stream

    async def write(self, data: bytes) -> None:
        """Write to the terminal (waits while it is slow: the host then coalesces)."""
        if data:
            await self.stream.send_all(data)

    async def read(self) -> bytes:
        """The next keys typed (``b""`` when the terminal went away)."""
        try:
            return bytes(await self.stream.receive_some(4096))
        except (*STREAM_GONE, OSError):
            return b""

    def write_blocking(self, data: bytes) -> None:
        """Write from outside Trio (the last restore, after a cancellation)."""
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.fd, view) :]
            except BlockingIOError:
                continue
            except OSError:
                return

    def close(self) -> None:
        if self._stream is not None:
            stream, self._stream = self._stream, None
            stream.close()
        try:
            os.close(self.fd)
        except OSError:
            pass
