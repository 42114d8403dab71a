"""Which history request reads the source, waits for a read, or takes a kept one. Pure."""

from __future__ import annotations

from mirror_host.session.history import HistoryPlan, HistoryReads, ReadAction

PANE, OTHER = "pane", "other"


def test_the_first_request_starts_a_read_and_a_second_joins_it() -> None:
    reads: HistoryReads[str] = HistoryReads(keep_seconds=30.0)
    first = reads.ask(PANE, 0.0)
    assert first.action is ReadAction.START
    assert reads.ask(PANE, 1.0) == HistoryPlan(ReadAction.JOIN, read=first.read)
    other = reads.ask(OTHER, 1.0)
    assert other.action is ReadAction.START and other.read != first.read  # per pane
    assert reads.pending(PANE) and reads.pending(OTHER)


def test_a_read_that_somebody_still_waits_for_is_theirs_not_kept() -> None:
    reads: HistoryReads[str] = HistoryReads(keep_seconds=30.0)
    plan = reads.ask(PANE, 0.0)
    assert reads.finish(PANE, plan.read, "page", 3.0) is None
    assert not reads.kept(PANE) and not reads.pending(PANE)
    assert reads.ask(PANE, 4.0).action is ReadAction.START  # the next one reads again


def test_a_read_finished_after_every_asker_gave_up_answers_the_next_request_once() -> None:
    reads: HistoryReads[str] = HistoryReads(keep_seconds=30.0)
    plan = reads.ask(PANE, 0.0)
    joined = reads.ask(PANE, 2.0)
    reads.give_up(PANE, plan.read)
    reads.give_up(PANE, joined.read)
    assert reads.finish(PANE, plan.read, "page", 10.0) == 40.0
    assert reads.kept(PANE)
    assert reads.ask(PANE, 12.0) == HistoryPlan(ReadAction.READY, result="page")
    assert not reads.kept(PANE)  # taken: one answer per read
    assert reads.ask(PANE, 13.0).action is ReadAction.START


def test_a_kept_result_expires() -> None:
    reads: HistoryReads[str] = HistoryReads(keep_seconds=30.0)
    plan = reads.ask(PANE, 0.0)
    reads.give_up(PANE, plan.read)
    reads.finish(PANE, plan.read, "page", 10.0)
    reads.expire(39.9)
    assert reads.kept(PANE)
    reads.expire(40.0)
    assert not reads.kept(PANE)
    assert reads.ask(PANE, 40.0).action is ReadAction.START


def test_a_failed_read_keeps_nothing() -> None:
    reads: HistoryReads[str] = HistoryReads(keep_seconds=30.0)
    plan = reads.ask(PANE, 0.0)
    reads.give_up(PANE, plan.read)
    assert reads.finish(PANE, plan.read, None, 20.0) is None
    assert not reads.kept(PANE) and not reads.pending(PANE)


def test_giving_up_on_a_read_that_is_no_longer_under_way_changes_nothing() -> None:
    reads: HistoryReads[str] = HistoryReads(keep_seconds=30.0)
    old = reads.ask(PANE, 0.0)
    reads.finish(PANE, old.read, "first", 1.0)  # its waiter took it
    new = reads.ask(PANE, 2.0)
    reads.give_up(PANE, old.read)  # stale: must not count against the new read
    assert reads.finish(PANE, new.read, "second", 3.0) is None  # still waited for
    assert reads.finish(PANE, old.read, "late", 4.0) is None  # unknown read: ignored
    assert not reads.kept(PANE)
