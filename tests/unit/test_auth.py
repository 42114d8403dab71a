"""Pairing codes, proofs and the QR payload."""

from __future__ import annotations

import json
from itertools import count
from uuid import UUID

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mirror_host.auth.pairing import (
    ALPHABET,
    InvalidPairingCode,
    display_code,
    generate_code,
    normalize_code,
)
from mirror_host.auth.proofs import device_proof, pair_proof, proof_message, proofs_match
from mirror_host.auth.qr import (
    InvalidPairingPayload,
    build_pairing_payload,
    encode_pairing_payload,
    parse_pairing_payload,
)
from tests.conftest import SHARED

HOST = UUID("00000000-0000-0000-0000-000000000001")
DEVICE = UUID("00000000-0000-0000-0000-000000000002")
NONCE = b"\x02" * 32


def test_device_proof_known_answer() -> None:
    # From prowl-vectors.json "hmac_device_proof_derived".
    proof = device_proof(b"\x01" * 32, HOST, DEVICE, NONCE)
    assert proof.hex() == "ead0a86820ba97155bf9d6c18db10ed44670953edf7fe2c019867a28eba313f5"
    assert proof_message("device", HOST, str(DEVICE).upper(), NONCE).startswith(
        b"device:00000000-0000-0000-0000-000000000001:00000000-0000-0000-0000-000000000002:"
    )


def test_pair_proof_known_answer() -> None:
    proof = pair_proof("ABCD2345", HOST, "Mac", NONCE)
    assert proof.hex() == "e3f70a60b8b155c2818b71e691102bd25e9cf0f3b3d2b0f75a56a730d4da00b9"


def test_shared_hmac_vectors_when_present() -> None:
    path = SHARED / "spec" / "prowl-vectors.json"
    if not path.exists():
        pytest.skip("../shared is absent")
    for vector in json.loads(path.read_text()):
        if vector["name"] == "hmac_device_proof_derived":
            assert (
                device_proof(bytes.fromhex(vector["key_hex"]), HOST, DEVICE, NONCE).hex()
                == (vector["proof_hex"])
            )


def test_proof_binds_purpose_host_identity_and_nonce() -> None:
    key = b"\x07" * 32
    base = device_proof(key, HOST, DEVICE, NONCE)
    assert not proofs_match(base, device_proof(key, DEVICE, DEVICE, NONCE))
    assert not proofs_match(base, device_proof(key, HOST, HOST, NONCE))
    assert not proofs_match(base, device_proof(key, HOST, DEVICE, b"\x03" * 32))
    assert not proofs_match(base, pair_proof("ABCD2345", HOST, str(DEVICE).upper(), NONCE))
    assert not proofs_match(base, base[:16])
    assert proofs_match(base, device_proof(key, HOST, DEVICE, NONCE))


def test_generated_codes_map_each_byte_through_the_mask() -> None:
    code = generate_code(lambda n: bytes(range(n)))
    assert code == "ABCDEFGH"
    counter = count()
    codes = {
        generate_code(lambda n: bytes((next(counter) * 37) % 256 for _ in range(n)))
        for _ in range(50)
    }
    assert all(len(c) == 8 and set(c) <= set(ALPHABET) for c in codes)
    assert display_code("ABCD2345") == "ABCD-2345"


@given(st.binary(min_size=8, max_size=8))
def test_every_generated_code_normalises_to_itself(raw: bytes) -> None:
    code = generate_code(lambda n: raw)
    assert normalize_code(display_code(code).lower()) == code


@pytest.mark.parametrize(
    "text", ["", "ABCD", "1234", "ABCD-23456", "ABCD-01OI", "ABCD-23é4", "a" * 64]
)
def test_bad_codes(text: str) -> None:
    with pytest.raises(InvalidPairingCode):
        normalize_code(text)


def test_pairing_payload_round_trip_and_expiry() -> None:
    payload = build_pairing_payload(
        address="192.168.1.20", port=7880, code="abcd-efgh", window_start=1800000000.2
    )
    assert payload.expires_at == 1800000061  # ceiling of start + 60
    text = encode_pairing_payload(payload)
    assert text == (
        b'{"type":"prowl-mirror-pairing","version":1,"address":"192.168.1.20","port":7880,'
        b'"code":"ABCDEFGH","expiresAt":1800000061}'
    )
    assert parse_pairing_payload(text, now=1800000000) == payload
    with pytest.raises(InvalidPairingPayload, match="expired"):
        parse_pairing_payload(text, now=1800000061)


@pytest.mark.parametrize(
    "address",
    ["127.0.0.1", "::1", "0.0.0.0", "::", "::ffff:127.0.0.1", "fe80::1%en0", "host.local"],
)
def test_unusable_addresses_are_refused(address: str) -> None:
    with pytest.raises(InvalidPairingPayload):
        build_pairing_payload(address=address, port=7880, code="ABCDEFGH", window_start=0)


def test_the_code_with_or_without_its_dash_is_one_code() -> None:
    """``pair --json`` gives ``code`` as the protocol and the QR payload carry it
    (``EHAGD5BQ``, the key TLS-PSK uses); the dash of the printed ``EHAG-D5BQ`` is only
    for reading, and everything that takes a typed code drops it (issue 28 item 16)."""
    code = "EHAGD5BQ"
    assert display_code(code) == "EHAG-D5BQ"
    assert normalize_code(display_code(code)) == normalize_code(code) == code
    assert normalize_code(" ehag-d5bq ") == code
