"""Retained mutations by request id: deduplication and receipts (protocol.md §6.3). Pure.

Mutating commands (``create``, ``agentsInput``, ``agentsDispatch``, ``send``) are
kept for the host's lifetime, up to 1024. The same id with the same request gets
the original result (exactly one execution, even for concurrent duplicates);
the same id with other parameters is refused; a full book refuses new mutations
and evicts nothing.

What a finished receipt keeps is small and bounded: its result (a CLI-shaped
answer) and a SHA-256 fingerprint of the request, which is all a duplicate is
compared with. The command itself (a prompt of up to 64 KiB, the text of a
``send``) is kept only while it runs, so 1024 receipts of 64 KiB prompts hold
1024 fingerprints, not 64 MiB of prompts.
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass
from uuid import UUID

from mirror_host.control import RemoteCommand
from mirror_host.control.swiftjson import JSONValue

__all__ = ["MAX_RECEIPTS", "Admission", "Receipt", "ReceiptBook", "fingerprint"]

MAX_RECEIPTS = 1024


class Admission(enum.Enum):
    """What :meth:`ReceiptBook.admit` decided."""

    NEW = "new"  # run it
    DUPLICATE = "duplicate"  # same request: answer with the original result
    REUSED = "reused"  # same id, other parameters: refuse
    FULL = "full"  # no room: refuse


@dataclass(slots=True)
class Receipt:
    """One retained mutation. ``result`` stays ``None`` while it runs; ``command``
    is there until it has finished (then only its ``fingerprint`` is kept)."""

    request_id: UUID
    command: RemoteCommand | None
    pane_id: UUID | None
    fingerprint: bytes
    result: JSONValue | None = None
    done: bool = False


def fingerprint(command: RemoteCommand, pane_id: UUID | None) -> bytes:
    """Equal for equal requests (the commands are frozen dataclasses of strings,
    booleans and ``None``, whose ``repr`` names every field)."""
    return hashlib.sha256(repr((command, pane_id)).encode("utf-8", "surrogatepass")).digest()


class ReceiptBook:
    """Request id → :class:`Receipt`, bounded."""

    def __init__(self, *, limit: int = MAX_RECEIPTS) -> None:
        self._limit = limit
        self._receipts: dict[UUID, Receipt] = {}

    def __len__(self) -> int:
        return len(self._receipts)

    def admit(
        self, request_id: UUID, command: RemoteCommand, pane_id: UUID | None
    ) -> tuple[Admission, Receipt | None]:
        """Decide what to do with a mutation and, if new, retain it."""
        existing = self._receipts.get(request_id)
        request = fingerprint(command, pane_id)
        if existing is not None:
            if existing.fingerprint == request:
                return Admission.DUPLICATE, existing
            return Admission.REUSED, existing
        if len(self._receipts) >= self._limit:
            return Admission.FULL, None
        receipt = Receipt(request_id, command, pane_id, request)
        self._receipts[request_id] = receipt
        return Admission.NEW, receipt

    def get(self, request_id: UUID) -> Receipt | None:
        """The retained mutation with this id, if any."""
        return self._receipts.get(request_id)

    @staticmethod
    def finish(receipt: Receipt, result: JSONValue) -> None:
        """Record the final result (once), and let go of the command."""
        if not receipt.done:
            receipt.result = result
            receipt.done = True
            receipt.command = None
