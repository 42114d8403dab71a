"""The fake Herdr's slow-answer knob: a delay holds one request, never the fake."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from mirror_host.panes.herdr.client import HerdrClient
from tests.fakes.herdr_fake import FakeHerdr

pytestmark = pytest.mark.timeout(30)


async def test_a_delayed_request_holds_only_its_own_connection(
    state_dir: Path, mock_clock: trio.testing.MockClock
) -> None:
    fake = FakeHerdr(state_dir / "herdr.sock")
    workspace = fake.add_workspace("api")
    fake.delay_method("pane.list", 10.0, when=lambda params: params.get("workspace_id") is not None)
    client = HerdrClient(state_dir / "herdr.sock")
    answers: list[tuple[float, dict[str, Any]]] = []
    answered = trio.Event()

    async def slow_list() -> None:
        result = await client.call("pane.list", {"workspace_id": workspace})
        answers.append((trio.current_time(), result))
        answered.set()

    async with trio.open_nursery() as nursery:
        await nursery.start(fake.serve)
        start = trio.current_time()
        nursery.start_soon(slow_list)
        await fake.wait_held("pane.list")
        # Everything else is answered meanwhile, with no time passing at all:
        # the same method without the matching params included.
        assert (await client.call("ping"))["type"] == "pong"
        assert (await client.call("pane.list"))["type"] == "pane_list"
        assert (await client.call("session.snapshot"))["type"] == "session_snapshot"
        assert trio.current_time() == start
        assert fake.holding("pane.list") == 1 and answers == []

        mock_clock.jump(9.5)
        await trio.testing.wait_all_tasks_blocked()
        assert answers == [] and fake.holding("pane.list") == 1
        mock_clock.jump(1.0)
        await answered.wait()
        assert answers[0][0] == start + 10.5  # answered once the clock passed 10 s
        assert answers[0][1]["type"] == "pane_list"
        assert fake.holding("pane.list") == 0
        await fake.stop()


async def test_clearing_a_delay_releases_what_it_holds(
    state_dir: Path, mock_clock: trio.testing.MockClock
) -> None:
    fake = FakeHerdr(state_dir / "herdr.sock")
    fake.delay_method("session.snapshot", 1000.0)
    fake.delay_method("ping", 1000.0)
    client = HerdrClient(state_dir / "herdr.sock")
    answered: dict[str, trio.Event] = {"session.snapshot": trio.Event(), "ping": trio.Event()}

    async def call(method: str) -> None:
        await client.call(method)
        answered[method].set()

    async with trio.open_nursery() as nursery:
        await nursery.start(fake.serve)
        start = trio.current_time()
        nursery.start_soon(call, "session.snapshot")
        nursery.start_soon(call, "ping")
        await fake.wait_held("session.snapshot")
        await fake.wait_held("ping")
        fake.clear_delay("session.snapshot")
        await answered["session.snapshot"].wait()
        # Released at once and no longer delayed, while the other method's delay stays.
        assert (await client.call("session.snapshot"))["type"] == "session_snapshot"
        assert not answered["ping"].is_set() and fake.holding("ping") == 1
        fake.clear_delay()  # every method
        await answered["ping"].wait()
        assert (await client.call("ping"))["type"] == "pong"
        assert trio.current_time() == start
        await fake.stop()


@pytest.mark.parametrize("stage", ["request", "answer"])
async def test_the_stage_decides_when_the_request_is_handled(
    state_dir: Path, mock_clock: trio.testing.MockClock, stage: str
) -> None:
    fake = FakeHerdr(state_dir / "herdr.sock")
    fake.add_workspace("before")
    fake.delay_method("workspace.list", 5.0, stage=stage)
    client = HerdrClient(state_dir / "herdr.sock")
    labels: list[str] = []
    answered = trio.Event()

    async def list_workspaces() -> None:
        result = await client.call("workspace.list")
        labels.extend(w["label"] for w in result["workspaces"])
        answered.set()

    async with trio.open_nursery() as nursery:
        await nursery.start(fake.serve)
        nursery.start_soon(list_workspaces)
        await fake.wait_held("workspace.list")
        fake.add_workspace("while held")
        mock_clock.jump(5.0)
        await answered.wait()
        # Held before handling, it sees the session as it is when let go; held
        # after, as it was when it arrived.
        assert labels == (["before", "while held"] if stage == "request" else ["before"])
        await fake.stop()


def test_streams_cannot_hold_their_answer(state_dir: Path) -> None:
    fake = FakeHerdr(state_dir / "herdr.sock")
    with pytest.raises(ValueError, match="streams"):
        fake.delay_method("events.subscribe", 1.0, stage="answer")
