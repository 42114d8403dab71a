"""A host process for the memory benchmarks, and what is watched on it: resident
memory, descriptors, a health login, the machine's load. Linux (``/proc``)."""

from __future__ import annotations

import json
import os
import signal
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import trio

from mirror_host import control as c
from mirror_host.client.client import Credential, login, pair_device
from mirror_host.host.admin_client import STATUS_FILE, admin_request

__all__ = ["HEALTH_ADDRESS", "Sample", "Watched", "pair_devices", "sample", "start"]

#: The health login's address: no case ever fails from it, so it is never locked out.
HEALTH_ADDRESS = "127.0.0.1"
#: Lines each pane prints first: more than a pane's scrollback holds (10 MB, about
#: 13,700 lines of 80 columns), so its screen is at its bound before anything is
#: measured and what grows afterwards is the host's, not the panes' history.
PREFILL = 30_000
#: A `cat` pane (typed input comes back; raw, so random bytes such as Ctrl-C or
#: Ctrl-D are data, not a signal or an end of file), and a pane that keeps
#: printing (frames flow, history grows).
CAT = f"seq 1 {PREFILL}; stty raw -echo; exec cat"
TICKER = f"seq 1 {PREFILL}; i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.2; done"


@dataclass
class Watched:
    """The host under test."""

    process: trio.Process
    state_dir: Path
    port: int
    log: Path
    snapshots: Path | None = None
    snapshots_taken: int = 0
    mallinfos_taken: int = 0

    @property
    def pid(self) -> int:
        return self.process.pid

    async def snapshot(self) -> Path | None:
        """Have a traced host dump a ``tracemalloc`` snapshot; its file."""
        if self.snapshots is None:
            return None
        path = self.snapshots / f"snapshot-{self.snapshots_taken}.pickle"
        self.snapshots_taken += 1
        self.process.send_signal(signal.SIGUSR1)
        with trio.fail_after(120):
            while not path.exists():
                await trio.sleep(0.2)
        return path

    async def mallinfo(self) -> dict[str, int]:
        """glibc's ``mallinfo2`` of a wrapped host (``start(wrap=True)``), or ``{}``."""
        if self.snapshots is None:
            return {}
        path = self.snapshots / f"mallinfo-{self.mallinfos_taken}.json"
        self.mallinfos_taken += 1
        self.process.send_signal(signal.SIGUSR2)
        with trio.fail_after(30):
            while not path.exists():
                await trio.sleep(0.05)
        await trio.sleep(0.05)
        info: dict[str, int] = json.loads(path.read_text())
        return info

    async def stop(self) -> int:
        self.process.terminate()
        with trio.move_on_after(15):
            return await self.process.wait()
        self.process.kill()
        return await self.process.wait()


async def start(
    state_dir: Path,
    out: Path,
    *,
    trace: bool = False,
    wrap: bool = False,
    max_connections: int | None = None,
    log_level: str = "warning",
    prefix: tuple[str, ...] = (),
) -> Watched:
    """``mirror-host serve`` on 127.0.0.1 with a ``cat`` pane and a ticker pane."""
    serve = [
        "serve", "--listen", "127.0.0.1:0", "--state-dir", str(state_dir),
        "--local-command", CAT, "--local-command", TICKER, "--log-level", log_level,
    ]  # fmt: skip
    snapshots = out / "snapshots" if trace or wrap else None
    if snapshots is not None:
        frames = "12" if trace else "0"
        command = [sys.executable, "-m", "benchmarks.traced_host",
                   "--frames", frames, str(snapshots), "--", *serve]  # fmt: skip
    else:
        command = [sys.executable, "-m", "mirror_host", *serve]
    command = [*prefix, *command]
    env = dict(os.environ)
    if max_connections is not None:
        env["MIRROR_HOST_SERVER_MAX_CONNECTIONS"] = str(max_connections)
    log = out / "host.log"
    with log.open("wb") as sink:
        process = await trio.lowlevel.open_process(command, stderr=sink, env=env)
    with trio.fail_after(60):
        while not (state_dir / STATUS_FILE).exists():
            if process.returncode is not None:
                raise SystemExit(f"the host did not start: {log.read_text()[-2000:]}")
            await trio.sleep(0.05)
    listen = json.loads((state_dir / STATUS_FILE).read_text())["listen"]
    return Watched(process, state_dir, int(listen.rsplit(":", 1)[1]), log, snapshots)


async def pair_devices(host: Watched, count: int) -> list[Credential]:
    devices = []
    for number in range(count):
        reply = await trio.to_thread.run_sync(admin_request, host.state_dir, {"op": "pair"})
        devices.append(
            await pair_device(
                "127.0.0.1", host.port, reply["code"], f"bench {number}",
                local_address=HEALTH_ADDRESS,
            )
        )  # fmt: skip
    return devices


@dataclass(frozen=True)
class Sample:
    """One look at the host."""

    seconds: float
    rss_mib: float
    descriptors: int
    #: A login and a `list` from the health address, or ``None`` when it failed.
    health_seconds: float | None
    health_error: str
    load: float
    #: Resident MiB by kind of mapping (see :func:`memory_map`).
    memory: dict[str, float]


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def memory_map(pid: int) -> dict[str, float]:
    """Resident MiB by kind of mapping: ``heap`` (the main malloc arena), ``anon``
    (other anonymous mappings: thread arenas, large allocations, libghostty's pages),
    ``code`` (mapped files), ``stack``."""
    kinds: dict[str, float] = {"heap": 0.0, "anon": 0.0, "code": 0.0, "stack": 0.0}
    kind = "anon"
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        first = line.split(maxsplit=6)
        if "-" in first[0] and len(first) >= 5 and ":" in first[3]:  # a mapping's header
            name = first[5] if len(first) > 5 else ""
            kind = (
                "heap" if name == "[heap]"
                else "stack" if name.startswith("[stack")
                else "anon" if not name or name.startswith("[")
                else "code"
            )  # fmt: skip
        elif first[0] == "Rss:":
            kinds[kind] += int(first[1]) / 1024
    return {k: round(v, 2) for k, v in kinds.items()}


def load_average() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


async def sample(host: Watched, device: Credential, started: float) -> Sample:
    began = time.monotonic()
    error = ""
    health: float | None = None
    try:
        with trio.fail_after(10):
            async with login(
                "127.0.0.1", host.port, device, local_address=HEALTH_ADDRESS
            ) as client:
                await client.send(c.ListPanes())
                await client.expect(c.Panes)
        health = time.monotonic() - began
    except Exception as exc:  # the sample says what went wrong
        error = f"{type(exc).__name__}: {exc}"[:200]
    return Sample(
        seconds=round(began - started, 1),
        rss_mib=round(_rss_mib(host.pid), 2),
        descriptors=len(os.listdir(f"/proc/{host.pid}/fd")),
        health_seconds=None if health is None else round(health, 4),
        health_error=error,
        load=load_average(),
        memory=memory_map(host.pid),
    )


def trend(samples: list[Sample], seconds: float) -> dict[str, float]:
    """The last ``seconds`` of the run: the median RSS of its first and its last
    minute (single samples jump by the 8 MiB packets under way at that moment),
    their difference, and the least-squares slope over every sample in it, in
    MiB per 10 minutes."""
    end = samples[-1].seconds
    window = [s for s in samples if s.seconds >= end - seconds]
    first = [s.rss_mib for s in window if s.seconds <= window[0].seconds + 60]
    last = [s.rss_mib for s in window if s.seconds >= end - 60]
    xs = [s.seconds for s in window]
    ys = [s.rss_mib for s in window]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    slope = (
        sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread
        if spread
        else 0.0
    )
    return {
        "first_minute_median": round(statistics.median(first), 2),
        "last_minute_median": round(statistics.median(last), 2),
        "added_mib": round(statistics.median(last) - statistics.median(first), 2),
        "slope_mib_per_10_min": round(slope * 600, 2),
        "min": round(min(ys), 2),
        "max": round(max(ys), 2),
    }


def growth_over(samples: list[Sample], seconds: float) -> tuple[float, float, float]:
    """RSS at the start of the last ``seconds`` of the run, at its end, and the
    difference (MiB)."""
    end = samples[-1]
    start = min(samples, key=lambda s: abs(s.seconds - (end.seconds - seconds)))
    return start.rss_mib, end.rss_mib, round(end.rss_mib - start.rss_mib, 2)
