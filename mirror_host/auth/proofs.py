"""HMAC-SHA256 proofs over the challenge nonce (docs/protocol.md §8.2). Pure.

``proof = HMAC-SHA256(key, UTF8(purpose ":" HOST ":" identity ":") || nonce)``
with upper-case canonical UUIDs. This module is the only place that computes or
compares proofs; comparison is constant-time.
"""

from __future__ import annotations

import hashlib
import hmac
from uuid import UUID

__all__ = ["device_proof", "pair_proof", "proof_message", "proofs_match"]


def proof_message(purpose: str, host_id: UUID, identity: str, nonce: bytes) -> bytes:
    """The exact bytes a proof signs."""
    return f"{purpose}:{str(host_id).upper()}:{identity}:".encode() + nonce


def device_proof(key: bytes, host_id: UUID, device_id: UUID, nonce: bytes) -> bytes:
    """A paired device's login proof, keyed with its 32-byte secret."""
    message = proof_message("device", host_id, str(device_id).upper(), nonce)
    return hmac.new(key, message, hashlib.sha256).digest()


def pair_proof(code: str, host_id: UUID, name: str, nonce: bytes) -> bytes:
    """An enrolment proof, keyed with the UTF-8 bytes of the normalised code."""
    message = proof_message("pair", host_id, name, nonce)
    return hmac.new(code.encode(), message, hashlib.sha256).digest()


def proofs_match(expected: bytes, given: bytes) -> bool:
    """Constant-time comparison; a wrong length is simply a mismatch."""
    return hmac.compare_digest(expected, given)
