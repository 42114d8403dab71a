"""Revoking paired devices from outside the host, whether or not one runs. I/O.

With a running host, the revocation goes through its admin socket: it deletes
the device, closes its live connections and saves the store. With none, the
store is rewritten here, atomically, while this process holds the state
directory's lock (:mod:`mirror_host.host.state_lock`), so no host starts and
loads the old store meanwhile. A host that holds the lock but does not answer
yet is starting: it has loaded (or is loading) the store, and a rewrite now
would be undone by its next save, so the revocation waits for it to answer, at
most :data:`HOST_START_SECONDS`, and goes through it.
"""

from __future__ import annotations

import contextlib
import re
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mirror_host.errors import MirrorHostError, StoreError
from mirror_host.host.admin_client import NoHostRunning, admin_request
from mirror_host.host.state_lock import StateDirBusy, StateLock
from mirror_host.host.store import DeviceStore

__all__ = [
    "HOST_START_SECONDS",
    "RevocationFailed",
    "device_id_problem",
    "match_device_id",
    "revoke",
]

#: How long a revocation waits for a host that holds the state directory (it is
#: starting) to answer on its admin socket.
HOST_START_SECONDS = 10.0

#: A device id as typed: the whole UUID, or at least its first 4 hex digits.
_ID_PREFIX = re.compile(r"[0-9A-Fa-f][0-9A-Fa-f-]{3,35}")


class RevocationFailed(MirrorHostError):
    """Nothing was revoked; the message says why."""


def device_id_problem(text: str) -> str | None:
    """Why ``text`` cannot name a device (its whole id, or the first 4 or more
    characters of it), or ``None``."""
    if _ID_PREFIX.fullmatch(text.strip()):
        return None
    return f"{text!r} is not a device id (or the first 4 or more characters of one)"


def match_device_id(text: str, known: list[str]) -> tuple[str | None, str]:
    """The one id in ``known`` that ``text`` names (whole, or a prefix of at least 4
    characters, any case), or ``None`` and why not."""
    wanted = text.strip().upper()
    matches = [device_id for device_id in known if device_id.upper().startswith(wanted)]
    if len(matches) == 1:
        return matches[0], ""
    if not matches:
        return None, f"no paired device {wanted} (`mirror-host devices` lists them)"
    return None, f"{wanted} matches {len(matches)} devices: give more of the id"


def revoke(
    state_dir: Path, device_id: str | None, *, offline: Callable[[NoHostRunning], None]
) -> list[str]:
    """Remove the device ``device_id`` names (``None``: every device); the ids removed.

    ``offline`` is told why no host answered before the store is rewritten here.

    Raises:
        RevocationFailed: no device, or more than one, matches ``device_id``; the
            store cannot be read, locked or written; the host refused, stopped
            meanwhile, or held the state directory without answering.
    """
    deadline = time.monotonic() + HOST_START_SECONDS
    while True:
        try:
            reply = admin_request(state_dir, {"op": "devices"})
            break
        except NoHostRunning as exc:
            absent = exc
        try:
            lock = _lock_offline(state_dir)
        except StateDirBusy:
            # A host holds the directory but does not answer yet: it is starting.
            if time.monotonic() >= deadline:
                raise RevocationFailed(
                    "another mirror-host holds this state directory but did not answer on "
                    f"its admin socket within {HOST_START_SECONDS:g} s; nothing was revoked: "
                    "try again"
                ) from None
            time.sleep(0.1)
            continue
        except StoreError as exc:
            raise RevocationFailed(f"{exc}; nothing was revoked") from exc
        with lock:
            offline(absent)
            return _revoke_in_store(state_dir, device_id)
    return _revoke_through_host(state_dir, device_id, [d["id"] for d in reply["devices"]])


def _revoke_through_host(state_dir: Path, device_id: str | None, known: list[str]) -> list[str]:
    request: dict[str, Any] = {"op": "revoke", "all": True}
    if device_id is not None:
        target, problem = match_device_id(device_id, known)
        if target is None:
            raise RevocationFailed(problem)
        request = {"op": "revoke", "deviceID": target}
    try:
        reply = admin_request(state_dir, request)
    except NoHostRunning as exc:
        raise RevocationFailed(str(exc)) from exc
    if not reply.get("ok"):
        raise RevocationFailed(str(reply.get("error")))
    revoked: list[str] = reply["revoked"]
    return revoked


def _lock_offline(state_dir: Path) -> contextlib.AbstractContextManager[object]:
    """The state directory's lock, for rewriting the store with no host running
    (nothing to hold when there is no directory, hence no store, at all).

    Raises:
        StateDirBusy: a host holds it.
        StoreError: the lock cannot be taken.
    """
    if not state_dir.is_dir():
        return contextlib.nullcontext()
    return StateLock(state_dir)


def _revoke_in_store(state_dir: Path, device_id: str | None) -> list[str]:
    """Rewrite the store without the device(s); the caller holds the state directory."""
    store = DeviceStore(state_dir)
    try:
        registry = store.load()
        if registry is None:
            if device_id is not None:
                raise RevocationFailed(f"no paired device {device_id}")
            return []
        target: uuid.UUID | None = None
        if device_id is not None:
            matched, problem = match_device_id(device_id, [d.identity for d in registry.devices])
            if matched is None:
                raise RevocationFailed(problem)
            target = uuid.UUID(matched)
        after, removed = registry.revoked(target)
        store.save_sync(after)
    except StoreError as exc:
        raise RevocationFailed(f"{exc}; nothing was revoked") from exc
    return removed
