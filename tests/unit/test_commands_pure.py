"""Receipts and CLI-shaped results."""

from __future__ import annotations

import sys
import uuid

from mirror_host import control as c
from mirror_host.commands.catalogue import Listing, worktree_record
from mirror_host.commands.receipts import MAX_RECEIPTS, Admission, ReceiptBook
from mirror_host.commands.responses import (
    REQUEST_LIMIT,
    cli_error,
    cli_success,
    grapheme_count,
    rejected,
)


def test_receipts_dedupe_refuse_reuse_and_cap() -> None:
    book = ReceiptBook(limit=2)
    pane = uuid.uuid4()
    first = uuid.uuid4()
    command = c.AgentsInputCommand(pane=str(pane), prompt="hi")
    assert book.admit(first, command, pane)[0] is Admission.NEW
    assert book.admit(first, command, pane)[0] is Admission.DUPLICATE
    other = c.AgentsInputCommand(pane=str(pane), prompt="bye")
    assert book.admit(first, other, pane)[0] is Admission.REUSED
    assert book.admit(uuid.uuid4(), command, pane)[0] is Admission.NEW
    assert book.admit(uuid.uuid4(), command, pane) == (Admission.FULL, None)
    receipt = book.get(first)
    assert receipt is not None and not receipt.done
    ReceiptBook.finish(receipt, {"ok": True})
    ReceiptBook.finish(receipt, {"ok": False})  # only the first result counts
    assert receipt.result == {"ok": True}


def test_a_finished_receipt_keeps_its_fingerprint_not_its_prompt() -> None:
    # 1024 receipts of 64 KiB prompts would otherwise hold 64 MiB for the host's life.
    book = ReceiptBook()
    pane = uuid.uuid4()
    prompt = "p" * 65536
    ids = [uuid.uuid4() for _ in range(MAX_RECEIPTS)]
    for request_id in ids:
        command = c.AgentsInputCommand(pane=str(pane), prompt=prompt + str(request_id))
        admission, receipt = book.admit(request_id, command, pane)
        assert admission is Admission.NEW and receipt is not None
        assert receipt.command is command  # kept while it runs
        ReceiptBook.finish(receipt, {"ok": True})
        assert receipt.command is None and len(receipt.fingerprint) == 32
    held = sum(sys.getsizeof(r.command) for r in map(book.get, ids) if r is not None)
    assert held <= MAX_RECEIPTS * sys.getsizeof(None)
    first = ids[0]
    same = c.AgentsInputCommand(pane=str(pane), prompt=prompt + str(first))
    assert book.admit(first, same, pane)[0] is Admission.DUPLICATE
    assert book.admit(first, same, uuid.uuid4())[0] is Admission.REUSED  # another pane
    changed = c.AgentsInputCommand(pane=str(pane), prompt=prompt + "!")
    assert book.admit(first, changed, pane)[0] is Admission.REUSED
    assert book.admit(uuid.uuid4(), same, pane) == (Admission.FULL, None)  # bounded
    assert len(book) == MAX_RECEIPTS


def test_envelopes() -> None:
    assert rejected(REQUEST_LIMIT) == {
        "ok": False,
        "command": "remote",
        "schema_version": "prowl.remote.command.v1",
        "error": {"code": "REMOTE_COMMAND_REJECTED", "message": REQUEST_LIMIT},
    }
    assert cli_success("agentsInput", {"input": {}})["command"] == "agents.input"  # type: ignore[index]
    error = cli_error("create", "TARGET_NOT_FOUND", "x")
    assert error["schema_version"] == "prowl.cli.create.v1"  # type: ignore[index]


def test_grapheme_count_is_close_to_swift() -> None:
    assert grapheme_count("hello") == 5
    assert grapheme_count("e\u0301") == 1  # e + combining acute
    assert grapheme_count("👍🏽") == 1  # skin tone modifier
    assert grapheme_count("👩‍💻") == 1  # ZWJ sequence
    assert grapheme_count("🇯🇵🇫🇷") == 2  # two flags
    assert grapheme_count("中文") == 2


def test_a_listing_names_each_worktree_once_in_first_named_order() -> None:
    empty = worktree_record("w0", "empty", "/srv/empty", None)
    listing = Listing([empty])
    first = worktree_record("w1", "app", "/srv/app", "/srv/app")
    again = worktree_record("w1", "app", "/srv/app/sub", "/srv/app")  # same id, other path
    other = worktree_record("w2", "lib", "/srv/lib", None)
    for worktree, pane in ((first, "a"), (other, "b"), (again, "c")):
        listing.add(worktree, {"id": f"t{pane}"}, {"id": pane}, {})
    result = listing.result()
    assert isinstance(result, dict)
    data = result["data"]
    assert isinstance(data, dict)
    assert data["count"] == 3
    assert data["worktrees"] == [empty, first, other]
    items = data["items"]
    assert isinstance(items, list)
    # The worktree first named stands for a later one with its id.
    assert [item["worktree"] for item in items if isinstance(item, dict)] == [first, other, first]
    assert items[2] == {"worktree": first, "tab": {"id": "tc"}, "pane": {"id": "c"}, "task": {}}
