"""The admin socket under bad requests and vanishing clients: a real host, raw Unix sockets.

Every request gets a refusal of a named kind or the connection is closed; the
host keeps answering other requests on the same connection and new clients.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from mirror_host.errors import MirrorHostError
from mirror_host.host import admin
from mirror_host.host.admin_client import ADMIN_SOCKET
from mirror_host.host.server import Host
from tests.integration.conftest import running_host

pytestmark = pytest.mark.timeout(30)

UNKNOWN_DEVICE = "00000000-0000-4000-8000-000000000000"


class Client:
    """One raw admin connection: send a line, read one reply line."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buffer = b""

    async def ask(self, line: bytes) -> dict[str, Any]:
        await self.stream.send_all(line + b"\n")
        while b"\n" not in self.buffer:
            chunk = await self.stream.receive_some(65536)
            assert chunk, "the host closed the connection"
            self.buffer += chunk
        reply, self.buffer = self.buffer.split(b"\n", 1)
        answer: dict[str, Any] = json.loads(reply)
        return answer


async def connect(state_dir: Path) -> Client:
    return Client(await trio.open_unix_socket(str(state_dir / ADMIN_SOCKET)))


BAD_REQUESTS = [
    # 3.11's decoder gives up on the depth (RecursionError: "nested too deeply"),
    # 3.12+ on the missing value; either way a refusal.
    (b"[" * 3000, "invalid-request", "invalid request: "),
    (b"\xff\xfe{}", "invalid-request", "invalid request: "),
    (b"[]", "invalid-request", "invalid request: a request is a JSON object"),
    (b"{}", "invalid-request", "a request needs an op (pair, pairing, closePairing"),
    (b'{"op":"nope"}', "invalid-request", "unknown op 'nope' (pair, pairing, closePairing"),
    (b'{"op":["status"]}', "invalid-request", "unknown op (list) (pair"),
    (b'{"op":"' + b"x" * 200 + b'"}', "invalid-request", "unknown op (str) (pair"),
    (b'{"op":"revoke","deviceID":{"a":[1]}}', "invalid-request", "deviceID is not a UUID"),
    (b'{"op":"revoke"}', "invalid-request", "deviceID is not a UUID"),
    (
        b'{"op":"revoke","deviceID":"' + UNKNOWN_DEVICE.encode() + b'"}',
        "not-found",
        f"no paired device {UNKNOWN_DEVICE.upper()}",
    ),
    (b'{"op":"pairing","window":1e999}', "invalid-request", "window is not a number"),
    (b'{"op":"pairing","window":NaN}', "invalid-request", "window is not a number"),
    (b'{"op":"pairing","window":true}', "invalid-request", "window is not a number"),
    (b'{"op":"pairing","window":' + b"9" * 4400 + b"}", "invalid-request", "invalid request"),
    (b'{"op":"closePairing","window":"1"}', "invalid-request", "window is not a number"),
    (b'{"op":"pairing"}', "invalid-request", "pairing needs a window number"),
]


async def test_bad_requests_are_refused_by_kind_and_the_connection_goes_on(
    state_dir: Path,
) -> None:
    async with running_host(state_dir):
        client = await connect(state_dir)
        with trio.fail_after(10):
            for line, kind, said in BAD_REQUESTS:
                reply = await client.ask(line)
                assert (reply["ok"], reply["kind"]) == (False, kind), (line[:40], reply)
                assert reply["error"].startswith(said), (line[:40], reply)
                assert "x" * 41 not in reply["error"]  # a long unknown op is not echoed back
                status = await client.ask(b'{"op":"status","note":"\\ud800"}')
                assert status["ok"] is True and status["devices"] == 0
            if sys.version_info < (3, 12):  # where the depth itself is what json gives up on
                deep = await client.ask(b"[" * 3000 + b"]" * 3000)
                assert deep["error"] == "invalid request: nested too deeply"
        await client.stream.aclose()


async def test_a_fault_in_an_op_is_an_internal_refusal_logged_without_its_message(
    state_dir: Path, host_log: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken_status(self: Host) -> dict[str, Any]:
        raise RuntimeError("QUOTES-A-SECRET")

    async def refused_pairing(self: Host) -> Any:
        raise MirrorHostError("the pairing window cannot open here")

    async with running_host(state_dir):
        monkeypatch.setattr(Host, "status", broken_status)
        monkeypatch.setattr(Host, "open_pairing_window", refused_pairing)
        client = await connect(state_dir)
        with trio.fail_after(10):
            reply = await client.ask(b'{"op":"status"}')
            assert reply == {
                "ok": False,
                "kind": "internal",
                "error": "the host could not answer: RuntimeError",
            }
            failed = await client.ask(b'{"op":"pair"}')
            assert failed == {
                "ok": False,
                "kind": "failed",
                "error": "the pairing window cannot open here",
            }
            devices = await client.ask(b'{"op":"devices"}')  # the same connection goes on
            assert devices == {"ok": True, "devices": []}
        await client.stream.aclose()
    (line,) = [r.getMessage() for r in host_log.records if "admin request" in r.getMessage()]
    assert line.startswith("admin request status failed: RuntimeError at test_admin_socket.py:")
    assert "QUOTES-A-SECRET" not in host_log.text


async def test_a_client_gone_before_its_pair_reply_leaves_no_window_open(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = trio.Event()
    numbers: list[int] = []
    real = Host.open_pairing_window

    async def after_the_client_left(self: Host) -> Any:
        await gone.wait()
        ticket = await real(self)
        numbers.append(ticket.number)
        return ticket

    async with running_host(state_dir) as host:
        monkeypatch.setattr(Host, "open_pairing_window", after_the_client_left)
        client = await connect(state_dir)
        with trio.fail_after(10):
            await client.stream.send_all(b'{"op":"pair"}\n')
            await trio.sleep(0.05)  # the host has the request (and waits in the patch)
            await client.stream.aclose()
            gone.set()
            while not numbers or host.book.window_state(numbers[0])["state"] == "open":
                await trio.sleep(0.01)
            assert host.book.window_state(numbers[0])["state"] == "closed"
            # The host goes on answering new clients.
            again = await connect(state_dir)
            assert (await again.ask(b'{"op":"status"}'))["ok"] is True
            await again.stream.aclose()


async def test_a_client_that_never_reads_its_replies_is_dropped(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(admin, "_IDLE_SECONDS", 0.2)
    async with running_host(state_dir):
        client = await connect(state_dir)
        sent = 0
        with trio.fail_after(20):
            try:
                while True:  # until the host, blocked on replies nobody reads, hangs up
                    await client.stream.send_all(b'{"op":"status"}\n' * 64)
                    sent += 64
            except trio.BrokenResourceError:
                pass
            assert sent > 64
            again = await connect(state_dir)
            assert (await again.ask(b'{"op":"devices"}'))["ok"] is True
            await again.stream.aclose()
        await client.stream.aclose()


def _refusing_socket(state_dir: Path) -> Any:
    """An ``admin.sock`` that exists but that nobody listens on (connect: refused)."""
    import socket

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(state_dir / ADMIN_SOCKET))
    return sock


def test_a_host_that_left_its_socket_behind_may_have_crashed(state_dir: Path) -> None:
    from mirror_host.host.admin_client import NoHostRunning, admin_request

    with _refusing_socket(state_dir), pytest.raises(NoHostRunning, match="may have crashed"):
        admin_request(state_dir, {"op": "status"})


def test_a_host_that_removes_its_socket_as_it_refuses_has_stopped(state_dir: Path) -> None:
    """A host stopping cleanly closes its socket and removes it; a client asking in
    between hears that it stopped, not that it may have crashed (issue 28 item 8)."""
    import threading

    from mirror_host.host.admin_client import NoHostRunning, admin_request

    with _refusing_socket(state_dir):
        remover = threading.Timer(0.05, (state_dir / ADMIN_SOCKET).unlink)
        remover.start()
        try:
            with pytest.raises(NoHostRunning) as refused:
                admin_request(state_dir, {"op": "status"})
        finally:
            remover.join()
    assert str(refused.value) == (
        f"the mirror-host of state directory {state_dir} has stopped; "
        "start one with `mirror-host serve`"
    )


def _silent_host(state_dir: Path) -> Any:
    """A host that took its socket and answers nothing: listening, never accepting."""
    import socket

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(state_dir / ADMIN_SOCKET))
    listener.listen(1)
    return listener


def test_a_host_that_never_answers_is_said_in_one_line(state_dir: Path) -> None:
    """Not a bare TimeoutError: the message the other admin errors get (issue 27)."""
    from mirror_host.host.admin_client import NoHostRunning, admin_request

    said = (
        f"the mirror-host of state directory {state_dir} did not answer on its admin "
        "socket within 0.3 s (it may be stuck: try again, or restart it)"
    )
    import socket

    with _silent_host(state_dir):
        # Connected (queued), the request sent, no reply.
        with pytest.raises(NoHostRunning) as waited:
            admin_request(state_dir, {"op": "status"}, timeout=0.3)
        assert str(waited.value) == said
        # Its queue full: the connection itself is not taken.
        queued: list[socket.socket] = []
        try:
            for _ in range(64):
                client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                client.setblocking(False)
                try:
                    client.connect(str(state_dir / ADMIN_SOCKET))
                except BlockingIOError:
                    client.close()
                    break
                queued.append(client)
            else:
                pytest.fail("the listener's queue never filled")
            with pytest.raises(NoHostRunning) as full:
                admin_request(state_dir, {"op": "status"}, timeout=0.3)
            assert str(full.value) == said
        finally:
            for client in queued:
                client.close()


def test_status_of_a_host_that_never_answers_is_one_line(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import functools

    from mirror_host.cli import command, main
    from mirror_host.host.admin_client import admin_request

    # The command's own 10 s, shortened: the host below would never answer at all.
    monkeypatch.setattr(command, "admin_request", functools.partial(admin_request, timeout=0.3))
    with _silent_host(state_dir):
        assert main(["status", "--state-dir", str(state_dir)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"mirror-host status: the mirror-host of state directory {state_dir} did not answer "
        "on its admin socket within 0.3 s (it may be stuck: try again, or restart it)\n"
    )
