"""Network fuzz against a real host on 127.0.0.1, watching its memory and descriptors.

    python -m benchmarks.fuzz --minutes 30
    python -m benchmarks.fuzz --minutes 5 --trace          # where memory goes
    python -m benchmarks.fuzz --minutes 5 --only json-edges,list-storm

``--workers`` tasks run the cases of ``benchmarks/fuzz_cases.py`` (25 kinds of
malformed or hostile traffic, over plain TCP and TLS-PSK, from thousands of
addresses of 127.0.0.0/8) back to back, each in its own connection, for
``--minutes``. Every ``--sample`` seconds the host's resident memory (VmRSS),
its open descriptors, a health login from 127.0.0.1 (TLS, login, ``list``) and
the machine's load average are recorded. The run prints the samples, the cases
by kind and outcome, and the memory added over the last third of the run (the
last 10 minutes of a 30-minute run), and writes it all to ``--out`` as JSON.

``--trace`` runs the host under ``tracemalloc`` (``benchmarks/traced_host.py``),
takes a snapshot a third of the way in and one at the end, and prints the call
sites whose memory grew most in between.

The host: ``mirror-host serve --source local`` with a ``cat`` pane and a pane
that prints a line every 200 ms, its default limits (16 connections).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import shlex
import shutil
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import asdict
from pathlib import Path

import trio

from benchmarks import hostwatch
from benchmarks.fuzz_cases import CASE_SECONDS, CASES, Env
from benchmarks.traced_host import growth
from mirror_host import control as c
from mirror_host.client.client import login

DEVICES = 4


async def worker(
    env: Env,
    names: list[str],
    weights: list[int],
    deadline: float,
    tally: Counter[tuple[str, str]],
    faults: list[str],
) -> None:
    while time.monotonic() < deadline:
        name = env.rng.choices(names, weights)[0]
        case = CASES[name][0]
        outcome = "timeout"
        with trio.move_on_after(CASE_SECONDS):
            try:
                outcome = await case(env)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                outcome = "broken"
            except trio.TooSlowError:
                outcome = "slow"
            except Exception as exc:
                from mirror_host.errors import MirrorHostError

                if isinstance(exc, MirrorHostError):
                    outcome = type(exc).__name__
                else:
                    outcome = f"harness:{type(exc).__name__}"
                    if len(faults) < 10:
                        faults.append(f"{name}: {traceback.format_exc()}")
        tally[(name, outcome)] += 1


async def sampler(
    host: hostwatch.Watched,
    env: Env,
    started: float,
    deadline: float,
    every: float,
    samples: list[hostwatch.Sample],
) -> None:
    while True:
        sample = await hostwatch.sample(host, env.devices[0], started)
        samples.append(sample)
        if host.snapshots is not None and not host.snapshots_taken:
            info = await host.mallinfo()
            in_use, free = info["uordblks"] / 2**20, info["fordblks"] / 2**20
            print(f"          malloc: {in_use:.1f} MiB in use, {free:.1f} MiB free in its arenas")
        health = (
            "failed: " + sample.health_error
            if sample.health_seconds is None
            else (f"{sample.health_seconds * 1000:.0f} ms")
        )
        print(
            f"{sample.seconds:7.0f} s  RSS {sample.rss_mib:7.1f} MiB  "
            f"fds {sample.descriptors:4d}  health {health}  load {sample.load:.2f}  "
            f"heap {sample.memory['heap']:.1f} anon {sample.memory['anon']:.1f}",
            flush=True,
        )
        if time.monotonic() + every > deadline:
            return
        await trio.sleep(every)


async def run(args: argparse.Namespace) -> dict[str, object]:
    out = Path(args.out or tempfile.mkdtemp(prefix="mh-fuzz-", dir="/tmp"))
    out.mkdir(parents=True, exist_ok=True)
    state_dir = Path(tempfile.mkdtemp(prefix="mh-fuzz-state-", dir="/tmp"))
    host = await hostwatch.start(
        state_dir,
        out,
        trace=args.trace,
        wrap=args.mallinfo,
        log_level=args.host_log,
        prefix=tuple(shlex.split(args.host_prefix)),
    )
    try:
        devices = await hostwatch.pair_devices(host, DEVICES)
        async with login("127.0.0.1", host.port, devices[0]) as client:
            await client.send(c.ListPanes())
            listing = await client.expect(c.Panes)
        assert isinstance(listing, c.Panes)
        env = Env(
            host.port,
            state_dir,
            devices,
            list(listing.panes),
            random.Random(args.seed),
            huge=not args.no_huge,
        )
        names = sorted(CASES) if not args.only else args.only.split(",")
        weights = [CASES[name][1] for name in names]
        tally: Counter[tuple[str, str]] = Counter()
        faults: list[str] = []
        samples: list[hostwatch.Sample] = []
        started = time.monotonic()
        deadline = started + args.minutes * 60
        first_snapshot: Path | None = None
        envs: list[Env] = []
        print(f"host pid {host.pid}, port {host.port}; output in {out}", flush=True)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(sampler, host, env, started, deadline, args.sample, samples)
            for number in range(args.workers):
                rng = random.Random(args.seed * 1000 + number)
                worker_env = dataclasses.replace(env, rng=rng)
                envs.append(worker_env)
                nursery.start_soon(worker, worker_env, names, weights, deadline, tally, faults)
            if args.trace:
                await trio.sleep(args.minutes * 60 / 3)
                first_snapshot = await host.snapshot()
        last_snapshot = await host.snapshot() if args.trace else None
        final = await hostwatch.sample(host, env.devices[0], started)
        samples.append(final)
    finally:
        code = await host.stop()
        shutil.rmtree(state_dir, ignore_errors=True)
    window = args.minutes * 60 / 3
    before, after, added = hostwatch.growth_over(samples, window)
    sent = sum(e.bytes_sent for e in envs)
    result: dict[str, object] = {
        "minutes": args.minutes,
        "workers": args.workers,
        "seed": args.seed,
        "cases": sum(tally.values()),
        "by_case": {f"{n} {o}": k for (n, o), k in sorted(tally.items())},
        "bytes_sent": sent,
        "bad_packets": sum(e.bad_packets for e in envs),
        "harness_faults": faults,
        "host_exit": code,
        "samples": [asdict(s) for s in samples],
        "last_third_trend": hostwatch.trend(samples, window),
        "last_third": {
            "seconds": window,
            "rss_before": before,
            "rss_after": after,
            "added_mib": added,
        },
        "health_failures": sum(1 for s in samples if s.health_seconds is None),
        "slowest_health": max((s.health_seconds or 0.0) for s in samples),
    }
    (out / "fuzz.json").write_text(json.dumps(result, indent=1))
    print()
    for (name, outcome), count in sorted(tally.items()):
        print(f"  {name:22s} {outcome:28s} {count:7d}")
    print(f"cases {result['cases']}, {sent / 2**30:.2f} GiB sent, {args.workers} workers")
    print(
        f"host exit status {code} (a stop asked for: 0), packets from the host that did "
        f"not decode: {result['bad_packets']}"
    )
    print(f"health: {result['health_failures']} failed, slowest {result['slowest_health']:.2f} s")
    rss = [s.rss_mib for s in samples]
    print(
        f"RSS first {rss[0]:.1f} MiB, max {max(rss):.1f}, last {rss[-1]:.1f}; "
        f"last {window / 60:.0f} min: {before:.1f} -> {after:.1f} MiB ({added:+.2f} MiB)"
    )
    t = hostwatch.trend(samples, window)
    print(
        f"last {window / 60:.0f} min, median of its first and last minute: "
        f"{t['first_minute_median']:.1f} -> {t['last_minute_median']:.1f} MiB "
        f"({t['added_mib']:+.2f} MiB); slope {t['slope_mib_per_10_min']:+.2f} MiB per 10 min; "
        f"range {t['min']:.1f} … {t['max']:.1f} MiB"
    )
    fds = [s.descriptors for s in samples]
    print(
        f"descriptors {min(fds)} … {max(fds)}; load average {samples[0].load:.2f} … "
        f"{max(s.load for s in samples):.2f}"
    )
    for fault in faults:
        print(fault)
    if first_snapshot is not None and last_snapshot is not None:
        lines = growth(first_snapshot, last_snapshot)
        (out / "growth.txt").write_text("\n".join(lines) + "\n")
        print("\n".join(lines[:80]))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--workers", type=int, default=6)
    parser.add_argument("--seed", type=int, default=29)
    parser.add_argument("--sample", type=float, default=10.0, help="seconds between samples")
    parser.add_argument("--no-huge", action="store_true", help="leave out the 8 MiB packets")
    parser.add_argument("--trace", action="store_true", help="run the host under tracemalloc")
    parser.add_argument("--mallinfo", action="store_true", help="print glibc's malloc figures")
    parser.add_argument("--only", default="", help="comma-separated case names")
    parser.add_argument("--out", default="", help="directory for host.log and fuzz.json")
    parser.add_argument("--host-log", default="warning", help="the host's --log-level")
    parser.add_argument(
        "--host-prefix",
        default="",
        help="run the host under this (`heaptrack -o FILE`, `taskset -c 0`)",
    )
    args = parser.parse_args()
    unknown = [n for n in args.only.split(",") if n and n not in CASES]
    if unknown:
        raise SystemExit(f"unknown cases {unknown}; known: {', '.join(sorted(CASES))}")
    trio.run(run, args)


if __name__ == "__main__":
    main()
