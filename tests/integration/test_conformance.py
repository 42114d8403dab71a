"""``mirror-host conformance`` against mirror-host itself, and against hosts with one
planted fault each (real TLS on loopback, real PTYs).

Each faulty host is mirror-host with one rule of its pure session or lease
patched inside the test; the suite must fail the check that guards that rule,
naming it.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from mirror_host.auth.login import check_device_login
from mirror_host.client.address import HostAddress
from mirror_host.client.conformance.report import CheckResult, Status
from mirror_host.client.conformance.suite import CHECKS, SuiteOptions, run_suite
from mirror_host.commands.service import CommandService
from mirror_host.control import (
    Input,
    Intent,
    JSONValue,
    Subscribe,
)
from mirror_host.host import hub as hub_module
from mirror_host.host import server as server_module
from mirror_host.host.server import Host
from mirror_host.host.service import run_host
from mirror_host.panes.local import LocalSource
from mirror_host.session import connection as connection_module
from mirror_host.session.connection import Session
from mirror_host.session.events import InputReceived, SubscribeRequested
from mirror_host.session.history import HistorySnapshot
from mirror_host.session.lease import FrameGate, ScrollTracker
from tests.integration.conftest import host_config, port_of

pytestmark = pytest.mark.timeout(120)

#: A shell to type into, with more than one page (200 lines) of history.
PANE_COMMAND = "seq 1 450; exec sh"
#: What the host owes comes within milliseconds on loopback; a fault's missing
#: reply or close is then noticed after this (the command's default is 5 s).
WAIT = 2.5


class _ShellBackend:
    """Just enough of a command backend for the service's own rules (``send`` never
    reaches a backend: the service refuses it)."""

    capabilities = ("launch-shell",)

    async def run(self) -> None:
        return None

    async def list(self) -> JSONValue:
        return {"ok": True, "command": "list", "schema_version": "prowl.cli.list.v1", "data": {}}

    async def profiles(self) -> JSONValue:
        return {"ok": True, "command": "profiles", "data": {"profiles": []}}

    async def create(self, command: object) -> JSONValue:
        raise AssertionError("the suite never creates tabs")

    async def agent_input(self, *args: object, **kwargs: object) -> JSONValue:
        raise AssertionError("the suite never sends agent input")


@asynccontextmanager
async def host_for_suite(
    state_dir: Path, *, commands: bool = False, pane: str = PANE_COMMAND
) -> AsyncIterator[Host]:
    source = LocalSource([pane], columns=80, rows=24)
    service = CommandService(_ShellBackend()) if commands else None  # type: ignore[arg-type]
    try:
        async with trio.open_nursery() as nursery:
            host: Host = await nursery.start(
                lambda task_status: run_host(
                    host_config(state_dir), source, commands=service, task_status=task_status
                )
            )
            try:
                yield host
            finally:
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise


async def run_against(
    state_dir: Path, only: tuple[str, ...] = (), *, commands: bool = False, pane: str = PANE_COMMAND
) -> dict[str, CheckResult]:
    async with host_for_suite(state_dir, commands=commands, pane=pane) as host:
        code = host.open_pairing_window().code
        results = await run_suite(
            HostAddress("127.0.0.1", port_of(host)),
            SuiteOptions(code=code, allow_input=True, only=only, wait=WAIT),
        )
    return {result.name: result for result in results}


@pytest.mark.slow
async def test_mirror_host_passes_every_check(state_dir: Path) -> None:
    results = await run_against(state_dir, commands=True)
    assert set(results) == {"pair.enroll", *(check.name for check in CHECKS)}
    failures = {n: r.detail for n, r in results.items() if r.status is not Status.PASSED}
    assert failures == {}


# ---------------------------------------------------------------- planted faults


def _gate_lets_a_second_frame_through(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gate forgets its outstanding frame whenever it is asked (changes still count)."""
    would_send, commit = FrameGate.would_send, FrameGate.commit

    def forgetful_would_send(self: FrameGate, key: object, *, force: bool = False) -> bool:
        self.outstanding = None
        return would_send(self, key, force=force)

    def forgetful_commit(self: FrameGate, key: object) -> int:
        self.outstanding = None
        return commit(self, key)

    monkeypatch.setattr(FrameGate, "is_open", property(lambda self: True))
    monkeypatch.setattr(FrameGate, "would_send", forgetful_would_send)
    monkeypatch.setattr(FrameGate, "commit", forgetful_commit)


def _sequences_skip(monkeypatch: pytest.MonkeyPatch) -> None:
    original = FrameGate.commit

    def commit(self: FrameGate, key: object) -> int:
        sequence = original(self, key)
        self.next_sequence += 1  # 1, 3, 5 …
        return sequence

    monkeypatch.setattr(FrameGate, "commit", commit)


def _wrong_ack_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    def acknowledge(self: FrameGate, sequence: int) -> None:
        self.outstanding = None

    monkeypatch.setattr(FrameGate, "acknowledge", acknowledge)


def _takeover_keeps_the_old_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    original = Session.send_ended

    def send_ended(self: Session, reason: Any) -> None:
        if reason.value != "takenOver":
            original(self, reason)

    monkeypatch.setattr(Session, "send_ended", send_ended)


def _busy_pane_not_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    original = hub_module.Hub._subscribe

    async def subscribe(self: Any, connection: Any, request: Subscribe) -> None:
        await original(self, connection, dataclasses.replace(request, intent=Intent.TAKEOVER))

    monkeypatch.setattr(hub_module.Hub, "_subscribe", subscribe)


def _history_pages_skip_a_line(monkeypatch: pytest.MonkeyPatch) -> None:
    original = HistorySnapshot.page_before

    def page_before(self: HistorySnapshot, offset: int | None) -> Any:
        return original(self, None if offset is None else max(0, offset - 1))

    monkeypatch.setattr(HistorySnapshot, "page_before", page_before)


def _scroll_duplicate_reapplied(monkeypatch: pytest.MonkeyPatch) -> None:
    original = ScrollTracker.request

    def request(self: ScrollTracker, request_id: Any, direction: Any) -> Any:
        latest = self._latest
        if latest is not None and latest.request_id == request_id:
            self._latest = None  # forget it: the duplicate looks new
        return original(self, request_id, direction)

    monkeypatch.setattr(ScrollTracker, "request", request)


def _no_heartbeats(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connection_module, "HEARTBEAT_SECONDS", 3600.0)


def _input_accepted_on_text(monkeypatch: pytest.MonkeyPatch) -> None:
    def on_input(self: Session, message: Any, now: float) -> None:
        lease = self._lease_for(message.subscription_id)
        self._events.append(InputReceived(lease.subscription_id, lease.pane_id, message.data))

    monkeypatch.setitem(connection_module._AUTHENTICATED_HANDLERS, Input, on_input)


def _wrong_proof_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    def check(registry: Any, *, nonce: bytes, device_id: Any, proof: bytes) -> Any:
        device = registry.find(device_id)
        return (
            (device, "")
            if device is not None
            else check_device_login(registry, nonce=nonce, device_id=device_id, proof=proof)
        )

    monkeypatch.setattr(server_module, "check_device_login", check)


def _second_subscribe_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    def on_subscribe(self: Session, message: Any, now: float) -> None:
        self._events.append(SubscribeRequested(message))

    monkeypatch.setitem(connection_module._AUTHENTICATED_HANDLERS, Subscribe, on_subscribe)


def _refresh_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(FrameGate, "refresh", lambda self: None)


def _short_nonce(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server_module, "NONCE_BYTES", 16)


FAULTS: list[tuple[str, Callable[[pytest.MonkeyPatch], None], tuple[str, ...], str]] = [
    ("gate", _gate_lets_a_second_frame_through, ("frames.gate",), "frames.gate"),
    ("sequence", _sequences_skip, ("frames.sequence",), "frames.sequence"),
    ("ack", _wrong_ack_accepted, ("frames.ack-rules",), "frames.ack-rules"),
    ("takeover", _takeover_keeps_the_old_lease, ("takeover.takeover",), "takeover.takeover"),
    ("busy", _busy_pane_not_refused, ("takeover.busy",), "takeover.busy"),
    ("history", _history_pages_skip_a_line, ("history.pages",), "history.pages"),
    ("scroll", _scroll_duplicate_reapplied, ("scroll.duplicate",), "scroll.duplicate"),
    ("heartbeat", _no_heartbeats, ("heartbeat.ping",), "heartbeat.ping"),
    ("text-input", _input_accepted_on_text, ("input.text-lease",), "input.text-lease"),
    ("proof", _wrong_proof_accepted, ("auth.wrong-proof",), "auth.wrong-proof"),
    (
        "second-subscribe",
        _second_subscribe_accepted,
        ("lease.second-subscribe",),
        "lease.second-subscribe",
    ),
    ("refresh", _refresh_ignored, ("frames.refresh",), "frames.refresh"),
    # Caught at once: pairing already reads a challenge.
    ("nonce", _short_nonce, ("auth.challenge",), "pair.enroll"),
]


#: What each failure must say.
SAID = {
    "gate": "frame 2 arrived while frame 1 was still unacknowledged",
    "sequence": "sequence 3 after 1 (expected 2)",
    "ack": "stayed open 2.5 s after an ACK of 2 for frame 1",
    "takeover": "no `ended` for the old owner",
    "busy": "was granted a lease",
    "history": "pages must be contiguous",
    "scroll": "the duplicate was applied again",
    "heartbeat": "0 ping(s) from the host",
    "text-input": "after `input` on a text-v1 lease",
    "proof": "with `authenticated` instead of closing",
    "second-subscribe": "a second `subscribe` on the same connection",
    "refresh": "no frame after `refresh` (the unchanged screen again)",
    "nonce": "the challenge nonce has 16 bytes, not 32",
}


@pytest.fixture
def reset_patches() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as patch:
        yield patch


@pytest.mark.parametrize(
    ("plant", "only", "expected", "said"),
    [
        pytest.param(plant, only, expected, SAID[name], id=name)
        for name, plant, only, expected in FAULTS
    ],
)
async def test_a_planted_fault_fails_its_check(
    state_dir: Path,
    reset_patches: pytest.MonkeyPatch,
    plant: Callable[[pytest.MonkeyPatch], None],
    only: tuple[str, ...],
    expected: str,
    said: str,
) -> None:
    plant(reset_patches)
    results = await run_against(state_dir, only)
    if expected != "pair.enroll":
        assert results["pair.enroll"].status is Status.PASSED, results["pair.enroll"].detail
    failed = {name for name, r in results.items() if r.status is Status.FAILED}
    assert failed == {expected}, {n: r.detail for n, r in results.items()}
    assert said in results[expected].detail


async def test_a_short_history_is_lengthened_to_catch_a_paging_fault(
    state_dir: Path, reset_patches: pytest.MonkeyPatch
) -> None:
    _history_pages_skip_a_line(reset_patches)
    results = await run_against(state_dir, ("history.pages",), pane="sh")
    assert results["history.pages"].status is Status.FAILED
    assert "pages must be contiguous" in results["history.pages"].detail


# ---------------------------------------------------------------- the command line


async def _cli(*args: str) -> tuple[int, str]:
    result = await trio.run_process(
        [sys.executable, "-m", "mirror_host", "conformance", *args],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    return result.returncode, result.stdout.decode()


async def test_the_command_reports_json_and_its_exit_status(state_dir: Path) -> None:
    async with host_for_suite(state_dir) as host:
        address = f"127.0.0.1:{port_of(host)}"
        code = host.open_pairing_window().code
        status, out = await _cli(address, "--code", code, "--only", "auth.*", "--json")
        assert status == 0, out
        document = json.loads(out)
        assert document["failed"] == 0 and document["passed"] == 6
        assert [c["name"] for c in document["checks"]][:2] == ["pair.enroll", "auth.challenge"]
        # The code was used up: pairing fails, the rest is skipped, the exit status is 1.
        status, out = await _cli(address, "--code", code, "--only", "panes.list")
        lines = out.strip().splitlines()
        assert status == 1
        assert lines[0].startswith("FAIL pair.enroll: the TLS handshake with identity `pair`")
        assert lines[1].startswith("SKIP panes.list: no paired device")
        assert lines[-1] == "0 passed, 1 failed"


async def test_the_command_refuses_unknown_checks() -> None:
    status, _ = await _cli("127.0.0.1:1", "--code", "ABCD-2345", "--only", "nothing.here")
    assert status == 2
    status, out = await _cli("--list")
    assert status == 0 and "frames.gate" in out and "[--allow-input]" in out
