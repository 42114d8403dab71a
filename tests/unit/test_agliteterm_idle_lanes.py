"""The agliteterm source closes idle panes' lanes while other tasks change its tables.

A lane's close awaits; meanwhile a one-off call may start on another expired
pane, or a new tree (``_reconcile``) may drop one. Every interleaving here is
forced at the close of the first pane's first lane, on Trio's virtual clock.
"""

from __future__ import annotations

from contextlib import AsyncExitStack

import pytest
import trio
import trio.testing

from mirror_host.panes.agliteterm.protocol import SessionPane
from mirror_host.panes.agliteterm.source import PANE_LANES, AgliteSource

pytestmark = pytest.mark.timeout(10)

IDLE = 5.0


class _NoConnections:
    """A transport the test never reaches: no lane is opened, only closed."""

    endpoint = "unix:/nonexistent"

    async def connect(self) -> trio.abc.Stream:
        raise AssertionError("no lane is opened in these tests")


def _pane(pane_id: str) -> SessionPane:
    return SessionPane(
        pane_id=pane_id, session_id=pane_id, name=pane_id, workspace_id="w", workspace_name="w"
    )


async def test_tables_changed_while_a_lane_closes(autojump_clock: trio.testing.MockClock) -> None:
    source = AgliteSource(_NoConnections(), idle_lane_seconds=IDLE)
    closed: list[tuple[float, str]] = []
    real_close = source.client.close_lane
    busy = AsyncExitStack()

    async def close_lane(name: str) -> None:
        await trio.lowlevel.checkpoint()  # a real close awaits its connection
        if not closed:  # first close ("pane:a"): the other tasks run now
            source._idle_since.pop("b", None)  # a new tree dropped pane b (_reconcile)
            await busy.enter_async_context(source._one_off(_pane("c")))  # a call on c starts
            async with source._one_off(_pane("d")):  # a call on d starts and ends
                pass
        closed.append((trio.current_time(), name))
        await real_close(name)

    source.client.close_lane = close_lane  # type: ignore[method-assign]
    start = trio.current_time()
    for key in ("a", "b", "c", "d"):
        source._idle_since[key] = start - IDLE - 1  # all four expired
    async with trio.open_nursery() as nursery:
        nursery.start_soon(source._close_idle_lanes)
        await trio.sleep(1)
        lanes = [name for _, name in closed]
        assert lanes[: len(PANE_LANES)] == [f"{kind}:a" for kind in PANE_LANES]
        # b's lanes may close (its entry went; _reconcile closes them too); c's and
        # d's may not: a call is under way on c, and d is idle only since its call.
        assert not any(name.endswith((":c", ":d")) for name in lanes)
        await trio.sleep(IDLE)  # d's new idle period is over
        assert {name for _, name in closed if name.endswith(":d")} == {
            f"{kind}:d" for kind in PANE_LANES
        }
        assert not any(name.endswith(":c") for _, name in closed)
        await busy.aclose()  # c's call ends: its idle period starts
        ended = trio.current_time()
        await trio.sleep(IDLE + 1)
        c_closes = [at for at, name in closed if name.endswith(":c")]
        assert len(c_closes) == len(PANE_LANES) and min(c_closes) >= ended + IDLE
        nursery.cancel_scope.cancel()
    assert source._idle_since == {} and not source._one_offs
