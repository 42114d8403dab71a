"""The one reconnect loop of the tmux, Herdr and agliteterm sources (``panes/follow.py``),
on a mock clock: capped backoff, an outage said once, a fresh start after it; and the
one way the three say where following stands (``follow_health``)."""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing

from mirror_host.errors import PaneSourceError
from mirror_host.panes.follow import MAX_BACKOFF_SECONDS, Follower, follow_health

pytestmark = pytest.mark.timeout(30)


class _Backend:
    """Fails while ``down``; once up, answers (``reached``) and follows until told to fail."""

    def __init__(self, follower: Follower) -> None:
        self.follower = follower
        self.down = True
        self.attempts: list[float] = []
        self.news: list[bool] = []
        self.drop = trio.Event()
        #: Renewed by every attempt, as the sources renew theirs (tmux's relist).
        self.wake = trio.Event()

    async def attempt(self) -> None:
        self.wake = trio.Event()
        self.attempts.append(trio.current_time())
        if self.down:
            raise PaneSourceError(f"backend down (attempt {len(self.attempts)})")
        self.news.append(self.follower.reached())
        self.drop = trio.Event()
        await self.drop.wait()
        raise PaneSourceError("backend went away")


async def test_an_outage_is_retried_with_capped_backoff_and_said_once(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mirror_host.panes.follow")
    follower = Follower("backend at /tmp/x")
    backend = _Backend(follower)
    failures: list[str | None] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            lambda: follower.run(
                backend.attempt, on_failure=lambda: failures.append(follower.problem)
            )
        )
        await trio.sleep(200.0)
        waits = [b - a for a, b in zip(backend.attempts, backend.attempts[1:], strict=False)]
        assert waits[:6] == [1.0, 2.0, 4.0, 8.0, 16.0, MAX_BACKOFF_SECONDS]
        assert set(waits[5:]) == {MAX_BACKOFF_SECONDS}
        assert follower.in_outage and follower.problem == f"backend down (attempt {len(waits) + 1})"
        assert len(failures) == len(backend.attempts)  # on_failure after every one
        warnings = [r.getMessage() for r in caplog.records]
        assert warnings == [
            f"backend at /tmp/x: backend down (attempt 1); retrying (up to every "
            f"{MAX_BACKOFF_SECONDS:g} s)"
        ]

        # Back: said by the source (news), the problem cleared, the backoff reset.
        backend.down = False
        await trio.sleep(MAX_BACKOFF_SECONDS)
        assert backend.news == [True] and follower.problem is None and not follower.in_outage
        # It goes away again: the new outage is said, and retried from 1 s.
        backend.down = True
        backend.drop.set()
        dropped = trio.current_time()
        await trio.sleep(10.0)
        assert len(caplog.records) == 2
        assert "backend went away" in caplog.records[-1].getMessage()
        assert [at - dropped for at in backend.attempts[-3:]] == [1.0, 3.0, 7.0]
        nursery.cancel_scope.cancel()


async def test_a_wake_cuts_the_wait_short(autojump_clock: trio.testing.MockClock) -> None:
    follower = Follower()
    backend = _Backend(follower)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: follower.run(backend.attempt, wake=lambda: backend.wake))
        await trio.sleep(3.5)  # attempts at 0, 1, 3: now waiting 4 s
        assert backend.attempts == [0.0, 1.0, 3.0]
        backend.wake.set()
        await trio.sleep(0.01)
        assert backend.attempts == [0.0, 1.0, 3.0, 3.5]
        await trio.sleep(8.0)  # and the backoff goes on doubling: the next 8 s later
        assert backend.attempts == [0.0, 1.0, 3.0, 3.5, 11.5]
        nursery.cancel_scope.cancel()


async def test_the_first_answer_is_news_and_later_ones_are_not() -> None:
    follower = Follower()
    assert follower.problem is None and not follower.in_outage
    assert follower.reached() is True
    assert follower.reached() is False


async def test_an_os_error_from_an_attempt_is_an_outage_too(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Found in review: an OSError (EMFILE opening a socket or starting a process)
    # that an attempt did not map went through the Follower into the host's nursery.
    follower = Follower("backend")
    attempts: list[float] = []
    answered = trio.Event()

    async def attempt() -> None:
        attempts.append(trio.current_time())
        if len(attempts) < 3:
            raise OSError(24, "Too many open files")
        follower.reached()
        answered.set()
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: follower.run(attempt))
        await trio.sleep(0.5)
        assert follower.in_outage and follower.problem == "[Errno 24] Too many open files"
        await answered.wait()
        start = attempts[0]
        assert attempts == [start, start + 1.0, start + 3.0]  # waits of 1 s, then 2 s
        assert follower.problem is None and not follower.in_outage
        nursery.cancel_scope.cancel()


def _never() -> str:
    raise AssertionError("the following detail is asked only while following")


def test_a_problem_is_unreachable_before_anything_else() -> None:
    health = follow_health("herdr", "no such socket", waiting="connecting to /s", following=_never)
    assert health == {"kind": "herdr", "state": "unreachable", "detail": "no such socket; retrying"}
    tmux = follow_health(
        "tmux", "gone", waiting=None, following=_never, retrying="retrying (up to every 30 s)"
    )
    assert tmux["detail"] == "gone; retrying (up to every 30 s)"


def test_waiting_is_starting_and_then_following_says_its_own_words() -> None:
    starting = follow_health("agliteterm", None, waiting="connecting to unix:/a", following=_never)
    assert starting == {
        "kind": "agliteterm",
        "state": "starting",
        "detail": "connecting to unix:/a",
    }
    following = follow_health("tmux", None, waiting=None, following=lambda: "-L work")
    assert following == {"kind": "tmux", "state": "following", "detail": "-L work"}
