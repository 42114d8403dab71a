"""Pairing codes: generation, display and normalisation (docs/protocol.md §8.1). Pure."""

from __future__ import annotations

from collections.abc import Callable

from mirror_host.errors import AuthError

__all__ = [
    "ALPHABET",
    "CODE_LENGTH",
    "PAIR_IDENTITY",
    "InvalidPairingCode",
    "display_code",
    "generate_code",
    "normalize_code",
]

#: The TLS-PSK identity of a pairing connection (its key is the normalised code).
PAIR_IDENTITY = "pair"

#: 32 symbols without I, O, 0 and 1, so a code read aloud is unambiguous.
ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 8


class InvalidPairingCode(AuthError):
    """The text is not a pairing code once normalised."""


def generate_code(token_bytes: Callable[[int], bytes]) -> str:
    """A fresh normalised code: 8 CSPRNG bytes, each mapped through ``byte & 31``.

    With 32 symbols the mask is exact, so every symbol is equally likely and the
    code carries 40 bits.
    """
    return "".join(ALPHABET[byte & 31] for byte in token_bytes(CODE_LENGTH))


def display_code(code: str) -> str:
    """``ABCD2345`` → ``ABCD-2345``, the form people type."""
    return f"{code[:4]}-{code[4:]}"


def normalize_code(text: str) -> str:
    """Normalise typed or scanned input as Prowl does.

    Trim surrounding whitespace, upper-case, drop every ``-`` and whitespace;
    the result must be exactly 8 symbols of :data:`ALPHABET`.

    Raises:
        InvalidPairingCode: anything else.
    """
    compact = "".join(ch for ch in text.strip().upper() if ch != "-" and not ch.isspace())
    if len(compact) != CODE_LENGTH or any(ch not in ALPHABET for ch in compact):
        raise InvalidPairingCode("a pairing code is 8 symbols from " + ALPHABET)
    return compact
