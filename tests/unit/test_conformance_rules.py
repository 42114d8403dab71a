"""The pure judgments of ``mirror-host conformance``: pane choice, history pages,
scrolled views, timeouts and the exit status."""

from __future__ import annotations

import uuid

import pytest

from mirror_host.client.conformance.ledger import FrameLedger, FrameView
from mirror_host.client.conformance.report import CheckResult, Status
from mirror_host.client.conformance.rules import (
    PAGE_LINES,
    choose_pane,
    exit_status,
    history_answer_problem,
    last_page_end,
    launch_profile_problem,
    moved_up,
    page_problem,
    same_snapshot,
    send_refusal_problem,
    view_rows,
)
from mirror_host.client.conformance.suite import CHECKS, Check
from mirror_host.control import HistoryPage, PaneDescriptor, Representation

LEASE = uuid.UUID(int=1)
SNAPSHOT = uuid.UUID(int=2)


def _pane(n: int, *, busy: bool = False) -> PaneDescriptor:
    return PaneDescriptor(id=uuid.UUID(int=100 + n), title=f"pane {n}", directory="/", busy=busy)


# ---------------------------------------------------------------- panes


def test_the_first_free_pane_is_chosen() -> None:
    panes = [_pane(1, busy=True), _pane(2), _pane(3)]
    assert choose_pane(panes, None) == panes[1]
    assert choose_pane(panes, "3") == panes[2]
    assert choose_pane(panes, str(panes[0].id).lower()) == panes[0]
    assert choose_pane(panes, "9") == "no pane '9' in the host's list"


def test_with_every_pane_busy_the_first_is_returned_still_busy() -> None:
    panes = [_pane(1, busy=True), _pane(2, busy=True)]
    chosen = choose_pane(panes, None)
    assert isinstance(chosen, PaneDescriptor)
    assert chosen == panes[0] and chosen.busy  # the caller probes it


def test_no_panes_is_a_reason_not_a_pane() -> None:
    reason = choose_pane([], None)
    assert isinstance(reason, str) and "lists no panes" in reason


# ---------------------------------------------------------------- history


def _page(offset: int, count: int, *, total: int = 1000, captured_at: float = 1.5) -> HistoryPage:
    return HistoryPage(
        history_id=SNAPSHOT,
        offset=offset,
        lines=tuple(f"line {n}" for n in range(offset, offset + count)),
        total=total,
        subscription_id=LEASE,
        captured_at=captured_at,
        truncated=False,
    )


def test_a_page_must_end_where_asked_with_min_200_lines() -> None:
    assert page_problem(_page(800, 200), 1000, LEASE) is None
    assert page_problem(_page(0, 37), 37, LEASE) is None
    assert page_problem(_page(0, 0, total=0), 0, LEASE) is None  # an empty snapshot
    assert "contiguous" in (page_problem(_page(799, 200), 1000, LEASE) or "")
    assert "not 200" in (page_problem(_page(900, 100), 1000, LEASE) or "")
    assert "another subscription" in (page_problem(_page(800, 200), 1000, SNAPSHOT) or "")
    too_many = _page(0, PAGE_LINES + 1)
    assert "at most 200" in (page_problem(too_many, PAGE_LINES + 1, LEASE) or "")
    assert "finite" in (page_problem(_page(0, 5, captured_at=float("nan")), 5, LEASE) or "")


def test_a_later_page_must_keep_the_snapshot() -> None:
    first = _page(800, 200)
    assert same_snapshot(_page(600, 200), first) is None
    problem = same_snapshot(_page(600, 200, total=999, captured_at=2.0), first)
    assert problem is not None and "total 1000 → 999" in problem and "capturedAt" in problem


@pytest.mark.parametrize(
    ("offset", "end"), [(1, 1), (200, 200), (201, 1), (400, 200), (4321, 121), (4000, 200)]
)
def test_where_the_oldest_page_ends(offset: int, end: int) -> None:
    # Walking back from `offset` in 200-line steps reaches line 0 with a page ending here.
    assert last_page_end(offset) == end
    walked = offset
    while walked > PAGE_LINES:
        walked -= PAGE_LINES
    assert walked == end


def test_the_oldest_page_needs_a_line() -> None:
    with pytest.raises(ValueError):
        last_page_end(0)


# ---------------------------------------------------------------- scrolled views


def test_rows_are_trimmed_and_padded() -> None:
    assert view_rows("a  \nb\n", 4) == ["a", "b", "", ""]
    assert view_rows("a\nb\nc", 2) == ["a", "b"]


def test_a_view_moved_further_up_is_recognised() -> None:
    before = [f"{n}" for n in range(100, 124)]
    after = [f"{n}" for n in range(79, 103)]  # 21 rows further back
    assert moved_up(before, after) == 21
    assert moved_up(before, before) is None


def test_new_output_or_blank_screens_are_not_a_scroll() -> None:
    before = [f"{n}" for n in range(100, 124)]
    assert moved_up(before, [f"{n}" for n in range(103, 127)]) is None  # output scrolled it
    assert moved_up(before, ["changed", *before[1:]]) is None  # one row changed in place
    blank = [""] * 24
    assert moved_up(blank, ["x"] + [""] * 23) is None  # nothing shared that holds text
    same_row = ["y"] * 24
    assert moved_up(same_row, ["new"] + ["y"] * 23) is None  # one distinct row proves nothing


# ---------------------------------------------------------------- the run


def test_the_exit_status() -> None:
    passed = CheckResult("a", Status.PASSED, "", 0)
    failed = CheckResult("b", Status.FAILED, "x", 0)
    skipped = CheckResult("c", Status.SKIPPED, "y", 0)
    assert exit_status([passed, skipped]) == 0
    assert exit_status([passed, failed]) == 1
    assert exit_status([skipped]) == 1  # nothing ran at all
    assert exit_status([]) == 1


async def _nothing(ctx: object) -> str:
    return ""


def test_timeouts_grow_with_wait() -> None:
    check = Check("x", _nothing, base=5.0, waits=3.0)
    assert check.timeout(5.0) == 20.0
    assert check.timeout(30.0) == 95.0
    for check in CHECKS:
        assert check.timeout(60.0) - check.timeout(5.0) >= 55.0, check.name


# ---------------------------------------------------------------- Prowl's own apps


def test_command_capabilities_need_launch_profile() -> None:
    assert launch_profile_problem(("vt-v1", "text-v1")) is None  # no command service
    everything = ("launch-profile", "launch-shell", "agents-dispatch", "agent-input")
    assert launch_profile_problem(everything) is None
    problem = launch_profile_problem(("vt-v1", "agents-dispatch", "agent-input"))
    assert problem is not None
    assert problem.startswith("the host advertises agents-dispatch, agent-input but not")
    assert "send no command at all" in problem


def _send_error(code: str, message: str = "The command is empty.") -> dict[str, object]:
    return {"ok": False, "command": "send", "schema_version": "prowl.cli.send.v1",
            "error": {"code": code, "message": message}}  # fmt: skip


def test_an_empty_send_on_a_shell_send_host_is_a_refusal() -> None:
    assert send_refusal_problem(_send_error("INVALID_ARGUMENT")) is None
    assert send_refusal_problem(_send_error("SHELL_BUSY", "A job runs.")) is None
    for code in ("SEND_FAILED", "REMOTE_COMMAND_UNCONFIRMED", "DISPATCH_FAILED"):
        problem = send_refusal_problem(_send_error(code))
        assert problem is not None and code in problem and "maybe typed" in problem
    accepted = {"ok": True, "command": "send", "data": {}}
    assert "was not refused" in (send_refusal_problem(accepted) or "")
    remote = {**_send_error("REMOTE_COMMAND_REJECTED"), "command": "remote"}
    assert "not 'send'" in (send_refusal_problem(remote) or "")
    assert "code and message" in (send_refusal_problem(_send_error("INVALID_ARGUMENT", "")) or "")
    assert "code and message" in (
        send_refusal_problem({"ok": False, "command": "send", "error": "no"}) or ""
    )


def test_history_must_be_answered_before_android_gives_up() -> None:
    assert history_answer_problem(0.1, 20.0) is None
    assert history_answer_problem(8.0, 20.0) is None
    late = history_answer_problem(8.5, 20.0)
    assert late is not None and late.startswith("a new history snapshot was answered after 8.5 s")
    never = history_answer_problem(None, 20.0)
    assert never is not None and "answered not within 20 s" in never


def _scroll_ledger() -> FrameLedger:
    return FrameLedger(LEASE, Representation.TEXT, scroll_state=True)


def _text_frame(sequence: int, text: str = "x") -> FrameView:
    return FrameView(LEASE, sequence, Representation.TEXT, (80, 24, False, text))


def test_each_frame_needs_exactly_one_scroll_state_with_its_sequence() -> None:
    ledger = _scroll_ledger()
    assert ledger.scroll_state_message(1, LEASE) == []
    assert ledger.frame(_text_frame(1)) == []
    ledger.acknowledged(1)
    problems = ledger.frame(_text_frame(2, "y"))
    assert problems == [
        "frame 2 came without its `scrollState` (the lease opted in: Prowl's Android and "
        "Mac clients close the connection on it)"
    ]
    ledger.acknowledged(2)
    assert ledger.scroll_state_message(3, LEASE) == []
    assert ledger.scroll_state_message(3, LEASE) == [
        "two `scrollState`s (3, then 3) before one frame (Prowl's Android and Mac clients "
        "close the connection on it)"
    ]
    assert ledger.frame(_text_frame(3, "z")) == []
    ledger.acknowledged(3)
    ledger.scroll_state_message(5, LEASE)
    assert ledger.frame(_text_frame(4, "w")) == [
        "the `scrollState` before frame 4 carries sequence 5"
    ]


def test_a_scroll_state_the_lease_did_not_ask_for_is_a_problem() -> None:
    ledger = FrameLedger(LEASE, Representation.TEXT)
    assert ledger.scroll_state_message(1, uuid.UUID(int=9)) == [
        "a `scrollState` on a lease that did not opt in to scroll state",
        f"a `scrollState` names subscription {uuid.UUID(int=9)}, not the lease",
    ]
    assert ledger.frame(_text_frame(1)) == []  # frames without the opt-in need none
