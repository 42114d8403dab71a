"""The real device store on a disk that stalls when a test says so.

:class:`HeldStore` is :class:`~mirror_host.host.store.DeviceStore` itself (the
same atomic file, the same one-write-at-a-time lock, the same worker thread),
except that while :meth:`HeldStore.hold` is in force a write stops in its
thread, store lock held, until :meth:`HeldStore.release`: a slow ``fsync``
exactly where the host awaits it, so a test can let another change arrive
while one is on its way to disk.
"""

from __future__ import annotations

import threading
from pathlib import Path

import trio

from mirror_host.auth.devices import DeviceRegistry
from mirror_host.errors import StoreError
from mirror_host.host.store import DeviceStore

__all__ = ["HeldStore"]


class HeldStore(DeviceStore):
    """A device store whose writes a test can hold at the disk."""

    def __init__(self, state_dir: Path) -> None:
        super().__init__(state_dir)
        #: Writes the host awaited that went through.
        self.saves = 0
        #: Make every write fail as a full disk would.
        self.fail = False
        #: Set once a held write has reached the disk and stopped there.
        self.waiting = trio.Event()
        self._held = False
        self._gate = threading.Event()

    def hold(self) -> None:
        """Stop the next writes at the disk (each one until :meth:`release`)."""
        self._held, self.waiting, self._gate = True, trio.Event(), threading.Event()

    def release(self) -> None:
        """Let the held write (and every later one) through."""
        self._held = False
        self._gate.set()

    async def save(self, registry: DeviceRegistry) -> None:
        await super().save(registry)
        self.saves += 1

    def save_sync(self, registry: DeviceRegistry) -> None:
        if self._held and threading.current_thread() is not threading.main_thread():
            trio.from_thread.run_sync(self.waiting.set)
            self._gate.wait(timeout=30)
        if self.fail:
            raise StoreError(f"{self.path}: cannot write the device store (disk full)")
        super().save_sync(registry)

    async def saved(self, count: int) -> None:
        """Wait until ``count`` awaited writes went through."""
        while self.saves < count:
            await trio.sleep(0.01)
