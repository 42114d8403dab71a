"""The private directory a phone's command line reaches a shell through. I/O (files).

One directory per user, made by the host: ``$XDG_RUNTIME_DIR/mirror-host/shells``
when ``XDG_RUNTIME_DIR`` names a private directory of this user, else
``<state-dir>/shells``. The path is worked out the same way every time, so a
restarted host and the shells started under an earlier one agree on it. It
reaches shells in ``MIRROR_HOST_SHELL_DIR`` as the nonce does
(:mod:`mirror_host.shell.nonce`): local panes in their environment, tmux
through its global environment. The integration keeps it in a shell variable
and drops the environment variable, so programs do not inherit it.

What lives in it (names: :mod:`mirror_host.shell.exchange`):

* ``<pid>.prompt``, touched by shell ``pid`` at every prompt (with builtins
  only). Newer than the process's start, it proves that this shell has the
  integration (:meth:`ShellDirectory.registered`);
* ``<pid>.request``, written atomically by the host (0600): a request id,
  when it expires and the command line;
* ``<pid>.<id>.answer``, created exclusively by whichever of the shell and the
  host decides first.

The directory must be a real directory (never a symlink: checked with
``lstat``) owned by this user and closed to everyone else (0700): anyone who
could write in it could hand the shells a command line.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
import time
from collections.abc import Mapping
from pathlib import Path

from mirror_host.files import write_atomic
from mirror_host.shell.exchange import (
    answer_name,
    encode_request,
    registration_name,
    request_expiry,
    request_name,
)

__all__ = [
    "STALE_SECONDS",
    "ShellDirectory",
    "UnsafeDirectory",
    "default_shell_directory",
    "is_private_directory",
    "new_request_id",
]

logger = logging.getLogger(__name__)

#: Request and answer files older than this are left over from an earlier host.
STALE_SECONDS = 60.0
#: Registration files left by shells gone this long are removed at start.
_OLD_REGISTRATION_SECONDS = 7 * 24 * 3600.0
#: An answer file is never longer than a command line and a word.
_MAX_ANSWER = 70_000


class UnsafeDirectory(OSError):
    """The directory cannot be made, or is not a private directory of this user."""


def new_request_id() -> str:
    """128 random bits as 32 hex digits."""
    return secrets.token_hex(16)


def is_private_directory(path: Path) -> bool:
    """Whether ``path`` is a directory of this user, no symlink, that nobody else may enter."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077


def default_shell_directory(state_dir: Path, environ: Mapping[str, str]) -> Path:
    """Where the directory is: in ``$XDG_RUNTIME_DIR`` if it is usable, else the state dir."""
    runtime = environ.get("XDG_RUNTIME_DIR", "")
    if runtime.startswith("/") and is_private_directory(Path(runtime)):
        return Path(runtime) / "mirror-host" / "shells"
    return state_dir / "shells"


def _private(path: Path) -> None:
    """Make ``path`` (0700) unless it exists; either way it must be private and ours.

    Raises:
        UnsafeDirectory: it cannot be made, or is not private.
    """
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise UnsafeDirectory(f"{path}: cannot create it ({exc.strerror})") from exc
    if not is_private_directory(path):
        raise UnsafeDirectory(
            f"{path}: not a private directory of this user (a symlink, someone else's, "
            "or open to others); remove it and start the host again"
        )


class ShellDirectory:
    """The directory, and the exchange files in it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def prepare(self) -> None:
        """Create the directory (and a missing parent ``mirror-host``), check it, and
        remove request and answer files an earlier host left behind.

        Raises:
            UnsafeDirectory: it cannot be made, or is not a private directory of ours.
        """
        parent = self.path.parent
        if parent.name == "mirror-host" and not parent.exists():
            _private(parent)
        _private(self.path)
        self.remove_stale(time.time())

    def usable(self) -> bool:
        """Whether the directory is (still) a private directory of ours."""
        return is_private_directory(self.path)

    def remove_stale(self, now: float) -> None:
        """Remove exchange files older than :data:`STALE_SECONDS` (a host that died mid-send)
        and registrations untouched for a week (shells long gone)."""
        try:
            entries = list(os.scandir(self.path))
        except OSError:
            return
        for entry in entries:
            name = entry.name
            if name.endswith(".prompt"):
                limit = _OLD_REGISTRATION_SECONDS
            elif name.endswith((".request", ".answer", ".tmp")):
                limit = STALE_SECONDS
            else:
                continue
            try:
                if now - entry.stat(follow_symlinks=False).st_mtime > limit:
                    os.unlink(entry.path)
            except OSError:
                pass

    # ------------------------------------------------------------ registration

    def registered(self, pid: int, started: float, *, slack: float = 0.0) -> bool:
        """Whether shell ``pid`` touched its registration since it started (wall clock,
        ``slack`` seconds of imprecision in ``started`` allowed)."""
        try:
            info = os.lstat(self.path / registration_name(pid))
        except OSError:
            return False
        return stat.S_ISREG(info.st_mode) and info.st_mtime >= started - slack

    # ------------------------------------------------------------ one request

    def write_request(self, pid: int, request_id: str, text: str) -> None:
        """Write ``<pid>.request`` atomically (0600).

        Raises:
            OSError: it could not be written (nothing was).
        """
        data = encode_request(request_id, text, request_expiry(time.time()))
        write_atomic(self.path / request_name(pid), data, mode=0o600, durable=False)

    def read_answer(self, pid: int, request_id: str) -> bytes | None:
        """The answer file's contents, or ``None`` while there is none.

        A file that cannot be read (not a regular file, unreadable) reads as empty:
        somebody made it, so the host cannot cancel, and the exchange ends uncertain.
        """
        path = self.path / answer_name(pid, request_id)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            return None
        except OSError:
            return b""
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return b""
            return os.read(fd, _MAX_ANSWER)
        except OSError:
            return b""
        finally:
            os.close(fd)

    def create_answer(self, pid: int, request_id: str, data: bytes) -> bool:
        """Create the answer file exclusively with ``data``; whether this call created it."""
        path = self.path / answer_name(pid, request_id)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            return False
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        return True

    def remove_exchange(self, pid: int, request_id: str) -> None:
        """Remove the request and its answer (either may be gone already)."""
        for name in (request_name(pid), answer_name(pid, request_id)):
            try:
                os.unlink(self.path / name)
            except FileNotFoundError:
                pass
            except OSError as exc:
                logger.warning("could not remove %s: %s", self.path / name, exc)
