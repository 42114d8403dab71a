"""What exporting a styled-scrollback archive costs (styled-scrollback-v1).

A local pane's screen is filled with coloured lines and scrolled back; the
benchmark times what the host does for a frame when the archive is not cached:
choosing the window, formatting it as VT (cut to 2 MiB if needed) and presenting
it on a replica the way Prowl's Mac client does, to check it. A cached archive
costs only the viewport text read and a comparison, timed too.

    .venv/bin/python -m benchmarks.styled_archive
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from benchmarks.common import percentile
from mirror_host.capture.styled import ArchiveCache, ArchiveKey, plan_window
from mirror_host.terminal import Screen
from mirror_host.terminal.archive import export_archive


def coloured(number: int, columns: int) -> bytes:
    """A line as a build log or `ls --color` writes it, filling the row."""
    head = (
        b"\x1b[38;5;%dm%05d\x1b[0m \x1b[1;31merror\x1b[0m \x1b[4munder\x1b[0m "
        b"\x1b[38;2;80;190;240mtrue colour\x1b[0m \x1b[48;5;22m bg \x1b[0m "
        % (number % 256, number)
    )
    return head + b"x" * max(0, columns - 44) + b"\r\n"


def every_cell(number: int, columns: int) -> bytes:
    """The worst case: each cell its own true colour (about 20 bytes a cell)."""
    cells = (
        b"\x1b[38;2;%d;%d;%dm#" % (number % 256, x * 3 % 256, number * x % 256)
        for x in range(columns)
    )
    return b"".join(cells) + b"\x1b[0m\r\n"


def timed(action: Callable[[], object], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append((time.perf_counter() - start) * 1000)
    return times


def run(
    columns: int, rows: int, lines: int, line: Callable[[int, int], bytes], repeat: int
) -> None:
    screen = Screen(columns, rows)
    screen.feed(b"".join(line(n, columns) for n in range(lines)))
    screen.scroll_viewport(-(rows * 3))
    total, top, _ = screen.scrollbar
    frame = screen.vt_frame()
    text = screen.viewport_overlay()
    window = plan_window(total_rows=total, columns=columns, viewport_top=top, viewport_rows=rows)
    assert window is not None
    result = export_archive(screen, window, rows=rows, viewport_text=text, frame=frame)
    assert result.archive is not None, "the archive did not present the viewport"
    miss = timed(
        lambda: export_archive(screen, window, rows=rows, viewport_text=text, frame=frame), repeat
    )
    cache = ArchiveCache()
    key = ArchiveKey(columns, rows, top, text)
    cache.store(key, result, 0.0)
    hit = timed(
        lambda: cache.lookup(ArchiveKey(columns, rows, top, screen.viewport_overlay()), 0.1), repeat
    )
    kept = len(result.archive.data)
    print(
        f"| {columns}×{rows}, {total:,} rows retained | {window.rows:,} | {kept / 1024:,.0f} KiB"
        f" ({top - result.archive.row_offset:,} oldest rows cut) | {percentile(miss, 50):.1f} ms"
        f" | {percentile(miss, 99):.1f} ms | {percentile(hit, 50):.2f} ms |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    print("| pane | window rows | archive | export p50 | export p99 | cached p50 |")
    print("| --- | --- | --- | --- | --- | --- |")
    run(50, 40, 6_000, coloured, args.repeat)  # 5,000 rows × 50 = the 250,000-cell maximum
    run(80, 24, 6_000, coloured, args.repeat)  # 3,125 rows of 80 columns
    run(120, 40, 6_000, coloured, args.repeat)  # 2,083 rows of 120 columns
    run(80, 24, 6_000, every_cell, args.repeat)  # over 2 MiB: shrunk until it fits


if __name__ == "__main__":
    main()
