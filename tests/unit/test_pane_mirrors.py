"""The refcounted watch every source uses (``panes/mirrors.py``), on a mock clock.

The sources' own tests and the contract suite (tests/integration/test_source_contract.py)
run it against real backends; these pin the cases a backend cannot be made to
hit on cue: the watcher starting a mirror going away while another waits, a
start failing under waiters, a pane gone while its mirror started, a superseded
mirror, a feed that fails and recovers.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from uuid import UUID

import pytest
import trio
import trio.testing

from mirror_host.errors import PaneNotFound, PaneSourceError
from mirror_host.panes.mirrors import HICCUP_SECONDS, MirrorTable, PaneMirror

pytestmark = pytest.mark.timeout(30)


@dataclass(eq=False)
class _Mirror(PaneMirror):
    reads: int = 0


@dataclass
class _Backend:
    """Hooks that record what the table asked for; a start can be held or made to fail."""

    listed: set[UUID] = field(default_factory=set)
    start_seconds: float = 0.0
    start_failure: PaneSourceError | None = None
    vanish_during_start: bool = False
    created: list[_Mirror] = field(default_factory=list)
    stopped: list[_Mirror] = field(default_factory=list)
    feed_failures: int = 0
    fed: list[float] = field(default_factory=list)

    def create(self, pane_id: UUID) -> _Mirror:
        if pane_id not in self.listed:
            raise PaneNotFound(f"pane {pane_id} is not listed")
        mirror = _Mirror(uuid=pane_id)
        self.created.append(mirror)
        return mirror

    async def start(self, mirror: _Mirror) -> None:
        await trio.sleep(self.start_seconds)
        if self.vanish_during_start:
            mirror.vanish()
        if self.start_failure is not None:
            raise self.start_failure
        mirror.reads += 1

    async def stop(self, mirror: _Mirror) -> None:
        await trio.sleep(0.1)  # shielded by the table: a stop is never cut short
        self.stopped.append(mirror)

    async def feed(self, mirror: _Mirror) -> None:
        await trio.sleep(0.5)
        self.fed.append(trio.current_time())
        if self.feed_failures:
            self.feed_failures -= 1
            raise PaneSourceError("the backend hiccuped")
        mirror.fed()

    def table(self, *, feed: bool = False) -> MirrorTable[_Mirror]:
        return MirrorTable(
            "test pane",
            create=self.create,
            start=self.start,
            stop=self.stop,
            feed=self.feed if feed else None,
        )


def _noop() -> None:
    pass


async def test_the_last_watcher_stops_the_one_mirror(
    autojump_clock: trio.testing.MockClock,
) -> None:
    backend = _Backend(start_seconds=1.0)
    pane = uuid.uuid4()
    backend.listed.add(pane)
    table = backend.table()
    async with table.watch(pane, _noop), table.watch(pane, _noop):
        assert len(table) == 1 and table.starts == 1 and len(backend.created) == 1
        assert table.require(pane) is backend.created[0]
    assert len(table) == 0 and backend.stopped == backend.created
    with pytest.raises(PaneNotFound):
        table.require(pane)


async def test_a_watcher_joining_a_slow_start_waits_for_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    backend = _Backend(start_seconds=5.0)
    pane = uuid.uuid4()
    backend.listed.add(pane)
    table = backend.table()
    entered: list[float] = []
    release = trio.Event()

    async def watcher() -> None:
        async with table.watch(pane, _noop):
            entered.append(trio.current_time())
            await release.wait()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(watcher)
        await trio.sleep(1.0)
        nursery.start_soon(watcher)
        await trio.sleep(1.0)
        assert entered == [] and table.starts == 1  # the second joined the first's start
        await trio.sleep(4.0)
        assert entered == [5.0, 5.0]
        assert backend.created[0].reads == 1 and len(backend.created) == 1
        release.set()
    assert backend.stopped == backend.created


async def test_when_the_starting_watcher_leaves_a_waiting_one_starts_anew(
    autojump_clock: trio.testing.MockClock,
) -> None:
    backend = _Backend(start_seconds=5.0)
    pane = uuid.uuid4()
    backend.listed.add(pane)
    table = backend.table()
    entered = trio.Event()
    release = trio.Event()

    async def second() -> None:
        async with table.watch(pane, _noop):
            entered.set()
            await release.wait()

    async def first() -> None:
        with trio.move_on_after(2.0):  # goes away mid-start
            async with table.watch(pane, _noop):
                pytest.fail("the start cannot have finished")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(first)
        await trio.sleep(1.0)
        nursery.start_soon(second)  # joins the first's start, then is left with it
        await entered.wait()
        assert trio.current_time() == pytest.approx(2.1 + 5.0)
        assert table.starts == 2 and len(backend.created) == 2
        assert backend.stopped == [backend.created[0]]  # the abandoned one was undone
        assert table.require(pane) is backend.created[1]
        release.set()
    assert backend.stopped == backend.created


async def test_a_failed_start_fails_the_watchers_that_waited_for_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    backend = _Backend(start_seconds=3.0, start_failure=PaneSourceError("read refused"))
    pane = uuid.uuid4()
    backend.listed.add(pane)
    table = backend.table()
    failures: list[BaseException] = []

    async def watcher() -> None:
        try:
            async with table.watch(pane, _noop):
                pytest.fail("a failed start is never watched")
        except PaneSourceError as exc:
            failures.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(watcher)
        await trio.sleep(1.0)
        nursery.start_soon(watcher)
    assert [str(exc) for exc in failures] == ["read refused", "read refused"]
    assert not any(isinstance(exc, PaneNotFound) for exc in failures)
    assert table.starts == 1 and backend.stopped == backend.created and len(table) == 0


async def test_a_pane_gone_during_the_start_is_not_found(
    autojump_clock: trio.testing.MockClock,
) -> None:
    backend = _Backend(start_seconds=1.0, vanish_during_start=True)
    pane = uuid.uuid4()
    backend.listed.add(pane)
    table = backend.table()
    with pytest.raises(PaneNotFound):
        async with table.watch(pane, _noop):
            pass
    with pytest.raises(PaneNotFound):
        async with table.watch(uuid.uuid4(), _noop):  # never listed: nothing created
            pass
    assert len(backend.created) == 1 and backend.stopped == backend.created


async def test_a_vanished_mirror_tells_its_watchers_and_the_next_watch_starts_anew(
    autojump_clock: trio.testing.MockClock,
) -> None:
    backend = _Backend()
    pane = uuid.uuid4()
    backend.listed.add(pane)
    table = backend.table()
    told: list[str] = []
    async with table.watch(pane, lambda: told.append("old")):
        old = table.require(pane)
        old.vanish()
        assert told == ["old"] and table.get(pane) is old and table.live(pane) is None
        # The pane came back (Herdr listed it again): a new watcher gets a new mirror,
        # and the old one's end does not stop it.
        async with table.watch(pane, lambda: told.append("new")):
            new = table.require(pane)
            assert new is not old and table.starts == 2
        assert backend.stopped == [new]
    assert backend.stopped == [new]  # the superseded mirror was not stopped again
    assert len(table) == 0


async def test_a_feed_runs_until_the_mirror_stops_and_its_hiccups_are_said_once(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="mirror_host.panes.mirrors")
    backend = _Backend(feed_failures=3)
    pane = uuid.uuid4()
    backend.listed.add(pane)
    table = backend.table(feed=True)
    with pytest.raises(PaneSourceError, match="not running"):
        async with table.watch(pane, _noop):
            pass
    async with trio.open_nursery() as nursery:
        await nursery.start(table.run)
        async with table.watch(pane, _noop):
            await trio.sleep(10.0)
        fed = len(backend.fed)
        await trio.sleep(5.0)
        assert len(backend.fed) == fed  # stopped with its last watcher
        nursery.cancel_scope.cancel()
    # Three failures, each followed by the hiccup pause, then one feed every 0.5 s.
    gaps = [round(b - a, 3) for a, b in zip(backend.fed, backend.fed[1:], strict=False)]
    assert gaps[:3] == [0.5 + HICCUP_SECONDS] * 3 and set(gaps[3:]) == {0.5}
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "the backend hiccuped" in warnings[0].getMessage()
    recovered = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert recovered == [f"mirroring pane {pane} again"]
