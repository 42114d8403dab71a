"""The agliteterm source: host + the faithful fake agliteterm, over real TLS on loopback.

A Mac-style client (``vt-v1``) subscribes, replays each frame into a fresh
libghostty replica as Prowl's Mac client does and must see the fake's screen
cell for cell, in colour; it types, pages history and scrolls. A phone gets
text frames and sends agent input, which must reach the agent as one paste and
one Enter, with no empty paste ever sent. agliteterm being slow, refusing or
restarting never closes a connection.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
import trio

from mirror_host import control as c
from mirror_host.client.client import MirrorClient, login
from mirror_host.commands.agliteterm import AgliteCommands
from mirror_host.commands.delivery import DeliveryTiming
from mirror_host.commands.responses import SEND_REFUSED
from mirror_host.commands.service import CommandService
from mirror_host.config import Profile
from mirror_host.host.server import Host
from mirror_host.host.service import run_host
from mirror_host.panes.agliteterm import discovery as discovery_module
from mirror_host.panes.agliteterm import source as source_module
from mirror_host.panes.agliteterm.protocol import pane_uuid
from mirror_host.panes.agliteterm.source import AgliteSource
from mirror_host.panes.agliteterm.transport import (
    CommandTransport,
    Transport,
    UnixSocketTransport,
)
from mirror_host.session.logged_in import HISTORY_UNAVAILABLE
from mirror_host.terminal import Screen
from mirror_host.wire import TextFramePacket, VTFramePacket
from tests.fakes.agliteterm_fake import FakeAgliteterm
from tests.fakes.serving import serving
from tests.integration.agent_helpers import (
    FakeAgent,
    agent_input,
    bracketed,
    command,
    submissions_after,
)
from tests.integration.conftest import host_config, paired, port_of
from tests.integration.mirror_helpers import (
    frame_containing,
    list_panes,
    messages_within,
    next_frame,
    scroll_until_result,
    subscribe,
)

pytestmark = pytest.mark.timeout(120)

RELAY = Path(__file__).resolve().parent.parent / "fakes" / "unix_relay.py"
SHELL = "exec bash --norc --noprofile -i"
#: A static screen in colour: bold red, a 256-colour wide glyph pair, truecolor
#: on a background, faint italic, underline, inverse with strike, a wide glyph
#: in the last column.
COLOURS = (
    "printf '\\033[1;31mred\\033[0m \\033[38;5;200m中文\\033[0m "
    "\\033[38;2;10;20;30;48;2;200;100;50mrgb\\033[0m \\033[2;3mfaint\\033[0m "
    "\\033[4;94mundl\\033[0m \\033[7;9;42minv\\033[0m\\n'; "
    "printf '%*s\\033[45m字\\033[0m\\n' 78 ''; printf 'done-%d\\n' $((20+3)); exec sleep 120"
)


@asynccontextmanager
async def fake_agliteterm(state_dir: Path, **kw: Any) -> AsyncIterator[FakeAgliteterm]:
    fake = FakeAgliteterm(state_dir / "aglite.sock", **kw)
    async with serving(fake):
        yield fake


@asynccontextmanager
async def aglite_host(
    state_dir: Path,
    fake: FakeAgliteterm,
    *,
    transport: Transport | None = None,
    timing: DeliveryTiming | None = None,
    profiles: tuple[Profile, ...] = (),
    idle_lane_seconds: float = source_module.IDLE_LANE_SECONDS,
) -> AsyncIterator[tuple[Host, AgliteSource]]:
    source = AgliteSource(
        transport or UnixSocketTransport(Path(fake.socket_path)),
        idle_lane_seconds=idle_lane_seconds,
    )
    commands = CommandService(AgliteCommands(source, timing=timing, profiles=profiles))
    async with trio.open_nursery() as nursery:
        host: Host = await nursery.start(
            lambda task_status: run_host(
                host_config(state_dir), source, commands=commands, task_status=task_status
            )
        )
        await source.wait_listed()
        try:
            yield host, source
        finally:
            nursery.cancel_scope.cancel()


@asynccontextmanager
async def client_of(host: Host, name: str = "Mac") -> AsyncIterator[MirrorClient]:
    async with login("127.0.0.1", port_of(host), await paired(host, name)) as client:
        yield client


def key(fake: FakeAgliteterm, session: str) -> UUID:
    return pane_uuid(f"unix:{fake.socket_path}", session)


def replica_of(frame: VTFramePacket) -> Screen:
    """What Prowl's Mac client shows: a fresh replica of the frame's size, fed the frame."""
    replica = Screen(frame.columns, frame.rows)
    replica.feed(b"\x1bc" + frame.data)
    return replica


_STYLE = ("bold", "faint", "italic", "underline", "inverse", "strikethrough", "fg", "bg")


def assert_cell_exact(source: Screen, replica: Screen) -> int:
    """Every cell agliteterm reports (up to each row's last non-blank) is the same
    on the replica: text, flags and colours. Returns how many cells were compared."""
    columns, rows = source.size
    assert replica.size == (columns, rows)
    compared = 0
    for y, line in enumerate(source.active_text().split("\n")[:rows]):
        if not line.strip():
            continue
        for x in range(columns):
            want, want_style = source.cell(x, y)
            got, got_style = replica.cell(x, y)
            if want in ("", " ") and not any(
                source.cell(z, y)[0].strip() for z in range(x, columns)
            ):
                break  # agliteterm trims a row after its last non-blank cell
            assert got == want or (got, want) in (("", " "), (" ", "")), f"cell {x},{y}"
            want_fields, got_fields = dict(want_style), dict(got_style)
            for field in _STYLE:
                assert got_fields[field] == want_fields[field], f"cell {x},{y} {field}"
            compared += 1
    return compared


@pytest.mark.parametrize("dialect", ["lite", "full"])
async def test_a_mac_sees_the_pane_cell_exact_and_types_a_command(
    state_dir: Path, dialect: str
) -> None:
    async with fake_agliteterm(state_dir, dialect=dialect) as fake:
        work = fake.add_workspace("work")
        coloured = await fake.add_session(work, COLOURS, name="colours")
        shell = await fake.add_session(work, SHELL, name="shell")
        idle = await fake.add_session(work, "exec sleep 120", name="never watched")
        async with aglite_host(state_dir, fake) as (host, _source), client_of(host) as mac:
            listing = await list_panes(mac)
            assert sorted(p.title for p in listing.panes) == [
                "work · colours", "work · never watched", "work · shell"
            ]  # fmt: skip
            assert {"history", "remote-scroll", "scroll-state-v1"} <= set(listing.capabilities)
            assert "viewport-text-v1" not in listing.capabilities
            assert fake.requests_for("session.text") == []  # listing reads no screen

            sub = await subscribe(mac, key(fake, coloured))
            frame = await frame_containing(mac, sub, "done-23")
            assert isinstance(frame, VTFramePacket) and (frame.columns, frame.rows) == (80, 24)
            compared = assert_cell_exact(fake.screen(coloured), replica_of(frame))
            assert compared >= 100

            await mac.send(c.Subscribe(pane_id=key(fake, shell),
                                       representation=c.Representation.VT,
                                       intent=c.Intent.IF_FREE))  # fmt: skip
            # A second subscribe on one connection closes it (protocol rule):
            # the shell is driven from a second Mac instead.
            await mac.expect_closed()
        async with aglite_host(state_dir, fake) as (host, _source), client_of(host) as mac:
            sub = await subscribe(mac, key(fake, shell))
            await next_frame(mac, sub)
            await mac.send(c.Input(data=b"echo aglite-$((40+2))\r", subscription_id=sub))
            frame = await frame_containing(mac, sub, "aglite-42")
            assert b"echo aglite" in fake.received_input(shell)
            replica = replica_of(frame)
            assert "aglite-42" in replica.active_text()
            # Raw keys go with allow-control (a Mac's arrows and DEL are control bytes).
            typed = fake.requests_for("session.type", target=shell)
            assert typed and all(r["args"]["allow-control"] in ("true", True) for r in typed)
        # Nothing ever read the pane nobody watched.
        assert fake.requests_for("session.text", target=idle) == []
        assert fake.requests_for("session.metrics", target=idle) == []


async def test_a_phone_gets_text_frames(state_dir: Path) -> None:
    async with fake_agliteterm(state_dir) as fake:
        session = await fake.add_session(
            fake.add_workspace("w"), "printf 'phone view 中\\n'; exec sleep 120"
        )
        async with aglite_host(state_dir, fake) as (host, _source), client_of(host) as phone:
            sub = await subscribe(phone, key(fake, session), c.Representation.TEXT)
            frame = await frame_containing(phone, sub, "phone view 中")
            assert isinstance(frame, TextFramePacket)
            assert frame.text.split("\n")[0] == "phone view 中"


async def test_history_pages_back_through_the_scrollback(state_dir: Path) -> None:
    async with fake_agliteterm(state_dir) as fake:
        session = await fake.add_session(fake.add_workspace("w"), "seq 1 450; exec sleep 120")
        async with aglite_host(state_dir, fake) as (host, _source), client_of(host) as mac:
            sub = await subscribe(mac, key(fake, session))
            await frame_containing(mac, sub, "450")
            await mac.send(c.History(subscription_id=sub))
            page = await mac.expect(c.HistoryPage)
            assert isinstance(page, c.HistoryPage)
            assert page.lines[-1] == "450" and page.offset + len(page.lines) == page.total
            lines = list(page.lines)
            while page.offset > 0:
                await mac.send(c.History(history_id=page.history_id, offset=page.offset,
                                         subscription_id=sub))  # fmt: skip
                page = await mac.expect(c.HistoryPage)
                assert isinstance(page, c.HistoryPage)
                lines = list(page.lines) + lines
            assert lines == [str(n) for n in range(1, 451)]
            history = [r for r in fake.requests_for("session.text", target=session)
                       if r["args"].get("all") == "true"]  # fmt: skip
            assert len(history) == 1 and "styles" not in history[0]["args"]


async def test_remote_scroll_pages_the_hosts_copy_with_exact_bounds(state_dir: Path) -> None:
    async with fake_agliteterm(state_dir) as fake:
        session = await fake.add_session(fake.add_workspace("w"), "seq 1 60; exec sleep 120")
        async with aglite_host(state_dir, fake) as (host, _source), client_of(host) as mac:
            sub = await subscribe(mac, key(fake, session), include_scroll_state=True)
            await frame_containing(mac, sub, "60")
            # 60 lines and an empty row on 24 rows: 37 rows of scrollback, 21 per page.
            seen = await scroll_until_result(mac, sub, c.ScrollDirection.UP)
            state, frame = seen[-3], seen[-2]
            assert isinstance(frame, VTFramePacket) and isinstance(state, c.ScrollState)
            assert (state.at_top, state.at_bottom) == (False, False)
            shown = replica_of(frame).active_text().split("\n")
            assert shown[0] == "17" and shown[-1] == "40"
            seen = await scroll_until_result(mac, sub, c.ScrollDirection.UP)
            state, frame = seen[-3], seen[-2]
            assert isinstance(frame, VTFramePacket) and isinstance(state, c.ScrollState)
            assert (state.at_top, state.at_bottom) == (True, False)
            assert replica_of(frame).active_text().split("\n")[0] == "1"
            await scroll_until_result(mac, sub, c.ScrollDirection.DOWN)
            seen = await scroll_until_result(mac, sub, c.ScrollDirection.DOWN)
            state, frame = seen[-3], seen[-2]
            assert isinstance(state, c.ScrollState) and state.at_bottom is True
            assert isinstance(frame, VTFramePacket) and b"60" in frame.data
            # One scrollback read served every page.
            reads = [r for r in fake.requests_for("session.text") if "all" in r["args"]]
            assert len(reads) == 1


async def test_takeover_and_pane_close(state_dir: Path) -> None:
    async with fake_agliteterm(state_dir) as fake:
        session = await fake.add_session(fake.add_workspace("w"), SHELL)
        async with aglite_host(state_dir, fake) as (host, _source):
            async with client_of(host, "first") as first, client_of(host, "second") as second:
                pane = key(fake, session)
                sub = await subscribe(first, pane)
                await next_frame(first, sub)
                listed = await list_panes(second)
                assert [p.busy for p in listed.panes] == [True]
                taken = await subscribe(second, pane, intent=c.Intent.TAKEOVER)
                assert c.Ended(reason=c.EndReason.TAKEN_OVER) in await first.expect_closed()
                await next_frame(second, taken)
                await fake.close_session(session)
                assert c.Ended(reason=c.EndReason.PANE_CLOSED) in await second.expect_closed(
                    timeout=15
                )
            async with client_of(host, "third") as third:
                assert (await list_panes(third)).panes == ()


@pytest.mark.slow
async def test_slow_or_refusing_agliteterm_never_closes_a_connection(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch, host_log: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(source_module, "HISTORY_SECONDS", 2.0)
    monkeypatch.setattr(source_module, "BUSY_RETRY_SECONDS", 0.5)
    async with fake_agliteterm(state_dir) as fake:
        session = await fake.add_session(fake.add_workspace("w"), SHELL)
        async with aglite_host(state_dir, fake) as (host, source), client_of(host) as mac:
            pane = key(fake, session)
            sub = await subscribe(mac, pane)
            await next_frame(mac, sub)
            # Screen reads hang: the lease stays, pings go on, nothing fails.
            fake.delay("session.text", float("inf"))
            assert [
                m for m in await messages_within(mac, sub, 4.0) if isinstance(m, c.Failure)
            ] == []
            # History read hangs too: HISTORY_UNAVAILABLE, a recoverable answer.
            await mac.send(c.History(subscription_id=sub))
            failure = await mac.expect(c.Failure, timeout=10)
            assert failure == c.Failure(error=HISTORY_UNAVAILABLE, subscription_id=sub)
            fake.clear_delay()
            # Refused and partial input: logged, the connection goes on.
            fake.refuse_input(session, "busy", count=100)
            await mac.send(c.Input(data=b"echo refused\r", subscription_id=sub))
            with trio.fail_after(5):  # refused (after its busy retries) before the next
                while not any(" input not written" in m for m in host_log.messages):
                    await trio.sleep(0.05)
            fake.sessions[session].refusals.clear()
            fake.refuse_input(session, "partial")
            await mac.send(c.Input(data=b"echo partial-input\r", subscription_id=sub))
            assert [
                m for m in await messages_within(mac, sub, 4.5) if isinstance(m, c.Failure)
            ] == []
            # The log says which: refused outright, or perhaps partly written.
            inputs = [m for m in host_log.messages if " input " in m]
            assert len(inputs) == 2, inputs
            assert "input not written: agliteterm refused" in inputs[0]
            assert "busy or reserved" in inputs[0]
            assert "input may be partly written (19 bytes, not sent again): " in inputs[1]
            assert "bytes written" in inputs[1]
            fake.sessions[session].refusals.clear()
            await mac.send(c.Input(data=b"\x15echo after-$((1+1))\r", subscription_id=sub))
            await frame_containing(mac, sub, "after-2", timeout=15)
            assert b"echo refused" not in fake.received_input(session)
            assert source.is_listed(pane)


@pytest.mark.slow
async def test_restart_resets_the_cursor_and_new_sessions_appear(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(discovery_module, "SAFETY_TREE_SECONDS", 3600.0)
    async with fake_agliteterm(state_dir) as fake:
        work = fake.add_workspace("w")
        session = await fake.add_session(work, SHELL, name="kept")
        async with aglite_host(state_dir, fake) as (host, source), client_of(host) as mac:
            sub = await subscribe(mac, key(fake, session))
            await next_frame(mac, sub)
            for _ in range(30):
                fake.set_status(session, "idle")  # the cursor moves on
            with trio.fail_after(5):
                while source.discovery.cursor < 30:
                    await trio.sleep(0.05)
            await fake.restart()  # connections cut, cursor back to 1
            new = await fake.add_session(work, "exec sleep 120", name="after restart")
            with trio.fail_after(10):
                while key(fake, new) not in source.discovery.panes:
                    await trio.sleep(0.05)
            await mac.send(c.Input(data=b"echo still-$((3*3))\r", subscription_id=sub))
            await frame_containing(mac, sub, "still-9", timeout=15)
            titles = sorted(p.title for p in (await list_panes(mac)).panes)
            assert titles == ["w · after restart", "w · kept"]
            assert source.discovery.restarts_seen == 1  # the cursor went back from 31


@pytest.mark.parametrize("dialect", ["lite", "full"])
async def test_the_command_transport_reaches_agliteterm_and_comes_back(
    state_dir: Path, dialect: str
) -> None:
    async with fake_agliteterm(state_dir, dialect=dialect) as fake:
        session = await fake.add_session(fake.add_workspace("w"), SHELL)
        transport = CommandTransport(f"{sys.executable} {RELAY} {fake.socket_path}")
        async with aglite_host(state_dir, fake, transport=transport) as (host, _source):
            pane = pane_uuid(transport.endpoint, session)
            async with client_of(host) as mac:
                sub = await subscribe(mac, pane)
                await mac.send(c.Input(data=b"echo relay-$((7*6))\r", subscription_id=sub))
                await frame_containing(mac, sub, "relay-42")
                # agliteterm goes away under the relays: they exit; new ones are started.
                await fake.restart()
                # A keystroke racing the restart may be lost (it is never sent twice);
                # typed again, it goes through a new relay.
                with trio.fail_after(30):
                    while True:
                        await mac.send(c.Input(data=b"echo again-$((7*7))\r", subscription_id=sub))
                        try:
                            await frame_containing(mac, sub, "again-49", timeout=3)
                            break
                        except trio.TooSlowError:
                            continue


async def test_full_app_grid_comes_from_session_metrics(state_dir: Path) -> None:
    async with fake_agliteterm(state_dir, dialect="full") as fake:
        session = await fake.add_session(
            fake.add_workspace("w"), "printf 'wide\\n'; exec sleep 120", columns=132, rows=43
        )
        async with aglite_host(state_dir, fake) as (host, _source), client_of(host) as mac:
            sub = await subscribe(mac, key(fake, session))
            frame = await frame_containing(mac, sub, "wide")
            assert isinstance(frame, VTFramePacket)
            assert (frame.columns, frame.rows) == (132, 43)
            assert fake.requests_for("session.metrics", target=session)


async def test_a_build_that_refuses_lines_is_read_its_own_way(state_dir: Path) -> None:
    async with fake_agliteterm(state_dir, has_lines=False) as fake:
        session = await fake.add_session(fake.add_workspace("w"), "seq 1 40; exec sleep 120")
        async with aglite_host(state_dir, fake) as (host, _source), client_of(host) as mac:
            sub = await subscribe(mac, key(fake, session))
            frame = await frame_containing(mac, sub, "40")
            # The bare answer is the whole buffer: the screen rows are picked out.
            assert replica_of(frame).active_text().split("\n")[0] == "18"
            refused = [r for r in fake.requests_for("session.text") if "lines" in r["args"]]
            assert len(refused) == 1  # asked once, then the build's own way


async def test_an_old_build_without_styles_or_events_still_mirrors(state_dir: Path) -> None:
    async with fake_agliteterm(state_dir, has_styles=False, has_events=False) as fake:
        work = fake.add_workspace("w")
        session = await fake.add_session(work, "seq 1 30; exec sleep 120")
        async with aglite_host(state_dir, fake) as (host, source), client_of(host) as mac:
            sub = await subscribe(mac, key(fake, session))
            frame = await frame_containing(mac, sub, "30")
            text = replica_of(frame).active_text().split("\n")
            assert text[-1] == "30" and source.discovery.has_events is False
            late = await fake.add_session(work, "exec sleep 120", name="late")
            with trio.fail_after(10):
                while key(fake, late) not in source.discovery.panes:
                    await trio.sleep(0.05)


# ------------------------------------------------------------------ agent input


@asynccontextmanager
async def agent_rig(
    state_dir: Path, *, status: str = "idle", **agent_args: str
) -> AsyncIterator[tuple[FakeAgliteterm, FakeAgent, str, MirrorClient, UUID]]:
    """The scripted agent in an agliteterm session, and a phone's text lease on it."""
    agent = FakeAgent(state_dir / "agent")
    async with fake_agliteterm(state_dir, columns=120, rows=40) as fake:
        session = await fake.add_session(fake.add_workspace("w"), agent.command(), name="claude")
        if status:
            fake.set_status(session, status)
        timing = DeliveryTiming(settle_seconds=1.0)
        async with aglite_host(state_dir, fake, timing=timing) as (host, _source):
            async with client_of(host, "phone") as phone:
                sub = await subscribe(
                    phone, key(fake, session), c.Representation.TEXT, c.Intent.TAKEOVER
                )
                await frame_containing(phone, sub, "Welcome back Tester", timeout=15)
                yield fake, agent, session, phone, sub


def no_empty_paste(fake: FakeAgliteterm) -> None:
    assert fake.clipboard_pastes == 0
    for request in fake.requests_for("session.paste"):
        assert request["args"].get("text"), request


async def test_agent_input_is_one_paste_and_one_enter(state_dir: Path) -> None:
    async with agent_rig(state_dir) as (fake, agent, session, phone, sub):
        listed = await command(phone, c.ListCommand(), sub=sub)
        (item,) = listed["data"]["items"]
        assert item["pane"]["agent"] == "claude" and item["task"]["status"] == "idle"
        result = await command(phone, agent_input(key(fake, session), "fix the tests"), sub=sub)
        assert result["ok"] is True, result
        assert result["data"]["input"]["trailing_enter_sent"] is True
        with trio.fail_after(10):
            while not agent.submissions():
                await trio.sleep(0.05)
        assert agent.submissions()[0]["prompt"] == "fix the tests"
        assert bracketed("fix the tests") + b"\r" in agent.received()
        (paste,) = fake.requests_for("session.paste", target=session)
        assert paste["args"]["text"] == "fix the tests"
        no_empty_paste(fake)


async def test_a_multi_line_prompt_goes_between_explicit_markers(state_dir: Path) -> None:
    async with agent_rig(state_dir) as (fake, agent, session, phone, sub):
        prompt = "first line\nsecond line"
        result = await command(phone, agent_input(key(fake, session), prompt), sub=sub)
        assert result["ok"] is True, result
        assert fake.requests_for("session.paste") == []  # type with explicit markers instead
        received = agent.received()
        assert b"\x1b[200~first line\rsecond line\x1b[201~" in received
        no_empty_paste(fake)


@pytest.mark.parametrize(
    ("status", "code"),
    [("blocked", "DISPATCH_TARGET_BUSY"), ("working", "DISPATCH_TARGET_BUSY"),
     ("", "AGENT_NOT_FOUND")],
)  # fmt: skip
async def test_agliteterm_status_refuses_before_anything_is_written(
    state_dir: Path, status: str, code: str
) -> None:
    async with agent_rig(state_dir, status=status) as (fake, agent, session, phone, sub):
        result = await command(phone, agent_input(key(fake, session), "hello"), sub=sub)
        assert result["ok"] is False and result["error"]["code"] == code, result
        assert fake.requests_for("session.paste") == [] and fake.requests_for("session.type") == []
        assert agent.received() == b""


@pytest.mark.parametrize(
    ("refusal", "code"),
    [("busy", "DISPATCH_TARGET_BUSY"), ("partial", "SEND_FAILED"), ("in_flight", "SEND_FAILED"),
     ("unknown", "SEND_FAILED")],
)  # fmt: skip
async def test_paste_refusals_map_to_the_protocol(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch, refusal: str, code: str
) -> None:
    monkeypatch.setattr(source_module, "BUSY_RETRY_SECONDS", 0.5)  # busy: tried, then refused
    async with agent_rig(state_dir) as (fake, agent, session, phone, sub):
        fake.refuse_input(session, refusal, count=100)
        result = await command(phone, agent_input(key(fake, session), "do not deliver"), sub=sub)
        assert result["ok"] is False and result["error"]["code"] == code, result
        # Whatever went, no Enter followed it: a partial write is never "delivered".
        assert fake.requests_for("session.type", target=session) == []
        assert b"\r" not in agent.received()
        assert agent.submissions() == []
        no_empty_paste(fake)


async def test_a_dialog_on_screen_refuses_even_when_the_status_says_idle(state_dir: Path) -> None:
    async with agent_rig(state_dir) as (fake, agent, session, phone, sub):
        agent.set(state="blocked")
        await frame_containing(phone, sub, "Do you want to proceed?", timeout=15)
        result = await command(phone, agent_input(key(fake, session), "yes"), sub=sub)
        assert result["ok"] is False and result["error"]["code"] == "DISPATCH_TARGET_BUSY"
        assert fake.requests_for("session.paste") == []
        assert agent.received() == b""


async def test_send_to_a_shell_pane_is_prowls_own_refusal(state_dir: Path) -> None:
    """agliteterm reports no prompt marks, so ``send`` is refused the way Prowl's host
    refuses it (docs/operations.md), not read and answered ``SHELL_NOT_READY``."""
    async with fake_agliteterm(state_dir) as fake:
        shell = await fake.add_session(fake.add_workspace("w"), SHELL, name="shell")
        async with aglite_host(state_dir, fake) as (host, _source), client_of(host) as phone:
            pane = key(fake, shell)
            assert "shell-send" not in (await list_panes(phone)).capabilities
            sub = await subscribe(phone, pane, c.Representation.TEXT)
            await next_frame(phone, sub)
            send = c.SendCommand(
                pane=str(pane).upper(),
                text="ls",
                trailing_enter=True,
                source="argv",
                wait=False,
                capture_output=False,
            )
            result = await command(phone, send, sub=sub)
            assert result["error"] == {"code": "REMOTE_COMMAND_REJECTED", "message": SEND_REFUSED}
            assert (
                fake.requests_for("session.paste") == [] and fake.requests_for("session.type") == []
            )


async def test_list_says_idle_only_for_an_agent(state_dir: Path) -> None:
    """``task.status`` ``idle`` means a ``send`` would be taken (docs/security.md), and
    agliteterm takes none: a pane without an agent has no status, an agent's is
    agliteterm's (``running`` while it reports the agent working)."""
    async with fake_agliteterm(state_dir) as fake:
        work = fake.add_workspace("w")
        shell = await fake.add_session(work, SHELL, name="shell")
        working = await fake.add_session(work, "exec sleep 120", name="working")
        waiting = await fake.add_session(work, "exec sleep 120", name="waiting")
        fake.set_status(working, "working")
        fake.set_status(waiting, "idle")
        async with aglite_host(state_dir, fake) as (host, _source), client_of(host) as phone:
            listed = await command(phone, c.ListCommand())
            tasks = {item["pane"]["id"]: item["task"] for item in listed["data"]["items"]}
            assert tasks == {
                str(key(fake, shell)).upper(): {},
                str(key(fake, working)).upper(): {"status": "running"},
                str(key(fake, waiting)).upper(): {"status": "idle"},
            }


# ------------------------------------------------------------------ connections


def relays(fake: FakeAgliteterm) -> int:
    """The relay processes (``--agliteterm-command``) running to this fake now."""
    count = 0
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if str(RELAY).encode() in argv and fake.socket_path.encode() in argv:
            count += 1
    return count


def pane_lanes(source: AgliteSource, session: str) -> list[str]:
    return [name for name in source.client.lane_names() if name.endswith(f":{session}")]


async def no_pane_connections(fake: FakeAgliteterm, source: AgliteSource, session: str) -> None:
    """Wait until ``session`` has no lane left, and agliteterm no connection (nor relay)
    beyond the source's shared lanes (discovery, commands)."""
    with trio.fail_after(15):
        while pane_lanes(source, session) or fake.connections_open > source.client.lanes_open():
            await trio.sleep(0.05)
    assert source.client.lanes_open() <= 2  # discovery and commands


@pytest.mark.slow
async def test_a_first_prompt_on_an_unwatched_pane_leaves_no_connection_open(
    state_dir: Path,
) -> None:
    launched = FakeAgent(state_dir / "launched", "launched")
    profile = Profile(
        id="fake", name="Fake Claude", agent=sys.executable, args=tuple(launched.arguments())
    )
    async with fake_agliteterm(state_dir, columns=120, rows=40) as fake:
        workspace = fake.add_workspace("w")
        await fake.add_session(workspace, SHELL, name="shell")
        transport = CommandTransport(f"{sys.executable} {RELAY} {fake.socket_path}")
        async with (
            aglite_host(
                state_dir,
                fake,
                transport=transport,
                timing=DeliveryTiming(settle_seconds=1.0),
                profiles=(profile,),
                idle_lane_seconds=0.5,
            ) as (host, source),
            client_of(host, "phone") as phone,
        ):
            before = set(fake.sessions)

            async def report_idle() -> None:
                # What the agent's agliteterm hook does once it is up.
                while not set(fake.sessions) - before:
                    await trio.sleep(0.02)
                (created,) = set(fake.sessions) - before
                fake.set_status(created, "idle")

            async with trio.open_nursery() as nursery:
                nursery.start_soon(report_idle)
                result = await command(
                    phone,
                    c.CreateCommand(
                        resource="tab",
                        worktree_id=workspace,
                        launch=c.Launch(profile="fake", prompt="first task"),
                        background=True,
                    ),
                )
            assert result["ok"] is True, result
            assert await submissions_after(launched, 1) == [
                {"prompt": "first task", "state": "idle"}
            ]
            (created,) = set(fake.sessions) - before
            assert fake.requests_for("session.paste", target=created)  # it used its lanes
            await no_pane_connections(fake, source, created)
            assert relays(fake) == source.client.lanes_open()


@pytest.mark.slow
async def test_a_pane_that_leaves_the_tree_leaves_no_connection_open(state_dir: Path) -> None:
    async with fake_agliteterm(state_dir) as fake:
        session = await fake.add_session(fake.add_workspace("w"), SHELL)
        transport = CommandTransport(f"{sys.executable} {RELAY} {fake.socket_path}")
        # Idle lanes are kept for an hour: only the pane's leaving may close them.
        async with aglite_host(state_dir, fake, transport=transport, idle_lane_seconds=3600) as (
            _host,
            source,
        ):
            pane = pane_uuid(transport.endpoint, session)
            await source.read_screen(pane)  # a command's read of a pane nobody watches
            await source.type_for_host(pane, "true", allow_control=False)
            assert sorted(pane_lanes(source, session)) == [f"agent:{session}", f"input:{session}"]
            await fake.close_session(session)
            await no_pane_connections(fake, source, session)
            assert relays(fake) == source.client.lanes_open()
