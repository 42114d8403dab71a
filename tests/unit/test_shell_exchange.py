"""The host's side of handing a command line to a shell: the state machine, no files."""

from __future__ import annotations

import pytest

from mirror_host.shell.exchange import (
    ANSWER_SECONDS,
    CANCELLED,
    POLL_SECONDS,
    SETTLE_SECONDS,
    Cancel,
    Done,
    Exchange,
    Outcome,
    Wait,
    answer_name,
    encode_request,
    is_request_id,
    registration_name,
    request_expiry,
    request_name,
)

ID = "0123456789abcdef0123456789abcdef"
TEXT = "  make test  "


def test_names_and_the_request_file() -> None:
    assert request_name(42) == "42.request"
    assert answer_name(42, ID) == f"42.{ID}.answer"
    assert registration_name(42) == "42.prompt"
    assert encode_request(ID, "echo ünï 👋", 1_700_000_005) == (
        f"{ID}\n1700000005\necho ünï 👋\n".encode()
    )
    assert request_expiry(1_700_000_000.2) == 1_700_000_006  # 5 s on, in whole seconds
    assert is_request_id(ID) and not is_request_id(ID.upper()) and not is_request_id("../x")
    for bad_id, text in (("../../etc", "ls"), (ID, "ls\nrm"), (ID, "ls\r"), (ID, "a\0b")):
        with pytest.raises(ValueError):
            encode_request(bad_id, text, 0)


def test_waits_between_looks_until_the_shell_answers() -> None:
    exchange = Exchange(TEXT, 100.0)
    assert exchange.observe(100.0, None) == Wait(100.0 + POLL_SECONDS)
    assert exchange.observe(100.5, b"") == Wait(100.5 + POLL_SECONDS)  # created, not written
    assert exchange.observe(100.6, b"loaded\n  make") == Wait(100.6 + POLL_SECONDS)
    assert exchange.observe(100.7, f"loaded\n{TEXT}\n".encode()) == Done(Outcome.RAN)
    assert exchange.done
    with pytest.raises(RuntimeError):
        exchange.observe(100.8, None)


def test_the_last_wait_ends_at_the_deadline() -> None:
    exchange = Exchange(TEXT, 0.0)
    assert exchange.observe(ANSWER_SECONDS - 0.001, None) == Wait(ANSWER_SECONDS)


@pytest.mark.parametrize(
    ("answer", "outcome"),
    [
        (b"refused line\n", Outcome.LINE_HAS_TEXT),
        (b"refused prompt\n", Outcome.NOT_AT_PROMPT),
        (b"refused abbr\n", Outcome.ABBREVIATIONS),
        (b"loaded\nmake tset\n", Outcome.UNCERTAIN),  # not what was sent
        (b"loaded\n\xff\n", Outcome.UNCERTAIN),
        (b"nonsense\n", Outcome.UNCERTAIN),
    ],
)
def test_each_answer_has_its_outcome(answer: bytes, outcome: Outcome) -> None:
    done = Exchange(TEXT, 0.0).observe(0.1, answer)
    assert isinstance(done, Done) and done.outcome is outcome


def test_no_answer_by_the_deadline_cancels_and_a_cancel_that_wins_means_nothing_ran() -> None:
    exchange = Exchange(TEXT, 0.0)
    assert exchange.observe(ANSWER_SECONDS, None) == Cancel(CANCELLED)
    assert exchange.cancel_result(ANSWER_SECONDS, True, None) == Done(Outcome.NOT_TAKEN)


def test_a_cancel_that_loses_reads_the_shells_answer() -> None:
    ran = Exchange(TEXT, 0.0)
    assert isinstance(ran.observe(ANSWER_SECONDS, None), Cancel)
    assert ran.cancel_result(2.0, False, f"loaded\n{TEXT}\n".encode()) == Done(Outcome.RAN)
    # The shell created its answer but had not written it yet: a little longer.
    late = Exchange(TEXT, 0.0)
    assert isinstance(late.observe(ANSWER_SECONDS, None), Cancel)
    assert late.cancel_result(2.0, False, b"") == Wait(2.0 + POLL_SECONDS)
    assert late.observe(2.1, b"refused line\n") == Done(Outcome.LINE_HAS_TEXT)
    # … and never finished it: the shell may have acted.
    stuck = Exchange(TEXT, 0.0)
    assert isinstance(stuck.observe(ANSWER_SECONDS, None), Cancel)
    assert isinstance(stuck.cancel_result(2.0, False, None), Wait)
    done = stuck.observe(2.0 + SETTLE_SECONDS, b"load")
    assert isinstance(done, Done) and done.outcome is Outcome.UNCERTAIN


def test_an_answer_half_written_at_the_deadline_gets_the_settle_time() -> None:
    # The shell created its answer just as the time ran out: it decided (and may be
    # running the command), so it may finish writing, as after a cancel it won.
    finished = Exchange(TEXT, 0.0)
    assert finished.observe(ANSWER_SECONDS, b"loaded\nma") == Wait(ANSWER_SECONDS + POLL_SECONDS)
    assert finished.observe(ANSWER_SECONDS + 0.1, f"loaded\n{TEXT}\n".encode()) == Done(Outcome.RAN)
    # … and one never finished is uncertain: the shell may have acted.
    stuck = Exchange(TEXT, 0.0)
    assert isinstance(stuck.observe(ANSWER_SECONDS, b"loaded\nma"), Wait)
    done = stuck.observe(ANSWER_SECONDS + SETTLE_SECONDS, b"loaded\nma")
    assert isinstance(done, Done) and done.outcome is Outcome.UNCERTAIN


def test_cancel_result_only_after_a_cancel() -> None:
    exchange = Exchange(TEXT, 0.0)
    assert isinstance(exchange.observe(ANSWER_SECONDS, None), Cancel)
    exchange.cancel_result(2.0, True, None)
    with pytest.raises(RuntimeError):
        exchange.cancel_result(2.0, True, None)


def test_a_trigger_that_may_not_have_arrived_cancels_at_once() -> None:
    exchange = Exchange(TEXT, 5.0, answer_seconds=0.0)
    assert exchange.observe(5.0, None) == Cancel(CANCELLED)
