"""SIGKILL a real host at random moments while phones pair with it, many times over.

One *lifetime*: start ``mirror-host serve`` on the state directory, pair phones
one after another (a pairing window from the admin socket, then the real
protocol over TLS), and SIGKILL the host at a random moment within the first
pairings, while one is under way. After each kill the store must load (old or
new file, never a broken one: ``corrupt``), and every device whose phone got
``paired`` must be in it with the key the phone holds (``lost``). A device on
disk whose phone never got its key (``orphans``: the kill came between the
save and ``paired``) is allowed; Prowl documents the same for a lost response.

``tests/integration/test_crash_safety.py`` runs a few dozen kills;
``benchmarks/pairing_kills.py`` runs as many as asked and prints the tally.
"""

from __future__ import annotations

import json
import random
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

import trio

from mirror_host.auth.devices import DeviceRegistry
from mirror_host.client.client import ClientClosed, Credential, pair_device
from mirror_host.errors import StoreError
from mirror_host.host.admin_client import STATUS_FILE, NoHostRunning, admin_request
from mirror_host.host.store import DeviceStore

__all__ = ["Tally", "kill_during_pairings", "start_host"]

#: Pairings one lifetime attempts at most (the kill comes long before: a bound
#: for the loop, not a figure the campaign needs).
PAIRINGS_PER_LIFETIME = 1000
#: The kill lands this long (at random) after the lifetime's first pairing began:
#: a pairing over loopback takes some tens of milliseconds.
KILL_WITHIN_SECONDS = 0.15


@dataclass
class Tally:
    """What the kills did."""

    kills: int = 0
    #: Pairings the kill cut off (the phone got no ``paired``).
    interrupted: int = 0
    #: Phones that got ``paired``.
    received: int = 0
    corrupt: int = 0
    lost: int = 0
    orphans: int = 0
    problems: list[str] = field(default_factory=list)


async def start_host(state_dir: Path) -> tuple[trio.Process, int]:
    """``mirror-host serve`` on ``state_dir`` (local ``cat`` pane); it and its port."""
    (state_dir / STATUS_FILE).unlink(missing_ok=True)
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
            while not (state_dir / STATUS_FILE).exists():
                await trio.sleep(0.02)
    except BaseException:
        process.kill()  # never leave a host behind a failed start
        with trio.CancelScope(shield=True):
            await process.wait()
        raise
    listen = json.loads((state_dir / STATUS_FILE).read_text())["listen"]
    return process, int(listen.rsplit(":", 1)[1])


async def _pair_until_killed(
    port: int,
    state_dir: Path,
    received: list[Credential],
    began: trio.Event,
    done: trio.Event,
    tally: Tally,
) -> None:
    try:
        for number in range(PAIRINGS_PER_LIFETIME):
            try:
                reply = await trio.to_thread.run_sync(admin_request, state_dir, {"op": "pair"})
                began.set()
                code = reply["code"]
                credential = await pair_device("127.0.0.1", port, code, f"phone {number}")
            except (ClientClosed, NoHostRunning, OSError, KeyError):
                tally.interrupted += 1
                return  # the host died mid-pairing: fine, as long as the store is whole
            received.append(credential)
    finally:
        done.set()


async def _one_lifetime(state_dir: Path, rng: random.Random, tally: Tally) -> None:
    process, port = await start_host(state_dir)
    received: list[Credential] = []
    try:
        async with trio.open_nursery() as nursery:
            began, done = trio.Event(), trio.Event()
            nursery.start_soon(_pair_until_killed, port, state_dir, received, began, done, tally)
            with trio.fail_after(30):
                await began.wait()
            await trio.sleep(rng.uniform(0.0, KILL_WITHIN_SECONDS))
            process.send_signal(signal.SIGKILL)
            await process.wait()
            tally.kills += 1
            with trio.move_on_after(10):  # the phone notices the host is gone
                await done.wait()
            nursery.cancel_scope.cancel()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    tally.received += len(received)
    try:
        registry = DeviceStore(state_dir).load()
    except StoreError as exc:
        tally.corrupt += 1
        tally.problems.append(f"kill {tally.kills}: the store does not load: {exc}")
        raise
    if registry is None:
        tally.corrupt += 1
        tally.problems.append(f"kill {tally.kills}: the store is gone")
        return
    for credential in received:
        device = registry.find(credential.device_id)
        if device is None or device.key != credential.key:
            tally.lost += 1
            tally.problems.append(f"kill {tally.kills}: {credential.device_id} lost")
    phones = {credential.device_id for credential in received}
    tally.orphans += sum(1 for device in registry.devices if device.id not in phones)
    # The next lifetime starts with no devices (same host id), far below the 64 limit.
    DeviceStore(state_dir).save_sync(DeviceRegistry(host_id=registry.host_id))


async def kill_during_pairings(state_dir: Path, kills: int, *, seed: int) -> Tally:
    """Run ``kills`` lifetimes on ``state_dir``, each ended by a SIGKILL; the tally.

    Raises:
        StoreError: a kill left a store that does not load (the tally says which).
    """
    rng = random.Random(seed)
    tally = Tally()
    while tally.kills < kills:
        await _one_lifetime(state_dir, rng, tally)
    return tally
