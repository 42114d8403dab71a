#!/usr/bin/env python3
"""Herdr source: output → frame latency (observe stream vs polling) and Herdr RPC rate.

Usage: python -m benchmarks.herdr [--panes 16] [--subscribed 1] [--polling] [--seconds 10]

A fake Herdr (tests/fakes/herdr_fake.py, the same one the tests use: real PTYs
rendered by libghostty, Herdr's transport) runs in its own process with --panes
ticker panes;
the host runs as a subprocess with --source herdr, streaming frames through the
fake `herdr terminal session observe` program, or with --polling through
`pane.read` every 200 ms. --subscribed panes are watched over loopback TLS.
Prints latency percentiles (when something is subscribed) and the number of
Herdr requests per second the host made during the measurement.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

from benchmarks.common import cpu_seconds, list_panes, open_window, percentile, start_host
from benchmarks.latency import TICKER, watch
from mirror_host.client.client import pair_device
from mirror_host.host.admin_client import admin_request

FAKE_CLI = str(Path(__file__).resolve().parent.parent / "tests" / "fakes" / "herdr")


async def run(panes: int, subscribed: int, polling: bool, seconds: float) -> None:
    socket = Path(tempfile.mkdtemp(prefix="mh-herdr-", dir="/tmp")) / "herdr.sock"
    # The fake runs in its own process, so its rendering does not compete with
    # the benchmark client for this process's time.
    fake = await trio.lowlevel.open_process(
        [sys.executable, "-m", "tests.fakes.herdr_fake", "--socket", str(socket),
         "--columns", "120", "--rows", "40", *[a for _ in range(panes) for a in ("--pane", TICKER)]]
    )  # fmt: skip
    try:
        with trio.fail_after(30):
            while not socket.exists():
                await trio.sleep(0.05)
        herdr_bin = "/nonexistent/herdr" if polling else FAKE_CLI
        process, state_dir, port = start_host(
            ["--source", "herdr", "--herdr-socket", str(socket), "--herdr-bin", herdr_bin]
        )
        try:
            await measure(state_dir, port, process, panes, subscribed, polling, seconds)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait()
    finally:
        fake.send_signal(signal.SIGTERM)
        await fake.wait()


def herdr_requests(state_dir: Path) -> int:
    status = admin_request(state_dir, {"op": "status"})
    return int(status["panes"]["source"]["herdrRequests"])


async def measure(
    state_dir: Path,
    port: int,
    process: subprocess.Popen[bytes],
    panes: int,
    subscribed: int,
    polling: bool,
    seconds: float,
) -> None:
    credential = await pair_device("127.0.0.1", port, open_window(state_dir), "bench")
    listing = await list_panes(port, credential)
    samples: list[float] = []
    recording = trio.Event()
    async with trio.open_nursery() as watchers:
        for pane in listing[:subscribed]:
            watchers.start_soon(watch, port, credential, pane, False, samples, recording)
            await trio.sleep(0.05)
        await trio.sleep(2)
        recording.set()
        requests_before = herdr_requests(state_dir)
        cpu_before, wall_before = cpu_seconds(process.pid), time.perf_counter()
        await trio.sleep(seconds)
        wall = time.perf_counter() - wall_before
        rpcs = (herdr_requests(state_dir) - requests_before) / wall
        cpu = cpu_seconds(process.pid) - cpu_before
        watchers.cancel_scope.cancel()
    mode = "polling" if polling else "observe"
    print(f"herdr {mode}: {panes} panes, {subscribed} subscribed")
    if samples:
        print(f"latency ms: p50 {percentile(samples, 50):.1f}  p99 {percentile(samples, 99):.1f}  "
              f"max {max(samples):.1f}  ({len(samples)} lines)")  # fmt: skip
    print(f"Herdr requests/s: {rpcs:.1f}")
    print(f"host CPU: {100 * cpu / wall:.0f}% of one core")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--panes", type=int, default=16)
    parser.add_argument("--subscribed", type=int, default=1)
    parser.add_argument("--polling", action="store_true")
    parser.add_argument("--seconds", type=float, default=10)
    args = parser.parse_args()
    trio.run(run, args.panes, args.subscribed, args.polling, args.seconds)


if __name__ == "__main__":
    main()
