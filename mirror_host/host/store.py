"""The device store on disk: atomic, private, never silently replaced. I/O.

``<state-dir>/devices.json`` holds the stable host id and every paired device.
The directory is 0700 (an existing one is checked, never taken over) and the
file 0600. Writes go to a temporary file in the same directory, are fsynced,
renamed over the old file and the directory is fsynced, so a crash at any
moment leaves either the old file or the new one. A file that exists but
cannot be read or parsed stops the program with a clear error: replacing it
would silently unpair every device.
"""

from __future__ import annotations

import logging
import os
import stat
import uuid
from pathlib import Path

import trio

from mirror_host.auth.devices import DeviceRegistry, decode_registry, encode_registry
from mirror_host.errors import StoreError
from mirror_host.files import write_atomic

__all__ = ["DeviceStore", "ensure_private_dir"]

STORE_NAME = "devices.json"

logger = logging.getLogger(__name__)


def ensure_private_dir(path: Path) -> None:
    """Create ``path`` (and parents) 0700, or check that an existing one is safe.

    An existing directory is never taken over: it must be a directory of this
    user that nobody else can write to (so ``--state-dir /tmp`` is refused, not
    locked down). It is tightened to 0700 only when the host made it or it is
    empty, so a directory of the user's keeps its mode on every run.

    Raises:
        StoreError: it cannot be created, or is not a private directory of ours.
    """
    try:
        path.mkdir(parents=True, mode=0o700)
        created = True
    except FileExistsError:
        created = False
    except OSError as exc:
        raise StoreError(f"{path}: cannot create the state directory ({exc.strerror})") from exc
    try:
        info = path.stat()
    except OSError as exc:
        raise StoreError(f"{path}: cannot use the state directory ({exc.strerror})") from exc
    if not stat.S_ISDIR(info.st_mode):
        raise StoreError(f"{path}: the state directory is not a directory")
    if info.st_uid != os.getuid():
        raise StoreError(f"{path}: the state directory belongs to another user")
    if info.st_mode & 0o022:
        raise StoreError(
            f"{path}: other users can write to this directory; "
            "choose a private one with --state-dir"
        )
    try:
        # Only a directory we made (now or as an empty one) is ours to lock down.
        if created or not any(path.iterdir()):
            os.chmod(path, 0o700)
    except OSError as exc:
        raise StoreError(f"{path}: cannot use the state directory ({exc.strerror})") from exc


class DeviceStore:
    """Loads and saves the :class:`DeviceRegistry` in one state directory."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.path = state_dir / STORE_NAME
        self._lock = trio.Lock()

    def load(self) -> DeviceRegistry | None:
        """The stored registry, or ``None`` when there is no store yet.

        A store other users could read (a backup restored with the wrong mode) is
        made private again, as ssh insists on private keys, and that is logged:
        its keys may have been read.

        Raises:
            StoreError: the file exists but cannot be read or parsed, belongs to
                another user, or cannot be made private.
        """
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreError(f"{self.path}: cannot read the device store ({exc.strerror})") from exc
        try:
            self._make_private(fd)
            with os.fdopen(fd, "rb", closefd=False) as file:
                data = file.read()
        except OSError as exc:
            raise StoreError(f"{self.path}: cannot read the device store ({exc.strerror})") from exc
        finally:
            os.close(fd)
        return decode_registry(data, origin=str(self.path))

    def _make_private(self, fd: int) -> None:
        info = os.fstat(fd)
        if info.st_uid != os.getuid():
            raise StoreError(
                f"{self.path}: the device store belongs to another user; "
                "run as that user or choose another --state-dir"
            )
        mode = stat.S_IMODE(info.st_mode)
        if not mode & 0o077:
            return
        try:
            os.fchmod(fd, 0o600)
        except OSError as exc:
            raise StoreError(
                f"{self.path}: other users can read the device store (mode {mode:04o}) and it "
                f"cannot be made private ({exc.strerror}): run `chmod 600 {self.path}`"
            ) from exc
        logger.warning(
            "%s was readable by other users (mode %04o); made it private (0600). If anyone "
            "else could read it, revoke every device (`mirror-host revoke --all`) and pair again",
            self.path,
            mode,
        )

    def load_or_create(self) -> DeviceRegistry:
        """Load the store, creating it (with a new host id) on first use.

        Raises:
            StoreError: as :meth:`load`, or the new store cannot be written.
        """
        ensure_private_dir(self.state_dir)
        # A crash mid-write leaves a temporary file beside the store; the store
        # itself is intact (old or new), so the leftover is only litter.
        for leftover in self.state_dir.glob(f".{STORE_NAME}.*.tmp"):
            leftover.unlink(missing_ok=True)
        registry = self.load()
        if registry is None:
            registry = DeviceRegistry(host_id=uuid.uuid4())
            self.save_sync(registry)
        return registry

    def save_sync(self, registry: DeviceRegistry) -> None:
        """Write ``registry`` atomically (blocking).

        Raises:
            StoreError: the write failed; the previous file is intact.
        """
        try:
            write_atomic(self.path, encode_registry(registry))
        except OSError as exc:
            raise StoreError(
                f"{self.path}: cannot write the device store ({exc.strerror or exc})"
            ) from exc

    async def save(self, registry: DeviceRegistry) -> None:
        """Write ``registry`` atomically in a worker thread, one write at a time.

        Raises:
            StoreError: the write failed; the previous file is intact.
        """
        async with self._lock:
            await trio.to_thread.run_sync(self.save_sync, registry)
