#!/usr/bin/env python3
"""What tmux panes nobody watches cost the host, with shell-send on and off.

Usage: python -m benchmarks.unwatched [--panes 16] [--seconds 10] [--flood] [--rounds 3]

While shell-send is on, the tmux source follows every pane (feeds its output to
a screen of its own) so that a shell's prompt marks are known before a phone
subscribes; with ``--no-shell-send`` it reads only subscribed panes. This runs
the same private tmux server (``--panes`` windows, each printing a timestamp 50
times a second, plus one ``yes`` with ``--flood``) under two hosts in turn,
nobody subscribed, and prints each host's CPU use. Rounds alternate, so drift
on a busy machine hits both sides alike.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import subprocess
import time

from benchmarks.common import cpu_seconds, start_host
from benchmarks.latency import start_tmux


def host_cpu(args: list[str], seconds: float) -> float:
    """Percent of one core the host uses over ``seconds``, after a 2 s warm-up."""
    process, _state_dir, _port = start_host(args)
    try:
        time.sleep(2)
        before, wall = cpu_seconds(process.pid), time.perf_counter()
        time.sleep(seconds)
        return 100 * (cpu_seconds(process.pid) - before) / (time.perf_counter() - wall)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--panes", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--flood", action="store_true", help="one more pane runs `yes`")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    host_args, name = start_tmux(args.panes, args.flood)
    results: dict[str, list[float]] = {"shell-send on": [], "--no-shell-send": []}
    try:
        for _ in range(args.rounds):
            results["shell-send on"].append(host_cpu(host_args, args.seconds))
            results["--no-shell-send"].append(
                host_cpu([*host_args, "--no-shell-send"], args.seconds)
            )
    finally:
        subprocess.run(["tmux", "-L", name, "kill-server"], check=False)
    print(f"tmux panes={args.panes} flood={args.flood}, nobody subscribed")
    for label, values in results.items():
        runs = " ".join(f"{v:.1f}" for v in values)
        print(f"{label:>16}: median {statistics.median(values):.1f}% of one core ({runs})")


if __name__ == "__main__":
    main()
