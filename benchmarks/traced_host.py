"""``mirror-host`` with ``tracemalloc`` on, dumping a snapshot on ``SIGUSR1``.

    python -m benchmarks.traced_host [--frames N] SNAPSHOT_DIR -- serve ARGS...

(``--frames 0``: no tracing; ``SIGUSR2`` writes glibc's ``mallinfo2`` to
``SNAPSHOT_DIR/mallinfo-K.json`` either way.)

For the memory benchmarks (``benchmarks/fuzz.py --trace``): each ``SIGUSR1``
writes ``SNAPSHOT_DIR/snapshot-K.pickle`` (K = 0, 1, …) from inside the host
(Python's signal handler runs between bytecodes of the main thread, so the host
pauses for the time the snapshot takes); :func:`growth` compares two. Tracing
slows the host and adds its own memory, so the plateau figures come from runs
without it.
"""

from __future__ import annotations

import argparse
import ctypes
import itertools
import json
import signal
import sys
import tracemalloc
from pathlib import Path
from types import FrameType

__all__ = ["growth"]


def growth(before: Path, after: Path, *, top: int = 25, frames: int = 6) -> list[str]:
    """The ``top`` call sites (``frames`` deep) whose memory grew most from
    ``before`` to ``after``, one line each (and their traceback below)."""
    noise = [
        tracemalloc.Filter(False, tracemalloc.__file__),
        tracemalloc.Filter(False, "<frozen importlib._bootstrap>"),
        tracemalloc.Filter(False, "<frozen importlib._bootstrap_external>"),
        tracemalloc.Filter(False, "<unknown>"),
    ]
    old = tracemalloc.Snapshot.load(str(before)).filter_traces(noise)
    new = tracemalloc.Snapshot.load(str(after)).filter_traces(noise)
    lines = [
        f"traced: {sum(s.size for s in old.statistics('filename')) / 2**20:.1f} MiB"
        f" -> {sum(s.size for s in new.statistics('filename')) / 2**20:.1f} MiB"
    ]
    for stat in new.compare_to(old, "traceback")[:top]:
        lines.append(
            f"{stat.size_diff / 1024:+9.1f} KiB {stat.count_diff:+7d} blocks"
            f" (now {stat.size / 1024:.1f} KiB in {stat.count})"
        )
        lines.extend(f"        {line}" for line in stat.traceback.format(limit=frames))
    return lines


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
            "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


def mallinfo() -> dict[str, int]:
    """glibc's ``mallinfo2()`` of this process: ``uordblks`` bytes in use by malloc,
    ``fordblks`` free in its arenas (fragmentation), ``hblkhd`` in mmapped blocks."""
    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = _MallInfo2
    info = libc.mallinfo2()
    return {name: int(getattr(info, name)) for name, _ in _MallInfo2._fields_}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("snapshots", type=Path)
    parser.add_argument("--frames", type=int, default=12)
    parser.add_argument("rest", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    rest = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
    args.snapshots.mkdir(parents=True, exist_ok=True)
    numbers = itertools.count()
    if args.frames:
        tracemalloc.start(args.frames)

    def dump(signum: int, frame: FrameType | None) -> None:
        path = args.snapshots / f"snapshot-{next(numbers)}.pickle"
        tracemalloc.take_snapshot().dump(str(path.with_suffix(".tmp")))
        path.with_suffix(".tmp").rename(path)

    signal.signal(signal.SIGUSR1, dump)
    mallinfo_numbers = itertools.count()

    def write_mallinfo(signum: int, frame: FrameType | None) -> None:
        path = args.snapshots / f"mallinfo-{next(mallinfo_numbers)}.json"
        path.write_text(json.dumps(mallinfo()))

    signal.signal(signal.SIGUSR2, write_mallinfo)
    from mirror_host.cli import main as cli_main

    sys.argv = ["mirror-host", *rest]
    raise SystemExit(cli_main())


if __name__ == "__main__":
    main()
