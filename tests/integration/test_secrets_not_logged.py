"""A pairing and a login at debug level leave no secret in the log, in any encoding."""

from __future__ import annotations

import base64
import io
import json
import logging
import re
from pathlib import Path

import pytest
import trio

from mirror_host.auth.pairing import display_code
from mirror_host.auth.proofs import device_proof, pair_proof
from mirror_host.auth.qr import encode_pairing_payload
from mirror_host.client.client import open_client
from mirror_host.control import (
    Authenticate,
    Authenticated,
    Challenge,
    ListPanes,
    Pair,
    Paired,
    Panes,
)
from mirror_host.host.admin_client import admin_request
from mirror_host.inspect import describe
from mirror_host.logs import configure_logging
from tests.integration.conftest import port_of, running_host

pytestmark = pytest.mark.timeout(60)


def encodings(secret: bytes) -> set[str]:
    forms = {secret.hex(), secret.hex().upper(), base64.b64encode(secret).decode()}
    forms.add(base64.b64encode(secret).decode().replace("/", "\\/"))
    try:
        forms.add(secret.decode())
    except UnicodeDecodeError:
        pass
    return {f for f in forms if len(f) >= 8}


@pytest.mark.parametrize(("fmt", "packets"), [("text", False), ("json", False), ("text", True)])
async def test_pairing_and_login_log_no_secrets(state_dir: Path, fmt: str, packets: bool) -> None:
    stream = io.StringIO()
    configure_logging("debug", fmt, stream=stream)
    secrets: set[str] = set()
    try:
        async with running_host(state_dir, log_packets=packets) as host:
            port = port_of(host)
            reply = await trio.to_thread.run_sync(admin_request, state_dir, {"op": "pair"})
            code = reply["code"]
            secrets |= {code, display_code(code)} | encodings(code.encode())
            assert host.book.window is not None
            assert reply["payload"] is not None
            secrets.add(json.dumps(reply["payload"], separators=(",", ":")))
            assert host.open_pairing_window  # a second window, to log its opening too
            payload_text = encode_pairing_payload(
                (await host.open_pairing_window()).payload  # type: ignore[arg-type]
            ).decode()
            secrets.add(payload_text)
            code = host.book.window.code
            secrets |= {code, display_code(code)} | encodings(code.encode())
            async with open_client("127.0.0.1", port, "pair", code.encode()) as c:
                challenge = await c.expect(Challenge)
                assert isinstance(challenge, Challenge)
                proof = pair_proof(code, challenge.host_id, "Phone", challenge.nonce)
                secrets |= encodings(challenge.nonce) | encodings(proof)
                await c.send(Pair(name="Phone", proof=proof))
                paired = await c.expect(Paired)
                assert isinstance(paired, Paired)
                secrets |= encodings(paired.key)
            async with open_client(
                "127.0.0.1", port, str(paired.device_id).upper(), paired.key
            ) as c:
                challenge = await c.expect(Challenge)
                assert isinstance(challenge, Challenge)
                proof = device_proof(
                    paired.key, challenge.host_id, paired.device_id, challenge.nonce
                )
                secrets |= encodings(challenge.nonce) | encodings(proof)
                await c.send(Authenticate(device_id=paired.device_id, proof=proof))
                await c.expect(Authenticated)
                await c.send(ListPanes())
                assert isinstance(await c.expect(Panes), Panes)
            # A failed login logs its reason, still without the proof it carried.
            async with open_client(
                "127.0.0.1", port, str(paired.device_id).upper(), paired.key
            ) as c:
                challenge = await c.expect(Challenge)
                bad = bytes(32)
                await c.send(Authenticate(device_id=paired.device_id, proof=bad))
                await c.expect_closed()
    finally:
        logging.getLogger("mirror_host").handlers.clear()
    log = stream.getvalue()
    assert "paired a new device" in log and "authenticated" in log and "wrong device proof" in log
    leaked = sorted(s for s in secrets if s in log)
    assert leaked == [], f"secrets in the log: {leaked}"
    dumped = re.findall(r"mirror_host\.packets: .* (in|out) ([0-9a-f]+)$", log, re.MULTILINE)
    if not packets:
        assert dumped == [] and "mirror_host.packets" not in log
        return
    # After login, every packet, as `wire decode` reads it: list in, authenticated and panes out.
    kinds = {
        direction: [
            kind
            for hex_packet in [h for d, h in dumped if d == direction]
            for line in describe(bytes.fromhex(hex_packet), now=0)
            if (kind := next(iter(json.loads(line)["message"]))) not in ("ping", "pong")
        ]
        for direction in ("in", "out")
    }
    assert kinds == {"in": ["list"], "out": ["authenticated", "panes"]}
    # Before login (and on the pairing connection) only the sizes.
    assert log.count("withheld") >= 6
