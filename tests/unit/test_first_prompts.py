"""First prompts that outlive their create's answer, and host stop (prowl-host.md §8). Pure
Trio: the work is a scripted coroutine, the clock virtual."""

from __future__ import annotations

from uuid import uuid4

import pytest
import trio
import trio.testing

from mirror_host.commands.first_prompt import ANSWER_SECONDS, FirstPrompts, Pending
from mirror_host.control.swiftjson import JSONValue

pytestmark = pytest.mark.timeout(10)


async def test_host_stop_cancels_a_first_prompt_still_waiting_for_its_agent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    prompts = FirstPrompts()
    typed: list[str] = []

    async def work() -> JSONValue:
        await trio.sleep(3600)  # the agent is not ready yet
        typed.append("fix it")  # what a delivery would type
        return {"ok": True}

    async with trio.open_nursery() as nursery:
        nursery.start_soon(prompts.run)
        await trio.testing.wait_all_tasks_blocked()
        answer = await prompts.deliver(uuid4(), "fix it", work)
        assert isinstance(answer, Pending)  # the create was answered at ANSWER_SECONDS
        assert trio.current_time() >= ANSWER_SECONDS
        prompts.stop()
        await trio.sleep(7200)  # long past the agent's readiness
        assert typed == []  # cancelled: nothing typed after the host stopped
        nursery.cancel_scope.cancel()


async def test_a_first_prompt_in_time_is_the_creates_own_result(
    autojump_clock: trio.testing.MockClock,
) -> None:
    prompts = FirstPrompts()

    async def work() -> JSONValue:
        await trio.sleep(1)
        return {"ok": True}

    async with trio.open_nursery() as nursery:
        nursery.start_soon(prompts.run)
        await trio.testing.wait_all_tasks_blocked()
        assert await prompts.deliver(uuid4(), "fix it", work) == {"ok": True}
        prompts.stop()  # nothing under way: nothing to cancel
        nursery.cancel_scope.cancel()
