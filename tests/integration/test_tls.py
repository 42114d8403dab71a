"""This Python's TLS-PSK route, over real TLS: the suite, the keys, the identity binding.

The same tests run on every route (the standard library on 3.13+, ctypes on
3.11/3.12): .ci/run runs them on each interpreter it covers.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import os
import secrets
import ssl
import subprocess
import sys
from functools import partial
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
import trio

from mirror_host.errors import TLSUnsupported
from mirror_host.host.tls import (
    PskTable,
    build_server_context,
    negotiated_identity,
    reset_negotiated_identity,
)
from mirror_host.tls import psk, psk_ctypes
from mirror_host.tls.psk import (
    CIPHER,
    check_psk_route,
    client_base_context,
    client_context,
    memory_handshake,
    psk_backend,
)

pytestmark = pytest.mark.timeout(30)

CTYPES_ONLY = pytest.mark.skipif(psk_backend() != "ctypes", reason="the ctypes route (3.11/3.12)")


def test_the_route_is_the_one_for_this_python() -> None:
    expected = "stdlib" if sys.version_info >= (3, 13) else "ctypes"
    assert psk_backend() == expected
    described = check_psk_route()
    assert f"{CIPHER} over TLS 1.2, {expected} route" in described
    assert ssl.OPENSSL_VERSION in described
    # The check ran in its own context: its identity is not this test's.
    assert negotiated_identity() is None


def test_the_route_is_logged_once_however_many_context_classes_check_it(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """serve checks with ssl.SSLContext, the host with its own class: one line, not two."""
    from mirror_host.host.tls import _ServerSSLContext
    from mirror_host.tls import psk

    monkeypatch.setattr(psk, "_checked", {})
    caplog.set_level(logging.DEBUG, logger="mirror_host.tls.psk")
    check_psk_route()
    check_psk_route(_ServerSSLContext)
    check_psk_route()
    assert [r.getMessage()[:14] for r in caplog.records] == ["TLS-PSK ready:"]


def test_a_handshake_negotiates_the_one_suite_and_binds_the_identity() -> None:
    key = secrets.token_bytes(32)
    server = build_server_context()
    server.set_table(PskTable(MappingProxyType({"ALICE": key})))
    reset_negotiated_identity()
    accepted, offered = memory_handshake(server.context, client_context("ALICE", key))
    for side in (accepted, offered):
        assert side.version() == "TLSv1.2"
        cipher = side.cipher()
        assert cipher is not None and cipher[0] == CIPHER
    assert negotiated_identity() == "ALICE"


@pytest.mark.parametrize(
    ("identity", "offered"),
    [("ALICE", b"\x01" * 32), ("MALLORY", None), ("", None)],
    ids=["wrong key", "unknown identity", "empty identity"],
)
def test_wrong_keys_and_unknown_identities_are_refused(
    identity: str, offered: bytes | None
) -> None:
    key = secrets.token_bytes(32)
    server = build_server_context()
    server.set_table(PskTable(MappingProxyType({"ALICE": key})))
    reset_negotiated_identity()
    with pytest.raises(ssl.SSLError):
        memory_handshake(server.context, client_context(identity, offered or key))
    if identity != "ALICE":
        assert negotiated_identity() is None


def test_a_new_table_applies_to_the_next_handshake() -> None:
    key = secrets.token_bytes(32)
    server = build_server_context()
    client = client_context("ALICE", key)
    with pytest.raises(ssl.SSLError):
        memory_handshake(server.context, client)
    server.set_table(PskTable(MappingProxyType({"ALICE": key})))
    memory_handshake(server.context, client)
    server.set_table(PskTable())
    with pytest.raises(ssl.SSLError):
        memory_handshake(server.context, client)


def test_callbacks_outlive_every_python_reference_but_the_context() -> None:
    key = secrets.token_bytes(32)

    def make() -> tuple[ssl.SSLContext, ssl.SSLContext]:
        server = build_server_context()
        server.set_table(PskTable(MappingProxyType({"ALICE": key})))
        return server.context, client_context("ALICE", key)

    server_ctx, client_ctx = make()
    gc.collect()
    for _ in range(3):
        memory_handshake(server_ctx, client_ctx)


async def test_concurrent_handshakes_each_bind_their_own_identity() -> None:
    # Twelve clients with twelve identities handshake at once over loopback
    # TCP; every server task must see exactly its own client's identity.
    keys = {f"DEVICE-{n:02d}": secrets.token_bytes(32) for n in range(12)}
    server = build_server_context()
    server.set_table(PskTable(MappingProxyType(keys)))
    seen: dict[str, str | None] = {}

    async def serve(stream: trio.SocketStream) -> None:
        ssl_stream = trio.SSLStream(stream, server.context, server_side=True)
        reset_negotiated_identity()
        await ssl_stream.do_handshake()
        before = negotiated_identity()
        await trio.sleep(0.05)  # other tasks handshake meanwhile
        claimed = (await ssl_stream.receive_some()).decode()
        assert negotiated_identity() == before
        seen[claimed] = before
        await ssl_stream.send_all(b"ok")
        await ssl_stream.aclose()

    async def connect(port: int, identity: str) -> None:
        tcp = await trio.open_tcp_stream("127.0.0.1", port)
        ssl_stream = trio.SSLStream(tcp, client_context(identity, keys[identity]))
        await ssl_stream.send_all(identity.encode())
        assert await ssl_stream.receive_some() == b"ok"
        await trio.aclose_forcefully(ssl_stream)

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(partial(trio.serve_tcp, serve, 0, host="127.0.0.1"))
            port = listeners[0].socket.getsockname()[1]
            async with trio.open_nursery() as clients:
                for identity in keys:
                    clients.start_soon(connect, port, identity)
            nursery.cancel_scope.cancel()
    assert seen == {identity: identity for identity in keys}


def test_a_route_that_does_not_work_fails_with_one_clear_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A client callback that offers another key than the one it was given
    # stands in for a route whose callback is not really in force.
    real = psk.set_client_psk

    def broken(context: ssl.SSLContext, callback: psk_ctypes.ClientCallback) -> None:
        real(context, lambda hint: (callback(hint)[0], b"\x00" * 32))

    monkeypatch.setattr(psk, "_checked", {})
    monkeypatch.setattr(psk, "set_client_psk", broken)
    with pytest.raises(TLSUnsupported) as caught:
        build_server_context()
    message = str(caught.value)
    assert message.startswith("TLS-PSK does not work on this Python (")
    assert "a handshake with the right key failed" in message
    if psk_backend() == "ctypes":
        assert "Python 3.13 or newer" in message
    assert "\n" not in message


def test_a_suite_other_than_prowls_fails_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    # A server that would also take another PSK suite, and a client that offers
    # only that one: the handshake works, the check must still refuse it.
    other = "ECDHE-PSK-AES128-CBC-SHA256"
    real_server, real_client = psk.server_context, psk.client_base_context

    def lax_server(callback: psk_ctypes.ServerCallback, **kw: Any) -> ssl.SSLContext:
        context = real_server(callback, **kw)
        context.set_ciphers(f"{other}:{CIPHER}")
        return context

    monkeypatch.setattr(psk, "_checked", {})
    monkeypatch.setattr(psk, "server_context", lax_server)
    monkeypatch.setattr(psk, "client_base_context", lambda **_: real_client(cipher=other))
    with pytest.raises(TLSUnsupported, match=f"the server negotiated \\('{other}'"):
        check_psk_route()


@CTYPES_ONLY
def test_ctypes_route_refuses_what_is_not_an_ssl_context() -> None:
    with pytest.raises(TLSUnsupported, match="layout"):
        psk_ctypes.install_server_callback(object(), lambda _: b"")  # type: ignore[arg-type]


@CTYPES_ONLY
def test_ctypes_route_finds_the_openssl_that_ssl_runs_on() -> None:
    import _ssl

    assert psk_ctypes.library_location() == getattr(_ssl, "__file__", None) or (
        psk_ctypes.library_location() == "the interpreter's own symbols"
    )


@CTYPES_ONLY
def test_ctypes_callback_errors_refuse_the_handshake_and_log_no_detail(
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = secrets.token_hex(16)

    def lookup(identity: str | None) -> bytes:
        raise RuntimeError(secret)

    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.minimum_version = server_ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    server_ctx.set_ciphers(CIPHER)
    psk_ctypes.install_server_callback(server_ctx, lookup)
    with caplog.at_level(logging.DEBUG), pytest.raises(ssl.SSLError):
        memory_handshake(server_ctx, client_context("ALICE", secrets.token_bytes(32)))
    assert "TLS-PSK server callback failed: RuntimeError" in caplog.text
    assert secret not in caplog.text


@CTYPES_ONLY
def test_ctypes_client_refuses_identities_and_keys_that_do_not_fit() -> None:
    key = secrets.token_bytes(32)
    server = build_server_context()
    too_long = "A" * 4096
    server.set_table(PskTable(MappingProxyType({"ALICE": key, too_long: key})))
    for identity, offered in ((too_long, key), ("ALICE", b"\x01" * 4096), ("AL\0ICE", key)):
        context = client_base_context()
        psk_ctypes.install_client_callback(context, lambda _hint, i=identity, k=offered: (i, k))
        with pytest.raises(ssl.SSLError):
            memory_handshake(server.context, context)


@pytest.mark.slow
@pytest.mark.parametrize(
    "command",
    [
        ["serve", "--listen", "127.0.0.1:0", "--source", "local", "--local-command", "cat"],
        ["attach", "127.0.0.1:9", "--code", "ABCD2345"],
        ["conformance", "127.0.0.1:9", "--code", "ABCD2345"],
    ],
    ids=["serve", "attach", "conformance"],
)
def test_commands_on_a_python_whose_route_fails_stop_with_one_line(
    tmp_path: Path, command: list[str]
) -> None:
    # serve stops before it writes its state directory; the clients before
    # they connect (port 9 on loopback has nobody listening anyway).
    state = tmp_path / "state"
    argv = [*command, "--state-dir", str(state)] if command[0] == "serve" else command
    code = (
        "import sys\n"
        "from mirror_host.tls import psk\n"
        "real = psk.set_client_psk\n"
        "psk.set_client_psk = lambda c, cb: real(c, lambda h: (cb(h)[0], b'x' * 32))\n"
        "from mirror_host.cli import main\n"
        f"sys.exit(main({argv!r}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True, text=True, timeout=30, check=False, cwd=tmp_path,
        env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config")},
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("mirror-host: TLS-PSK does not work on this")
    assert result.stdout == ""
    assert not state.exists()


# ------------------------------------------------------------------ robustness of the route


@CTYPES_ONLY
@pytest.mark.parametrize("side", ["server", "client"])
def test_ctypes_callbacks_refuse_even_a_keyboard_interrupt(
    side: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An exception ctypes sees leaves it no return value: OpenSSL would read
    # whatever is on the stack as the PSK's length. Every one is caught.
    unraisable: list[object] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    key = secrets.token_bytes(32)

    def interrupted(_: str | None) -> Any:
        raise KeyboardInterrupt

    server_ctx = psk.server_context(interrupted if side == "server" else lambda _: key)
    client_ctx = client_base_context()
    psk_ctypes.install_client_callback(
        client_ctx, interrupted if side == "client" else lambda _: ("ALICE", key)
    )
    with caplog.at_level(logging.DEBUG), pytest.raises(ssl.SSLError):
        memory_handshake(server_ctx, client_ctx)
    assert f"TLS-PSK {side} callback failed: KeyboardInterrupt" in caplog.text
    assert unraisable == []


@CTYPES_ONLY
def test_ctypes_layout_is_pinned_to_the_known_struct() -> None:
    import _ssl

    size = ctypes.sizeof(psk_ctypes._PySSLContext)
    assert _ssl._SSLContext.__basicsize__ == size  # type: ignore[attr-defined]
    if ctypes.sizeof(ctypes.c_void_p) == 8:
        assert size == 96  # CPython 3.11 and 3.12 on 64-bit builds


@CTYPES_ONLY
def test_ctypes_route_reads_nothing_from_a_context_of_unknown_layout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import _ssl

    class Grown(ssl.SSLContext):
        """Stands in for an _SSLContext whose struct grew (another CPython build)."""

        # A slot grows the instance on every version (from 3.12 a subclass's
        # __dict__ is kept outside the struct, so a plain subclass is no bigger).
        __slots__ = ("grown",)

    libssl = psk_ctypes._load()
    asked: list[int] = []
    real_get_options = libssl.get_options

    def get_options(pointer: int) -> int:
        asked.append(pointer)
        return int(real_get_options(pointer))

    monkeypatch.setattr(libssl, "get_options", get_options)
    monkeypatch.setattr(_ssl, "_SSLContext", Grown)
    assert Grown.__basicsize__ != ctypes.sizeof(psk_ctypes._PySSLContext)
    with pytest.raises(TLSUnsupported, match="layout"):
        psk_ctypes.install_server_callback(Grown(ssl.PROTOCOL_TLS_SERVER), lambda _: b"")
    assert asked == []  # refused before OpenSSL was handed anything read from it


def test_a_wrong_key_or_unknown_identity_that_only_stalls_fails_the_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A route under which the refused handshakes never end (one exchange each,
    # where the verdict needs several): silence is no refusal.
    real = psk.memory_handshake
    calls: list[int] = []

    def stalling(server: ssl.SSLContext, client: ssl.SSLContext, **_: Any) -> Any:
        calls.append(1)
        return real(server, client) if len(calls) == 1 else real(server, client, rounds=1)

    monkeypatch.setattr(psk, "_checked", {})
    monkeypatch.setattr(psk, "memory_handshake", stalling)
    with pytest.raises(TLSUnsupported, match="the wrong key neither failed nor finished"):
        check_psk_route()


def test_an_unknown_identity_let_in_fails_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    # A route that hands the server callback another identity than the client's
    # (here: always the one the check expects) lets strangers in.
    real = psk.server_context

    def confused(callback: psk_ctypes.ServerCallback, **kw: Any) -> ssl.SSLContext:
        return real(lambda offered: callback("mirror-host-self-check") if offered else b"", **kw)

    monkeypatch.setattr(psk, "_checked", {})
    monkeypatch.setattr(psk, "server_context", confused)
    with pytest.raises(TLSUnsupported, match="a handshake with an unknown identity succeeded"):
        check_psk_route()


def test_the_check_runs_with_the_hosts_own_context_class(monkeypatch: pytest.MonkeyPatch) -> None:
    from mirror_host.host import tls as host_tls

    made: list[type[ssl.SSLContext]] = []
    real = psk.server_context

    def recording(callback: psk_ctypes.ServerCallback, **kw: Any) -> ssl.SSLContext:
        context = real(callback, **kw)
        made.append(type(context))
        return context

    monkeypatch.setattr(psk, "_checked", {})
    monkeypatch.setattr(psk, "server_context", recording)
    context = build_server_context().context
    assert type(context) is host_tls._ServerSSLContext
    assert made == [host_tls._ServerSSLContext]  # the check's own server context
    build_server_context()
    assert made == [host_tls._ServerSSLContext]  # checked once for that class


@pytest.mark.skipif(not hasattr(ssl, "OP_NO_RENEGOTIATION"), reason="no OP_NO_RENEGOTIATION")
def test_the_server_context_refuses_renegotiation() -> None:
    context = build_server_context().context
    assert context.options & ssl.OP_NO_RENEGOTIATION


def test_the_server_keeps_no_session_of_a_closed_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # OpenSSL would keep each for 300 s (up to 20,480, ~1.2 KiB each): a table any
    # peer grows by connecting. No Prowl client resumes a session.
    if psk_ctypes._LAYOUTS.get(sys.version_info[:2]) is None:
        pytest.skip("this Python's SSLContext layout is not known: the cache stays on")
    identity_key = secrets.token_bytes(32)
    server = build_server_context()
    server.set_table(PskTable(MappingProxyType({"DEVICE": identity_key})))

    def handshakes(ctx: ssl.SSLContext) -> int:
        client_ctx = client_context("DEVICE", identity_key)
        for _ in range(20):
            obj, _client = memory_handshake(ctx, client_ctx)
            try:
                obj.unwrap()  # close_notify, as the host ends a connection: a "good" session
            except ssl.SSLWantReadError:
                pass  # the peer never answers it, as a phone that left
            del obj, _client
        gc.collect()
        return int(ctx.session_stats()["number"])

    assert handshakes(server.context) == 0
    # Without it, the same connections stay cached: the check above can fail.
    monkeypatch.setattr(psk_ctypes, "disable_session_cache", lambda _context: None)
    keeping = build_server_context()
    keeping.set_table(PskTable(MappingProxyType({"DEVICE": identity_key})))
    assert handshakes(keeping.context) == 20
