#!/usr/bin/env python3
"""Handshakes + authentications per second against a host pinned to one core.

Usage: python -m benchmarks.handshake_rate [--seconds 10] [--clients 6]

The host runs as a subprocess pinned (taskset) to CPU 0; the clients run here on
CPU 1. Keep --clients at most 8: the host holds 8 pending handshakes and drops
the oldest beyond that (docs/security.md). Each client loops: TCP connect,
TLS-PSK handshake, challenge, authenticate, authenticated, close. Prints
logins/second and the host's CPU use.
"""

from __future__ import annotations

import argparse
import os
import signal
import time

import trio

from benchmarks.common import cpu_seconds, open_window, percentile, start_host
from mirror_host.client.client import ClientClosed, login, pair_device


async def run(seconds: float, clients: int) -> None:
    process, state_dir, port = start_host(["--local-command", "cat"], cpu=0)
    os.sched_setaffinity(0, {1})
    try:
        credential = await pair_device("127.0.0.1", port, open_window(state_dir), "bench")
        count = 0
        latencies: list[float] = []
        failures: list[int] = []

        async def worker() -> None:
            nonlocal count
            while True:
                start = time.perf_counter()
                try:
                    async with login("127.0.0.1", port, credential):
                        pass
                except ClientClosed:
                    failures.append(1)
                    continue
                latencies.append(time.perf_counter() - start)
                count += 1

        cpu_before = cpu_seconds(process.pid)
        started = time.perf_counter()
        with trio.move_on_after(seconds):
            async with trio.open_nursery() as nursery:
                for _ in range(clients):
                    nursery.start_soon(worker)
        elapsed = time.perf_counter() - started
        cpu = cpu_seconds(process.pid) - cpu_before
        print(f"clients={clients} seconds={elapsed:.1f}")
        print(f"logins/s: {count / elapsed:.0f} ({len(failures)} refused)")
        print(f"host CPU: {100 * cpu / elapsed:.0f}% of one core")
        print(f"login time p50 {1000 * percentile(latencies, 50):.1f} ms, "
              f"p99 {1000 * percentile(latencies, 99):.1f} ms")  # fmt: skip
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--clients", type=int, default=6)
    args = parser.parse_args()
    trio.run(run, args.seconds, args.clients)


if __name__ == "__main__":
    main()
