"""What the accept loop says through a shortage of descriptors: a few lines, never one
per refused ``accept`` (the clock is handed in)."""

from __future__ import annotations

import errno

from mirror_host.host.accepting import RETRY_SECONDS, AcceptShortage


def test_a_shortage_is_said_once_then_every_interval_then_once_over() -> None:
    shortage = AcceptShortage("connections", report_seconds=10.0, quiet_seconds=1.0)
    assert shortage.settle_at is None and shortage.settle(0.0) is None
    first = shortage.failed(errno.EMFILE, 100.0, limit=64)
    assert first is not None and first.startswith("cannot accept connections: too many open files")
    assert "EMFILE: this process may open 64" in first and "\n" not in first
    lines = [first]
    now = 100.0
    while now < 125.0:  # 25 s of refusals, ten a second
        now = round(now + RETRY_SECONDS, 6)
        line = shortage.failed(errno.EMFILE, now, limit=64)
        if line is not None:
            lines.append(line)
    assert len(lines) == 3  # the start, and one at 110 s and one at 120 s
    assert lines[1].startswith("still cannot accept connections after 10 s")
    assert "(100 tries in the last 10 s)" in lines[1]
    assert shortage.settle(now + 0.5) is None  # not quiet long enough yet
    shortage.accepted()
    assert shortage.settle_at == now + 1.0
    over = shortage.settle(now + 1.0)
    # 251 refusals: at 100.0 s and every 0.1 s up to 125.0 s.
    assert over == "accepting connections again after 25.0 s (251 tries refused)"
    assert shortage.since is None and shortage.settle(now + 5.0) is None


def test_a_queue_served_one_freed_descriptor_at_a_time_is_one_shortage() -> None:
    # Refused, accepted, refused again within the quiet second: still the same
    # shortage, so no new "cannot accept" line for each turn.
    shortage = AcceptShortage("connections", report_seconds=10.0, quiet_seconds=1.0)
    lines = [shortage.failed(errno.EMFILE, 0.0)]
    now = 0.0
    for _ in range(200):  # 20 s of accept, refuse, accept …
        now = round(now + 0.1, 6)
        shortage.accepted()
        assert shortage.settle(now) is None
        lines.append(shortage.failed(errno.EMFILE, now))
    said = [line for line in lines if line is not None]
    assert len(said) == 3
    assert said[1].startswith("accepting connections only as descriptors free up: 100 accepted")
    assert shortage.settle(now + 1.0) is not None


def test_other_shortages_name_their_error() -> None:
    for code, words in [
        (errno.ENFILE, "too many open files in system (ENFILE)"),
        (errno.ENOBUFS, "no buffer space available (ENOBUFS)"),
        (errno.ENOMEM, "cannot allocate memory (ENOMEM)"),
    ]:
        line = AcceptShortage("admin requests").failed(code, 0.0, limit=64)
        assert line is not None and f"cannot accept admin requests: {words}" in line
