"""What finding OSC 133 prompt marks costs on the feed path (shell-send).

Every byte a local or tmux pane writes goes through ``Screen.feed``, which
first scans it for prompt marks (``mirror_host.shell.marks``). The benchmark
times the scanner alone and a whole feed (scan and libghostty) on three kinds
of 64 KiB output: plain lines, output dense with colour changes, and prompts
with marks.

    .venv/bin/python -m benchmarks.prompt_marks
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from mirror_host.shell.marks import MarkScanner
from mirror_host.terminal import Screen

_CHUNK = 65_536


def _outputs() -> dict[str, bytes]:
    plain = b"y\r\n" * (_CHUNK // 3)
    colour = b"".join(b"\x1b[3%dmword%d\x1b[0m " % (n % 8, n) for n in range(8000))
    prompt = b"\x1b]133;D;0\x07\x1b]133;P;k=i\x07~/src$ \x1b]133;B\x07ls\r\n\x1b]133;C\x07"
    return {
        "plain": plain[:_CHUNK],
        "colour": colour[:_CHUNK],
        "prompts": (prompt * (_CHUNK // len(prompt) + 1))[:_CHUNK],
    }


def _rate(work: Callable[[], None], repeat: int) -> float:
    """MB/s over ``repeat`` runs of ``work`` on one chunk."""
    start = time.perf_counter()
    for _ in range(repeat):
        work()
    return _CHUNK * repeat / (time.perf_counter() - start) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    for name, data in _outputs().items():
        scanner = MarkScanner()
        screen = Screen(120, 40)
        scan = _rate(lambda data=data, scanner=scanner: scanner.feed(data), args.repeat)
        feed = _rate(lambda data=data, screen=screen: screen.feed(data), args.repeat)
        print(f"{name:8} scan {scan:8.0f} MB/s   Screen.feed {feed:6.1f} MB/s")


if __name__ == "__main__":
    main()
