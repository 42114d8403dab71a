"""The ``PaneSource`` contract, run against every source (``source_harness.SOURCES``).

What the host relies on of any source, checked the same way for each: listing,
the refcounted watch (one mirror however many watch, none once the last left,
never two for one pane even when they arrive during a slow first read), a pane
going away ending its watchers, input coming back in captures, scroll bounds,
``health()`` and ``statistics()``, and a backend or a source that stops.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from uuid import UUID

import pytest
import trio

from mirror_host.capture.values import Capability, CaptureOptions, TextCapture, VTCapture
from mirror_host.control import Representation, ScrollDirection
from mirror_host.errors import PaneNotFound
from tests.integration.source_harness import (
    SOURCES,
    SourceUnderTest,
    running_source,
    wait_until,
)

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(params=SOURCES)
async def under_test(
    request: pytest.FixtureRequest, state_dir: Path
) -> AsyncIterator[SourceUnderTest]:
    async with running_source(request.param, state_dir) as running:
        yield running


class Changes:
    """A watcher's change callback that counts its calls."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> None:
        self.count += 1


async def text_of(under_test: SourceUnderTest, pane_id: UUID) -> str:
    capture = await under_test.source.capture(pane_id, Representation.TEXT)
    assert isinstance(capture, TextCapture)
    return capture.text


async def shows(
    under_test: SourceUnderTest, pane_id: UUID, word: str, *, timeout: float = 10
) -> None:
    """Wait until a capture of the (watched) pane shows ``word``."""
    with trio.fail_after(timeout):
        while word not in await text_of(under_test, pane_id):
            await trio.sleep(0.05)


async def type_line(under_test: SourceUnderTest, pane_id: UUID, text: str) -> None:
    await under_test.source.write(pane_id, text.encode() + under_test.line_end)


def watching(under_test: SourceUnderTest) -> int:
    count = under_test.source.statistics()["watching"]
    assert isinstance(count, int)
    return count


# ---------------------------------------------------------------- listing


async def test_listing_and_an_unknown_pane(under_test: SourceUnderTest) -> None:
    source = under_test.source
    pane = await under_test.add_pane()
    listed = await source.list_panes()
    assert pane in [info.id for info in listed]
    assert all(info.title for info in listed)
    assert source.is_listed(pane)
    assert watching(under_test) == 0  # listing mirrors nothing
    stranger = uuid.uuid4()
    assert not source.is_listed(stranger)
    with pytest.raises(PaneNotFound):
        async with source.watch(stranger, Changes()):
            pass
    with pytest.raises(PaneNotFound):
        await source.write(stranger, b"x")
    assert watching(under_test) == 0


# ---------------------------------------------------------------- watching


async def test_watchers_share_one_mirror_which_stops_after_the_last(
    under_test: SourceUnderTest,
) -> None:
    source = under_test.source
    pane = await under_test.add_pane()
    first, second = Changes(), Changes()
    starts = source.mirrors.starts
    async with source.watch(pane, first):
        async with source.watch(pane, second):
            assert watching(under_test) == 1
            assert source.mirrors.starts == starts + 1
            before = first.count, second.count
            await type_line(under_test, pane, "both-see-1")
            await shows(under_test, pane, "both-see-1")
            await wait_until(lambda: (first.count, second.count) > before)
            assert first.count > before[0] and second.count > before[1]
        # The first watcher still has the mirror, and is still told.
        assert watching(under_test) == 1
        told = first.count
        await type_line(under_test, pane, "one-sees-2")
        await shows(under_test, pane, "one-sees-2")
        await wait_until(lambda: first.count > told)
    assert watching(under_test) == 0
    assert source.is_listed(pane)  # unwatched, still listed
    async with source.watch(pane, first):  # watched again: a new mirror
        assert source.mirrors.starts == starts + 2
        await shows(under_test, pane, "one-sees-2")
    assert watching(under_test) == 0


async def test_watchers_arriving_during_a_slow_first_read_start_one_mirror(
    under_test: SourceUnderTest,
) -> None:
    source = under_test.source
    pane = await under_test.add_pane()
    starts = source.mirrors.starts
    entered: list[str] = []
    done = trio.Event()

    async def watcher(name: str) -> None:
        async with source.watch(pane, Changes()):
            entered.append(name)
            await done.wait()

    async with trio.open_nursery() as nursery:
        under_test.hold_first_read()
        nursery.start_soon(watcher, "first")
        await wait_until(lambda: source.mirrors.starts == starts + 1)
        counted = under_test.reads_started(pane) is not None
        if counted:
            await wait_until(lambda: (under_test.reads_started(pane) or 0) >= 1)
        nursery.start_soon(watcher, "second")
        await trio.sleep(0.3)  # the second arrives while the first read is held
        if under_test.reads_first_screen:
            assert entered == []  # both wait for the one read
        if counted:
            assert under_test.reads_started(pane) == 1  # a second mirror would read again
        under_test.release_first_read()
        await wait_until(lambda: len(entered) == 2, timeout=20)
        assert source.mirrors.starts == starts + 1
        assert watching(under_test) == 1
        await type_line(under_test, pane, "after-the-race")
        await shows(under_test, pane, "after-the-race")
        done.set()
    assert watching(under_test) == 0


async def test_a_pane_going_away_ends_its_watchers(under_test: SourceUnderTest) -> None:
    source = under_test.source
    pane = await under_test.add_pane()
    changes = Changes()
    async with source.watch(pane, changes):
        await type_line(under_test, pane, "still-here")
        await shows(under_test, pane, "still-here")
        told = changes.count
        await under_test.close_pane(pane)
        # The watcher is told, and finds the pane gone at its next look.
        await wait_until(lambda: changes.count > told and not source.is_listed(pane), timeout=20)
        with pytest.raises(PaneNotFound):
            await source.capture(pane, Representation.VT)
        with pytest.raises(PaneNotFound):
            async with source.watch(pane, Changes()):
                pass
    assert watching(under_test) == 0
    assert pane not in [info.id for info in await source.list_panes()]


# ---------------------------------------------------------------- reading and typing


async def test_input_comes_back_in_both_representations(under_test: SourceUnderTest) -> None:
    source = under_test.source
    pane = await under_test.add_pane()
    async with source.watch(pane, Changes()):
        await type_line(under_test, pane, "typed-word-7")
        await shows(under_test, pane, "typed-word-7")
        vt = await source.capture(pane, Representation.VT)
        assert isinstance(vt, VTCapture)
        assert vt.columns > 0 and vt.rows > 0 and vt.data
        text = await source.capture(pane, Representation.TEXT)
        assert isinstance(text, TextCapture) and "typed-word-7" in text.text
        assert vt.scroll_bounds is None and text.scroll_bounds is None  # not asked for


async def test_scroll_bounds_follow_a_scroll_up_and_back(under_test: SourceUnderTest) -> None:
    source = under_test.source
    pane = await under_test.add_pane()
    assert Capability.SCROLL_STATE in source.capabilities

    async def at_bottom() -> bool | None:
        capture = await source.capture(
            pane, Representation.VT, options=CaptureOptions(scroll_bounds=True)
        )
        assert capture.scroll_bounds is not None
        return capture.scroll_bounds.at_bottom

    async def until_at_bottom(expected: bool) -> None:
        with trio.fail_after(10):
            while await at_bottom() is not expected:
                await trio.sleep(0.05)

    async with source.watch(pane, Changes()):
        # A new pane is at its live bottom, or cannot tell yet (Herdr: no scrollback).
        assert await at_bottom() is not False
        lines = "".join(f"history-{n}\n" for n in range(80))
        await source.write(pane, lines.encode().replace(b"\n", under_test.line_end))
        await type_line(under_test, pane, "end-of-history")
        await shows(under_test, pane, "end-of-history")
        if Capability.REMOTE_SCROLL not in source.capabilities:
            return
        await source.scroll(pane, ScrollDirection.UP)
        if under_test.pages_history:
            await until_at_bottom(False)
        await source.scroll(pane, ScrollDirection.DOWN)
        await until_at_bottom(True)


# ---------------------------------------------------------------- status


async def test_health_and_statistics_have_their_shape(under_test: SourceUnderTest) -> None:
    source = under_test.source
    health = source.health()
    assert set(health) == {"kind", "state", "detail"}
    assert all(isinstance(value, str) and value for value in health.values())
    assert health["state"] == under_test.healthy
    statistics = source.statistics()
    json.dumps(statistics)  # it goes into `mirror-host status --json` as it is
    assert watching(under_test) == 0
    pane = await under_test.add_pane()
    async with source.watch(pane, Changes()):
        assert watching(under_test) == 1
        assert json.dumps(source.statistics())


# ---------------------------------------------------------------- stopping


async def test_a_backend_that_stops_is_reported_and_the_source_goes_on(
    under_test: SourceUnderTest,
) -> None:
    if not under_test.has_backend:
        pytest.skip("this source has no backend of its own")
    source = under_test.source
    await under_test.add_pane()
    await under_test.stop_backend()
    await wait_until(lambda: source.health()["state"] != under_test.healthy, timeout=20)
    assert source.health()["detail"]
    await trio.sleep(0.5)
    assert not under_test.run_ended.is_set()  # retrying (or waiting), not crashed
    json.dumps(source.statistics())


async def test_a_source_that_stops_lets_its_watchers_go(under_test: SourceUnderTest) -> None:
    source = under_test.source
    pane = await under_test.add_pane()
    with trio.fail_after(30):  # leaving the watch after the stop must not hang either
        async with source.watch(pane, Changes()):
            await type_line(under_test, pane, "before-the-stop")
            await shows(under_test, pane, "before-the-stop")
            under_test.run_scope.cancel()
            with trio.fail_after(15):
                await under_test.run_ended.wait()
            assert set(source.health()) == {"kind", "state", "detail"}  # still answers
    assert watching(under_test) == 0
