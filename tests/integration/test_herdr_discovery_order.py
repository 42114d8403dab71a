"""Herdr discovery against the fake Herdr: snapshots applied in the order they were read."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from mirror_host.panes.herdr.client import HerdrClient
from mirror_host.panes.herdr.discovery import HerdrDiscovery
from mirror_host.panes.herdr.protocol import Snapshot, pane_uuid
from tests.fakes.herdr_fake import FakeHerdr

pytestmark = pytest.mark.timeout(30)

SHELL = "exec sleep 60"


def _waiting_to_poll(discovery: HerdrDiscovery) -> bool:
    lock = getattr(discovery, "_poll_lock", None)
    return isinstance(lock, trio.Lock) and lock.statistics().tasks_waiting > 0


async def test_an_older_snapshot_answered_last_does_not_retire_a_live_pane(
    state_dir: Path,
) -> None:
    # Found in review: two polls at once (discovery's own, and one a create or a
    # moved pane asks for) applied whichever finished last, even the one that
    # read the older snapshot; PaneIdentities then took a pane created in
    # between for a closed one, retired its id, and gave it a new UUID for good.
    fake = FakeHerdr(state_dir / "herdr.sock")
    tab = fake.add_tab(fake.add_workspace("api"))
    listed: list[Snapshot] = []
    client = HerdrClient(state_dir / "herdr.sock")
    discovery = HerdrDiscovery(client, lambda snapshot, _started: listed.append(snapshot))
    session = str(client.socket_path)
    async with trio.open_nursery() as nursery:
        await nursery.start(fake.serve)
        with trio.fail_after(20):
            first = await fake.add_pane(tab, SHELL)
            await discovery.poll()
            # The older poll: Herdr reads its snapshot now, answers it later.
            fake.delay_method("session.snapshot", 1000.0, stage="answer")
            older_done = trio.Event()

            async def older_poll() -> None:
                await discovery.poll()
                older_done.set()

            nursery.start_soon(older_poll)
            await fake.wait_held("session.snapshot")
            second = await fake.add_pane(tab, SHELL)
            fake.delay_method("session.snapshot", 0.0)  # the newer read is answered at once
            newer_done = trio.Event()

            async def newer_poll() -> None:
                await discovery.poll()
                newer_done.set()

            nursery.start_soon(newer_poll)
            while not newer_done.is_set() and not _waiting_to_poll(discovery):
                await trio.sleep(0.01)
            fake.clear_delay("session.snapshot")  # the older answer arrives
            await older_done.wait()
            await newer_done.wait()
            # Whatever finished last, the pane created in between is listed, under
            # the id of its public id, and keeps it on the next snapshot.
            second_terminal = fake.terminal_id(second)
            expected = pane_uuid(session, second)
            assert discovery.ids.get(second_terminal) == expected
            assert {p.pane_id for p in listed[-1].panes} == {first, second}
            await discovery.poll()
            assert discovery.ids[second_terminal] == expected
            assert discovery.ids[fake.terminal_id(first)] == pane_uuid(session, first)
        await fake.stop()
        nursery.cancel_scope.cancel()
