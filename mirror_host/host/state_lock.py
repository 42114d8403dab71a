"""One state directory, one owner: an exclusive ``flock`` on ``<state-dir>/lock``. I/O.

A host takes it before it loads the device store and keeps it until it has
removed ``serve.json`` and ``admin.sock`` on its way out; ``revoke`` with no
host answering takes it while it reads and rewrites the store. So:

* a second host on the same directory is refused before it reads or creates
  anything there, and never removes the first host's admin socket or
  ``serve.json`` (which only the lock's holder may treat as stale);
* an offline ``revoke`` never races a host that is starting (one that has
  loaded the store but does not answer on its admin socket yet): that host's
  next save (the lastSeen flush) would write the revoked device back.

The lock belongs to the open file, so it goes with the process however that
ends (SIGKILL included): a crashed host leaves nothing to clean up. The file is
never removed (a second owner could then lock a new file of the same name
while the first still holds the old one), and its descriptor is not inherited
by the programs a host starts (Python's default), so a pane's shell can never
keep it. The lock is advisory: it orders mirror-host processes, nothing else.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from mirror_host.errors import MirrorHostError, StoreError
from mirror_host.host.admin_client import ADMIN_SOCKET

__all__ = ["LOCK_NAME", "StateDirBusy", "StateLock"]

LOCK_NAME = "lock"


class StateDirBusy(MirrorHostError):
    """Another mirror-host process holds the state directory."""


class StateLock:
    """The state directory's lock, held until :meth:`release` (or the process ends)."""

    def __init__(self, state_dir: Path) -> None:
        """Take the lock at once, without waiting.

        The directory must exist (a host makes it first with
        :func:`~mirror_host.host.store.ensure_private_dir`).

        Raises:
            StateDirBusy: another process holds it.
            StoreError: the lock file cannot be opened or locked.
        """
        self.path = state_dir / LOCK_NAME
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise StoreError(
                f"{self.path}: cannot open the state directory lock ({exc.strerror or exc})"
            ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            # The words (and the path) a second host has always been refused with.
            raise StateDirBusy(
                "another mirror-host is running with this state directory "
                f"({state_dir / ADMIN_SOCKET})"
            ) from None
        except OSError as exc:
            os.close(fd)
            raise StoreError(
                f"{self.path}: cannot lock the state directory ({exc.strerror or exc})"
            ) from exc
        self._fd: int | None = fd

    def release(self) -> None:
        """Let the next owner in (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the only descriptor drops the lock

    def __enter__(self) -> StateLock:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()
