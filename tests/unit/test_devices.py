"""The device registry as values, and its store format."""

from __future__ import annotations

import uuid

import pytest

from mirror_host.auth.devices import (
    Device,
    DeviceRegistry,
    decode_registry,
    encode_registry,
    name_problem,
)
from mirror_host.errors import StoreError


def registry() -> DeviceRegistry:
    host = DeviceRegistry(host_id=uuid.uuid4())
    for name in ("Mac", "Phone"):
        host = host.with_device(Device(id=uuid.uuid4(), name=name, key=bytes(32), paired_at=1.0))
    return host


def test_revoked_one_all_or_unknown() -> None:
    before = registry()
    mac, phone = before.devices
    after, removed = before.revoked(mac.id)
    assert removed == [mac.identity] and after.devices == (phone,)
    everyone, removed_all = before.revoked(None)
    assert removed_all == [mac.identity, phone.identity] and everyone.devices == ()
    assert everyone.host_id == before.host_id
    same, nothing = before.revoked(uuid.uuid4())
    assert nothing == [] and same == before


def test_store_round_trip_and_corruption() -> None:
    base = registry()
    before = base.touched(base.devices[0].id, 5.0)
    assert before.devices[0].last_seen == 5.0
    assert decode_registry(encode_registry(before), origin="x") == before
    with pytest.raises(StoreError, match="corrupt"):
        decode_registry(b"{not json", origin="devices.json")
    assert "key=" not in repr(before.devices[0])  # keys never show up in logs or tracebacks


def test_names() -> None:
    assert name_problem("iPhone") is None
    assert name_problem("") and name_problem("a\x00b") and name_problem("é" * 121)
