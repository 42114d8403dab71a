"""Run a fake server (FakeHerdr, FakeAgliteterm) for the length of a ``with`` block."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Protocol, TypeVar

import trio


class Served(Protocol):
    async def serve(self, *, task_status: trio.TaskStatus[None] = ...) -> None: ...

    async def stop(self) -> None: ...


F = TypeVar("F", bound=Served)


@asynccontextmanager
async def serving(fake: F) -> AsyncIterator[F]:
    """Serve ``fake`` until the block ends, then stop it (its panes killed, its
    socket unlinked) before the serving task is cancelled."""
    async with trio.open_nursery() as nursery:
        await nursery.start(fake.serve)
        try:
            yield fake
        finally:
            await fake.stop()
            nursery.cancel_scope.cancel()
