"""Paired devices as values, and their on-disk JSON form (docs/security.md). Pure.

The registry is immutable: every change returns a new one, which the host's
device book (``host/device_book.py``) persists *before* it acts on it (a device
is on disk before it receives its key).
Keys never appear in ``repr`` and are never logged.
"""

from __future__ import annotations

import base64
import binascii
import json
import unicodedata
from dataclasses import dataclass, field, replace
from uuid import UUID

from mirror_host.errors import StoreError

__all__ = [
    "KEY_BYTES",
    "MAX_DEVICES",
    "MAX_NAME_BYTES",
    "Device",
    "DeviceRegistry",
    "decode_registry",
    "encode_registry",
    "name_problem",
]

MAX_DEVICES = 64
MAX_NAME_BYTES = 240
KEY_BYTES = 32
_FORMAT = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class Device:
    """One paired client. ``key`` is its 32-byte TLS-PSK and HMAC secret."""

    id: UUID
    name: str
    key: bytes = field(repr=False)
    paired_at: float
    last_seen: float | None = None

    @property
    def identity(self) -> str:
        """Its TLS-PSK identity: the upper-case canonical UUID."""
        return str(self.id).upper()


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceRegistry:
    """The host's stable identity and its paired devices, in pairing order."""

    host_id: UUID
    devices: tuple[Device, ...] = ()

    def find(self, device_id: UUID) -> Device | None:
        """The device with this id, if paired."""
        return next((d for d in self.devices if d.id == device_id), None)

    def with_device(self, device: Device) -> DeviceRegistry:
        """A registry that also holds ``device``."""
        return replace(self, devices=(*self.devices, device))

    def without(self, device_id: UUID) -> DeviceRegistry:
        """A registry without that device (unchanged if absent)."""
        return replace(self, devices=tuple(d for d in self.devices if d.id != device_id))

    def revoked(self, device_id: UUID | None) -> tuple[DeviceRegistry, list[str]]:
        """Without that device (``None``: without every device), and the identities removed."""
        removed = [d.identity for d in self.devices if device_id is None or d.id == device_id]
        kept = () if device_id is None else tuple(d for d in self.devices if d.id != device_id)
        return replace(self, devices=kept), removed

    def touched(self, device_id: UUID, now: float) -> DeviceRegistry:
        """A registry where that device was last seen at ``now`` (Unix seconds)."""
        return replace(
            self,
            devices=tuple(
                replace(d, last_seen=now) if d.id == device_id else d for d in self.devices
            ),
        )

    def psk_keys(self) -> dict[str, bytes]:
        """Identity → key for every device, for the TLS table."""
        return {d.identity: d.key for d in self.devices}


def name_problem(name: str) -> str | None:
    """Why a device name is refused, or ``None``.

    Non-empty, at most 240 UTF-8 bytes, no control (Cc) or format (Cf) characters.
    """
    if not name:
        return "the name is empty"
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        return f"the name is longer than {MAX_NAME_BYTES} UTF-8 bytes"
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Cs") for ch in name):
        return "the name holds control or format characters"
    return None


def encode_registry(registry: DeviceRegistry) -> bytes:
    """The store file's bytes (pretty JSON, keys as base64)."""
    document = {
        "format": _FORMAT,
        "hostID": str(registry.host_id).upper(),
        "devices": [
            {
                "id": d.identity,
                "name": d.name,
                "key": base64.b64encode(d.key).decode("ascii"),
                "pairedAt": d.paired_at,
                "lastSeen": d.last_seen,
            }
            for d in registry.devices
        ],
    }
    return (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def decode_registry(data: bytes, *, origin: str) -> DeviceRegistry:
    """Parse the store file.

    Raises:
        StoreError: not JSON, an unknown format, or a malformed device; the
            message names ``origin`` and the fault but never a key.
    """
    try:
        document = json.loads(data.decode("utf-8"))
        if not isinstance(document, dict) or document.get("format") != _FORMAT:
            raise ValueError(
                f"unknown format {document.get('format') if isinstance(document, dict) else None!r}"
            )
        host_id = UUID(document["hostID"])
        devices = []
        for index, raw in enumerate(document["devices"]):
            try:
                key = base64.b64decode(raw["key"], validate=True)
                if len(key) != KEY_BYTES:
                    raise ValueError("key is not 32 bytes")
                last_seen = raw.get("lastSeen")
                devices.append(
                    Device(
                        id=UUID(raw["id"]),
                        name=str(raw["name"]),
                        key=key,
                        paired_at=float(raw["pairedAt"]),
                        last_seen=None if last_seen is None else float(last_seen),
                    )
                )
            except (KeyError, TypeError, ValueError, binascii.Error) as exc:
                raise ValueError(f"device #{index + 1}: {exc.__class__.__name__}: {exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise StoreError(f"{origin}: the device store is corrupt ({exc})") from exc
    return DeviceRegistry(host_id=host_id, devices=tuple(devices))
