"""Reaching a source's backend, said once: a Unix socket, a child process stopped. I/O.

Herdr listens on a Unix socket, and agliteterm is reached through one (a relay,
or a fake); both read the refusals the same way. Herdr's observe program and an
agliteterm relay command are child processes that must be stopped by their pid
however they behave.
"""

from __future__ import annotations

from pathlib import Path

import trio

from mirror_host.errors import PaneSourceUnavailable

__all__ = ["connect_unix", "stop_process"]


async def connect_unix(path: Path, *, what: str, nobody_listens: str) -> trio.SocketStream:
    """A new connection to the Unix socket at ``path``.

    Raises:
        PaneSourceUnavailable: ``nobody_listens`` when there is no socket or no
            listener; "cannot reach ``what`` at ``path``" for any other refusal.
    """
    try:
        return await trio.open_unix_socket(str(path))
    except (FileNotFoundError, ConnectionRefusedError) as exc:
        raise PaneSourceUnavailable(nobody_listens) from exc
    except OSError as exc:
        raise PaneSourceUnavailable(f"cannot reach {what} at {path}: {exc}") from exc


async def stop_process(process: trio.Process, *, grace: float) -> None:
    """Stop a child that has not ended: SIGTERM, and SIGKILL if it lingers ``grace``
    seconds; it is reaped either way. Callers shield it from cancellation."""
    if process.returncode is None:
        process.terminate()
        with trio.move_on_after(grace):
            await process.wait()
    if process.returncode is None:
        process.kill()
        await process.wait()
