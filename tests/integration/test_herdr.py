"""The Herdr source: host + the faithful fake Herdr, over real TLS."""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from mirror_host import control as c
from mirror_host.client.client import MirrorClient, login
from mirror_host.host.server import Host
from mirror_host.panes.herdr import discovery as discovery_module
from mirror_host.panes.herdr import source as herdr_source_module
from mirror_host.panes.herdr.protocol import pane_uuid
from mirror_host.panes.herdr.source import HerdrSource
from mirror_host.session import lease as lease_module
from mirror_host.session.logged_in import SCROLL_BUSY
from mirror_host.wire import TextFramePacket, VTFramePacket
from tests.fakes.herdr_fake import FakeHerdr
from tests.fakes.serving import serving
from tests.integration.conftest import paired, port_of, running_host
from tests.integration.mirror_helpers import (
    frame_containing,
    list_panes,
    messages_within,
    next_frame,
    subscribe,
)

pytestmark = pytest.mark.timeout(90)

FAKE_CLI = str(Path(__file__).resolve().parent.parent / "fakes" / "herdr")
SHELL = "exec bash --norc --noprofile -i"


@asynccontextmanager
async def fake_herdr(
    state_dir: Path, *, protocol: int = 22, snapshot: bool = True
) -> AsyncIterator[FakeHerdr]:
    fake = FakeHerdr(state_dir / "herdr.sock", protocol=protocol, snapshot=snapshot)
    async with serving(fake):
        yield fake


@asynccontextmanager
async def herdr_host(
    state_dir: Path, fake: FakeHerdr, *, observe: bool = True
) -> AsyncIterator[tuple[Host, MirrorClient, HerdrSource]]:
    source = HerdrSource(
        state_dir / "herdr.sock", herdr_bin=FAKE_CLI if observe else "/nonexistent/herdr"
    )
    async with running_host(state_dir, source) as host:
        await source.wait_listed()
        credential = await paired(host)
        async with login("127.0.0.1", port_of(host), credential) as client:
            yield host, client, source


async def add_demo(fake: FakeHerdr, command: str = SHELL, **kw: Any) -> str:
    workspace = fake.add_workspace("api", cwd="/tmp")
    tab = fake.add_tab(workspace, "agents")
    return await fake.add_pane(tab, command, **kw)


def no_text_recent_reads(fake: FakeHerdr) -> None:
    for request in fake.requests_for("pane.read"):
        params = request.get("params", {})
        if params.get("source") in ("recent", "recent_unwrapped"):
            assert params.get("format") == "ansi", (
                f"a text history read moves the screen: {request}"
            )


@pytest.mark.parametrize("observe", [True, False], ids=["observe", "polling"])
async def test_list_subscribe_and_echo(state_dir: Path, observe: bool) -> None:
    async with fake_herdr(state_dir) as fake:
        pane_id = await add_demo(fake)
        async with herdr_host(state_dir, fake, observe=observe) as (_host, client, source):
            panes = (await list_panes(client)).panes
            assert [p.title for p in panes] == ["api · agents · Shell"]
            assert panes[0].id == pane_uuid(fake.socket_path, pane_id)
            health = source.health()
            assert health["state"] == "following" and "(protocol 22)" in health["detail"]
            reads_before = len(fake.requests_for("pane.read"))
            assert reads_before == 0  # listing reads no pane contents
            sub = await subscribe(client, panes[0].id)
            frame = await next_frame(client, sub)
            assert isinstance(frame, VTFramePacket)
            await client.send(c.Input(data=b"echo herdr-$((20+3))\r", subscription_id=sub))
            await frame_containing(client, sub, "herdr-23")
            assert b"herdr-23" in fake.received_input(pane_id) or b"echo" in fake.received_input(
                pane_id
            )
            assert source.mirror_mode(panes[0].id) == ("observe" if observe else "poll")
        no_text_recent_reads(fake)


async def test_text_subscription(state_dir: Path) -> None:
    async with fake_herdr(state_dir) as fake:
        await add_demo(fake, "printf 'phone view\\n'; exec sleep 120")
        async with herdr_host(state_dir, fake) as (_host, client, _source):
            pane = (await list_panes(client)).panes[0]
            sub = await subscribe(client, pane.id, c.Representation.TEXT)
            frame = await frame_containing(client, sub, "phone view")
            assert isinstance(frame, TextFramePacket)


async def test_pane_closing_ends_the_subscription(state_dir: Path) -> None:
    async with fake_herdr(state_dir) as fake:
        pane_id = await add_demo(fake, "exec sleep 120")
        async with herdr_host(state_dir, fake) as (_host, client, _source):
            pane = (await list_panes(client)).panes[0]
            sub = await subscribe(client, pane.id)
            await next_frame(client, sub)
            await fake.close_pane(pane_id)
            assert c.Ended(reason=c.EndReason.PANE_CLOSED) in await client.expect_closed()


@pytest.mark.slow
async def test_herdr_restart_keeps_surviving_panes(state_dir: Path) -> None:
    socket = state_dir / "herdr.sock"
    first = FakeHerdr(socket)
    workspace = first.add_workspace("api", cwd="/tmp")
    tab = first.add_tab(workspace, "agents")
    survivor = await first.add_pane(tab, SHELL, terminal_id="term_survivor")
    doomed = await first.add_pane(tab, "exec sleep 120", terminal_id="term_doomed")
    async with trio.open_nursery() as nursery:
        await nursery.start(first.serve)
        source = HerdrSource(socket, herdr_bin=FAKE_CLI)
        async with running_host(state_dir, source) as host:
            await source.wait_listed()
            port = port_of(host)
            keeper = await paired(host, "Keeper")
            loser = await paired(host, "Loser")
            async with login("127.0.0.1", port, keeper) as a, login("127.0.0.1", port, loser) as b:
                sub_a = await subscribe(a, pane_uuid(str(socket), survivor))
                sub_b = await subscribe(b, pane_uuid(str(socket), doomed))
                await next_frame(a, sub_a)
                await next_frame(b, sub_b)
                await first.stop()  # Herdr goes away (both panes' processes end)
                # While Herdr is down nobody is told anything: it may be restarting.
                assert await messages_within(b, sub_b, 1.5) == []
                second = FakeHerdr(socket)
                w = second.add_workspace("api", cwd="/tmp")
                t = second.add_tab(w, "agents")
                await second.add_pane(t, SHELL, terminal_id="term_survivor")
                await nursery.start(second.serve)
                # The survivor keeps its lease; the pane that vanished is ended.
                assert c.Ended(reason=c.EndReason.PANE_CLOSED) in await b.expect_closed(timeout=30)
                await a.send(c.Input(data=b"echo after-restart\r", subscription_id=sub_a))
                await frame_containing(a, sub_a, "after-restart", timeout=30)
                await second.stop()
        nursery.cancel_scope.cancel()
    del survivor, doomed


async def test_old_server_without_snapshot(state_dir: Path) -> None:
    async with fake_herdr(state_dir, protocol=16, snapshot=False) as fake:
        await add_demo(fake)
        async with herdr_host(state_dir, fake) as (_host, client, source):
            panes = (await list_panes(client)).panes
            assert [p.title for p in panes] == ["api · agents · Shell"]
            assert "remote-scroll" not in (await list_panes(client)).capabilities
            assert fake.requests_for("workspace.list") and fake.requests_for("pane.list")
            assert source.protocol == 16


@pytest.mark.parametrize("protocol", [16, 20, 22])
async def test_protocols(state_dir: Path, protocol: int) -> None:
    async with fake_herdr(state_dir, protocol=protocol) as fake:
        await add_demo(fake, "seq 1 100; exec bash --norc --noprofile -i")
        async with herdr_host(state_dir, fake) as (_host, client, _source):
            listing = await list_panes(client)
            assert ("remote-scroll" in listing.capabilities) == (protocol == 22)
            assert "history" in listing.capabilities
            sub = await subscribe(client, listing.panes[0].id, c.Representation.TEXT)
            await frame_containing(client, sub, "100")
            await client.send(c.History(subscription_id=sub))
            page = await client.expect(c.HistoryPage)
            assert isinstance(page, c.HistoryPage)
            assert "100" in page.lines and "\x1b" not in "".join(page.lines)
        no_text_recent_reads(fake)


@pytest.mark.parametrize("settle", [None, 0.0], ids=["settled", "captured-at-once"])
async def test_remote_scroll_on_protocol_22(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch, settle: float | None
) -> None:
    if settle is not None:
        # No settle time: the scroll itself must wait for the stream's new view.
        monkeypatch.setattr(lease_module, "SCROLL_SETTLE_SECONDS", settle)
    # However long a loaded machine takes for the stream's new view, the scroll
    # waits for it (with the default 0.5 s a loaded CI machine saw the old view).
    monkeypatch.setattr(herdr_source_module, "_SCROLL_FRAME_SECONDS", 10.0)
    async with fake_herdr(state_dir, protocol=22) as fake:
        await add_demo(fake, "seq 1 300; exec sleep 120")
        async with herdr_host(state_dir, fake) as (_host, client, _source):
            pane = (await list_panes(client)).panes[0]
            sub = await subscribe(client, pane.id, include_scroll_state=True)
            await frame_containing(client, sub, "300")
            request = uuid.uuid4()
            await client.send(
                c.Scroll(request_id=request, direction=c.ScrollDirection.UP, subscription_id=sub)
            )
            seen: list[object] = []
            with trio.fail_after(10):
                while not any(isinstance(x, c.ScrollResult) for x in seen):
                    item = await client.receive()
                    seen.append(item)
                    if isinstance(item, VTFramePacket):
                        await client.send(
                            c.Acknowledge(sequence=item.sequence, subscription_id=sub)
                        )
            frame = next(x for x in reversed(seen) if isinstance(x, VTFramePacket))
            assert b"300" not in frame.data  # Herdr renders the scrolled-back viewport
            assert fake.requests_for("pane.scroll")


async def _until_scroll_result(client: MirrorClient, sub: uuid.UUID) -> list[object]:
    """Everything up to and including the next ``scrollResult``, frames acknowledged."""
    seen: list[object] = []
    with trio.fail_after(20):
        while not seen or not isinstance(seen[-1], c.ScrollResult):
            item = await client.receive()
            seen.append(item)
            if isinstance(item, VTFramePacket):
                await client.send(c.Acknowledge(sequence=item.sequence, subscription_id=sub))
    return seen


@pytest.mark.parametrize("observe", [True, False], ids=["observe", "polling"])
async def test_scroll_right_after_output_the_host_has_not_listed(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch, observe: bool
) -> None:
    # With a healthy event stream the session is read again only every 10 s, and
    # output is no event: keep it from being read, so the scrollback printed
    # below is news to the host when the phone scrolls.
    monkeypatch.setattr(discovery_module, "_SAFETY_POLL_SECONDS", 3600.0)
    # Nor may pane.scroll_changed tell it (as it would since that event is
    # followed): this is about a position the host has not heard of at all.
    monkeypatch.setattr(
        discovery_module.HerdrDiscovery, "_followed_scroll", lambda self: frozenset()
    )
    # However long a loaded machine takes, the scroll waits for the stream's new view.
    monkeypatch.setattr(herdr_source_module, "_SCROLL_FRAME_SECONDS", 10.0)
    async with fake_herdr(state_dir, protocol=22) as fake:
        await add_demo(fake)
        async with herdr_host(state_dir, fake, observe=observe) as (_host, client, source):
            pane = (await list_panes(client)).panes[0]
            sub = await subscribe(client, pane.id, include_scroll_state=True)
            await next_frame(client, sub)
            await client.send(c.Input(data=b"seq 1 300\r", subscription_id=sub))
            before = await frame_containing(client, sub, "300")
            assert not source.pane_record(pane.id).max_offset_from_bottom  # listed before it
            # Hold the scroll in Herdr while two more requests arrive.
            fake.delay_method("pane.scroll", 60.0)
            first, second = uuid.uuid4(), uuid.uuid4()
            up = c.ScrollDirection.UP
            await client.send(c.Scroll(request_id=first, direction=up, subscription_id=sub))
            with trio.fail_after(10):
                await fake.wait_held("pane.scroll")
            await client.send(c.Scroll(request_id=second, direction=up, subscription_id=sub))
            await client.send(c.Scroll(request_id=first, direction=up, subscription_id=sub))
            fake.clear_delay("pane.scroll")
            seen = await _until_scroll_result(client, sub)

            assert [x for x in seen if isinstance(x, c.Failure)] == [
                c.Failure(error=SCROLL_BUSY, subscription_id=sub, request_id=second)
            ]
            result, frame, state = seen[-1], seen[-2], seen[-3]
            assert isinstance(result, c.ScrollResult) and result.request_id == first
            assert isinstance(frame, VTFramePacket) and frame.sequence == result.sequence
            # Earlier lines, not the unchanged screen: 278…300 and the prompt
            # were showing; 24 rows − 3 = 21 rows up shows 257…280.
            assert isinstance(before, VTFramePacket) and frame.data != before.data
            assert b"257" in frame.data and b"281" not in frame.data
            # The scroll state is Herdr's answer to the scroll, not the old listing.
            assert state == c.ScrollState(
                at_top=False, at_bottom=False, sequence=result.sequence, subscription_id=sub
            )

            # The same request again: the same result, and Herdr is not asked again.
            await client.send(c.Scroll(request_id=first, direction=up, subscription_id=sub))
            replayed = await _until_scroll_result(client, sub)
            assert replayed[-1] == result
            probe_and_first = fake.requests_for("pane.scroll")
            assert len(probe_and_first) == 2
            assert probe_and_first[1]["params"]["offset_from_bottom"] == 21


@pytest.mark.slow
async def test_a_snapshot_older_than_a_scroll_does_not_undo_its_bounds(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(discovery_module, "_SAFETY_POLL_SECONDS", 3600.0)
    monkeypatch.setattr(herdr_source_module, "_SCROLL_FRAME_SECONDS", 10.0)
    async with fake_herdr(state_dir, protocol=22) as fake:
        await add_demo(fake, "seq 1 300; exec sleep 120")
        async with herdr_host(state_dir, fake) as (_host, client, source):
            pane = (await list_panes(client)).panes[0]
            sub = await subscribe(client, pane.id, include_scroll_state=True)
            await frame_containing(client, sub, "300")
            # A snapshot taken at the bottom, whose answer is slow to arrive.
            fake.delay_method("session.snapshot", 60.0, stage="answer")
            async with trio.open_nursery() as nursery:
                nursery.start_soon(source.poll)
                with trio.fail_after(10):
                    await fake.wait_held("session.snapshot")
                request = uuid.uuid4()
                await client.send(
                    c.Scroll(
                        request_id=request, direction=c.ScrollDirection.UP, subscription_id=sub
                    )
                )
                scrolled = await _until_scroll_result(client, sub)
                result = scrolled[-1]
                assert isinstance(result, c.ScrollResult)
                fresh = c.ScrollState(
                    at_top=False, at_bottom=False, sequence=result.sequence, subscription_id=sub
                )
                assert fresh in scrolled
                fake.clear_delay()
            # The old snapshot has arrived; the next frame still knows where the pane is.
            await client.send(c.Refresh(subscription_id=sub))
            with trio.fail_after(10):
                state = await client.expect(c.ScrollState)
            assert isinstance(state, c.ScrollState)
            assert (state.at_top, state.at_bottom) == (False, False)
            assert source.pane_record(pane.id).offset_from_bottom == 21


async def test_no_reads_while_nothing_is_subscribed(state_dir: Path) -> None:
    async with fake_herdr(state_dir) as fake:
        await add_demo(fake)
        async with herdr_host(state_dir, fake) as (_host, client, _source):
            for _ in range(3):
                await list_panes(client)
            await trio.sleep(0.5)
            assert fake.requests_for("pane.read") == []


async def test_herdr_not_running_is_reported(
    state_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mirror_host")
    logging.getLogger("mirror_host").propagate = True
    try:
        source = HerdrSource(state_dir / "absent.sock", herdr_bin=FAKE_CLI)
        async with running_host(state_dir, source) as host:
            await source.wait_listed()
            credential = await paired(host)
            async with login("127.0.0.1", port_of(host), credential) as client:
                assert (await list_panes(client)).panes == ()
            # `mirror-host status` says why there are no panes.
            health = (await host.status())["panes"]["health"]
            assert (health["kind"], health["state"]) == ("herdr", "unreachable")
            assert "Herdr is not running" in health["detail"]
    finally:
        logging.getLogger("mirror_host").propagate = False
    assert "Herdr is not running" in caplog.text and "absent.sock" in caplog.text


async def test_event_stream_follows_the_agent_panes(state_dir: Path) -> None:
    async with fake_herdr(state_dir) as fake:
        pane_id = await add_demo(fake)
        async with herdr_host(state_dir, fake) as (_host, _client, _source):

            def watched() -> set[str]:
                latest = fake.requests_for("events.subscribe")[-1]["params"]["subscriptions"]
                return {s["pane_id"] for s in latest if s["type"] == "pane.agent_status_changed"}

            with trio.fail_after(5):
                while not fake.requests_for("events.subscribe"):
                    await trio.sleep(0.02)
            assert watched() == set()
            fake.set_agent(pane_id, "claude")  # Herdr detects an agent in the pane
            with trio.fail_after(10):
                while watched() != {pane_id}:
                    await trio.sleep(0.05)


@pytest.mark.slow
async def test_typing_reaches_a_pane_that_moved_to_another_workspace(state_dir: Path) -> None:
    """Input goes to the pane's new id, once Herdr says the old one is not found."""
    async with fake_herdr(state_dir) as fake:
        old_id = await add_demo(fake)
        elsewhere = fake.add_tab(fake.add_workspace("web", cwd="/tmp"), "moved here")
        async with herdr_host(state_dir, fake) as (_host, client, _source):
            pane = (await list_panes(client)).panes[0]
            sub = await subscribe(client, pane.id)
            await client.send(c.Input(data=b"echo before-$((1+1))\r", subscription_id=sub))
            await frame_containing(client, sub, "before-2")
            # The host's next snapshot (after the move) is slow: its record is stale.
            fake.delay_method("session.snapshot", 1.0)
            new_id = fake.move_pane(old_id, elsewhere)
            assert new_id != old_id and new_id.startswith("w2:")
            await client.send(c.Input(data=b"echo moved-$((3+4))\r", subscription_id=sub))
            await frame_containing(client, sub, "moved-7")
            assert b"echo moved" in fake.received_input(new_id)
            sent_to = [r["params"]["pane_id"] for r in fake.requests_for("pane.send_text")]
            assert sent_to[-2:] == [old_id, new_id]  # tried, re-resolved, retried once
            fake.clear_delay()
            await client.send(c.ListPanes())  # still holding the pane, nothing ended
            listing = await client.expect(c.Panes)
            assert isinstance(listing, c.Panes) and listing.panes[0].id == pane.id


async def test_scroll_bounds_follow_herdr_between_scrolls(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operator scrolls the pane at the host: the phone's scrollState follows at once."""
    monkeypatch.setattr(discovery_module, "_SAFETY_POLL_SECONDS", 3600.0)
    async with fake_herdr(state_dir, protocol=20) as fake:
        herdr_pane = await add_demo(fake, "seq 1 300; exec sleep 120")
        async with herdr_host(state_dir, fake) as (_host, client, source):
            pane = (await list_panes(client)).panes[0]
            sub = await subscribe(client, pane.id, include_scroll_state=True)
            await frame_containing(client, sub, "300")

            def followed() -> set[str]:
                requests = fake.requests_for("events.subscribe")
                latest = requests[-1]["params"]["subscriptions"] if requests else []
                return {s["pane_id"] for s in latest if s["type"] == "pane.scroll_changed"}

            with trio.fail_after(10):
                while followed() != {herdr_pane}:
                    await trio.sleep(0.05)
            with trio.fail_after(10):  # the new stream is up (acknowledged): it reports scrolls
                while not fake.streaming("pane.scroll_changed", herdr_pane):
                    await trio.sleep(0.02)
            # No snapshot can tell the host from here on: only the event can.
            fake.delay_method("session.snapshot", 60.0)
            fake.scroll_pane(herdr_pane, 40)  # Herdr 0.8 has no pane.scroll: the mouse wheel
            with trio.fail_after(10):
                while True:
                    state = await client.receive()
                    if isinstance(state, VTFramePacket):
                        await client.send(
                            c.Acknowledge(sequence=state.sequence, subscription_id=sub)
                        )
                    elif isinstance(state, c.ScrollState) and state.at_bottom is False:
                        break
            assert (state.at_top, state.at_bottom) == (False, False)
            assert source.pane_record(pane.id).offset_from_bottom == 40
            assert fake.holding("session.snapshot") <= 1  # none answered meanwhile
            fake.clear_delay()
