#!/usr/bin/env python3
"""What tmux panes nobody watches cost, with shell-send on and off: the host, and tmux.

Usage: python -m benchmarks.unwatched [--panes 4] [--seconds 10] [--flood] [--rounds 3]

This runs one private tmux server (``--panes`` windows, each printing a
timestamp 50 times a second, plus one ``yes`` with ``--flood``) under two
hosts in turn, one with shell-send on (the default) and one with
``--no-shell-send``, nobody subscribed, and prints each host's CPU use and the
tmux server's over the same seconds (what it spends relaying output to the
host's control clients). Rounds alternate, so drift on a busy machine hits
both sides alike.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import subprocess
import time

from benchmarks.common import cpu_seconds, start_host
from benchmarks.latency import start_tmux


def cpu_use(args: list[str], seconds: float, tmux_pid: int) -> tuple[float, float]:
    """Percent of one core the host and the tmux server use over ``seconds``, after 2 s."""
    process, _state_dir, _port = start_host(args)
    try:
        time.sleep(2)
        host, tmux = cpu_seconds(process.pid), cpu_seconds(tmux_pid)
        wall = time.perf_counter()
        time.sleep(seconds)
        elapsed = time.perf_counter() - wall
        return (
            100 * (cpu_seconds(process.pid) - host) / elapsed,
            100 * (cpu_seconds(tmux_pid) - tmux) / elapsed,
        )
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--panes", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--flood", action="store_true", help="one more pane runs `yes`")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    host_args, name = start_tmux(args.panes, args.flood)
    shown = subprocess.run(
        ["tmux", "-L", name, "display-message", "-p", "#{pid}"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    tmux_pid = int(shown.stdout.strip())
    results: dict[str, list[tuple[float, float]]] = {"shell-send on": [], "--no-shell-send": []}
    try:
        for _ in range(args.rounds):
            results["shell-send on"].append(cpu_use(host_args, args.seconds, tmux_pid))
            results["--no-shell-send"].append(
                cpu_use([*host_args, "--no-shell-send"], args.seconds, tmux_pid)
            )
    finally:
        subprocess.run(["tmux", "-L", name, "kill-server"], check=False)
    print(f"tmux panes={args.panes} flood={args.flood}, nobody subscribed")
    for label, values in results.items():
        host = [v[0] for v in values]
        tmux = [v[1] for v in values]
        print(
            f"{label:>16}: host median {statistics.median(host):.1f}% of one core "
            f"({' '.join(f'{v:.1f}' for v in host)}); tmux server median "
            f"{statistics.median(tmux):.1f}% ({' '.join(f'{v:.1f}' for v in tmux)})"
        )


if __name__ == "__main__":
    main()
