"""TLS-PSK, pairing and authentication over real TLS on loopback."""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import uuid
from functools import partial
from pathlib import Path

import pytest
import trio

from mirror_host.auth.proofs import device_proof, pair_proof
from mirror_host.client.client import ClientClosed, Credential, login, open_client, pair_device
from mirror_host.control import (
    Authenticate,
    Authenticated,
    Challenge,
    ListPanes,
    Pair,
    Panes,
    Ping,
    Pong,
)
from mirror_host.host.admin_client import admin_request
from mirror_host.host.store import DeviceStore
from mirror_host.tls.psk import client_context
from tests.integration.conftest import paired, port_of, running_host

pytestmark = pytest.mark.timeout(60)


async def test_pair_then_reconnect_and_authenticate(state_dir: Path) -> None:
    async with running_host(state_dir) as host:
        credential = await paired(host)
        assert credential.host_id == host.book.registry.host_id
        # Persisted before `paired` was sent.
        stored = DeviceStore(state_dir).load()
        assert stored is not None and stored.find(credential.device_id) is not None
        async with login("127.0.0.1", port_of(host), credential) as client:
            await client.send(ListPanes())
            panes = await client.expect(Panes)
            assert isinstance(panes, Panes)
            assert panes.host_run_id == host.host_run_id
        device = host.book.registry.find(credential.device_id)
        assert device is not None and device.last_seen is not None


async def test_paired_message_carries_32_byte_key_and_closes(state_dir: Path) -> None:
    async with running_host(state_dir) as host:
        ticket = await host.open_pairing_window()
        async with open_client("127.0.0.1", port_of(host), "pair", ticket.code.encode()) as c:
            challenge = await c.expect(Challenge)
            assert isinstance(challenge, Challenge) and len(challenge.nonce) == 32
            await c.send(
                Pair(
                    name="Mac",
                    proof=pair_proof(ticket.code, challenge.host_id, "Mac", challenge.nonce),
                )
            )
            rest = await c.expect_closed()
        assert len(rest) == 1
        assert len(rest[0].key) == 32  # type: ignore[union-attr]


async def expect_silent_close(client_cm: object) -> list[object]:
    async with client_cm as client:  # type: ignore[attr-defined]
        return await client.expect_closed(timeout=15)


async def test_wrong_device_proof_is_closed_and_counted(state_dir: Path) -> None:
    async with running_host(state_dir) as host:
        credential = await paired(host)
        port = port_of(host)
        async with open_client("127.0.0.1", port, credential.identity, credential.key) as c:
            challenge = await c.expect(Challenge)
            await c.send(Authenticate(device_id=credential.device_id, proof=b"\x00" * 32))
            assert await c.expect_closed() == []
        assert host.failures.is_locked("127.0.0.1", trio.current_time()) is False
        assert len(host.failures) == 1
        del challenge


async def test_proof_for_another_nonce_is_refused(state_dir: Path) -> None:
    async with running_host(state_dir) as host:
        credential = await paired(host)
        port = port_of(host)
        async with open_client("127.0.0.1", port, credential.identity, credential.key) as first:
            old = await first.expect(Challenge)
        assert isinstance(old, Challenge)
        stale = device_proof(credential.key, old.host_id, credential.device_id, old.nonce)
        async with open_client("127.0.0.1", port, credential.identity, credential.key) as c:
            fresh = await c.expect(Challenge)
            assert isinstance(fresh, Challenge) and fresh.nonce != old.nonce
            await c.send(Authenticate(device_id=credential.device_id, proof=stale))
            assert await c.expect_closed() == []


@pytest.mark.slow
async def test_expired_window_refuses_pairing(state_dir: Path) -> None:
    # A window long enough that a loaded machine still finishes TLS inside it.
    async with running_host(state_dir, window_seconds=3.0) as host:
        ticket = await host.open_pairing_window()
        port = port_of(host)
        # Within the window TLS works, but the pair arrives after expiry.
        async with open_client("127.0.0.1", port, "pair", ticket.code.encode()) as c:
            challenge = await c.expect(Challenge)
            assert isinstance(challenge, Challenge)
            assert host.book.window is not None
            await trio.sleep_until(host.book.window.deadline + 0.2)
            proof = pair_proof(ticket.code, challenge.host_id, "Late", challenge.nonce)
            await c.send(Pair(name="Late", proof=proof))
            assert await c.expect_closed() == []
        # After expiry the `pair` identity is gone from the TLS table.
        with pytest.raises(ClientClosed, match="TLS handshake failed"):
            await pair_device("127.0.0.1", port, ticket.code, "Later")
        assert host.book.registry.devices == ()


async def test_code_is_single_use(state_dir: Path) -> None:
    async with running_host(state_dir) as host:
        ticket = await host.open_pairing_window()
        port = port_of(host)
        await pair_device("127.0.0.1", port, ticket.code, "First")
        with pytest.raises(ClientClosed):
            await pair_device("127.0.0.1", port, ticket.code, "Second")
        assert [d.name for d in host.book.registry.devices] == ["First"]


async def test_new_window_replaces_the_old_code(state_dir: Path) -> None:
    async with running_host(state_dir) as host:
        old = await host.open_pairing_window()
        new = await host.open_pairing_window()
        port = port_of(host)
        with pytest.raises(ClientClosed):
            await pair_device("127.0.0.1", port, old.code, "Old")
        await pair_device("127.0.0.1", port, new.code, "New")


@pytest.mark.parametrize("name", ["", "x" * 241, "bad\x07name", "zero\u200bwidth"])
async def test_bad_device_names_are_refused(state_dir: Path, name: str) -> None:
    async with running_host(state_dir) as host:
        ticket = await host.open_pairing_window()
        with pytest.raises(ClientClosed):
            await pair_device("127.0.0.1", port_of(host), ticket.code, name)
        assert host.book.registry.devices == ()


async def test_list_before_authentication_closes_and_counts(state_dir: Path) -> None:
    async with running_host(state_dir) as host:
        ticket = await host.open_pairing_window()
        async with open_client("127.0.0.1", port_of(host), "pair", ticket.code.encode()) as c:
            await c.expect(Challenge)
            await c.send(Ping())
            assert isinstance(await c.expect(Pong), Pong)  # pings are fine before login
            await c.send(ListPanes())
            assert await c.expect_closed() == []
        assert len(host.failures) == 1


async def test_identity_is_bound_to_the_tls_session(state_dir: Path) -> None:
    async with running_host(state_dir) as host:
        alice = await paired(host, "Alice")
        bob = await paired(host, "Bob")
        port = port_of(host)
        # Alice's TLS session cannot log in as Bob, even with Bob's valid proof.
        async with open_client("127.0.0.1", port, alice.identity, alice.key) as c:
            challenge = await c.expect(Challenge)
            assert isinstance(challenge, Challenge)
            proof = device_proof(bob.key, challenge.host_id, bob.device_id, challenge.nonce)
            await c.send(Authenticate(device_id=bob.device_id, proof=proof))
            assert await c.expect_closed() == []
        # A device session cannot pair.
        async with open_client("127.0.0.1", port, alice.identity, alice.key) as c:
            await c.expect(Challenge)
            await c.send(Pair(name="x", proof=b"\x00" * 32))
            assert await c.expect_closed() == []
        # A pairing session cannot authenticate.
        ticket = await host.open_pairing_window()
        async with open_client("127.0.0.1", port, "pair", ticket.code.encode()) as c:
            challenge = await c.expect(Challenge)
            assert isinstance(challenge, Challenge)
            proof = device_proof(alice.key, challenge.host_id, alice.device_id, challenge.nonce)
            await c.send(Authenticate(device_id=alice.device_id, proof=proof))
            assert await c.expect_closed() == []


async def test_thirteenth_failure_is_refused_before_tls(state_dir: Path) -> None:
    async with running_host(state_dir) as host:
        port = port_of(host)
        for _ in range(12):
            with pytest.raises(ClientClosed):
                async with open_client("127.0.0.1", port, "nobody", b"k" * 32):
                    pass
        assert host.failures.is_locked("127.0.0.1", trio.current_time())
        credential_holder: list[Credential] = []
        # Even a correct credential is now refused before TLS starts.
        ticket = await host.open_pairing_window()
        with pytest.raises(ClientClosed):
            credential_holder.append(await pair_device("127.0.0.1", port, ticket.code, "late"))
        assert credential_holder == []


async def test_fifty_silent_sockets_do_not_lock_out_a_real_client(state_dir: Path) -> None:
    async with running_host(state_dir) as host:
        port = port_of(host)
        credential = await paired(host)
        sockets: list[trio.SocketStream] = []
        try:
            for _ in range(50):
                # One by one, so a failure part-way still closes those already open.
                sockets.append(await trio.open_tcp_stream("127.0.0.1", port))  # noqa: PERF401
            await trio.sleep(0.2)
            assert len(host._pending) <= 8
            async with login("127.0.0.1", port, credential) as c:
                await c.send(ListPanes())
                assert isinstance(await c.expect(Panes), Panes)
        finally:
            for sock in sockets:
                await sock.aclose()


async def test_revoke_closes_the_live_connection_and_the_key(state_dir: Path) -> None:
    async with running_host(state_dir) as host:
        credential = await paired(host)
        other = await paired(host, "Other")
        port = port_of(host)
        async with (
            login("127.0.0.1", port, credential) as victim,
            login("127.0.0.1", port, other) as bystander,
        ):
            reply = await trio.to_thread.run_sync(
                admin_request, state_dir, {"op": "revoke", "deviceID": credential.identity}
            )
            assert reply == {"ok": True, "revoked": [credential.identity]}
            assert await victim.expect_closed() == []
            await bystander.send(ListPanes())
            assert isinstance(await bystander.expect(Panes), Panes)
        with pytest.raises(ClientClosed, match="TLS handshake failed"):
            async with login("127.0.0.1", port, credential):
                pass
    stored = DeviceStore(state_dir).load()
    assert stored is not None and [d.name for d in stored.devices] == ["Other"]


async def test_host_id_survives_a_restart(state_dir: Path) -> None:
    async with running_host(state_dir) as host:
        first_id, first_run = host.book.registry.host_id, host.host_run_id
        credential = await paired(host)
    async with running_host(state_dir) as host:
        assert host.book.registry.host_id == first_id
        assert host.host_run_id != first_run
        async with login("127.0.0.1", port_of(host), credential) as c:
            await c.send(ListPanes())
            assert isinstance(await c.expect(Panes), Panes)


async def test_tls_refuses_other_suites_versions_and_keys(state_dir: Path) -> None:
    async with running_host(state_dir) as host:
        ticket = await host.open_pairing_window()
        port = port_of(host)
        code = ticket.code.encode()
        bad_contexts = [
            client_context("pair", code, cipher="PSK-AES128-CBC-SHA256"),
            client_context("pair", b"WRONGKEY"),
            client_context("nobody", code),
            client_context(
                "pair",
                code,
                minimum=ssl.TLSVersion.TLSv1_3,
                maximum=ssl.TLSVersion.TLSv1_3,
            ),
        ]
        for context in bad_contexts:
            with pytest.raises(ClientClosed):
                async with open_client("127.0.0.1", port, "pair", code, context=context) as c:
                    await c.expect(Challenge)
        async with open_client("127.0.0.1", port, "pair", code) as c:
            assert isinstance(await c.expect(Challenge), Challenge)
            assert c.stream.cipher()[0] == "ECDHE-PSK-CHACHA20-POLY1305"  # type: ignore[index]
            assert c.stream.version() == "TLSv1.2"


@pytest.mark.slow
async def test_openssl_s_client_matrix(state_dir: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the openssl command-line program is not installed")
    async with running_host(state_dir) as host:
        ticket = await host.open_pairing_window()
        port = port_of(host)
        psk = ticket.code.encode().hex()

        async def s_client(*args: str) -> tuple[int, bytes]:
            result = await trio.run_process(
                [openssl, "s_client", "-connect", f"127.0.0.1:{port}", "-quiet", "-ign_eof", *args],
                stdin=b"",
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
            return result.returncode, result.stdout

        suite = ("-cipher", "ECDHE-PSK-CHACHA20-POLY1305")
        code, out = await s_client("-tls1_2", *suite, "-psk_identity", "pair", "-psk", psk)
        # The first packet after the handshake is a `challenge` control message.
        assert (
            out[4:5] == b"\x00"
            and json.loads(out[5 : 4 + int.from_bytes(out[:4], "big")])["challenge"]
        )
        failing = [
            ("-tls1_2", "-cipher", "PSK-AES128-CBC-SHA256", "-psk_identity", "pair", "-psk", psk),
            ("-tls1_3", "-psk_identity", "pair", "-psk", psk),
            ("-tls1_2", "-cipher", "ECDHE-RSA-AES128-GCM-SHA256"),
            ("-tls1_2", *suite, "-psk_identity", "pair", "-psk", "00112233"),
            ("-tls1_2", *suite, "-psk_identity", "intruder", "-psk", psk),
        ]
        for args in failing:
            code, out = await s_client(*args)
            assert code != 0 and out == b"", args


async def test_unknown_identity_gets_an_alert_not_a_bare_eof(state_dir: Path) -> None:
    async with running_host(state_dir) as host:
        port = port_of(host)
        tcp = await trio.open_tcp_stream("127.0.0.1", port)
        stream = trio.SSLStream(tcp, client_context(str(uuid.uuid4()).upper(), b"k" * 32))
        with pytest.raises(trio.BrokenResourceError) as info:
            await stream.do_handshake()
        await trio.aclose_forcefully(stream)
        # OpenSSL reports the peer's alert, not "unexpected EOF".
        assert "ALERT" in str(info.value.__cause__).upper()


async def test_challenge_and_authenticated_ids_match(state_dir: Path) -> None:
    async with running_host(state_dir) as host:
        credential = await paired(host)
        async with open_client(
            "127.0.0.1", port_of(host), credential.identity, credential.key
        ) as c:
            challenge = await c.expect(Challenge)
            assert isinstance(challenge, Challenge)
            await c.send(
                Authenticate(
                    device_id=credential.device_id,
                    proof=device_proof(
                        credential.key, challenge.host_id, credential.device_id, challenge.nonce
                    ),
                )
            )
            done = await c.expect(Authenticated)
            assert isinstance(done, Authenticated) and done.host_id == challenge.host_id


async def test_a_cancelled_client_handshake_closes_its_socket() -> None:
    # The crash-safety test cancels pairings whose host was just killed; the
    # half-open client socket must be closed then, not left to the collector.
    hello = trio.Event()
    closed_by_client = trio.Event()

    async def silent(stream: trio.SocketStream) -> None:
        await stream.receive_some()  # the ClientHello: the handshake is under way
        hello.set()
        while await stream.receive_some():
            pass
        closed_by_client.set()

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, silent, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        with trio.CancelScope() as scope:

            async def cancel_mid_handshake() -> None:
                await hello.wait()
                scope.cancel()

            nursery.start_soon(cancel_mid_handshake)
            async with open_client("127.0.0.1", port, "pair", b"ABCD2345"):
                pytest.fail("a silent server cannot finish a handshake")
        assert scope.cancelled_caught
        with trio.fail_after(10):
            await closed_by_client.wait()
        nursery.cancel_scope.cancel()


async def test_failed_handshakes_are_logged_in_words(
    state_dir: Path, host_log: pytest.LogCaptureFixture
) -> None:
    caplog = host_log

    async def fail(port: int, identity: str, key: bytes) -> None:
        with pytest.raises(ClientClosed):
            await _handshake_only(port, identity, key)

    async with running_host(state_dir) as host:
        port = port_of(host)
        credential = await paired(host)
        await fail(port, "pair", b"ABCD2345")  # no window is open
        await host.open_pairing_window()
        await fail(port, "pair", b"ABCD2345")  # a window, another code
        await fail(port, str(uuid.uuid4()).upper(), bytes(32))
        await fail(port, credential.identity, bytes(32))
        with trio.fail_after(5):
            while sum("TLS handshake failed" in m for m in caplog.messages) < 4:
                await trio.sleep(0.01)
    reasons = [m.split("TLS handshake failed: ", 1)[1] for m in caplog.messages if "failed: " in m]
    assert reasons == [
        "a pairing code, but no pairing window is open (it expired, or was used)",
        "wrong or expired pairing code",
        "unknown or revoked device",
        "wrong key for a paired device (its credential does not match this host's)",
    ]
    assert not any("_" in reason for reason in reasons)  # no OpenSSL reason names


async def _handshake_only(port: int, identity: str, key: bytes) -> None:
    async with open_client("127.0.0.1", port, identity, key):
        pass


async def test_the_host_keeps_tcp_alive_as_the_apps_do(state_dir: Path) -> None:
    """Prowl's iPhone and Mac apps keep TCP alive with a 15 s idle time; so does the host."""
    async with running_host(state_dir) as host:
        async with login("127.0.0.1", port_of(host), await paired(host)) as client:
            await client.send(ListPanes())
            await client.expect(Panes)
            (connection,) = host.connections
            stream = connection.stream
            assert isinstance(stream, trio.SSLStream)
            sock = stream.transport_stream.socket  # type: ignore[attr-defined]
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
            if hasattr(socket, "TCP_KEEPIDLE"):
                assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == 15
