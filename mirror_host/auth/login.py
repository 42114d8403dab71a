"""Deciding ``authenticate`` and ``pair`` (docs/protocol.md §8). Pure.

Each check returns the reason it failed, for the log; the peer never learns it
(every failure is the same silent close).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from uuid import UUID

from mirror_host.auth.devices import KEY_BYTES, MAX_DEVICES, Device, DeviceRegistry, name_problem
from mirror_host.auth.proofs import device_proof, pair_proof, proofs_match
from mirror_host.auth.window import PairingWindow

__all__ = ["check_device_login", "check_pairing", "create_device"]


def check_device_login(
    registry: DeviceRegistry, *, nonce: bytes, device_id: UUID, proof: bytes
) -> tuple[Device | None, str]:
    """``(device, "")`` when the proof is right, else ``(None, reason)``."""
    device = registry.find(device_id)
    if device is None:
        return None, "unknown device"
    expected = device_proof(device.key, registry.host_id, device_id, nonce)
    if not proofs_match(expected, proof):
        return None, "wrong device proof"
    return device, ""


def check_pairing(
    registry: DeviceRegistry,
    window: PairingWindow | None,
    *,
    now: float,
    nonce: bytes,
    name: str,
    proof: bytes,
) -> str | None:
    """``None`` when a new device may be created, else the reason it may not."""
    if window is None:
        return "no pairing window is open"
    if not window.is_open(now):
        return "the pairing window has expired"
    problem = name_problem(name)
    if problem:
        return problem
    if len(registry.devices) >= MAX_DEVICES:
        return f"already {MAX_DEVICES} paired devices"
    expected = pair_proof(window.code, registry.host_id, name, nonce)
    if not proofs_match(expected, proof):
        return "wrong pairing proof"
    return None


def create_device(name: str, *, now_unix: float, token_bytes: Callable[[int], bytes]) -> Device:
    """A new device: random UUID, 32 random key bytes."""
    return Device(
        id=uuid.UUID(bytes=token_bytes(16), version=4),
        name=name,
        key=token_bytes(KEY_BYTES),
        paired_at=now_unix,
    )
