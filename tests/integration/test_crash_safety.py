"""SIGKILL the host at random moments while devices pair: nothing paired is ever lost."""

from __future__ import annotations

import json
import os
import random
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from mirror_host.auth.devices import DeviceRegistry
from mirror_host.client.client import ClientClosed, Credential, pair_device
from mirror_host.host.admin_client import NoHostRunning, admin_request
from mirror_host.host.store import DeviceStore

pytestmark = pytest.mark.timeout(240)

PAIRINGS = 50


async def start_host(state_dir: Path) -> tuple[trio.Process, int]:
    (state_dir / "serve.json").unlink(missing_ok=True)
    process = await trio.lowlevel.open_process(
        [
            sys.executable, "-m", "mirror_host", "serve",
            "--listen", "127.0.0.1:0",
            "--state-dir", str(state_dir),
            "--local-command", "cat",
            "--log-level", "warning",
        ]
    )  # fmt: skip
    try:
        with trio.fail_after(30):
            while not (state_dir / "serve.json").exists():
                await trio.sleep(0.02)
    except BaseException:
        process.kill()  # never leave a host behind a failed start
        with trio.CancelScope(shield=True):
            await process.wait()
        raise
    port = int(json.loads((state_dir / "serve.json").read_text())["listen"].rsplit(":", 1)[1])
    return process, port


async def pair_until_killed(
    port: int, state_dir: Path, received: list[Credential], budget: list[int], quota: int
) -> None:
    while budget[0] > 0 and quota > 0:
        quota -= 1
        try:
            reply = await trio.to_thread.run_sync(admin_request, state_dir, {"op": "pair"})
            budget[0] -= 1
            credential = await pair_device("127.0.0.1", port, reply["code"], f"phone {budget[0]}")
        except (ClientClosed, NoHostRunning, OSError, KeyError):
            return  # the host died mid-pairing: fine, as long as the store is whole
        received.append(credential)


@pytest.mark.slow
async def test_sigkill_during_pairings_loses_nothing(state_dir: Path) -> None:
    rng = random.Random(20261201)
    budget = [PAIRINGS]
    received_total = 0
    lifetimes = 0
    while budget[0] > 0:
        lifetimes += 1
        process, port = await start_host(state_dir)
        received: list[Credential] = []
        try:
            async with trio.open_nursery() as nursery:
                # At most 10 attempts per lifetime, so 50 attempts span 5+ lifetimes.
                nursery.start_soon(pair_until_killed, port, state_dir, received, budget, 10)
                await trio.sleep(rng.uniform(0.005, 0.15))
                process.send_signal(signal.SIGKILL)
                await process.wait()
                nursery.cancel_scope.cancel()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
        registry = DeviceStore(state_dir).load()  # must load: old or new, never broken
        assert registry is not None
        for credential in received:
            device = registry.find(credential.device_id)
            assert device is not None, "a device that received `paired` is missing"
            assert device.key == credential.key
        received_total += len(received)
        # Start the next lifetime below the 64-device limit (same host id).
        DeviceStore(state_dir).save_sync(DeviceRegistry(host_id=registry.host_id))
    assert lifetimes >= 5
    assert received_total >= 10, "too few pairings completed to mean anything"


@pytest.mark.parametrize(
    ("names", "said"),
    [
        (lambda name: True, "lock: cannot open the state directory lock (Read-only file system)"),
        (
            lambda name: name.endswith(".tmp"),
            "devices.json: cannot write the device store (Read-only file system)",
        ),
    ],
    ids=["lock", "store"],
)
def test_revoke_all_on_a_read_only_state_dir_says_so_in_words(
    state_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    names: Callable[[str], bool],
    said: str,
) -> None:
    """Not a raw ``[Errno 30]`` (issue 28 item 18); and nothing is revoked."""
    from mirror_host.cli import main
    from tests.fakes.disk_faults import read_only_under

    store = DeviceStore(state_dir)
    registry = store.load_or_create()
    before = (state_dir / "devices.json").read_bytes()
    assert isinstance(registry, DeviceRegistry)
    monkeypatch.setattr(os, "open", read_only_under(str(state_dir), names=names))
    assert main(["revoke", "--all", "--state-dir", str(state_dir)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == f"mirror-host revoke: {state_dir}/{said}; nothing was revoked", err
    assert "Errno" not in "\n".join(err)
    assert (state_dir / "devices.json").read_bytes() == before
