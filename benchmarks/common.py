"""Shared helpers for the benchmarks: start a host subprocess, pair, percentiles."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mirror_host import control as c
from mirror_host.client.client import Credential, login
from mirror_host.host.admin_client import STATUS_FILE, admin_request


def ticker(rate: float) -> str:
    """A pane command printing its wall clock in nanoseconds ``rate`` times a second."""
    return (
        f"{sys.executable} -c 'import time\n"
        "while True:\n"
        "    print(time.time_ns(), flush=True)\n"
        f"    time.sleep({1 / rate!r})'"
    )


def start_host(
    args: list[str],
    *,
    cpu: int | None = None,
    python: list[str] | None = None,
    wrap: list[str] | None = None,
    env: dict[str, str] | None = None,
    start_seconds: float = 30,
) -> tuple[subprocess.Popen[bytes], Path, int]:
    """Run ``mirror-host serve`` (optionally pinned to one CPU); return it, its state dir, port.

    ``python``: what runs the package instead of ``python -m mirror_host`` (a profiling
    wrapper); ``wrap``: a command put in front (valgrind); ``env``: added variables.
    """
    state_dir = Path(tempfile.mkdtemp(prefix="mh-bench-", dir="/tmp"))
    entry = python if python is not None else [sys.executable, "-m", "mirror_host"]
    command = [*entry, "serve", "--listen", "127.0.0.1:0",
               "--state-dir", str(state_dir), "--log-level", "warning", *args]  # fmt: skip
    if cpu is not None:
        command = ["taskset", "-c", str(cpu), *command]
    command = [*(wrap or []), *command]
    variables = {**os.environ, "MIRROR_HOST_SERVER_MAX_CONNECTIONS": "64", **(env or {})}
    process = subprocess.Popen(command, env=variables)
    status = state_dir / STATUS_FILE
    deadline = time.monotonic() + start_seconds
    while not status.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("the host did not start")
        time.sleep(0.05)
    port = int(json.loads(status.read_text())["listen"].rsplit(":", 1)[1])
    return process, state_dir, port


def open_window(state_dir: Path) -> str:
    code: str = admin_request(state_dir, {"op": "pair"})["code"]
    return code


async def list_panes(port: int, credential: Credential) -> list[c.PaneDescriptor]:
    """Log in once on 127.0.0.1:port and return the host's pane listing."""
    async with login("127.0.0.1", port, credential) as lister:
        await lister.send(c.ListPanes())
        listing = await lister.expect(c.Panes)
    assert isinstance(listing, c.Panes)
    return list(listing.panes)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks
