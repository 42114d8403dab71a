"""How the host reaches agliteterm's control API: a byte stream per connection. I/O.

agliteterm listens on a Windows named pipe only. A host in WSL (or a test)
reaches it through one of two transports, each of which opens one duplex
stream per connection:

* :class:`UnixSocketTransport` (``--agliteterm-socket PATH``): a Unix socket
  speaking the API, such as ``socat`` relaying the pipe through ``npiperelay``
  (docs/operations.md), or a fake;
* :class:`CommandTransport` (``--agliteterm-command CMD``): a program whose
  standard input and output carry one connection, e.g.
  ``npiperelay.exe -ep -s //./pipe/agliteterm``. One process per connection;
  a process that dies is a closed connection, and the client opens the next
  one (a new process) after a backoff.

A native Windows pipe transport is not provided: it could not be run here.
"""

from __future__ import annotations

import logging
import shlex
import subprocess
from pathlib import Path
from typing import Protocol

import trio

from mirror_host.config import AgliteSettings
from mirror_host.errors import ConfigError, PaneSourceUnavailable
from mirror_host.panes.backends import connect_unix, stop_process

__all__ = ["CommandTransport", "Transport", "UnixSocketTransport", "agliteterm_transport"]

logger = logging.getLogger(__name__)

_STOP_GRACE_SECONDS = 1.0


class Transport(Protocol):
    """Opens connections to one agliteterm instance."""

    #: Where the connections go, for logs and stable pane ids.
    endpoint: str

    async def connect(self) -> trio.abc.Stream:
        """A new connection.

        Raises:
            PaneSourceUnavailable: nothing answers there right now.
        """
        ...


class UnixSocketTransport:
    """Connections to a Unix socket that speaks agliteterm's API."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.endpoint = f"unix:{path}"

    async def connect(self) -> trio.abc.Stream:
        return await connect_unix(
            self.path,
            what="agliteterm",
            nobody_listens=f"nothing listens on {self.path} (is the npiperelay/socat relay to "
            "agliteterm's pipe running? see docs/operations.md)",
        )


class _ProcessStream(trio.abc.Stream):
    """A child process's standard input and output as one stream; closing stops it."""

    def __init__(self, process: trio.Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self._stdin = process.stdin
        self._stdout = process.stdout

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self._stdin.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._stdin.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self._stdout.receive_some(max_bytes)

    def fileno(self) -> int:
        """The descriptor replies arrive on (to notice a relay that exited)."""
        stdout = self._stdout
        assert isinstance(stdout, trio.lowlevel.FdStream), "a pipe on POSIX"
        return stdout.fileno()

    async def aclose(self) -> None:
        with trio.CancelScope(shield=True):
            await self._stdin.aclose()
            await self._stdout.aclose()
            process = self.process
            if process.returncode is None:  # a relay ends by itself once its input closes
                with trio.move_on_after(_STOP_GRACE_SECONDS):
                    await process.wait()
            await stop_process(process, grace=_STOP_GRACE_SECONDS)


class CommandTransport:
    """Connections that are each a child process (its stdin and stdout).

    ``command`` is split like a shell would (``shlex``) but run without one.
    The child's standard error goes to the host's, where a relay's complaint
    (``npiperelay``: the pipe does not exist) is seen next to the host's log.
    """

    def __init__(self, command: str) -> None:
        self.argv = shlex.split(command)
        if not self.argv:
            raise ValueError("the agliteterm command is empty")
        self.endpoint = f"command:{command}"

    async def connect(self) -> trio.abc.Stream:
        try:
            process = await trio.lowlevel.open_process(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE
            )
        except OSError as exc:
            raise PaneSourceUnavailable(
                f"cannot start {self.argv[0]!r} to reach agliteterm: {exc.strerror or exc}"
            ) from exc
        logger.debug("started %s (pid %d) for an agliteterm connection", self.argv[0], process.pid)
        return _ProcessStream(process)


def agliteterm_transport(settings: AgliteSettings) -> Transport:
    """The transport the settings name (``agliteterm.socket`` or ``agliteterm.command``).

    Raises:
        ConfigError: neither or both are set, or the command is empty.
    """
    if settings.socket and settings.command:
        raise ConfigError(
            "agliteterm.socket",
            "set agliteterm.socket or agliteterm.command, not both (two ways to reach one window)",
        )
    if settings.socket:
        return UnixSocketTransport(Path(settings.socket).expanduser())
    if settings.command:
        try:
            return CommandTransport(settings.command)
        except ValueError as exc:
            raise ConfigError("agliteterm.command", str(exc)) from exc
    raise ConfigError(
        "agliteterm.socket",
        "--source agliteterm needs --agliteterm-socket PATH or --agliteterm-command CMD "
        '(see docs/operations.md, "Running beside agliteterm")',
    )
