"""The network fuzz's cases: malformed and valid-but-hostile traffic, one connection each.

Each case is an ``async def case(env) -> str`` that opens its own connection(s)
to the host under test, does one hostile (or ordinary) thing and returns how it
ended (``"closed"``, ``"answered"`` …). Cases before TLS or with bad keys come
from random addresses of 127.0.0.0/8 (:meth:`Env.hostile_address`), so the
host's per-address tables see thousands of peers and the lock-out fills;
logged-in cases come from a small pool of addresses that never fail. A case
never waits more than :data:`CASE_SECONDS` (the runner enforces it).

Categories (the ``CASES`` table, with weights): plain TCP garbage, silence and
resets, HTTP; TLS with unknown identities, wrong keys, pairing codes with no
window or a wrong one, pairings with wrong proofs and bad names, valid pairings
revoked again; garbage after TLS, wrong login proofs; truncated, oversized and
8 MiB packets, wrong packet kinds, JSON edge cases; list, subscribe, input,
history, command and scroll storms; abrupt closes under flowing frames; a
reader that never reads; plain logins.
"""

from __future__ import annotations

import json
import random
import socket
import struct
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from mirror_host import control as c
from mirror_host.auth.proofs import device_proof, pair_proof
from mirror_host.client.client import (
    ClientClosed,
    Credential,
    MirrorClient,
    login,
    open_client,
    pair_device,
)
from mirror_host.errors import MirrorHostError
from mirror_host.host.admin_client import admin_request
from mirror_host.tls.psk import client_context
from mirror_host.wire import ControlPacket, PacketDecoder, VTFramePacket, encode_packet

__all__ = ["CASES", "CASE_SECONDS", "Env"]

CASE_SECONDS = 20.0
EIGHT_MIB = 8 * 1024 * 1024


@dataclass
class Env:
    """What every case may use: the host's port and state directory, paired devices,
    the panes, a random source, counters."""

    port: int
    state_dir: Path
    devices: list[Credential]
    panes: list[c.PaneDescriptor]
    rng: random.Random
    huge: bool = True
    bytes_sent: int = 0
    #: Packets from the host that did not decode (must stay 0).
    bad_packets: int = 0
    notes: dict[str, int] = field(default_factory=dict)

    def hostile_address(self) -> str:
        """A random address of 127.128.0.0/9: peers the lock-out may refuse."""
        r = self.rng
        return f"127.{r.randint(128, 254)}.{r.randint(0, 255)}.{r.randint(1, 254)}"

    def friendly_address(self) -> str:
        """One of 127.0.0.2 … 127.0.0.99: peers that never fail before login."""
        return f"127.0.0.{self.rng.randint(2, 99)}"

    def device(self) -> Credential:
        return self.rng.choice(self.devices)

    def pane(self) -> c.PaneDescriptor:
        return self.rng.choice(self.panes)

    def garbage(self, low: int = 1, high: int = 65536) -> bytes:
        return self.rng.randbytes(self.rng.randint(low, high))


def _packet(body: bytes, kind: int = 0) -> bytes:
    """A frame with any kind and body (no validation)."""
    return struct.pack(">I", len(body) + 1) + bytes([kind]) + body


def _control(message: c.ControlMessage) -> bytes:
    return encode_packet(ControlPacket(c.encode_control(message)))


async def _tcp(env: Env, address: str) -> trio.SocketStream:
    return await trio.open_tcp_stream("127.0.0.1", env.port, local_address=address)


async def _send(env: Env, stream: trio.abc.SendStream, data: bytes) -> None:
    env.bytes_sent += len(data)
    await stream.send_all(data)


async def _drain(stream: trio.abc.ReceiveStream, seconds: float) -> str:
    """Read until the host closes or ``seconds`` pass."""
    with trio.move_on_after(seconds):
        try:
            while await stream.receive_some(65536):
                pass
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        return "closed"
    return "open"


async def _reset(stream: trio.SocketStream) -> None:
    stream.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    await trio.aclose_forcefully(stream)


def _watch(env: Env, client: MirrorClient) -> None:
    if client.decode_error:
        env.bad_packets += 1


# ---------------------------------------------------------------- plain TCP


async def tcp_garbage(env: Env) -> str:
    stream = await _tcp(env, env.hostile_address())
    try:
        await _send(env, stream, env.garbage())
        return await _drain(stream, 6.0)
    except (trio.BrokenResourceError, OSError):
        return "reset"
    finally:
        await trio.aclose_forcefully(stream)


async def tcp_silent(env: Env) -> str:
    stream = await _tcp(env, env.hostile_address())
    try:
        return await _drain(stream, env.rng.uniform(0.0, 6.5))
    finally:
        await trio.aclose_forcefully(stream)


async def tcp_reset(env: Env) -> str:
    stream = await _tcp(env, env.hostile_address())
    try:
        await _send(
            env, stream, b"\x16\x03\x01\x00\xc8\x01\x00\x00\xc4\x03\x03" + env.garbage(1, 64)
        )
    except (trio.BrokenResourceError, OSError):
        pass
    await trio.sleep(env.rng.uniform(0.0, 0.2))
    await _reset(stream)
    return "reset"


async def http_request(env: Env) -> str:
    stream = await _tcp(env, env.hostile_address())
    try:
        await _send(env, stream, b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        return await _drain(stream, 6.0)
    except (trio.BrokenResourceError, OSError):
        return "reset"
    finally:
        await trio.aclose_forcefully(stream)


# ---------------------------------------------------------------- TLS identities


async def _tls_attempt(env: Env, identity: str, key: bytes, address: str) -> str:
    try:
        async with open_client(
            "127.0.0.1", env.port, identity, key, local_address=address, handshake_timeout=8.0
        ) as client:
            await client.expect_closed(timeout=10.0)
            _watch(env, client)
            return "tls-then-closed"
    except ClientClosed:
        return "refused"


async def tls_unknown_identity(env: Env) -> str:
    r = env.rng
    identity = r.choice(
        [
            str(uuid.uuid4()).upper(),
            "".join(chr(r.randint(0x21, 0x7E)) for _ in range(r.randint(1, 120))),
            "closed",
            "PAIR",
            "pair ",
        ]
    )
    return await _tls_attempt(env, identity, r.randbytes(32), env.hostile_address())


async def tls_wrong_key(env: Env) -> str:
    device = env.device()
    return await _tls_attempt(env, device.identity, env.rng.randbytes(32), env.hostile_address())


async def tls_pair_code(env: Env) -> str:
    code = "".join(env.rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(8))
    return await _tls_attempt(env, "pair", code.encode(), env.hostile_address())


async def _open_window(env: Env) -> str:
    reply = await trio.to_thread.run_sync(admin_request, env.state_dir, {"op": "pair"})
    return str(reply["code"])


async def pair_wrong_proof(env: Env) -> str:
    """The right code (a window opened for it) with a wrong proof or a bad name."""
    code = await _open_window(env)
    r = env.rng
    name = r.choice(["", "x" * 300, "bad\x07name", "phone\n", "ok name"])
    try:
        async with open_client(
            "127.0.0.1", env.port, "pair", code.encode(), local_address=env.hostile_address()
        ) as client:
            challenge = await client.expect(c.Challenge)
            assert isinstance(challenge, c.Challenge)
            proof = (
                r.randbytes(32)
                if name == "ok name"
                else pair_proof(code, challenge.host_id, name, challenge.nonce)
            )
            await client.send(c.Pair(name=name, proof=proof))
            await client.expect_closed(timeout=10.0)
            _watch(env, client)
            return "closed"
    except ClientClosed:
        return "refused"


async def pair_valid_then_revoke(env: Env) -> str:
    """A real pairing (a store write), then the device revoked (another)."""
    code = await _open_window(env)
    credential = await pair_device(
        "127.0.0.1",
        env.port,
        code,
        f"fuzz {env.rng.randrange(10**6)}",
        local_address=env.friendly_address(),
    )
    await trio.to_thread.run_sync(
        admin_request, env.state_dir, {"op": "revoke", "deviceID": str(credential.device_id)}
    )
    return "paired-and-revoked"


# ---------------------------------------------------------------- after TLS, before login


async def _device_tls(env: Env, address: str) -> Any:
    device = env.device()
    return open_client(
        "127.0.0.1", env.port, device.identity, device.key, local_address=address
    ), device


async def login_garbage(env: Env) -> str:
    opener, _ = await _device_tls(env, env.hostile_address())
    try:
        async with opener as client:
            await client.expect(c.Challenge)
            data = env.garbage(1, 4096)
            if env.rng.random() < 0.5:
                data = _packet(data)
            await client.send_raw(data)
            await client.expect_closed(timeout=10.0)
            _watch(env, client)
            return "closed"
    except ClientClosed:
        return "closed"


async def login_wrong_proof(env: Env) -> str:
    opener, device = await _device_tls(env, env.hostile_address())
    try:
        async with opener as client:
            await client.expect(c.Challenge)
            await client.send(c.Authenticate(device_id=device.device_id, proof=env.garbage(0, 64)))
            await client.expect_closed(timeout=10.0)
            return "closed"
    except ClientClosed:
        return "closed"


# ---------------------------------------------------------------- logged in: packets


async def _logged_in(env: Env) -> Any:
    return login("127.0.0.1", env.port, env.device(), local_address=env.friendly_address())


async def login_plain(env: Env) -> str:
    async with await _logged_in(env) as client:
        await client.send(c.ListPanes())
        await client.expect(c.Panes)
        _watch(env, client)
    return "answered"


async def truncated_packet(env: Env) -> str:
    async with await _logged_in(env) as client:
        declared = env.rng.randint(2, 1 << 20)
        await client.send_raw(struct.pack(">I", declared) + b"\x00" + env.garbage(0, declared - 2))
        env.bytes_sent += declared
    return "abandoned"


async def oversized_packet(env: Env) -> str:
    async with await _logged_in(env) as client:
        declared = env.rng.choice([EIGHT_MIB + 1, 0xFFFFFFFF, 0, 1 << 30])
        await client.send_raw(struct.pack(">I", declared) + b"\x00{")
        await client.expect_closed(timeout=10.0)
    return "closed"


async def huge_packet(env: Env) -> str:
    """A full 8 MiB control packet: a ``list`` padded with an 8 MiB member (valid, it
    is answered), or the same cut short (invalid JSON: the host closes)."""
    if not env.huge:
        return "skipped"
    valid = env.rng.random() < 0.5
    padding = b"x" * (EIGHT_MIB - 1 - len(b'{"list":{"_0":""}}'))
    body = b'{"list":{"_0":"' + padding + (b'"}}' if valid else b"xxx")
    async with await _logged_in(env) as client:
        await client.send_raw(_packet(body))
        env.bytes_sent += len(body)
        if valid:
            await client.expect(c.Panes, timeout=15.0)
            return "answered"
        await client.expect_closed(timeout=15.0)
    return "closed"


async def wrong_kinds(env: Env) -> str:
    r = env.rng
    sub = uuid.uuid4().bytes
    choices = [
        _packet(sub + struct.pack(">QII", 1, 80, 24) + b"hi", kind=1),
        _packet(sub + struct.pack(">QII", 1, 80, 24) + b"\x00hi", kind=2),
        _packet(env.garbage(0, 100), kind=r.randint(3, 255)),
        _packet(b"", kind=0),
        b"\x00\x00\x00\x00",
    ]
    async with await _logged_in(env) as client:
        await client.send_raw(r.choice(choices))
        await client.expect_closed(timeout=10.0)
    return "closed"


def _json_edge(r: random.Random) -> bytes:
    depth = r.randint(1000, 200_000)
    cases: list[bytes] = [
        b"[" * depth + b"]" * depth,
        b'{"list":' * 5000 + b"{}" + b"}" * 5000,
        b'{"list":{},"ping":{}}',
        b'{"list":{"_0":1e999999}}',
        b'{"acknowledge":{"_0":{"sequence":18446744073709551616,"subscriptionID":"x"}}}',
        b'{"acknowledge":{"_0":{"sequence":NaN}}}',
        b'{"list":{}, "list":{}}',
        b'{"subscribe":{"_0":null}}',
        b'{"\xff\xfe":{}}',
        b'{"history":{"_0":{"subscriptionID":"' + str(uuid.uuid4()).encode() + b'","offset":-1}}}',
        b'"\\ud800"',
        json.dumps({"unknownCase": {"_0": "x" * r.randint(1, 100_000)}}).encode(),
        b"nul\x00l",
        b"",
        b"{" + b'"a":1,' * 50_000 + b'"b":2}',
    ]
    return r.choice(cases)


async def json_edges(env: Env) -> str:
    async with await _logged_in(env) as client:
        body = _json_edge(env.rng)
        await client.send_raw(_packet(body))
        env.bytes_sent += len(body)
        await client.expect_closed(timeout=10.0)
        _watch(env, client)
    return "closed"


# ---------------------------------------------------------------- logged in: storms


async def list_storm(env: Env) -> str:
    async with await _logged_in(env) as client:
        count = env.rng.randint(10, 200)
        await client.send_raw(_control(c.ListPanes()) * count)
        for _ in range(count):
            await client.expect(c.Panes)
        _watch(env, client)
    return "answered"


async def _subscribed(
    client: MirrorClient, pane: c.PaneDescriptor, representation: c.Representation
) -> uuid.UUID | None:
    await client.send(
        c.Subscribe(pane_id=pane.id, representation=representation, intent=c.Intent.TAKEOVER)
    )
    while True:
        item = await client.receive()
        if isinstance(item, c.Subscribed):
            return item.subscription_id
        if isinstance(item, c.Failure):
            return None


async def subscribe_storm(env: Env) -> str:
    r = env.rng
    async with await _logged_in(env) as client:
        if r.random() < 0.3:
            pane_id = uuid.uuid4()  # never listed: the host closes
            await client.send(
                c.Subscribe(
                    pane_id=pane_id, representation=c.Representation.VT, intent=c.Intent.IF_FREE
                )
            )
            await client.expect_closed(timeout=10.0)
            return "closed"
        sub = await _subscribed(client, env.pane(), r.choice(list(c.Representation)))
        if sub is None:
            return "busy"
        for _ in range(r.randint(1, 50)):
            item = await client.receive(timeout=10.0)
            sequence = getattr(item, "sequence", None)
            if sequence is not None and not isinstance(item, c.ControlMessage):
                await client.send(c.Acknowledge(sequence=sequence, subscription_id=sub))
                await client.send(c.Refresh(subscription_id=sub))
        if r.random() < 0.3:
            await client.send(
                c.Subscribe(
                    pane_id=env.pane().id,
                    representation=c.Representation.VT,
                    intent=c.Intent.IF_FREE,
                )
            )
            await client.expect_closed(timeout=10.0)
            return "closed"
        _watch(env, client)
    return "answered"


async def input_storm(env: Env) -> str:
    r = env.rng
    cat = next((p for p in env.panes if "exec cat" in p.title), env.panes[0])
    async with await _logged_in(env) as client:
        sub = await _subscribed(client, cat, c.Representation.VT)
        if sub is None:
            return "busy"
        for _ in range(r.randint(10, 300)):
            size = r.choice([1, 16, 100, 1024, 65536])
            await client.send(c.Input(data=r.randbytes(size), subscription_id=sub))
            env.bytes_sent += size
        if r.random() < 0.1:  # one over 64 KiB, or empty: the host closes
            await client.send(c.Input(data=r.randbytes(r.choice([0, 65537])), subscription_id=sub))
            await client.expect_closed(timeout=10.0)
            return "closed"
        await trio.sleep(0.2)
        _watch(env, client)
    return "sent"


async def history_storm(env: Env) -> str:
    r = env.rng
    async with await _logged_in(env) as client:
        sub = await _subscribed(client, env.pane(), c.Representation.TEXT)
        if sub is None:
            return "busy"
        history_id: uuid.UUID | None = None
        for _ in range(r.randint(5, 80)):
            choice = r.random() if r.random() < 0.97 else 1.0
            if choice < 0.3 or history_id is None:
                await client.send(c.History(subscription_id=sub))
            elif choice < 1.0:
                await client.send(
                    c.History(history_id=history_id, offset=r.randint(0, 200), subscription_id=sub)
                )
            else:
                bad = r.choice([-1, 2**62, 10**6, None])
                await client.send(
                    c.History(
                        history_id=r.choice([history_id, uuid.uuid4()]),
                        offset=bad,
                        subscription_id=sub,
                    )
                )
            try:
                item = await client.receive(timeout=8.0)
            except ClientClosed:
                return "closed"
            while not isinstance(item, c.HistoryPage | c.Failure):
                item = await client.receive(timeout=8.0)
            if isinstance(item, c.HistoryPage):
                history_id = item.history_id
        _watch(env, client)
    return "answered"


async def command_storm(env: Env) -> str:
    r = env.rng
    async with await _logged_in(env) as client:
        sub = None
        pane = env.pane()
        if r.random() < 0.5:
            sub = await _subscribed(client, pane, c.Representation.TEXT)
        for _ in range(r.randint(1, 20)):
            kind = r.random()
            if kind < 0.3 or sub is None:
                command: c.RemoteCommand = r.choice([c.ListCommand(), c.ProfilesCommand()])
                if sub is None and kind < 0.1:
                    command = c.CreateCommand(
                        resource="window", worktree_id="nope", launch=None, background=False
                    )
            else:
                prompt = "p" * r.choice([1, 100, 65536, 65537])
                command = c.AgentsInputCommand(pane=str(pane.id).upper(), prompt=prompt)
            output = r.choice(["json"] * 8 + ["text", "", "JSON"])
            request = c.CommandRequest(
                request_id=uuid.uuid4(), request=c.CommandEnvelope(output=output, command=command)
            )
            await client.send(c.Command(subscription_id=sub, command_request=request))
            try:
                while not isinstance(await client.receive(timeout=15.0), c.CommandResult):
                    pass
            except ClientClosed:
                return "closed"
            if sub is not None and r.random() < 0.3:
                await client.send(
                    c.CommandReceipt(subscription_id=sub, command_receipt_id=request.request_id)
                )
                while not isinstance(await client.receive(timeout=15.0), c.CommandResult):
                    pass
        _watch(env, client)
    return "answered"


async def scroll_storm(env: Env) -> str:
    r = env.rng
    async with await _logged_in(env) as client:
        sub = await _subscribed(client, env.pane(), r.choice(list(c.Representation)))
        if sub is None:
            return "busy"
        for _ in range(r.randint(1, 30)):
            await client.send(
                c.Scroll(
                    request_id=uuid.uuid4(),
                    direction=r.choice(list(c.ScrollDirection)),
                    subscription_id=sub,
                )
            )
            await trio.sleep(r.uniform(0, 0.05))
        await trio.sleep(1.0)
        _watch(env, client)
    return "sent"


async def abrupt_close(env: Env) -> str:
    r = env.rng
    ticker = next((p for p in env.panes if "tick" in p.title), env.panes[0])
    async with await _logged_in(env) as client:
        sub = await _subscribed(client, ticker, c.Representation.VT)
        if sub is not None:
            for _ in range(r.randint(0, 3)):
                item = await client.receive(timeout=5.0)
                if isinstance(item, VTFramePacket):
                    await client.send(c.Acknowledge(sequence=item.sequence, subscription_id=sub))
        transport = client.stream.transport_stream
        if isinstance(transport, trio.SocketStream):
            transport.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    return "reset"


async def never_reads(env: Env) -> str:
    """A peer that asks for lists and never reads the answers: the host's outbound
    bound (16 MiB) closes it, or the case ends first."""
    device = env.device()
    stream = await _tcp(env, env.friendly_address())
    tls = trio.SSLStream(stream, client_context(device.identity, device.key), server_hostname=None)
    try:
        await tls.do_handshake()
        decoder = PacketDecoder()
        challenge = None
        while challenge is None:
            decoder.feed(await tls.receive_some(65536))
            while (packet := decoder.next_packet()) is not None:
                if isinstance(packet, ControlPacket):
                    message = c.decode_control(packet.body)
                    if isinstance(message, c.Challenge):
                        challenge = message
        proof = device_proof(device.key, challenge.host_id, device.device_id, challenge.nonce)
        await tls.send_all(_control(c.Authenticate(device_id=device.device_id, proof=proof)))
        with trio.move_on_after(env.rng.uniform(2.0, 10.0)):
            while True:  # never reads again: the answers pile up at the host
                await tls.send_all(_control(c.ListPanes()) * 50 + _control(c.Ping()))
        return "stopped"
    except (trio.BrokenResourceError, OSError, MirrorHostError):
        return "closed"
    finally:
        await trio.aclose_forcefully(tls)


Case = Callable[[Env], Awaitable[str]]

#: name → (case, weight)
CASES: dict[str, tuple[Case, int]] = {
    "tcp-garbage": (tcp_garbage, 10),
    "tcp-silent": (tcp_silent, 6),
    "tcp-reset": (tcp_reset, 8),
    "http": (http_request, 4),
    "tls-unknown-identity": (tls_unknown_identity, 8),
    "tls-wrong-key": (tls_wrong_key, 8),
    "tls-pair-code": (tls_pair_code, 6),
    "pair-wrong-proof": (pair_wrong_proof, 4),
    "pair-valid-revoke": (pair_valid_then_revoke, 2),
    "login-garbage": (login_garbage, 6),
    "login-wrong-proof": (login_wrong_proof, 6),
    "login-plain": (login_plain, 8),
    "truncated": (truncated_packet, 5),
    "oversized": (oversized_packet, 5),
    "huge-8mib": (huge_packet, 1),
    "wrong-kinds": (wrong_kinds, 5),
    "json-edges": (json_edges, 8),
    "list-storm": (list_storm, 6),
    "subscribe-storm": (subscribe_storm, 6),
    "input-storm": (input_storm, 4),
    "history-storm": (history_storm, 5),
    "command-storm": (command_storm, 6),
    "scroll-storm": (scroll_storm, 4),
    "abrupt-close": (abrupt_close, 5),
    "never-reads": (never_reads, 2),
}
