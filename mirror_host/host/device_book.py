"""The device book: the one owner of the paired devices, the PSK table and the pairing window. I/O.

Three things must always agree: the registry in memory, the store on disk and
the PSK table the TLS callback reads (every paired device's key, and ``pair``
with the code while a window is open). They change from several tasks (a
pairing connection, a login, ``revoke`` on the admin socket, the lastSeen
flush, a window expiring), and a save awaits a worker thread; a change that
read the registry before another's await and wrote it after would undo that
other change. The rules that keep them in step:

1. **One lock.** Every change (pair, revoke one, revoke all, a login's lastSeen,
   the lastSeen flush, opening, closing or expiring a window) holds one
   ``trio.Lock`` from the moment it reads the current state until it has swapped
   in the new one. Each change starts from the state the one before it left, so
   no change can lose another.
2. **Disk, then memory, then the world.** A change that must last saves the new
   registry before it swaps it in, and only then does anyone hear of it: the
   phone gets ``paired`` once its device is on disk, a revoked device's
   sessions end once it is gone from disk. The save and the swap are shielded
   from cancellation, so memory is never behind disk. A save fails only when
   the file on disk is still the old one (a directory fsync failing after the
   rename is a warning in :func:`~mirror_host.files.write_atomic`, not a
   failure), so memory is never ahead of it either.
3. **One table.** After every swap the PSK table is rebuilt whole from the
   registry and the open window and replaced in one assignment.
4. **A closed session gets no decision.** A login or pairing that waited for the
   lock first checks its session; one closed meanwhile (revoked, the host
   stopping) is left alone. A pairing whose session closed while its device was
   being saved (the peer went away) removes the device again: a device is kept
   only if its ``paired`` was queued.
5. **Readers do not lock.** The registry and the window are immutable values,
   read whole (``devices``, ``status``, the TLS callback's table).

A login's lastSeen changes memory only; the flush writes it at most once a
second (:data:`LAST_SEEN_FLUSH_SECONDS`) and on stop, and any other save carries
it too, since every save writes the registry as it is.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from types import MappingProxyType
from typing import Any
from uuid import UUID

import trio

from mirror_host.auth.devices import Device, DeviceRegistry
from mirror_host.auth.login import check_device_login, check_pairing, create_device
from mirror_host.auth.pairing import PAIR_IDENTITY
from mirror_host.auth.window import WINDOW_SECONDS, PairingWindow, PairingWindows
from mirror_host.errors import StoreError
from mirror_host.host.store import DeviceStore
from mirror_host.host.tls import PskTable
from mirror_host.session.connection import Session

__all__ = ["LAST_SEEN_FLUSH_SECONDS", "DeviceBook"]

logger = logging.getLogger(__name__)

#: lastSeen is written at most this often (a login must not wait for fsync).
LAST_SEEN_FLUSH_SECONDS = 1.0


class DeviceBook:
    """The paired devices, the PSK table and the pairing window, changed under one lock.

    ``publish`` installs a new PSK table (the server context's ``set_table``);
    ``cut`` ends the sessions of a revoked device (``None``: of every device, and
    the handshakes under way), called under the lock right after the swap.
    """

    def __init__(
        self,
        *,
        store: DeviceStore,
        registry: DeviceRegistry,
        publish: Callable[[PskTable], None],
        cut: Callable[[UUID | None], None],
        window_seconds: float = WINDOW_SECONDS,
        token_bytes: Callable[[int], bytes] = secrets.token_bytes,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self._registry = registry
        self._windows = PairingWindows(seconds=window_seconds)
        self._publish = publish
        self._cut = cut
        self._token_bytes = token_bytes
        self._wall_clock = wall_clock
        self._lock = trio.Lock()
        self._window_changed = trio.Event()
        self._last_seen_dirty = trio.Event()
        self._publish_table()

    # ------------------------------------------------------------ reading

    @property
    def registry(self) -> DeviceRegistry:
        """The paired devices as they are on disk (lastSeen possibly newer)."""
        return self._registry

    @property
    def window(self) -> PairingWindow | None:
        """The pairing window, until it is replaced, closed, used or expired."""
        return self._windows.window

    @property
    def window_seconds(self) -> float:
        """How long a pairing window stays open."""
        return self._windows.seconds

    def pairing_state(self) -> dict[str, Any]:
        """Whether a window is open, and for how long still (``status``)."""
        return self._windows.summary(trio.current_time())

    def window_state(self, number: int) -> dict[str, Any]:
        """What became of window ``number`` (the admin ``pairing`` op)."""
        return self._windows.state_of(number, trio.current_time())

    # ------------------------------------------------------------ sessions

    async def log_in(self, session: Session, device_id: UUID, proof: bytes) -> Device | None:
        """Check ``authenticate`` and log the session in (or reject it); the device."""
        async with self._lock:
            if session.is_closed:
                return None
            device, reason = check_device_login(
                self._registry, nonce=session.nonce, device_id=device_id, proof=proof
            )
            if device is None:
                session.reject(reason)
                return None
            self._registry = self._registry.touched(device.id, self._wall_clock())
            self._last_seen_dirty.set()
            session.accept_authentication(device.id, trio.current_time())
            return device

    async def pair(self, session: Session, name: str, proof: bytes, *, label: str) -> Device | None:
        """Check ``pair``, save the new device, then send ``paired``; the device.

        The window closes before the save (single use: a second pairing waits for
        the lock and finds it gone); its fate is ``pairing`` until the save ends.
        """
        async with self._lock:
            if session.is_closed:
                return None
            problem = check_pairing(
                self._registry,
                self._windows.window,
                now=trio.current_time(),
                nonce=session.nonce,
                name=name,
                proof=proof,
            )
            if problem:
                session.reject(problem)
                return None
            number = self._windows.take()
            self._publish_table()
            self._window_changed.set()
            device = create_device(name, now_unix=self._wall_clock(), token_bytes=self._token_bytes)
            try:
                await self._commit(self._registry.with_device(device))
            except StoreError as exc:
                logger.error("%s pairing failed: %s", label, exc)
                self._windows.settle(number, None)
                session.pairing_failed("the device store could not be written")
                return None
            if _closed(session):
                # Nobody will read `paired` (the peer went away, or the host is
                # stopping): a device kept now would be one no phone has a key for.
                await self._forget_unsent(device, label)
                self._windows.settle(number, None)
                return None
            self._windows.settle(number, device.name)
            session.send_paired(device.id, device.key)
            return device

    async def _forget_unsent(self, device: Device, label: str) -> None:
        logger.warning("%s closed before it was sent its key: unpairing the new device", label)
        try:
            await self._commit(self._registry.without(device.id))
        except StoreError as exc:
            logger.error("%s could not unpair the device it never got: %s", label, exc)

    # ------------------------------------------------------------ admin

    async def revoke(self, device_id: UUID | None) -> list[str]:
        """Remove one device (all with ``None``), save, then cut its sessions; the ids removed.

        Revoking every device also closes the pairing window.

        Raises:
            StoreError: the store could not be written (nothing was changed).
        """
        async with self._lock:
            after, removed = self._registry.revoked(device_id)
            if device_id is not None and not removed:
                return []
            await self._commit(after)
            if device_id is None and self._windows.close():
                self._publish_table()
                self._window_changed.set()
            self._cut(device_id)
        logger.info("revoked %d device(s)", len(removed))
        return removed

    async def open_window(self) -> tuple[PairingWindow, int]:
        """Open a new pairing window (replacing any open one); it and its number."""
        async with self._lock:
            window, number = self._windows.open(
                now=trio.current_time(), now_unix=self._wall_clock(), token_bytes=self._token_bytes
            )
            self._publish_table()
            self._window_changed.set()
        logger.info("pairing window opened for %g s", self._windows.seconds)
        return window, number

    async def close_window(self, number: int | None = None) -> bool:
        """Close the open window (only if it is ``number``, when given); whether one closed."""
        async with self._lock:
            if not self._windows.close(number):
                return False
            self._publish_table()
            self._window_changed.set()
        logger.info("pairing window closed")
        return True

    # ------------------------------------------------------------ running

    async def run(self) -> None:
        """Expire pairing windows and flush lastSeen, until cancelled."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._expire_windows)
            nursery.start_soon(self._flush_last_seen)

    async def settle(self) -> None:
        """Wait until no change is under way (a pairing being saved gets to send ``paired``)."""
        async with self._lock:
            pass

    async def flush(self) -> None:
        """Save a lastSeen not yet written (on stop)."""
        async with self._lock:
            if not self._last_seen_dirty.is_set():
                return
            self._last_seen_dirty = trio.Event()
            try:
                await self._commit(self._registry)
            except StoreError as exc:
                logger.error("could not save lastSeen on stop: %s", exc)

    async def _expire_windows(self) -> None:
        while True:
            window = self._windows.window
            if window is None:
                await self._window_changed.wait()
            else:
                with trio.move_on_at(window.deadline):
                    await self._window_changed.wait()
                async with self._lock:
                    if self._windows.window is window and self._windows.expire(trio.current_time()):
                        self._publish_table()
                        logger.info("pairing window expired")
            self._window_changed = trio.Event()

    async def _flush_last_seen(self) -> None:
        while True:
            await self._last_seen_dirty.wait()
            await trio.sleep(LAST_SEEN_FLUSH_SECONDS)
            async with self._lock:
                self._last_seen_dirty = trio.Event()
                try:
                    await self._commit(self._registry)
                except StoreError as exc:
                    logger.error("could not save lastSeen: %s", exc)

    # ------------------------------------------------------------ under the lock

    async def _commit(self, after: DeviceRegistry) -> None:
        """Save ``after``, then make it the registry and publish its table.

        Raises:
            StoreError: the save failed; nothing changed.
        """
        assert self._lock.locked()
        # Shielded: the save runs to its end in its thread whatever happens, so a
        # cancellation here must not skip the swap that makes memory match disk.
        with trio.CancelScope(shield=True):
            await self.store.save(after)
        self._registry = after
        self._publish_table()

    def _publish_table(self) -> None:
        keys = self._registry.psk_keys()
        window = self._windows.window
        if window is not None:
            keys[PAIR_IDENTITY] = window.code.encode()
        self._publish(PskTable(MappingProxyType(keys)))


def _closed(session: Session) -> bool:
    """Whether ``session`` has closed: asked again after an await, where it may have
    (a function, so that the type checker does not carry an earlier answer over)."""
    return session.is_closed
