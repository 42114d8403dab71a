"""Pairing codes, QR pairing payloads, HMAC proofs and the device registry. Pure.

Randomness comes in as an injected ``token_bytes`` and time as ``now``, so every
function here is deterministic under test. See docs/protocol.md §8–§9.
"""

from __future__ import annotations
