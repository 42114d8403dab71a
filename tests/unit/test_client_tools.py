"""The client tools' pure parts: addresses, the chooser, the frame ledger, the report;
and the credential file."""

from __future__ import annotations

import json
import os
import stat
import uuid
from pathlib import Path

import pytest

from mirror_host.client.address import HostAddress, parse_address
from mirror_host.client.chooser import (
    BACKOFF_SECONDS,
    DETACH_KEY,
    backoff,
    describe_end,
    find_pane,
    format_pane_list,
    key_name,
    parse_choice,
    parse_detach_key,
    short_ids,
)
from mirror_host.client.client import Credential
from mirror_host.client.conformance.ledger import FrameLedger, FrameView
from mirror_host.client.conformance.report import (
    CheckResult,
    Status,
    render_json,
    render_text,
    select,
    summary,
)
from mirror_host.client.credentials import CredentialStore, CredentialStoreError, default_path
from mirror_host.control import EndReason, PaneDescriptor, Representation

# ---------------------------------------------------------------- addresses


@pytest.mark.parametrize(
    ("text", "host", "port"),
    [
        ("127.0.0.1:7880", "127.0.0.1", 7880),
        ("mini.local:7880", "mini.local", 7880),
        ("[::1]:7880", "::1", 7880),
        (" 192.168.1.20:1 ", "192.168.1.20", 1),
    ],
)
def test_addresses_parse(text: str, host: str, port: int) -> None:
    assert parse_address(text) == HostAddress(host, port)


@pytest.mark.parametrize("text", ["7880", "host:", "host:0", "host:65536", "::1:7880", "a b:1"])
def test_bad_addresses_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="HOST:PORT|outside"):
        parse_address(text)


def test_address_key_is_case_blind_and_brackets_ipv6() -> None:
    assert HostAddress("Mini.Local", 7880).key == "mini.local:7880"
    assert str(HostAddress("::1", 7880)) == "[::1]:7880"


# ---------------------------------------------------------------- chooser

PANES = tuple(
    PaneDescriptor(id=uuid.UUID(int=i + 1), title=f"pane {i}", directory="/w", busy=i == 1)
    for i in range(3)
)


def test_find_pane_by_index_id_and_prefix() -> None:
    assert find_pane(PANES, "2") is PANES[1]
    assert find_pane(PANES, "0") is None and find_pane(PANES, "4") is None
    assert find_pane(PANES, str(PANES[2].id).lower()) is PANES[2]
    assert find_pane(PANES, "0000") is None  # ambiguous prefix
    assert find_pane(PANES, "nope") is None


def test_pane_list_and_choice() -> None:
    lines = format_pane_list(PANES)
    assert lines[0] == "  1) pane 0  (/w)"
    assert "another device" in lines[1]
    assert parse_choice(" 3\n", 3) == 2
    assert parse_choice("x", 3) is None and parse_choice("4", 3) is None


def test_the_chooser_can_show_the_id_prefixes_pane_takes() -> None:
    lines = format_pane_list(PANES, with_ids=True)
    # uuid ints 1, 2, 3 share their first 35 characters: the prefixes grow to tell them apart.
    assert short_ids(PANES) == [str(p.id).upper() for p in PANES]
    assert lines[0] == f"  1) pane 0  (/w)  id {str(PANES[0].id).upper()}"
    apart = [
        PaneDescriptor(id=uuid.UUID(f"{i}" * 32), title="t", directory="/", busy=False)
        for i in (1, 2)
    ]
    assert short_ids(apart) == ["11111111", "22222222"]
    for pane, short in zip(apart, short_ids(apart), strict=True):
        assert find_pane(apart, short) is pane


@pytest.mark.parametrize(
    ("text", "key", "name"),
    [
        ("ctrl-]", DETACH_KEY, "Ctrl-]"),
        ("C-]", b"\x1d", "Ctrl-]"),
        ("^q", b"\x11", "Ctrl-Q"),
        ("Ctrl+A", b"\x01", "Ctrl-A"),
        (" ctrl-\\ ", b"\x1c", "Ctrl-\\"),
    ],
)
def test_detach_keys_parse(text: str, key: bytes, name: str) -> None:
    assert parse_detach_key(text) == key
    assert key_name(key) == name


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("q", "expected a control key"),
        ("ctrl-1", "expected a control key"),
        ("ctrl-[", "Escape"),
        ("^m", "Enter"),
        ("ctrl-j", "Enter"),
    ],
)
def test_keys_that_cannot_detach_are_refused(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_detach_key(text)


def test_backoff_grows_then_holds() -> None:
    assert [backoff(n) for n in range(1, 8)] == [*BACKOFF_SECONDS, 15.0, 15.0]


def test_end_reasons_in_words() -> None:
    assert describe_end(EndReason.TAKEN_OVER) == (
        "the pane was taken over, by another device or another `mirror-host attach` of this one"
    )
    assert describe_end(EndReason.HOST_STOPPED) == "the host stopped"
    assert describe_end(EndReason.PANE_CLOSED) == "the pane was closed on the host"


# ---------------------------------------------------------------- ledger

LEASE = uuid.UUID(int=7)


def _view(sequence: int, content: str = "a", lease: uuid.UUID = LEASE) -> FrameView:
    return FrameView(lease, sequence, Representation.VT, (content,))


def test_ledger_accepts_the_protocol() -> None:
    ledger = FrameLedger(LEASE, Representation.VT)
    assert ledger.frame(_view(1)) == []
    ledger.acknowledged(1)
    assert ledger.frame(_view(2, "b")) == []
    ledger.acknowledged(2)
    ledger.forced()
    assert ledger.frame(_view(3, "b")) == []  # unchanged, but refresh asked for it


def test_ledger_names_each_broken_rule() -> None:
    ledger = FrameLedger(LEASE, Representation.VT)
    assert "expected 1" in ledger.frame(_view(2))[0]
    ledger = FrameLedger(LEASE, Representation.VT)
    ledger.frame(_view(1))
    assert "unacknowledged" in " ".join(ledger.frame(_view(2, "b")))
    ledger = FrameLedger(LEASE, Representation.VT)
    ledger.frame(_view(1))
    ledger.acknowledged(1)
    assert "expected 2" in ledger.frame(_view(3, "b"))[0]
    ledger.acknowledged(3)
    assert "unchanged" in ledger.frame(_view(4, "b"))[0]
    ledger = FrameLedger(LEASE, Representation.VT)
    assert "not the lease" in ledger.frame(_view(1, lease=uuid.UUID(int=8)))[0]
    text = FrameView(LEASE, 1, Representation.TEXT, ("a",))
    assert "text-v1 frame on a vt-v1 lease" in FrameLedger(LEASE, Representation.VT).frame(text)[0]


def test_ledger_wrong_ack_does_not_open_the_gate() -> None:
    ledger = FrameLedger(LEASE, Representation.VT)
    ledger.frame(_view(1))
    ledger.acknowledged(2)
    assert ledger.outstanding == 1


# ---------------------------------------------------------------- report

NAMES = ["tls.policy", "frames.gate", "frames.sequence", "history.pages"]


def test_select_by_name_glob_and_skip() -> None:
    assert select(NAMES) == (NAMES, [])
    assert select(NAMES, only=["frames.*"]) == (["frames.gate", "frames.sequence"], [])
    assert select(NAMES, only=["frames.*"], skip=["frames.gate"])[0] == ["frames.sequence"]
    assert select(NAMES, only=["nothing.*"]) == ([], ["nothing.*"])


def test_report_lines_and_json() -> None:
    results = [
        CheckResult("a", Status.PASSED, "ok", 0.1),
        CheckResult("b", Status.FAILED, "frame 2 arrived early", 1.0),
        CheckResult("c", Status.SKIPPED, "no history", 0.0),
    ]
    lines = render_text(results)
    assert lines[:3] == [
        "PASS a: ok (0.1 s)",
        "FAIL b: frame 2 arrived early (1.0 s)",
        "SKIP c: no history (0.0 s)",
    ]
    assert lines[-1] == "1 passed, 1 failed"
    assert summary(results) == (1, 1, 1)
    document = json.loads(render_json("127.0.0.1:7880", results))
    assert document["passed"] == 1 and document["failed"] == 1 and document["skipped"] == 1
    assert document["checks"][1] == {
        "name": "b",
        "status": "fail",
        "detail": "frame 2 arrived early",
        "seconds": 1.0,
    }


# ---------------------------------------------------------------- credentials

ADDRESS = HostAddress("192.168.1.20", 7880)
CREDENTIAL = Credential(uuid.uuid4(), uuid.uuid4(), bytes(range(32)))


def test_credentials_round_trip_privately(tmp_path: Path) -> None:
    store = CredentialStore(tmp_path / "cfg" / "mirror-host" / "credentials.json")
    assert store.get(ADDRESS) is None
    store.put(ADDRESS, CREDENTIAL)
    assert store.get(HostAddress("192.168.1.20", 7880)) == CREDENTIAL
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert [p.name for p in store.path.parent.iterdir()] == ["credentials.json"]  # no temp left
    other = HostAddress("10.0.0.1", 7880)
    store.put(other, CREDENTIAL)
    assert store.forget(ADDRESS) and not store.forget(ADDRESS)
    assert store.get(ADDRESS) is None and store.get(other) == CREDENTIAL


def test_a_damaged_credential_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "credentials.json"
    path.write_text('{"version": 1, "hosts": {"a:1": {"key": "??"}}}')
    with pytest.raises(CredentialStoreError, match=r"credentials\.json: not a credential file"):
        CredentialStore(path).get(ADDRESS)


def test_default_path_follows_xdg(tmp_path: Path) -> None:
    assert default_path({"XDG_CONFIG_HOME": str(tmp_path)}) == (
        tmp_path / "mirror-host" / "credentials.json"
    )
    assert default_path({}).parent.name == "mirror-host"
    assert os.sep in str(default_path({}))
