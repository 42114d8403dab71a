#!/usr/bin/env python3
"""Python function calls per output chunk and per capture, for each pane source.

Usage: python -m benchmarks.source_calls [--chunks 2000] [--captures 500]

Wall-clock figures on a shared machine drift; the number of Python function
calls a source makes to handle one chunk of a watched pane's output, or to
capture it, does not. This runs each source against its real backend or the
test suite's fake (a private tmux server, local PTYs, the fake Herdr and
agliteterm), watches one pane, and counts (``cProfile``) the calls of:

* **output**: tmux's ``pane_output`` (a ``%output`` line's bytes), Herdr's
  ``apply_observe_line`` (one ``terminal.frame``), the local pump's screen
  feed and change callback;
* **capture**: ``capture(VT)`` of the watched pane (tmux, local, Herdr,
  agliteterm).

Each figure is the total divided by the number of operations.
"""

from __future__ import annotations

import argparse
import base64
import cProfile
import json
import os
import pstats
import shutil
import signal
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

from mirror_host.control import Representation
from mirror_host.panes.agliteterm.protocol import pane_uuid as aglite_uuid
from mirror_host.panes.agliteterm.source import AgliteSource
from mirror_host.panes.agliteterm.transport import UnixSocketTransport
from mirror_host.panes.herdr.observe import apply_observe_line
from mirror_host.panes.herdr.protocol import pane_uuid as herdr_uuid
from mirror_host.panes.herdr.source import HerdrSource
from mirror_host.panes.local import LocalSource
from mirror_host.panes.tmux import TmuxSource

CHUNK = b"\x1b[32mok\x1b[0m line of output with some words in it\r\n"


def calls(run: Callable[[], None]) -> int:
    profile = cProfile.Profile()
    profile.enable()
    run()
    profile.disable()
    return int(pstats.Stats(profile).total_calls)  # type: ignore[attr-defined]


async def acalls(count: int, op: Callable[[], Awaitable[object]]) -> float:
    """Calls per ``op`` over ``count`` runs (the profiler spans the awaits)."""
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(count):
        await op()
    profile.disable()
    return int(pstats.Stats(profile).total_calls) / count  # type: ignore[attr-defined]


def per(count: int, op: Callable[[], object]) -> float:
    def run() -> None:
        for _ in range(count):
            op()

    return calls(run) / count


async def local(chunks: int, captures: int) -> tuple[float, float]:
    source = LocalSource(["cat"], columns=80, rows=24, shell_integration=False)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(source.run)
        while not source.live_panes():
            await trio.sleep(0.01)
        pane = source.live_panes()[0]
        async with source.watch(pane.id, lambda: None):

            def pump() -> None:  # what _pump does with each chunk it reads
                pane.screen.feed(CHUNK)
                pane.watchers.notify()

            output = per(chunks, pump)
            capture = await acalls(captures, lambda: source.capture(pane.id, Representation.VT))
        nursery.cancel_scope.cancel()
    return output, capture


async def tmux(chunks: int, captures: int) -> tuple[float, float]:
    name = f"mh-calls-{uuid.uuid4().hex[:8]}"
    base = ["tmux", "-L", name]
    await trio.run_process([*base, "-f", "/dev/null", "new-session", "-d", "-x", "80", "-y", "24",
                            "cat"])  # fmt: skip
    shown = await trio.run_process([*base, "display", "-p", "#{pid}"], capture_stdout=True)
    pid = int(shown.stdout)
    try:
        source = TmuxSource(socket_name=name, sign_marks=False)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(source.run)
            await source.wait_listed()
            ((key, row),) = source.pane_rows()
            async with source.watch(key, lambda: None):
                output = per(chunks, lambda: source.pane_output(row.pane_id, CHUNK))
                capture = await acalls(captures, lambda: source.capture(key, Representation.VT))
            nursery.cancel_scope.cancel()
    finally:
        await trio.run_process([*base, "kill-server"], check=False, capture_stderr=True)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return output, capture


async def herdr(directory: Path, chunks: int, captures: int) -> tuple[float, float]:
    from tests.fakes.herdr_fake import FakeHerdr

    fake = FakeHerdr(directory / "herdr.sock", protocol=22)
    async with trio.open_nursery() as nursery:
        await nursery.start(fake.serve)
        tab = fake.add_tab(fake.add_workspace("w"), "t")
        herdr_id = await fake.add_pane(tab, "exec cat")
        source = HerdrSource(directory / "herdr.sock", herdr_bin="/nonexistent/herdr")
        nursery.start_soon(source.run)
        await source.wait_listed()
        key = herdr_uuid(fake.socket_path, herdr_id)
        async with source.watch(key, lambda: None):
            mirror = source.mirrors.get(key)
            assert mirror is not None
            frame = json.dumps({
                "type": "terminal.frame", "full": False, "width": 80, "height": 24,
                "bytes": base64.b64encode(CHUNK).decode(),
            }).encode()  # fmt: skip
            output = per(chunks, lambda: apply_observe_line(mirror, frame))
            capture = await acalls(captures, lambda: source.capture(key, Representation.VT))
        await fake.stop()
        nursery.cancel_scope.cancel()
    return output, capture


async def agliteterm(directory: Path, captures: int) -> float:
    from tests.fakes.agliteterm_fake import FakeAgliteterm

    fake = FakeAgliteterm(directory / "aglite.sock")
    async with trio.open_nursery() as nursery:
        await nursery.start(fake.serve)
        session = await fake.add_session(fake.add_workspace("w"), "printf 'hello\\n'; exec cat")
        source = AgliteSource(UnixSocketTransport(Path(fake.socket_path)))
        nursery.start_soon(source.run)
        await source.wait_listed()
        key = aglite_uuid(f"unix:{fake.socket_path}", session)
        async with source.watch(key, lambda: None):
            capture = await acalls(captures, lambda: source.capture(key, Representation.VT))
        await fake.stop()
        nursery.cancel_scope.cancel()
    return capture


async def main(chunks: int, captures: int) -> None:
    directory = Path(tempfile.mkdtemp(prefix="mh-calls-", dir="/tmp"))
    try:
        output, capture = await local(chunks, captures)
        print(f"local:      output {output:.1f} calls/chunk, capture {capture:.1f} calls")
        if shutil.which("tmux"):
            output, capture = await tmux(chunks, captures)
            print(f"tmux:       output {output:.1f} calls/chunk, capture {capture:.1f} calls")
        output, capture = await herdr(directory, chunks, captures)
        print(f"herdr:      output {output:.1f} calls/frame, capture {capture:.1f} calls")
        capture = await agliteterm(directory, captures)
        print(f"agliteterm: capture {capture:.1f} calls")
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=2000)
    parser.add_argument("--captures", type=int, default=500)
    args = parser.parse_args()
    trio.run(main, args.chunks, args.captures)
