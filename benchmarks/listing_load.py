"""Ordinary load: many logged-in phones listing panes, watching the host's memory.

    python -m benchmarks.listing_load --clients 200 --minutes 5

Each client logs in (from its own address of 127.0.0.0/8), answers pings and
sends ``list`` every ``--every`` seconds, reading every ``panes``, for
``--minutes``. The host is the fuzz's (``benchmarks/hostwatch.py``: a ``cat``
pane and a ticker, both at their scrollback bound) with room for the clients
(``MIRROR_HOST_SERVER_MAX_CONNECTIONS``). Every ``--sample`` seconds the host's
RSS, descriptors and a health login are recorded; the run prints them, the
connections dropped (a client whose connection ended before the end: must be
0), the lists answered, and the memory added in the second half of the run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import trio

from benchmarks import hostwatch
from mirror_host import control as c
from mirror_host.client.client import ClientClosed, Credential, login


async def client(
    port: int,
    device: Credential,
    number: int,
    deadline: float,
    every: float,
    counts: dict[str, int],
    start: trio.Event,
) -> None:
    address = f"127.1.{number // 250}.{number % 250 + 1}"
    await start.wait()
    await trio.sleep(number * 0.01)  # logins spread over the first seconds
    try:
        async with login("127.0.0.1", port, device, local_address=address) as phone:
            counts["connected"] += 1
            while time.monotonic() < deadline:
                await phone.send(c.ListPanes())
                await phone.expect(c.Panes, timeout=30.0)
                counts["lists"] += 1
                await trio.sleep(every)
    except (ClientClosed, trio.TooSlowError, OSError) as exc:
        counts["dropped"] += 1
        if counts["dropped"] <= 5:
            print(f"client {number} dropped: {type(exc).__name__}: {exc}", flush=True)


async def run(args: argparse.Namespace) -> None:
    out = Path(args.out or tempfile.mkdtemp(prefix="mh-listing-", dir="/tmp"))
    out.mkdir(parents=True, exist_ok=True)
    state_dir = Path(tempfile.mkdtemp(prefix="mh-listing-state-", dir="/tmp"))
    host = await hostwatch.start(state_dir, out, max_connections=args.clients + 16)
    samples: list[hostwatch.Sample] = []
    counts = {"connected": 0, "lists": 0, "dropped": 0}
    try:
        devices = await hostwatch.pair_devices(host, 4)
        started = time.monotonic()
        deadline = started + args.minutes * 60
        print(f"host pid {host.pid}, port {host.port}; output in {out}", flush=True)
        async with trio.open_nursery() as nursery:
            start = trio.Event()
            for number in range(args.clients):
                device = devices[number % len(devices)]
                nursery.start_soon(
                    client, host.port, device, number, deadline, args.every, counts, start
                )
            start.set()
            while time.monotonic() < deadline:
                sample = await hostwatch.sample(host, devices[0], started)
                samples.append(sample)
                print(
                    f"{sample.seconds:6.0f} s  RSS {sample.rss_mib:6.1f} MiB  "
                    f"fds {sample.descriptors:4d}  connected {counts['connected']:4d}  "
                    f"lists {counts['lists']:7d}  dropped {counts['dropped']}  "
                    f"load {sample.load:.2f}",
                    flush=True,
                )
                await trio.sleep(min(args.sample, max(deadline - time.monotonic(), 0.1)))
        samples.append(await hostwatch.sample(host, devices[0], started))
    finally:
        code = await host.stop()
        shutil.rmtree(state_dir, ignore_errors=True)
    half = args.minutes * 60 / 2
    before, after, added = hostwatch.growth_over(samples, half)
    result = {
        "clients": args.clients,
        "minutes": args.minutes,
        "every": args.every,
        **counts,
        "host_exit": code,
        "second_half": {"rss_before": before, "rss_after": after, "added_mib": added},
        "samples": [asdict(s) for s in samples],
    }
    (out / "listing.json").write_text(json.dumps(result, indent=1))
    t = hostwatch.trend(samples, half)
    result["second_half_trend"] = t
    (out / "listing.json").write_text(json.dumps(result, indent=1))
    rss = [s.rss_mib for s in samples]
    print(
        f"second half, median of its first and last minute: {t['first_minute_median']:.1f} -> "
        f"{t['last_minute_median']:.1f} MiB ({t['added_mib']:+.2f}); slope "
        f"{t['slope_mib_per_10_min']:+.2f} MiB per 10 min"
    )
    print(
        f"{counts['connected']} of {args.clients} connected, {counts['dropped']} dropped, "
        f"{counts['lists']} lists answered; host exit status {code}"
    )
    print(
        f"RSS first {rss[0]:.1f} MiB (clients connecting), max {max(rss):.1f}, last "
        f"{rss[-1]:.1f}; second half: {before:.1f} -> {after:.1f} MiB ({added:+.2f} MiB)"
    )
    print(f"load average {min(s.load for s in samples):.2f} … {max(s.load for s in samples):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--every", type=float, default=2.0, help="seconds between lists")
    parser.add_argument("--sample", type=float, default=10.0)
    parser.add_argument("--out", default="")
    trio.run(run, parser.parse_args())


if __name__ == "__main__":
    main()
