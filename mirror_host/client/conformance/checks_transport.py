"""Checks of the transport: pairing, TLS policy, login, heartbeats. I/O.

Each check is ``async (ctx) -> str``: it returns a short note on success and
raises :class:`~mirror_host.client.conformance.probe.CheckFailed` (or
``CheckSkipped``) otherwise. The negative ones (a refused handshake, a wrong
proof, a message before login) each cost one authentication failure at the
host, which locks an address out after 12 in 60 s; see ``AUTH_FAILURES`` in
:mod:`mirror_host.client.conformance.suite`.
"""

from __future__ import annotations

import itertools
import secrets
import ssl
import uuid

import trio

from mirror_host.auth.pairing import PAIR_IDENTITY, InvalidPairingCode, normalize_code
from mirror_host.auth.proofs import device_proof, pair_proof
from mirror_host.client.chooser import LOCKED_OUT
from mirror_host.client.client import ClientClosed, Credential, HandshakeFailed
from mirror_host.client.conformance.probe import (
    CheckFailed,
    CheckSkipped,
    Conn,
    Context,
    connect,
    device,
    fail,
)
from mirror_host.control import (
    Authenticate,
    Authenticated,
    Failure,
    ListPanes,
    Pair,
    Paired,
    Ping,
    Pong,
)
from mirror_host.tls.psk import CIPHER, client_context

__all__ = [
    "check_auth_before_login",
    "check_auth_challenge",
    "check_auth_login",
    "check_auth_replayed_proof",
    "check_auth_wrong_proof",
    "check_heartbeat_idle_close",
    "check_heartbeat_ping",
    "check_heartbeat_pong",
    "check_pair_enroll",
    "check_pair_single_use",
    "check_pair_wrong_proof",
    "check_tls_cipher",
    "check_tls_policy",
    "check_tls_unknown_identity",
    "check_tls_version",
]

#: Heartbeats: the host pings every 2 s; allow for a loaded machine.
PING_GAP_LIMIT = 3.5
PING_WATCH_SECONDS = 5.5
#: Idle close: 8 s of silence; closes earlier than this or later than that fail.
IDLE_EARLIEST = 6.5
IDLE_LATEST = 12.0
#: Suites a Prowl host must refuse (it speaks ECDHE-PSK-CHACHA20-POLY1305 only).
OTHER_SUITES = "PSK-AES128-GCM-SHA256:PSK-AES128-CBC-SHA256:ECDHE-PSK-AES128-CBC-SHA256"


# ---------------------------------------------------------------- pairing


async def check_pair_enroll(ctx: Context) -> str:
    """Pair as a new device: ``challenge``, ``paired`` with a 32-byte key, then closed.
    (That ``challenge`` comes first is ``auth.challenge``'s business.)"""
    code, name = ctx.code, ctx.device_name
    try:
        normalized = normalize_code(code)
    except InvalidPairingCode as exc:
        fail(f"the code {code!r} is not a Prowl pairing code: {exc}")
    ctx.step = "pairing: TLS handshake with identity `pair`"
    try:
        async with connect(ctx, PAIR_IDENTITY, normalized.encode(), "pairing") as client:
            conn = Conn(ctx, client, "pairing")
            challenge = await conn.read_challenge()
            proof = pair_proof(normalized, challenge.host_id, name, challenge.nonce)
            await conn.send(Pair(name=name, proof=proof))
            try:
                answer = await conn.expect_one(
                    (Paired, Failure), "`paired`", ack=False, timeout=2 * ctx.wait
                )
            except CheckFailed as exc:
                if conn.closed and not client.decode_error:
                    fail(
                        "the host accepted the code (TLS came up) but closed the connection "
                        "instead of sending `paired`: the host's log says why (mirror-host: "
                        "it could not save the device)"
                    )
                raise exc
            if isinstance(answer, Failure):  # mirror-host, when it cannot save the device
                fail(f"the host accepted the code but refused to pair: {answer.error!r}")
            assert isinstance(answer, Paired)
            paired = answer
            if paired.host_id != challenge.host_id:
                fail(f"`paired` names host {paired.host_id}, the challenge {challenge.host_id}")
            if len(paired.key) != 32:
                fail(f"`paired` carries a {len(paired.key)}-byte key, not 32 bytes")
            ctx.credential = Credential(paired.host_id, paired.device_id, paired.key)
            await conn.expect_closed("`paired` (the host closes after sending it)")
    except HandshakeFailed as exc:
        if exc.before_tls:
            fail(f"the host {LOCKED_OUT}")
        hint = ""
        if ctx.tried_wrong_pair_proof:
            hint = (
                "; if the host closes its pairing window after a failed `pair` (Prowl's "
                "does not), run again with --skip pair.wrong-proof"
            )
        fail(
            "the TLS handshake with identity `pair` failed: the code is wrong or its "
            f"pairing window is closed ({exc.reason}){hint}"
        )
    return f"paired as device {str(ctx.credential.device_id).upper()}"


async def check_pair_wrong_proof(ctx: Context) -> str:
    """Before pairing: ``pair`` with a wrong proof (made over another nonce) closes the
    connection without ``paired`` (and the window stays open for ``pair.enroll``)."""
    code, name = ctx.code, ctx.device_name
    try:
        normalized = normalize_code(code)
    except InvalidPairingCode as exc:
        raise CheckSkipped(f"the code {code!r} is not a Prowl pairing code") from exc
    ctx.step = "wrong proof: TLS handshake with identity `pair`"
    ctx.tried_wrong_pair_proof = True
    try:
        async with connect(ctx, PAIR_IDENTITY, normalized.encode(), "wrong proof") as client:
            conn = Conn(ctx, client, "wrong proof")
            challenge = await conn.read_challenge()
            proof = pair_proof(normalized, challenge.host_id, name, secrets.token_bytes(32))
            await conn.send(Pair(name=name, proof=proof))
            violation = "`pair` with a proof made over another nonce"
            try:
                await conn.expect_closed(violation)
            except CheckFailed:
                paired = conn.unexpected
                if isinstance(paired, Paired):
                    # Keep what the host handed out: the other checks can still run.
                    ctx.credential = Credential(paired.host_id, paired.device_id, paired.key)
                    fail(f"the host answered {violation} with `paired` (a new device)")
                raise
    except HandshakeFailed as exc:
        raise CheckSkipped(
            f"the pairing code does not open TLS ({exc.reason}); see pair.enroll"
        ) from exc
    return "closed without `paired`"


async def check_pair_single_use(ctx: Context) -> str:
    """The pairing window closes at the first pairing: the code opens TLS no more."""
    ctx.require_credential()
    return await _handshake_refused(
        ctx,
        client_context(PAIR_IDENTITY, normalize_code(ctx.code).encode()),
        "the used pairing code",
    )


# ---------------------------------------------------------------- TLS


async def _handshake_refused(ctx: Context, context: ssl.SSLContext, what: str) -> str:
    ctx.step = f"TLS handshake with {what}"
    try:
        async with connect(ctx, "unused", b"unused", f"TLS with {what}", context=context) as client:
            version, cipher = client.stream.version(), client.stream.cipher()
    except HandshakeFailed as exc:
        return f"refused ({exc.reason})"
    except ClientClosed as exc:
        return f"refused ({exc})"
    name = cipher[0] if cipher else "?"
    fail(f"the host completed a TLS handshake with {what} ({version}, {name})")


async def check_tls_policy(ctx: Context) -> str:
    """The paired key's handshake negotiates TLS 1.2 and ECDHE-PSK-CHACHA20-POLY1305."""
    async with device(ctx, "device", login=False) as conn:
        version = conn.client.stream.version()
        cipher = conn.client.stream.cipher()
        name = cipher[0] if cipher else None
        if version != "TLSv1.2":
            fail(f"negotiated {version}, not TLSv1.2")
        if name != CIPHER:
            fail(f"negotiated {name}, not {CIPHER}")
        await conn.login()
    return f"TLSv1.2, {CIPHER}"


async def check_tls_version(ctx: Context) -> str:
    """A client that offers only TLS 1.3 (with the right key) is refused."""
    credential = ctx.require_credential()
    context = client_context(
        credential.identity,
        credential.key,
        minimum=ssl.TLSVersion.TLSv1_3,
        maximum=ssl.TLSVersion.TLSv1_3,
    )
    return "TLS 1.3 " + await _handshake_refused(ctx, context, "TLS 1.3 only")


async def check_tls_cipher(ctx: Context) -> str:
    """A client that offers only other PSK suites (with the right key) is refused."""
    credential = ctx.require_credential()
    try:
        context = client_context(credential.identity, credential.key, cipher=OTHER_SUITES)
    except ssl.SSLError as exc:
        raise CheckSkipped(f"this machine's OpenSSL offers none of {OTHER_SUITES}") from exc
    return "other suites " + await _handshake_refused(ctx, context, f"only {OTHER_SUITES}")


async def check_tls_unknown_identity(ctx: Context) -> str:
    """An identity the host never issued is refused in the handshake."""
    ctx.require_credential()
    identity = str(uuid.uuid4()).upper()
    context = client_context(identity, secrets.token_bytes(32))
    return "unknown identity " + await _handshake_refused(ctx, context, "an unknown identity")


# ---------------------------------------------------------------- login


async def check_auth_challenge(ctx: Context) -> str:
    """The first message (heartbeats aside) is ``challenge``: the paired hostID and a
    fresh 32-byte nonce."""
    nonces: list[bytes] = []
    for number in (1, 2):
        async with device(ctx, f"connection {number}", login=False) as conn:
            challenge = await conn.read_challenge()
            if conn.client.first_kind != "challenge":
                fail(f"the first message was `{conn.client.first_kind}`, not `challenge`")
            if challenge.host_id != ctx.host_id:
                fail(f"the challenge names host {challenge.host_id}, pairing said {ctx.host_id}")
            nonces.append(challenge.nonce)
    if nonces[0] == nonces[1]:
        fail("two connections got the same nonce")
    return "first message, 32-byte nonce, fresh per connection"


async def check_auth_login(ctx: Context) -> str:
    """``authenticate`` with the right proof is answered ``authenticated(hostID)``."""
    async with device(ctx, "device") as conn:
        await conn.stays_open("after login")
    return "authenticated with the paired hostID"


async def _refused_login(ctx: Context, proof_for: str) -> str:
    credential = ctx.require_credential()
    async with device(ctx, "device", login=False) as conn:
        challenge = await conn.read_challenge()
        if proof_for == "another key":
            proof = device_proof(
                secrets.token_bytes(32), challenge.host_id, credential.device_id, challenge.nonce
            )
        else:  # an old nonce: a replayed proof
            proof = device_proof(
                credential.key, challenge.host_id, credential.device_id, secrets.token_bytes(32)
            )
        await conn.send(Authenticate(device_id=credential.device_id, proof=proof))
        await conn.expect_closed(f"`authenticate` with a proof made with {proof_for}")
    return "closed without `authenticated`"


async def check_auth_wrong_proof(ctx: Context) -> str:
    """A proof made with another key closes the connection, nothing sent."""
    return await _refused_login(ctx, "another key")


async def check_auth_replayed_proof(ctx: Context) -> str:
    """A proof over another nonce (a replay) closes the connection, nothing sent."""
    return await _refused_login(ctx, "another nonce")


async def check_auth_before_login(ctx: Context) -> str:
    """``list`` before authenticating closes the connection without ``panes``."""
    async with device(ctx, "device", login=False) as conn:
        await conn.read_challenge()
        await conn.send(ListPanes())
        await conn.expect_closed("`list` before login")
    return "closed without an answer"


# ---------------------------------------------------------------- heartbeats


async def check_heartbeat_pong(ctx: Context) -> str:
    """``ping`` is answered with ``pong``, before login and after it."""
    async with device(ctx, "device", login=False) as conn:
        await conn.read_challenge()
        await conn.send(Ping())
        await conn.expect(Pong, "`pong` (before login)", ack=False)
        credential = ctx.require_credential()
        assert conn.challenge is not None
        proof = device_proof(
            credential.key, conn.challenge.host_id, credential.device_id, conn.challenge.nonce
        )
        await conn.send(Authenticate(device_id=credential.device_id, proof=proof))
        await conn.expect(Authenticated, "`authenticated` after a ping", ack=False)
        await conn.send(Ping())
        await conn.expect(Pong, "`pong` (after login)", ack=False)
    return "answered before and after login"


async def check_heartbeat_ping(ctx: Context) -> str:
    """The host pings about every 2 s from the moment TLS is up."""
    async with device(ctx, "device", login=False) as conn:
        started = trio.current_time()
        await conn.login()
        ctx.step = "watching for the host's pings"
        deadline = started + PING_WATCH_SECONDS
        while len(conn.client.ping_times) < 2 and trio.current_time() < deadline:
            await trio.sleep(0.05)
            if conn.client.decode_error:
                fail(f"the host sent an invalid packet: {conn.client.decode_error}")
        times = [started, *conn.client.ping_times[:2]]
    if len(times) < 3:
        fail(
            f"{len(times) - 1} ping(s) from the host in {PING_WATCH_SECONDS:g} s "
            "(Prowl's hosts ping every 2 s)"
        )
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    if max(gaps) > PING_GAP_LIMIT:
        shown = ", ".join(f"{gap:.1f}" for gap in gaps)
        fail(f"pings {shown} s apart (expected about 2 s)")
    return "first after " + " s, then ".join(f"{gap:.1f}" for gap in gaps) + " s"


async def check_heartbeat_idle_close(ctx: Context) -> str:
    """8 s without a packet closes a connection; answering pings keeps one open."""
    async with (
        device(ctx, "silent connection", answer_pings=False) as silent,
        device(ctx, "pong-only connection") as alive,
    ):
        quiet_since = trio.current_time()
        ctx.step = "silent connection: waiting for the host to close it"
        with trio.move_on_after(IDLE_LATEST):
            await silent.expect_closed("8 s of silence", within=IDLE_LATEST)
        closed_after = trio.current_time() - quiet_since
        if not silent.closed:
            fail(f"a connection that sent nothing stayed open for {IDLE_LATEST:g} s")
        if closed_after < IDLE_EARLIEST:
            fail(f"a silent connection was closed after {closed_after:.1f} s, before 8 s")
        await trio.sleep(0.5)
        await alive.stays_open("a connection that only answered pings")
    return f"silent one closed after {closed_after:.1f} s; the one answering pings stayed"
