#!/usr/bin/env python3
"""agliteterm source: typing echo latency and the API request rate, through the fake agliteterm.

Usage: python -m benchmarks.agliteterm [--sessions 8] [--keys 60] [--idle 8] [--command]

The fake agliteterm of the test suite (tests/fakes/agliteterm_fake.py: real
PTYs rendered by libghostty behind agliteterm's control API on a Unix socket)
runs in its own process with --sessions sessions running ``cat``. The host runs
as a subprocess with --source agliteterm (over the socket, or with --command
through a relay process per connection, as npiperelay is used from WSL).

1. Idle: nothing subscribed for --idle seconds; prints the API requests per
   second by verb (the events cursor and the tree; no screen is read).
2. Typing: a Mac-style client (vt-v1) subscribes to one session and types
   --keys inputs, each a unique word and Enter, one every 137 ms (so they land
   at every phase of the 100 ms poll); for each, the time from sending the
   input to the first decoded frame that shows it. Prints p50/p90/p99/max,
   the requests per second while typing, and the host's CPU use.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import trio

from benchmarks.common import cpu_seconds, list_panes, open_window, percentile, start_host
from mirror_host import control as c
from mirror_host.client.client import Credential, login, pair_device
from mirror_host.host.admin_client import admin_request
from mirror_host.wire import VTFramePacket

RELAY = Path(__file__).resolve().parent.parent / "tests" / "fakes" / "unix_relay.py"


def requests(state_dir: Path) -> Counter[str]:
    status: dict[str, Any] = admin_request(state_dir, {"op": "status"})
    return Counter(status["panes"]["source"]["requests"])


def rates(before: Counter[str], after: Counter[str], seconds: float) -> str:
    diff = after - before
    parts = [f"{verb} {count / seconds:.1f}" for verb, count in sorted(diff.items())]
    return ", ".join(parts) or "none"


async def run(sessions: int, keys: int, idle: float, command: bool) -> None:
    socket = Path(tempfile.mkdtemp(prefix="mh-aglite-", dir="/tmp")) / "aglite.sock"
    fake = await trio.lowlevel.open_process(
        [sys.executable, "-m", "tests.fakes.agliteterm_fake", "--socket", str(socket),
         *[a for _ in range(sessions) for a in ("--session", "exec cat")]]
    )  # fmt: skip
    try:
        with trio.fail_after(30):
            while not socket.exists():
                await trio.sleep(0.05)
        if command:
            how = ["--agliteterm-command", f"{sys.executable} {RELAY} {socket}"]
        else:
            how = ["--agliteterm-socket", str(socket)]
        process, state_dir, port = start_host(["--source", "agliteterm", *how])
        try:
            await measure(state_dir, port, process, sessions, keys, idle, command)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait()
    finally:
        fake.send_signal(signal.SIGTERM)
        await fake.wait()


async def measure(
    state_dir: Path,
    port: int,
    process: subprocess.Popen[bytes],
    sessions: int,
    keys: int,
    idle: float,
    command: bool,
) -> None:
    credential = await pair_device("127.0.0.1", port, open_window(state_dir), "bench")
    with trio.fail_after(30):
        while len(panes := await list_panes(port, credential)) < sessions:
            await trio.sleep(0.2)
    transport = "command relay" if command else "Unix socket"
    print(f"agliteterm ({transport}): {sessions} sessions")
    await trio.sleep(1.5)
    before, cpu_before, wall_before = requests(state_dir), cpu_seconds(process.pid), time.time()
    await trio.sleep(idle)
    wall = time.time() - wall_before
    print(f"idle, nothing subscribed: requests/s {rates(before, requests(state_dir), wall)}; "
          f"host CPU {100 * (cpu_seconds(process.pid) - cpu_before) / wall:.0f}%")  # fmt: skip
    samples, wall, used, cpu = await typing(state_dir, port, process, credential, panes[0], keys)
    print(
        f"typing echo ms: p50 {percentile(samples, 50):.1f}  p90 {percentile(samples, 90):.1f}"
        f"  p99 {percentile(samples, 99):.1f}  max {max(samples):.1f}  ({len(samples)} inputs)"
    )
    print(f"while typing (1 of {sessions} watched): requests/s {used}; host CPU {cpu:.0f}%")


async def typing(
    state_dir: Path,
    port: int,
    process: subprocess.Popen[bytes],
    credential: Credential,
    pane: c.PaneDescriptor,
    keys: int,
) -> tuple[list[float], float, str, float]:
    samples: list[float] = []
    async with login("127.0.0.1", port, credential) as mac:
        vt, takeover = c.Representation.VT, c.Intent.TAKEOVER
        await mac.send(c.Subscribe(pane_id=pane.id, representation=vt, intent=takeover))
        answer = await mac.expect(c.Subscribed)
        assert isinstance(answer, c.Subscribed)
        sub = answer.subscription_id
        await trio.sleep(1.0)
        before, cpu_before, wall_before = requests(state_dir), cpu_seconds(process.pid), time.time()
        for index in range(keys):
            word = f"k{index:05d}x"
            sent = time.perf_counter()
            await mac.send(c.Input(data=f"{word}\r".encode(), subscription_id=sub))
            with trio.fail_after(10):
                while True:
                    item = await mac.receive(timeout=10)
                    if not isinstance(item, VTFramePacket):
                        continue
                    await mac.send(c.Acknowledge(sequence=item.sequence, subscription_id=sub))
                    if word.encode() in item.data:
                        samples.append((time.perf_counter() - sent) * 1000)
                        break
            await trio.sleep(0.137)
        wall = time.time() - wall_before
        used = rates(before, requests(state_dir), wall)
        cpu = 100 * (cpu_seconds(process.pid) - cpu_before) / wall
    return samples, wall, used, cpu


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--keys", type=int, default=60)
    parser.add_argument("--idle", type=float, default=8.0)
    parser.add_argument("--command", action="store_true", help="through a relay process")
    args = parser.parse_args()
    trio.run(run, args.sessions, args.keys, args.idle, args.command)


if __name__ == "__main__":
    main()
