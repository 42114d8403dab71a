"""The conformance suite's connection layer against scripted peers (no host, no TLS):
heartbeats are not the first message, and a host that closes right after its last
word is still heard."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from functools import partial

import pytest
import trio

from mirror_host.client.address import HostAddress
from mirror_host.client.client import ClientClosed, Credential, Incoming, MirrorClient
from mirror_host.client.conformance.ledger import FrameLedger
from mirror_host.client.conformance.probe import CheckFailed, Conn, Context
from mirror_host.client.conformance.report import Status
from mirror_host.client.conformance.suite import _run_one
from mirror_host.control import (
    Challenge,
    ControlMessage,
    Ended,
    EndReason,
    Ping,
    Representation,
    Subscribed,
    encode_control,
)
from mirror_host.wire import ControlPacket, VTFramePacket, encode_packet

LEASE = uuid.UUID(int=7)
HOST = uuid.UUID(int=9)


def _packet(message: ControlMessage) -> bytes:
    return encode_packet(ControlPacket(encode_control(message)))


class _ClosingStream:
    """A TLS stream stand-in: delivers ``data``, then EOF; every send fails (closed)."""

    def __init__(self, data: bytes) -> None:
        self._chunks = [data]

    async def receive_some(self, max_bytes: int) -> bytes:
        await trio.lowlevel.checkpoint()
        return self._chunks.pop(0) if self._chunks else b""

    async def send_all(self, data: bytes) -> None:
        await trio.lowlevel.checkpoint()
        raise trio.BrokenResourceError("peer closed")


async def _read_all(data: bytes) -> MirrorClient:
    client = MirrorClient(_ClosingStream(data), answer_pings=True)  # type: ignore[arg-type]
    await client._read()
    return client


async def test_a_ping_before_the_challenge_is_not_the_first_message() -> None:
    challenge = Challenge(host_id=HOST, nonce=bytes(32))
    client = await _read_all(_packet(Ping()) + _packet(challenge))
    assert client.first_kind == "challenge"
    assert client.pings_received == 1
    assert await client.receive(timeout=1) == challenge


async def test_what_follows_a_ping_that_cannot_be_answered_is_still_read() -> None:
    # The pong fails (the host is closing), but the `ended` sent before the close counts.
    client = await _read_all(_packet(Ping()) + _packet(Ended(reason=EndReason.TAKEN_OVER)))
    assert await client.receive(timeout=1) == Ended(reason=EndReason.TAKEN_OVER)
    with pytest.raises(ClientClosed):
        await client.receive(timeout=1)


class _ScriptedClient:
    """A :class:`MirrorClient` stand-in: ``items`` to receive, then closed; sends fail."""

    decode_error: str | None = None

    def __init__(self, items: list[Incoming]) -> None:
        self._items = items

    async def send(self, message: ControlMessage) -> None:
        await trio.lowlevel.checkpoint()
        raise ClientClosed("connection closed while sending")

    async def receive(self, *, timeout: float = 10.0) -> Incoming:
        await trio.lowlevel.checkpoint()
        if self._items:
            return self._items.pop(0)
        raise ClientClosed("the host closed the connection")


def _subscribed_conn(items: list[Incoming]) -> Conn:
    ctx = Context(HostAddress("127.0.0.1", 1))
    conn = Conn(ctx, _ScriptedClient(items), "owner")  # type: ignore[arg-type]
    conn.subscribed = Subscribed(pane_id=uuid.uuid4(), subscription_id=LEASE, host_run_id=HOST)
    conn.ledger = FrameLedger(LEASE, Representation.VT)
    return conn


async def test_an_ack_into_a_closing_connection_still_reads_what_came_before() -> None:
    frame = VTFramePacket(LEASE, 1, 80, 24, b"screen")
    conn = _subscribed_conn([frame, Ended(reason=EndReason.TAKEN_OVER)])
    assert await conn.frame("frame 1") == frame  # its ACK cannot be sent: no failure yet
    assert conn.send_closed and not conn.closed
    ended = await conn.expect(Ended, "`ended`")
    assert ended.reason is EndReason.TAKEN_OVER
    await conn.expect_closed("`ended`")


async def test_other_messages_still_fail_on_a_closed_connection() -> None:
    conn = _subscribed_conn([])
    with pytest.raises(CheckFailed, match="before refresh was sent"):
        await conn.refresh()


# ---------------------------------------------------------------- how a check ends


def _ctx() -> Context:
    ctx = Context(HostAddress("127.0.0.1", 1))
    ctx.credential = Credential(HOST, uuid.uuid4(), bytes(32))
    return ctx


async def test_an_unexpected_exception_is_an_internal_error() -> None:
    async def broken(ctx: Context) -> str:
        await trio.lowlevel.checkpoint()
        raise KeyError("oops")

    result = await _run_one(_ctx(), "x", broken, 5.0)
    assert result.status is Status.FAILED
    assert result.detail.startswith("internal error: KeyError: 'oops'")


async def test_the_check_timeout_and_an_inner_one_are_told_apart() -> None:
    async def hangs(ctx: Context) -> str:
        ctx.step = "waiting for Godot"
        await trio.sleep_forever()

    async def inner(ctx: Context) -> str:
        with trio.fail_after(0.01):
            await trio.sleep_forever()

    result = await _run_one(_ctx(), "x", hangs, 0.05)
    assert result.detail == "timed out after 0.05 s (waiting for Godot)"
    result = await _run_one(_ctx(), "x", inner, 5.0)
    assert result.status is Status.FAILED and "inner wait timed out" in result.detail


async def test_a_local_tls_error_does_not_read_as_unreachable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mirror_host.client.conformance import checks_transport

    monkeypatch.setattr(checks_transport, "OTHER_SUITES", "NO-SUCH-SUITE")
    result = await _run_one(_ctx(), "tls.cipher", checks_transport.check_tls_cipher, 5.0)
    assert result.status is Status.SKIPPED, result.detail
    assert "OpenSSL offers none of NO-SUCH-SUITE" in result.detail

    async def raises(ctx: Context) -> str:
        import ssl

        await trio.lowlevel.checkpoint()
        raise ssl.SSLError("no ciphers available")

    result = await _run_one(_ctx(), "x", raises, 5.0)
    assert result.status is Status.FAILED
    assert "TLS library" in result.detail and "cannot reach" not in result.detail


async def test_a_handshake_that_never_ends_has_its_own_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mirror_host.client.conformance import checks_transport, probe

    monkeypatch.setattr(probe, "HANDSHAKE_SECONDS", 0.2)
    accepted: list[trio.SocketStream] = []

    async def silent(stream: trio.SocketStream) -> None:
        accepted.append(stream)  # never answers the ClientHello
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, silent, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        ctx = _ctx()
        ctx.target = HostAddress("127.0.0.1", port)
        result = await _run_one(ctx, "tls.policy", checks_transport.check_tls_policy, 5.0)
        nursery.cancel_scope.cancel()
    assert result.status is Status.FAILED
    assert "the TLS handshake neither completed nor failed within 0.2 s" in result.detail


# ---------------------------------------------------------------- the command


def test_a_crash_outside_any_check_still_ends_with_the_counts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from mirror_host.cli import main
    from mirror_host.client.conformance import suite
    from mirror_host.client.conformance.report import CheckResult

    async def crashing(
        target: object, options: object, *, on_result: Callable[[CheckResult], None]
    ) -> list[CheckResult]:
        on_result(CheckResult("pair.enroll", Status.PASSED, "paired", 0.0))
        await trio.lowlevel.checkpoint()
        raise RuntimeError("boom")

    monkeypatch.setattr(suite, "run_suite", crashing)
    status = main(["conformance", "127.0.0.1:1", "--code", "ABCD-2345"])
    lines = capsys.readouterr().out.splitlines()
    assert status == 1
    assert lines[-2].startswith("FAIL suite: internal error: RuntimeError: boom")
    assert lines[-1] == "1 passed, 1 failed"


def test_unknown_patterns_are_refused_before_connecting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from mirror_host.cli import main
    from mirror_host.client.conformance import suite

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("the suite must not start")

    monkeypatch.setattr(suite, "run_suite", never)
    with pytest.raises(SystemExit) as exit_info:
        main(["conformance", "127.0.0.1:1", "--code", "ABCD-2345", "--skip", "nothing.*"])
    assert exit_info.value.code == 2
    assert "no check matches 'nothing.*'" in capsys.readouterr().err
