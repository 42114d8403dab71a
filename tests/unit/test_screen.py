"""The libghostty screen: scrollback bounds, the viewport overlay, the styled archive."""

from __future__ import annotations

from mirror_host.terminal import Screen


def _lines(screen: Screen) -> list[str]:
    return screen.history_text().split("\n")


def test_scrollback_keeps_ten_thousand_lines_of_a_usual_pane() -> None:
    screen = Screen(80, 24)
    screen.feed(b"".join(b"line %d\r\n" % i for i in range(12_000)))
    kept = _lines(screen)
    # Lines go in whole pages, so the count is close to, not exactly, 10,000.
    assert 9_500 <= len(kept) <= 10_100
    assert kept[-1] == "line 11999" and "line 0" not in kept


def test_scrollback_of_a_very_wide_pane_is_bounded_by_memory() -> None:
    screen = Screen(1000, 24)
    row = b"\x1b[31m" + b"x" * 999 + b"\x1b[0m\r\n"
    screen.feed(row * 12_000)
    assert 500 < len(_lines(screen)) < 5_000
