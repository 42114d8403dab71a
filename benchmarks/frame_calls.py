#!/usr/bin/env python3
"""The host's Python calls per delivered frame, with the latency benchmark's load.

Usage: python -m benchmarks.frame_calls [--panes 32] [--rate 50] [--seconds 10]
                                        [--top 30] [--save FILE]
       python -m benchmarks.frame_calls --compare BEFORE.json AFTER.json [--top 40]

Wall-clock figures on a shared machine drift with its load; what the host does
for each frame it delivers does not, or much less. This runs the latency
benchmark's set-up (``--panes`` local panes, each printing a timestamp line
``--rate`` times a second; one connection per pane that subscribes ``vt-v1``
and acknowledges every frame at once) against a host whose own process counts
its calls with ``cProfile``, switched on after a warm-up for ``--seconds`` (the
host is started through a small wrapper that turns the profiler on at SIGUSR1
and writes it out at SIGUSR2, so the same script measures any commit's host:
run it from that commit's checkout with its own venv).

It prints the calls per delivered frame and per line printed, and the
functions that make most of them. How many lines one frame carries depends on
the load (a frame waits for the previous one's acknowledgement), so ``--rate``
low enough that every line is its own frame (10 a second) gives the figure
that depends least on the machine; at 50 a second the per-frame figure mixes
per-line work (reading the PTY, feeding the screen, waking the sampler) and
per-frame work (capture, encode, send) in a proportion the load decides, and
the per-function table shows which is which.

``--save`` keeps the counts (per function, per frame) as JSON; ``--compare``
prints two saved runs side by side, functions matched by module path and name.
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from benchmarks.common import cpu_seconds, list_panes, open_window, start_host, ticker
from mirror_host import control as c
from mirror_host.client.client import Credential, login, pair_device
from mirror_host.wire import TextFramePacket, VTFramePacket

#: The host, with a profiler that SIGUSR1 starts and SIGUSR2 stops and writes out.
WRAPPER = """
import cProfile, os, runpy, signal, sys
profile = cProfile.Profile()
def start(*_):
    profile.enable()
def stop(*_):
    profile.disable()
    profile.dump_stats(os.environ["MH_PROFILE_OUT"])
signal.signal(signal.SIGUSR1, start)
signal.signal(signal.SIGUSR2, stop)
sys.argv[0] = "mirror-host"
runpy.run_module("mirror_host", run_name="__main__")
"""

STAMP = re.compile(rb"(?<!\d)1[7-9]\d{17}(?!\d)")


def start_profiled_host(
    args: list[str], profile_out: Path, callgrind: bool
) -> tuple[subprocess.Popen[bytes], Path, int]:
    """The host under cProfile (the wrapper above), or under callgrind, counting only
    between ``callgrind_control -i on`` and the dump (below)."""
    wrap = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
            f"--callgrind-out-file={profile_out}.cg"] if callgrind else None  # fmt: skip
    return start_host(
        args,
        python=[sys.executable, "-c", WRAPPER],
        wrap=wrap,
        env={"MH_PROFILE_OUT": str(profile_out)},
        start_seconds=600 if callgrind else 30,
    )


async def callgrind_control(pid: int, *args: str) -> None:
    await trio.run_process(["callgrind_control", *args, str(pid)], capture_stdout=True)


class Counts:
    def __init__(self) -> None:
        self.frames = 0
        self.lines = 0
        self.recording = False


async def watch(
    port: int, credential: Credential, pane: c.PaneDescriptor, counts: Counts, ack_delay: float
) -> None:
    newest = 0
    async with login("127.0.0.1", port, credential) as client:
        await client.send(
            c.Subscribe(
                pane_id=pane.id, representation=c.Representation.VT, intent=c.Intent.TAKEOVER
            )
        )
        sub = await client.expect(c.Subscribed)
        assert isinstance(sub, c.Subscribed)
        while True:
            item = await client.receive(timeout=30)
            if not isinstance(item, VTFramePacket | TextFramePacket):
                continue
            if ack_delay:
                await trio.sleep(ack_delay)  # a slower client: more lines per frame
            await client.send(
                c.Acknowledge(sequence=item.sequence, subscription_id=sub.subscription_id)
            )
            fresh = [stamp for stamp in map(int, STAMP.findall(item.data)) if stamp > newest]
            if fresh:
                newest = max(fresh)
            if counts.recording:
                counts.frames += 1
                counts.lines += len(fresh)


def key(filename: str, name: str) -> str:
    """A function's name that stays the same across commits (no line numbers)."""
    if filename == "~":
        return name  # a builtin: "<method 'append' of 'list' objects>"
    for marker in ("/mirror_host/", "/site-packages/", "/lib/python3"):
        if marker in filename:
            filename = filename.split(marker, 1)[1]
            break
    return f"{filename}:{name}"


async def measure(
    panes: int, rate: float, seconds: float, profile: bool, callgrind: bool, ack_delay: float
) -> dict[str, Any]:
    out = Path(tempfile.mkdtemp(prefix="mh-calls-out-", dir="/tmp")) / "host.prof"
    args = [arg for _ in range(panes) for arg in ("--local-command", ticker(rate))]
    process, state_dir, port = start_profiled_host(args, out, callgrind)
    try:
        credentials = []
        for i in range(2):
            code = open_window(state_dir)
            credentials.append(await pair_device("127.0.0.1", port, code, f"calls {i}"))
        counts = Counts()
        async with trio.open_nursery() as nursery:
            for index, pane in enumerate(await list_panes(port, credentials[0])):
                nursery.start_soon(watch, port, credentials[index % 2], pane, counts, ack_delay)
                await trio.sleep(0.05)  # stay under the 8 pending handshakes
            await trio.sleep(20 if callgrind else 2)  # warm-up
            if callgrind:
                await callgrind_control(process.pid, "-z")  # zero what start-up counted
                await callgrind_control(process.pid, "-i", "on")
            elif profile:
                process.send_signal(signal.SIGUSR1)
            counts.recording = True
            cpu_before, wall_before = cpu_seconds(process.pid), time.perf_counter()
            await trio.sleep(seconds)
            counts.recording = False
            cpu = cpu_seconds(process.pid) - cpu_before
            wall = time.perf_counter() - wall_before
            if callgrind:
                await callgrind_control(process.pid, "-d")  # write the counts out
                await callgrind_control(process.pid, "-i", "off")
            elif profile:
                process.send_signal(signal.SIGUSR2)
            nursery.cancel_scope.cancel()
        if callgrind:
            dumps = sorted(out.parent.glob(out.name + ".cg*"))
            instructions = 0
            for dump in dumps:
                for line in dump.read_text(errors="replace").splitlines():
                    if line.startswith(("summary:", "totals:")):
                        instructions = max(instructions, int(line.split()[1]))
            process.send_signal(signal.SIGTERM)
            process.wait()
            return {"panes": panes, "rate": rate, "seconds": wall, "frames": counts.frames,
                    "lines": counts.lines, "cpu": cpu, "load": os.getloadavg(),
                    "instructions": instructions, "dumps": [str(d) for d in dumps]}  # fmt: skip
        if not profile:
            return {"panes": panes, "rate": rate, "seconds": wall, "frames": counts.frames,
                    "lines": counts.lines, "cpu": cpu, "load": os.getloadavg()}  # fmt: skip
        deadline = time.monotonic() + 30
        while not out.exists() or out.stat().st_size == 0:
            if time.monotonic() > deadline:
                raise SystemExit("the host wrote no profile")
            await trio.sleep(0.1)
        await trio.sleep(0.5)  # the dump is written in one go; let it finish
        stats = pstats.Stats(str(out))
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait()
    functions: dict[str, int] = {}
    times: dict[str, float] = {}
    for (filename, _line, name), row in stats.stats.items():  # type: ignore[attr-defined]
        name_key = key(filename, name)
        functions[name_key] = functions.get(name_key, 0) + row[1]  # all calls, recursive too
        times[name_key] = times.get(name_key, 0.0) + row[2]  # its own time, profiled
    return {
        "ack_delay": ack_delay,
        "panes": panes,
        "rate": rate,
        "seconds": wall,
        "frames": counts.frames,
        "lines": counts.lines,
        "cpu": cpu,
        "load": os.getloadavg(),
        "calls": sum(functions.values()),
        "functions": functions,
        "times": times,
        "profile": str(out),
    }


def report(run: dict[str, Any], top: int) -> None:
    frames, lines = run["frames"], run["lines"]
    print(f"panes={run['panes']} rate={run['rate']}/s seconds={run['seconds']:.1f} "
          f"load={' '.join(f'{x:.2f}' for x in run['load'])}")  # fmt: skip
    print(
        f"frames delivered={frames} ({frames / run['panes'] / run['seconds']:.1f}/s per "
        f"subscriber), lines shown={lines} ({lines / max(frames, 1):.2f} per frame)"
    )
    print(
        f"host CPU {1000 * run['cpu'] / max(frames, 1):.3f} ms per frame"
        f"{' (profiled)' if 'calls' in run or 'instructions' in run else ''}"
    )
    if "instructions" in run:
        print(
            f"host instructions: {run['instructions'] / max(frames, 1):,.0f} per frame "
            f"({', '.join(run['dumps'])})"
        )
    if "calls" not in run:
        return
    print(
        f"host calls: {run['calls'] / max(frames, 1):.1f} per frame, "
        f"{run['calls'] / max(lines, 1):.1f} per line"
    )
    ranked = sorted(run["functions"].items(), key=lambda kv: -kv[1])[:top]
    for name, count in ranked:
        print(f"  {count / max(frames, 1):9.2f}  {name}")


def compare(before: dict[str, Any], after: dict[str, Any], top: int, by: str) -> None:
    fb, fa = max(before["frames"], 1), max(after["frames"], 1)
    print(f"calls per frame: {before['calls'] / fb:.1f} -> {after['calls'] / fa:.1f}; "
          f"lines per frame {before['lines'] / fb:.2f} -> {after['lines'] / fa:.2f}")  # fmt: skip
    field, unit, scale = ("functions", "calls", 1.0)
    if by == "time":
        field, unit, scale = ("times", "µs (profiled)", 1e6)
    b_all, a_all = before[field], after[field]
    if by == "time":
        print(f"profiled time per frame: {sum(b_all.values()) * 1e6 / fb:.1f} -> "
              f"{sum(a_all.values()) * 1e6 / fa:.1f} µs")  # fmt: skip
    rows = [
        (name, b_all.get(name, 0) * scale / fb, a_all.get(name, 0) * scale / fa)
        for name in set(b_all) | set(a_all)
    ]
    rows.sort(key=lambda row: -abs(row[2] - row[1]))
    print(f"{'before':>9} {'after':>9} {'diff':>9}  function ({unit} per frame, "
          "largest changes first)")  # fmt: skip
    for name, b, a in rows[:top]:
        print(f"{b:9.2f} {a:9.2f} {a - b:+9.2f}  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--panes", type=int, default=32)
    parser.add_argument("--rate", type=float, default=50, help="lines a second per pane")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument(
        "--ack-delay", type=float, default=0.0, help="seconds a client waits before acknowledging"
    )
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--save", type=Path, help="write the counts here (JSON)")
    parser.add_argument(
        "--no-profile", action="store_true", help="only frames and CPU, without the profiler"
    )
    parser.add_argument(
        "--callgrind", action="store_true", help="count instructions (valgrind) instead of calls"
    )
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    parser.add_argument("--by", choices=("calls", "time"), default="calls", help="for --compare")
    args = parser.parse_args()
    if args.compare:
        before, after = (json.loads(path.read_text()) for path in args.compare)
        compare(before, after, args.top, args.by)
        return
    run = trio.run(
        measure,
        args.panes,
        args.rate,
        args.seconds,
        not args.no_profile,
        args.callgrind,
        args.ack_delay,
    )
    report(run, args.top)
    if args.save:
        args.save.write_text(json.dumps(run, indent=1))


if __name__ == "__main__":
    main()
