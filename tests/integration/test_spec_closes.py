"""What Prowl's host does with a history offset outside its snapshot and a command
whose ``output`` is not ``json``, over real TLS (prowl-host.md §7, §8).

History: ``MirrorHost.sendHistory`` pages every answer at ``offset ?? count``,
a new snapshot's too, and ``MirrorHistory.page(before:)`` throws outside
0 … count: a silent close, after login (no lock-out count). Commands: the
remote scope allows ``output: "json"`` only, and a command outside the
allowlist fails to decode, which closes the connection (§8).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from mirror_host import control as c
from mirror_host.client.client import MirrorClient, login
from mirror_host.commands.local import LocalCommands
from mirror_host.commands.service import CommandService
from mirror_host.panes.local import LocalSource
from tests.integration.conftest import paired, port_of, running_host
from tests.integration.mirror_helpers import frame_containing, list_panes, subscribe

pytestmark = pytest.mark.timeout(90)

#: Below 0, and far past any snapshot (2 MiB of history holds ~2^21 lines).
BAD_OFFSETS = (-1, 2**62, 10**6)
#: ``output`` values that are not exactly ``json``.
BAD_OUTPUTS = ("text", "", "JSON", "j" * 4096)


def history_source() -> LocalSource:
    return LocalSource(["seq 1 450; exec cat"], columns=80, rows=24)


async def history_lease(client: MirrorClient) -> uuid.UUID:
    pane = (await list_panes(client)).panes[0]
    sub = await subscribe(client, pane.id, c.Representation.TEXT)
    await frame_containing(client, sub, "450")
    return sub


async def test_history_offsets_outside_the_snapshot_close_silently(state_dir: Path) -> None:
    async with running_host(state_dir, history_source()) as host:
        credential = await paired(host)
        port = port_of(host)
        for offset in BAD_OFFSETS:
            # A page of the snapshot the client holds.
            async with login("127.0.0.1", port, credential) as client:
                sub = await history_lease(client)
                await client.send(c.History(subscription_id=sub))
                first = await client.expect(c.HistoryPage)
                assert isinstance(first, c.HistoryPage) and first.total >= 450
                await client.send(
                    c.History(history_id=first.history_id, offset=offset, subscription_id=sub)
                )
                seen = await client.expect_closed()
                assert not [m for m in seen if isinstance(m, c.HistoryPage | c.Failure)], offset
            # A new snapshot asked for with the same offset: captured, then closed
            # (not answered with its newest page).
            async with login("127.0.0.1", port, credential) as client:
                sub = await history_lease(client)
                await client.send(c.History(offset=offset, subscription_id=sub))
                seen = await client.expect_closed()
                assert not [m for m in seen if isinstance(m, c.HistoryPage | c.Failure)], offset
        # Logged in, so none of these counted toward the address's lock-out.
        assert len(host.failures) == 0
        async with login("127.0.0.1", port, credential) as client:
            sub = await history_lease(client)
            await client.send(c.History(offset=0, subscription_id=sub))
            page = await client.expect(c.HistoryPage)  # 0 … count is fine: an empty page
            assert isinstance(page, c.HistoryPage) and page.lines == () and page.offset == 0


async def test_a_command_whose_output_is_not_json_closes_the_connection(
    state_dir: Path,
) -> None:
    source = LocalSource(["exec cat"], columns=80, rows=24)
    commands = CommandService(LocalCommands(source))
    async with running_host(state_dir, source, commands=commands) as host:
        credential = await paired(host)
        port = port_of(host)
        for output in BAD_OUTPUTS:
            async with login("127.0.0.1", port, credential) as client:
                await list_panes(client)
                envelope = c.CommandEnvelope(output=output, command=c.ListCommand())
                await client.send(
                    c.Command(
                        command_request=c.CommandRequest(request_id=uuid.uuid4(), request=envelope)
                    )
                )
                seen = await client.expect_closed()
                assert not [m for m in seen if isinstance(m, c.CommandResult | c.Failure)], output
        # The same command with `json` runs normally; none of the closes counted
        # toward the address's lock-out (they came after login).
        async with login("127.0.0.1", port, credential) as client:
            envelope = c.CommandEnvelope(output="json", command=c.ListCommand())
            await client.send(
                c.Command(
                    command_request=c.CommandRequest(request_id=uuid.uuid4(), request=envelope)
                )
            )
            listed = await client.expect(c.CommandResult)
            assert isinstance(listed, c.CommandResult)
            response = listed.command_response.response
            assert isinstance(response, dict) and response["ok"] is True
        assert len(host.failures) == 0
