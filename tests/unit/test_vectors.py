"""Every protocol vector in tests/vectors, in both directions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mirror_host import control
from mirror_host.inspect import describe
from mirror_host.wire import PacketDecoder, encode_packet

VECTOR_DIR = Path(__file__).resolve().parent.parent / "vectors"


def _load() -> list[dict[str, Any]]:
    vectors: list[dict[str, Any]] = []
    for path in sorted(VECTOR_DIR.glob("*.json")):
        document = json.loads(path.read_text())
        assert document["provenance"], f"{path.name} needs a provenance note"
        vectors.extend(document["vectors"])
    return vectors


VECTORS = _load()


def test_vector_names_are_unique() -> None:
    names = [v["name"] for v in VECTORS]
    assert len(names) == len(set(names))
    assert len(VECTORS) > 120


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: v["name"])
def test_vector_is_decided_as_expected(vector: dict[str, Any]) -> None:
    data = bytes.fromhex(vector["hex"])
    lines = [json.loads(line) for line in describe(data, vector["input"], now=vector.get("now", 0))]
    errors = [line["error"] for line in lines if "error" in line]
    if vector["expect"] == "reject":
        assert errors, f"accepted: {lines}"
        assert all(isinstance(e, str) and e for e in errors)
        return
    assert not errors, errors
    expected = vector.get("decoded")
    if expected is not None:
        assert lines == (expected if isinstance(expected, list) else [expected])


@pytest.mark.parametrize(
    "vector",
    [v for v in VECTORS if v.get("byte_exact") and v["input"] == "packets"],
    ids=lambda v: v["name"],
)
def test_byte_exact_vector_is_reproduced_by_the_encoder(vector: dict[str, Any]) -> None:
    raw = bytes.fromhex(vector["hex"])
    decoder = PacketDecoder()
    decoder.feed(raw)
    packet = decoder.next_packet()
    assert packet is not None
    if packet.__class__.__name__ == "ControlPacket":
        message = control.decode_control(packet.body)  # type: ignore[union-attr]
        body = control.encode_control(message)
        assert encode_packet(type(packet)(body)).hex() == vector["hex"]  # type: ignore[call-arg]
    else:
        assert encode_packet(packet).hex() == vector["hex"]


@pytest.mark.parametrize(
    "vector",
    [
        v
        for v in VECTORS
        if v["expect"] == "accept"
        and isinstance(v.get("decoded"), dict)
        and v["decoded"].get("kind") == 0
    ],
    ids=lambda v: v["name"],
)
def test_accepted_control_vector_re_encodes_to_the_same_json(vector: dict[str, Any]) -> None:
    message = control.decode_control_value(vector["decoded"]["message"])
    assert json.loads(control.encode_control(message)) == vector["decoded"]["message"]
