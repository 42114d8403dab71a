#!/usr/bin/env python3
"""Pane output → frame decoded at a client, over loopback TLS.

Usage: python -m benchmarks.latency [--panes 1] [--flood] [--seconds 10] [--text] [--tmux]

Each pane runs a small program that prints a wall-clock timestamp (ns) 50 times
a second. One client connection per pane subscribes (vt-v1, or text-v1 with
--text), acknowledges every frame at once, and for every line that appears for
the first time records ``now - its timestamp``: the time from the line being
written to the PTY to the first frame that shows it being decoded here. With --flood one more
pane runs ``yes`` and is subscribed too, to show that a flooding pane does not
slow the others down. Prints p50/p99/max and the host's CPU use, plus the CPU
use of the same panes, subscribed but idle, when --idle is given. With --tmux the
panes are windows of a private tmux server mirrored through control mode.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import time

import trio

from benchmarks.common import (
    cpu_seconds,
    list_panes,
    open_window,
    percentile,
    start_host,
    ticker,
)
from mirror_host import control as c
from mirror_host.client.client import Credential, login, pair_device
from mirror_host.wire import TextFramePacket, VTFramePacket

TICKER = ticker(50.0)
STAMP = re.compile(rb"(?<!\d)1[7-9]\d{17}(?!\d)")


async def watch(port: int, credential: Credential, pane: c.PaneDescriptor, text: bool,
                samples: list[float], recording: trio.Event) -> None:  # fmt: skip
    representation = c.Representation.TEXT if text else c.Representation.VT
    newest = 0
    async with login("127.0.0.1", port, credential) as client:
        await client.send(
            c.Subscribe(pane_id=pane.id, representation=representation, intent=c.Intent.TAKEOVER)
        )
        sub = await client.expect(c.Subscribed)
        assert isinstance(sub, c.Subscribed)
        while True:
            item = await client.receive(timeout=30)
            if not isinstance(item, VTFramePacket | TextFramePacket):
                continue
            now = time.time_ns()
            await client.send(
                c.Acknowledge(sequence=item.sequence, subscription_id=sub.subscription_id)
            )
            body = item.text.encode() if isinstance(item, TextFramePacket) else item.data
            # Every line seen for the first time counts, from the moment it was
            # written: a frame that coalesces several lines carries their waits too.
            fresh = [stamp for stamp in map(int, STAMP.findall(body)) if stamp > newest]
            if fresh:
                newest = max(fresh)
                if recording.is_set():
                    samples.extend((now - stamp) / 1e6 for stamp in fresh)


def start_tmux(panes: int, flood: bool) -> tuple[list[str], str]:
    """A private tmux server with one window per ticker; returns host args and its name."""
    name = f"mh-bench-{os.getpid()}"
    base = ["tmux", "-L", name]
    subprocess.run([*base, "-f", "/dev/null", "new-session", "-d", "-s", "bench", "-x", "120",
                    "-y", "40", TICKER], check=True)  # fmt: skip
    for _ in range(panes - 1):
        subprocess.run([*base, "new-window", "-d", "-t", "bench", TICKER], check=True)
    if flood:
        subprocess.run([*base, "new-window", "-d", "-t", "bench", "yes flooding"], check=True)
    return ["--source", "tmux", "--tmux-socket", name], name


async def run(panes: int, flood: bool, seconds: float, text: bool, idle: bool, tmux: bool) -> None:
    tmux_name = None
    if tmux:
        args, tmux_name = start_tmux(panes, flood)
    else:
        args = [arg for _ in range(panes) for arg in ("--local-command", TICKER)]
        if flood:
            args += ["--local-command", "exec yes 'flooding the pane flat out'"]
    try:
        await measure(args, panes, flood, seconds, text, idle, tmux)
    finally:
        if tmux_name is not None:
            await trio.run_process(["tmux", "-L", tmux_name, "kill-server"], check=False)


async def measure(
    args: list[str], panes: int, flood: bool, seconds: float, text: bool, idle: bool, tmux: bool
) -> None:
    process, state_dir, port = start_host(args)
    try:
        credentials = [
            await pair_device("127.0.0.1", port, open_window(state_dir), f"bench {i}")
            for i in range(2)
        ]
        listing = await list_panes(port, credentials[0])
        samples: list[float] = []
        recording = trio.Event()
        async with trio.open_nursery() as nursery:
            for index, pane in enumerate(listing):
                # The flooding pane's samples are not measured (it prints no stamps).
                nursery.start_soon(
                    watch, port, credentials[index % 2], pane, text, samples, recording
                )
                await trio.sleep(0.05)  # stay under the 8 pending handshakes
            await trio.sleep(2)  # warm-up
            recording.set()
            cpu_before, wall_before = cpu_seconds(process.pid), time.perf_counter()
            await trio.sleep(seconds)
            cpu = cpu_seconds(process.pid) - cpu_before
            wall = time.perf_counter() - wall_before
            nursery.cancel_scope.cancel()
        kind = "text-v1" if text else "vt-v1"
        source = "tmux" if tmux else "local"
        print(f"source={source} panes={panes} flood={flood} representation={kind}")
        print(f"lines measured={len(samples)}")
        print(f"latency ms: p50 {percentile(samples, 50):.1f}  p99 {percentile(samples, 99):.1f}  "
              f"max {max(samples):.1f}")  # fmt: skip
        print(f"host CPU: {100 * cpu / wall:.0f}% of one core")
        if idle:
            await measure_idle(panes)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait()


async def measure_idle(panes: int) -> None:
    """Idle CPU of a second host whose ``panes`` quiet panes are all subscribed."""
    process, idle_dir, idle_port = start_host(
        [arg for _ in range(panes) for arg in ("--local-command", "exec cat")]
    )
    try:
        credential = await pair_device("127.0.0.1", idle_port, open_window(idle_dir), "idle")
        async with trio.open_nursery() as nursery:
            for pane in await list_panes(idle_port, credential):
                nursery.start_soon(watch, idle_port, credential, pane, False, [], trio.Event())
                await trio.sleep(0.05)
            await trio.sleep(2)
            before, wall = cpu_seconds(process.pid), time.perf_counter()
            await trio.sleep(10)
            used = cpu_seconds(process.pid) - before
            print(f"idle: {panes} subscribed quiet panes, host CPU "
                  f"{100 * used / (time.perf_counter() - wall):.1f}% of one core")  # fmt: skip
            nursery.cancel_scope.cancel()
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--panes", type=int, default=1)
    parser.add_argument("--flood", action="store_true")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--text", action="store_true", help="subscribe text-v1 instead of vt-v1")
    parser.add_argument("--idle", action="store_true", help="also measure idle CPU")
    parser.add_argument("--tmux", action="store_true", help="panes in a private tmux server")
    args = parser.parse_args()
    trio.run(run, args.panes, args.flood, args.seconds, args.text, args.idle, args.tmux)


if __name__ == "__main__":
    main()
