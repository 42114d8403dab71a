"""Every subscription rule over real TLS, with real PTYs behind the panes."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import trio

from mirror_host import control as c
from mirror_host.client.client import login
from mirror_host.panes.local import EMPTY_HINT, LocalSource
from mirror_host.wire import ControlPacket, TextFramePacket, VTFramePacket, encode_packet
from tests.integration.conftest import paired, port_of, running_host
from tests.integration.mirror_helpers import (
    coloured_lines,
    frame_containing,
    frame_text,
    list_panes,
    next_frame,
    scroll_until_result,
    scrolled_back_in_colour,
    settle,
    subscribe,
)
from tests.pane_process import wait_program_in_place

pytestmark = pytest.mark.timeout(60)

SHELL = "exec bash --norc --noprofile -i"


async def test_list_advertises_exactly_what_is_implemented(state_dir: Path) -> None:
    source = LocalSource(["cat", "sleep 60"], columns=80, rows=24)
    async with running_host(state_dir, source) as host:
        credential = await paired(host)
        async with login("127.0.0.1", port_of(host), credential) as client:
            panes = await list_panes(client)
    assert panes.capabilities == (
        "vt-v1", "text-v1", "takeover", "refresh",
        "history", "remote-scroll", "viewport-text-v1", "styled-scrollback-v1", "scroll-state-v1",
    )  # fmt: skip
    assert sorted(p.title for p in panes.panes) == ["cat", "sleep 60"]
    assert all(not p.busy for p in panes.panes)
    assert panes.host_run_id == host.host_run_id


async def test_subscribe_watch_type_and_see_the_echo(state_dir: Path) -> None:
    source = LocalSource([SHELL], columns=80, rows=24)
    async with running_host(state_dir, source) as host:
        credential = await paired(host)
        async with login("127.0.0.1", port_of(host), credential) as client:
            pane = (await list_panes(client)).panes[0]
            sub = await subscribe(client, pane.id)
            first = await next_frame(client, sub)
            assert isinstance(first, VTFramePacket)
            assert first.sequence == 1 and (first.columns, first.rows) == (80, 24)
            await client.send(c.Input(data=b"echo mirror-$((6*7))\r", subscription_id=sub))
            frame = await frame_containing(client, sub, "mirror-42")
            assert frame.sequence > 1
            panes = await list_panes(client)
            assert panes.panes[0].busy


async def test_text_subscription_gets_the_viewport_and_may_not_type(state_dir: Path) -> None:
    received = state_dir / "received.txt"
    source = LocalSource([f"printf 'ready\\n'; exec cat > {received}"], columns=80, rows=24)
    async with running_host(state_dir, source) as host:
        credential = await paired(host)
        port = port_of(host)
        async with login("127.0.0.1", port, credential) as phone:
            pane = (await list_panes(phone)).panes[0]
            sub = await subscribe(phone, pane.id, c.Representation.TEXT)
            frame = await frame_containing(phone, sub, "ready")
            assert isinstance(frame, TextFramePacket) and frame.truncated is False
            assert (frame.columns, frame.rows) == (80, 24)
            await phone.send(c.Input(data=b"must not arrive\r", subscription_id=sub))
            await phone.expect_closed()
        # The same bytes on a vt-v1 lease do arrive: the write path works.
        async with login("127.0.0.1", port, credential) as mac:
            sub = await subscribe(mac, pane.id)
            await next_frame(mac, sub)
            await mac.send(c.Input(data=b"typed on the mac\r", subscription_id=sub))
            with trio.fail_after(10):
                while "typed on the mac" not in received.read_text():
                    await trio.sleep(0.05)
        assert "must not arrive" not in received.read_text()


async def test_two_devices_trade_a_pane(state_dir: Path) -> None:
    source = LocalSource([SHELL], columns=80, rows=24)
    async with running_host(state_dir, source) as host:
        mac = await paired(host, "Mac")
        phone = await paired(host, "Phone")
        port = port_of(host)
        async with login("127.0.0.1", port, mac) as first:
            pane = (await list_panes(first)).panes[0]
            sub = await subscribe(first, pane.id)
            await next_frame(first, sub)
            async with login("127.0.0.1", port, phone) as second:
                await second.send(
                    c.Subscribe(
                        pane_id=pane.id,
                        representation=c.Representation.TEXT,
                        intent=c.Intent.IF_FREE,
                    )
                )
                busy = await second.expect(c.Failure)
                assert busy == c.Failure(error="PANE_BUSY: This pane already has a remote mirror.")
                assert (await list_panes(second)).panes[0].busy
                # The same connection may take over after PANE_BUSY.
                taken = await subscribe(second, pane.id, c.Representation.TEXT, c.Intent.TAKEOVER)
                frame = await next_frame(second, taken)
                assert isinstance(frame, TextFramePacket) and frame.sequence == 1
                rest = await first.expect_closed()
                assert c.Ended(reason=c.EndReason.TAKEN_OVER) in rest
                await second.send(c.Input(data=b"x", subscription_id=sub))  # the old lease id
                await second.expect_closed()


async def test_wrong_ack_closes_and_frees_the_pane(state_dir: Path) -> None:
    async with running_host(state_dir, LocalSource(["cat"], columns=80, rows=24)) as host:
        credential = await paired(host)
        port = port_of(host)
        async with login("127.0.0.1", port, credential) as client:
            pane = (await list_panes(client)).panes[0]
            sub = await subscribe(client, pane.id)
            frame = await next_frame(client, sub, ack=False)
            await client.send(c.Acknowledge(sequence=frame.sequence + 1, subscription_id=sub))
            assert await client.expect_closed() == []
        async with login("127.0.0.1", port, credential) as client:
            assert not (await list_panes(client)).panes[0].busy


async def test_second_subscribe_on_one_connection_closes(state_dir: Path) -> None:
    async with running_host(
        state_dir, LocalSource(["cat", "sleep 60"], columns=80, rows=24)
    ) as host:
        credential = await paired(host)
        async with login("127.0.0.1", port_of(host), credential) as client:
            panes = (await list_panes(client)).panes
            sub = await subscribe(client, panes[0].id)
            await next_frame(client, sub)
            await client.send(
                c.Subscribe(
                    pane_id=panes[1].id, representation=c.Representation.VT, intent=c.Intent.IF_FREE
                )
            )
            assert await client.expect_closed() == []


async def test_unknown_pane_closes(state_dir: Path) -> None:
    async with running_host(state_dir) as host:
        credential = await paired(host)
        async with login("127.0.0.1", port_of(host), credential) as client:
            await client.send(
                c.Subscribe(
                    pane_id=uuid.uuid4(),
                    representation=c.Representation.VT,
                    intent=c.Intent.IF_FREE,
                )
            )
            assert await client.expect_closed() == []


async def test_one_unacknowledged_frame_then_the_latest_state(state_dir: Path) -> None:
    source = LocalSource([SHELL], columns=80, rows=24)
    async with running_host(state_dir, source) as host:
        credential = await paired(host)
        async with login("127.0.0.1", port_of(host), credential) as client:
            pane = (await list_panes(client)).panes[0]
            sub = await subscribe(client, pane.id)
            first = await next_frame(client, sub, ack=False)
            await client.send(
                c.Input(data=b"for i in 1 2 3 4 5; do echo step$i; done\r", subscription_id=sub)
            )
            with pytest.raises(trio.TooSlowError):  # nothing while frame 1 is unacknowledged
                await client.receive(timeout=0.8)
            # However slow the machine, ack only once the loop has finished on the host.
            with trio.fail_after(10):
                while "step5\n" not in (await source.capture(pane.id, c.Representation.TEXT)).text:
                    await trio.sleep(0.05)
            await client.send(c.Acknowledge(sequence=first.sequence, subscription_id=sub))
            latest = await next_frame(client, sub)
            assert latest.sequence == 2
            assert "step5" in frame_text(latest)  # coalesced: the latest state, not step1


async def test_refresh_resends_an_unchanged_screen(state_dir: Path) -> None:
    async with running_host(
        state_dir, LocalSource(["printf 'still\\n'; exec sleep 60"], columns=80, rows=24)
    ) as host:
        credential = await paired(host)
        async with login("127.0.0.1", port_of(host), credential) as client:
            pane = (await list_panes(client)).panes[0]
            sub = await subscribe(client, pane.id)
            last = await frame_containing(client, sub, "still")
            last = await settle(client, sub) or last
            await client.send(c.Refresh(subscription_id=sub))
            again = await next_frame(client, sub)
            assert again.sequence == last.sequence + 1
            assert again.data == last.data  # type: ignore[union-attr]


@pytest.mark.slow
async def test_scroll_duplicate_and_concurrent_requests(state_dir: Path) -> None:
    source = LocalSource(["seq 1 300; exec sleep 60"], columns=80, rows=24)
    async with running_host(state_dir, source) as host:
        credential = await paired(host)
        async with login("127.0.0.1", port_of(host), credential) as client:
            pane = (await list_panes(client)).panes[0]
            sub = await subscribe(
                client, pane.id, include_viewport_text=True, include_scroll_state=True
            )
            await frame_containing(client, sub, "300")
            await settle(client, sub)
            first, second = uuid.uuid4(), uuid.uuid4()
            # One write, so the second arrives while the first is surely still pending.
            await client.send_raw(
                b"".join(
                    encode_packet(ControlPacket(c.encode_control(message)))
                    for message in (
                        c.Scroll(
                            request_id=first, direction=c.ScrollDirection.UP, subscription_id=sub
                        ),
                        c.Scroll(
                            request_id=second, direction=c.ScrollDirection.UP, subscription_id=sub
                        ),
                    )
                )
            )
            seen: list[object] = []
            result: c.ScrollResult | None = None
            with trio.fail_after(10):
                while result is None:
                    item = await client.receive()
                    seen.append(item)
                    if isinstance(item, VTFramePacket):
                        await client.send(
                            c.Acknowledge(sequence=item.sequence, subscription_id=sub)
                        )
                    if isinstance(item, c.ScrollResult):
                        result = item
            assert (
                c.Failure(
                    error="SCROLL_BUSY: Wait for the current scroll to finish.",
                    subscription_id=sub,
                    request_id=second,
                )
                in seen
            )
            # viewport → scrollState → frame → scrollResult, all for the same sequence
            tail = seen[-4:]
            assert [type(x) for x in tail] == [
                c.Viewport,
                c.ScrollState,
                VTFramePacket,
                c.ScrollResult,
            ]
            viewport, state, frame = tail[0], tail[1], tail[2]
            assert isinstance(viewport, c.Viewport) and viewport.text is not None
            assert "280" in viewport.text and "300" not in viewport.text
            assert isinstance(state, c.ScrollState) and state.at_bottom is False
            assert isinstance(frame, VTFramePacket) and result.sequence == frame.sequence
            assert viewport.sequence == state.sequence == frame.sequence
            # A duplicate is answered from memory: same result, nothing scrolls.
            await client.send(
                c.Scroll(request_id=first, direction=c.ScrollDirection.UP, subscription_id=sub)
            )
            again = await client.expect(c.ScrollResult)
            assert again == result
            with pytest.raises(trio.TooSlowError):
                await client.receive(timeout=0.6)


#: 300 coloured lines, then the pane stays.
COLOURED = coloured_lines(300) + "; exec sleep 60"


async def test_a_mac_client_scrolled_back_sees_the_colours(state_dir: Path) -> None:
    source = LocalSource([COLOURED], columns=80, rows=24)
    async with running_host(state_dir, source) as host:
        credential = await paired(host)
        async with login("127.0.0.1", port_of(host), credential) as client:
            pane = (await list_panes(client)).panes[0]
            sub = await subscribe(
                client,
                pane.id,
                include_viewport_text=True,
                include_styled_scrollback=True,
                include_scroll_state=True,
            )
            await frame_containing(client, sub, "red300")
            await settle(client, sub)
            await scrolled_back_in_colour(client, sub, newest=300, shown=280)
            # Back at the bottom the frame is the view again: no text, no archive.
            seen = await scroll_until_result(client, sub, c.ScrollDirection.DOWN)
            viewport = next(x for x in reversed(seen) if isinstance(x, c.Viewport))
            assert viewport.text is None and viewport.styled_scrollback is None


async def test_no_archive_without_both_opt_ins(state_dir: Path) -> None:
    source = LocalSource([COLOURED], columns=80, rows=24)
    async with running_host(state_dir, source) as host:
        credential = await paired(host)
        async with login("127.0.0.1", port_of(host), credential) as client:
            pane = (await list_panes(client)).panes[0]
            sub = await subscribe(client, pane.id, include_viewport_text=True)
            await frame_containing(client, sub, "red300")
            await settle(client, sub)
            seen = await scroll_until_result(client, sub, c.ScrollDirection.UP)
            viewport = next(x for x in reversed(seen) if isinstance(x, c.Viewport))
            assert viewport.text is not None and "red280" in viewport.text
            assert viewport.styled_scrollback is None


async def test_history_pages_are_contiguous(state_dir: Path) -> None:
    source = LocalSource(["seq 1 1000; exec sleep 60"], columns=80, rows=24)
    async with running_host(state_dir, source) as host:
        credential = await paired(host)
        async with login("127.0.0.1", port_of(host), credential) as client:
            pane = (await list_panes(client)).panes[0]
            sub = await subscribe(client, pane.id, c.Representation.TEXT)
            await frame_containing(client, sub, "1000")
            await client.send(c.History(subscription_id=sub))
            page = await client.expect(c.HistoryPage)
            assert isinstance(page, c.HistoryPage)
            pages = [page]
            while page.offset > 0:
                await client.send(
                    c.History(history_id=page.history_id, offset=page.offset, subscription_id=sub)
                )
                nxt = await client.expect(c.HistoryPage)
                assert isinstance(nxt, c.HistoryPage)
                assert nxt.offset + len(nxt.lines) == page.offset  # ends where the last began
                assert (nxt.history_id, nxt.total, nxt.captured_at) == (
                    page.history_id,
                    page.total,
                    page.captured_at,
                )
                assert 0 < len(nxt.lines) <= 200
                pages.append(nxt)
                page = nxt
            lines = [line for p in reversed(pages) for line in p.lines]
            assert len(lines) == pages[0].total
            numbers = [line for line in lines if line.isdigit()]
            assert numbers == [str(i) for i in range(1, 1001)]
            await client.send(c.History(history_id=uuid.uuid4(), offset=0, subscription_id=sub))
            await client.expect_closed()


async def test_pane_whose_process_exits(state_dir: Path) -> None:
    source = LocalSource(["read line; exit 0", "sleep 60"], columns=80, rows=24)
    async with running_host(state_dir, source) as host:
        credential = await paired(host)
        async with login("127.0.0.1", port_of(host), credential) as client:
            panes = {p.title: p for p in (await list_panes(client)).panes}
            sub = await subscribe(client, panes["read line; exit 0"].id)
            await next_frame(client, sub)
            await client.send(c.Input(data=b"bye\r", subscription_id=sub))
            rest = await client.expect_closed()
            assert c.Ended(reason=c.EndReason.PANE_CLOSED) in rest
        async with login("127.0.0.1", port_of(host), credential) as client:
            assert [p.title for p in (await list_panes(client)).panes] == ["sleep 60"]


async def test_when_the_last_pane_exits_the_host_says_what_to_do(
    state_dir: Path, host_log: pytest.LogCaptureFixture
) -> None:
    source = LocalSource(["read line; exit 0"], columns=80, rows=24)
    async with running_host(state_dir, source) as host:
        credential = await paired(host)
        async with login("127.0.0.1", port_of(host), credential) as client:
            sub = await subscribe(client, (await list_panes(client)).panes[0].id)
            await next_frame(client, sub)
            await client.send(c.Input(data=b"bye\r", subscription_id=sub))
            await client.expect_closed()
        with trio.fail_after(10):
            while source.health()["state"] != "empty":
                await trio.sleep(0.05)
        status = await host.status()
        assert status["panes"]["listed"] == 0
        assert status["panes"]["health"]["detail"] == EMPTY_HINT
    assert EMPTY_HINT in host_log.messages and "--local-respawn" in EMPTY_HINT


@pytest.mark.slow
async def test_local_respawn_starts_the_panes_again(state_dir: Path) -> None:
    source = LocalSource(["read line; exit 0"], columns=80, rows=24, respawn=True)
    async with running_host(state_dir, source) as host:
        credential = await paired(host)
        async with login("127.0.0.1", port_of(host), credential) as client:
            first = (await list_panes(client)).panes[0].id
            sub = await subscribe(client, first)
            await next_frame(client, sub)
            await client.send(c.Input(data=b"bye\r", subscription_id=sub))
            assert c.Ended(reason=c.EndReason.PANE_CLOSED) in await client.expect_closed()
        with trio.fail_after(15):
            while not source.live_panes():
                await trio.sleep(0.05)
        async with login("127.0.0.1", port_of(host), credential) as client:
            (again,) = (await list_panes(client)).panes
            assert again.id != first and again.title == "read line; exit 0"


async def test_pane_exit_ends_a_lease_whose_frame_is_unacknowledged(state_dir: Path) -> None:
    source = LocalSource(["read line; exit 0"], columns=80, rows=24)
    async with running_host(state_dir, source) as host:
        credential = await paired(host)
        async with login("127.0.0.1", port_of(host), credential) as client:
            pane = (await list_panes(client)).panes[0]
            sub = await subscribe(client, pane.id)
            await next_frame(client, sub, ack=False)  # the gate stays shut from here on
            await client.send(c.Input(data=b"bye\r", subscription_id=sub))
            assert await client.expect_closed() == [c.Ended(reason=c.EndReason.PANE_CLOSED)]


async def test_host_stop_tells_subscribers(state_dir: Path) -> None:
    async with trio.open_nursery() as outer:
        stopped = trio.Event()
        endings: list[object] = []

        async def watch() -> None:
            async with running_host(state_dir, LocalSource(["cat"], columns=80, rows=24)) as host:
                credential = await paired(host)
                async with login("127.0.0.1", port_of(host), credential) as client:
                    pane = (await list_panes(client)).panes[0]
                    sub = await subscribe(client, pane.id)
                    await next_frame(client, sub)
                    with trio.CancelScope() as scope:
                        outer_scope.append(scope)
                        await trio.sleep_forever()
                    # Leaving running_host stops the host while we still read.
                    host.hub.stop_all()
                    endings.extend(await client.expect_closed())
            stopped.set()

        outer_scope: list[trio.CancelScope] = []
        outer.start_soon(watch)
        with trio.fail_after(20):
            while not outer_scope:
                await trio.sleep(0.05)
        outer_scope[0].cancel()
        await stopped.wait()
    assert c.Ended(reason=c.EndReason.HOST_STOPPED) in endings


async def _environ_of(pid: int) -> dict[str, str]:
    await wait_program_in_place(pid)
    entries = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(entry.decode().partition("=")[::2] for entry in entries if entry)


@pytest.mark.parametrize("shell_integration", [True, False])
async def test_a_local_pane_gets_no_host_only_variable(
    state_dir: Path, shell_integration: bool
) -> None:
    if not Path("/proc/self/environ").exists():
        pytest.skip("reads /proc/PID/environ (Linux)")
    inherited = {
        "PATH": "/usr/bin:/bin",
        "MIRROR_HOST_SERVICE": "systemd",  # the host runs as the service …
        "MIRROR_HOST_MARK_NONCE": "ab" * 16,  # … or was started from a signed shell
        "MIRROR_HOST_ZDOTDIR": "/nowhere",
        "MIRROR_HOST_LOG_LEVEL": "info",  # a setting is the user's: passed on
    }
    source = LocalSource(
        ["exec sleep 30"], columns=80, rows=24, cwd=str(state_dir), env=inherited,
        shell_integration=shell_integration,
    )  # fmt: skip
    async with trio.open_nursery() as nursery:
        nursery.start_soon(source.run)
        with trio.fail_after(10):
            while not source.live_panes():
                await trio.sleep(0.02)
        (pane,) = source.live_panes()
        environ = await _environ_of(pane.pid)
        nursery.cancel_scope.cancel()
    assert "MIRROR_HOST_SERVICE" not in environ and "MIRROR_HOST_ZDOTDIR" not in environ
    assert environ["MIRROR_HOST_LOG_LEVEL"] == "info"
    nonce = environ.get("MIRROR_HOST_MARK_NONCE")
    if shell_integration:  # a new one of its own
        assert nonce is not None and nonce != "ab" * 16
        assert pane.screen.prompt.signed_only
    else:  # none at all: nothing signs, and the screen expects no signature
        assert nonce is None
        assert not pane.screen.prompt.signed_only
