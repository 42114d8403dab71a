"""Phones answering a coding agent in a tmux pane and in a local pane, end to end.

A scripted Claude-Code look-alike (``tests/fakes/claude``) runs in a real tmux
pane or a real PTY of the host; a phone with a ``text-v1`` lease sends
``agentsInput`` through the real host and TLS. The agent logs every byte it
reads, so each test proves exactly what was typed: one bracketed paste and one
Enter when it is ready, nothing at all when it is blocked, holds a draft, keeps
working past the grace period, or is gone.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
import trio

from mirror_host import control as c
from mirror_host.client.client import MirrorClient, login
from mirror_host.commands.delivery import DeliveryTiming
from mirror_host.commands.local import LocalCommands
from mirror_host.commands.service import CommandService
from mirror_host.commands.tmux import TmuxCommands
from mirror_host.config import Profile
from mirror_host.host.server import Host
from mirror_host.host.service import run_host
from mirror_host.panes.local import LocalSource
from mirror_host.panes.tmux import TmuxSource
from tests.integration.agent_helpers import (
    FakeAgent,
    agent_input,
    bracketed,
    command,
    received_settles,
    screen_shows,
    submissions_after,
)
from tests.integration.conftest import host_config, paired, port_of
from tests.integration.mirror_helpers import list_panes, subscribe
from tests.integration.test_tmux import TmuxServer

pytestmark = pytest.mark.timeout(120)

KINDS = [
    pytest.param("tmux", marks=pytest.mark.skipif(shutil.which("tmux") is None, reason="no tmux")),
    "local",
]
COLUMNS, ROWS = 215, 64


@dataclass
class Rig:
    """A host mirroring one scripted agent (and one plain shell) through one source."""

    kind: str
    host: Host
    source: TmuxSource | LocalSource
    commands: TmuxCommands | LocalCommands
    agent: FakeAgent
    pane: UUID
    shell: UUID
    tmux: TmuxServer | None


async def _local_panes(source: LocalSource, count: int) -> list[UUID]:
    with trio.fail_after(10):
        while len(source.live_panes()) < count:
            await trio.sleep(0.02)
    return [pane.id for pane in source.live_panes()]


async def _tmux_pane(source: TmuxSource, session: str) -> UUID:
    with trio.fail_after(10):
        while True:
            for pane_id, row in source.pane_rows():
                if row.session_name == session:
                    return pane_id
            await trio.sleep(0.02)


@asynccontextmanager
async def rig(
    kind: str,
    state_dir: Path,
    *,
    timing: DeliveryTiming | None = None,
    agent_args: tuple[str, ...] = (),
    profiles: tuple[Profile, ...] = (),
    cwd: Path | None = None,
) -> AsyncIterator[Rig]:
    """The scripted agent (working in ``cwd``) and a plain shell, mirrored by a real host."""
    agent = FakeAgent(state_dir / "agent")
    directory = str(cwd or state_dir)
    server: TmuxServer | None = None
    source: TmuxSource | LocalSource
    commands: TmuxCommands | LocalCommands
    if kind == "tmux":
        server = TmuxServer(state_dir)
        server.start()
        server.tmux("new-session", "-d", "-s", "agents", "-x", str(COLUMNS), "-y", str(ROWS),
                    "-c", directory, agent.command(*agent_args))  # fmt: skip
        source = TmuxSource(socket_name=server.name)
        commands = TmuxCommands(source, profiles=profiles, timing=timing)
    else:
        local = [
            agent.command(*agent_args),
            f"cd {shlex.quote(str(state_dir))} && exec bash --norc --noprofile",
        ]
        source = LocalSource(local, columns=COLUMNS, rows=ROWS, cwd=directory)
        commands = LocalCommands(source, profiles=profiles, timing=timing)
    try:
        async with trio.open_nursery() as nursery:
            host: Host = await nursery.start(
                lambda task_status: run_host(
                    host_config(state_dir),
                    source,
                    commands=CommandService(commands),
                    task_status=task_status,
                )
            )
            if isinstance(source, TmuxSource):
                await source.wait_listed()
                pane, shell = await _tmux_pane(source, "agents"), await _tmux_pane(source, "work")
            else:
                pane, shell = await _local_panes(source, 2)
            try:
                yield Rig(kind, host, source, commands, agent, pane, shell, server)
            finally:
                nursery.cancel_scope.cancel()
    finally:
        if server is not None:
            server.stop()


@asynccontextmanager
async def phone_on(
    setup: Rig, pane: UUID | None = None, *, advertised: set[str] | None = None
) -> AsyncIterator[tuple[MirrorClient, UUID]]:
    """A phone holding a text-v1 lease on the pane (the agent's by default).

    ``advertised`` receives the capabilities its pane list showed first.
    """
    async with login("127.0.0.1", port_of(setup.host), await paired(setup.host)) as phone:
        listing = await list_panes(phone)
        if advertised is not None:
            advertised.update(listing.capabilities)
        sub = await subscribe(phone, pane or setup.pane, c.Representation.TEXT, c.Intent.TAKEOVER)
        yield phone, sub


async def send(phone: MirrorClient, sub: UUID, setup: Rig, prompt: str) -> Any:
    return await command(phone, agent_input(setup.pane, prompt), sub=sub)


async def echoed(phone: MirrorClient, sub: UUID, prompt: str) -> None:
    """Wait until the agent has taken ``prompt`` and echoed it above an empty box.

    The result comes as soon as Enter is written; the agent redraws a moment
    later, and until then the prompt still sits in its box as a draft. (The
    echo is ``❯`` and a space; the box has a no-break space after its ``❯``.)
    """
    await phone.send(c.Refresh(subscription_id=sub))  # it may already be on screen
    await screen_shows(phone, sub, f"❯ {prompt}")


def delivered(prompt: str, *, characters: int | None = None) -> dict[str, Any]:
    return {
        "ok": True,
        "command": "agents.input",
        "schema_version": "prowl.cli.agents.input.v1",
        "data": {
            "input": {
                "bytes": len(prompt.encode()),
                "characters": len(prompt) if characters is None else characters,
                "source": "argument",
                "trailing_enter_sent": True,
            }
        },
    }


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.slow
async def test_a_ready_agent_gets_the_prompt_once_with_one_enter(
    state_dir: Path, kind: str
) -> None:
    advertised: set[str] = set()
    async with (
        rig(kind, state_dir) as setup,
        phone_on(setup, advertised=advertised) as (
            phone,
            sub,
        ),
    ):
        assert {"agents-dispatch", "agent-input", "launch-shell"} <= advertised
        await screen_shows(phone, sub, "❯", "bypass permissions")
        prompt = "Refactor the parser, then run the tests — ünïcode 👋"
        result = await send(phone, sub, setup, prompt)
        assert result == delivered(prompt, characters=len(prompt))
        assert await received_settles(setup.agent) == bracketed(prompt) + b"\r"
        assert await submissions_after(setup.agent, 1) == [{"prompt": prompt, "state": "idle"}]
        await phone.send(c.Refresh(subscription_id=sub))  # the answer may already be on screen
        await screen_shows(phone, sub, "● Done.")
        # The same again is a new delivery, with its own single Enter.
        assert await send(phone, sub, setup, "and commit") == delivered("and commit")
        submitted = await submissions_after(setup.agent, 2)
        assert [s["prompt"] for s in submitted] == [prompt, "and commit"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.slow
async def test_long_pastes_and_faint_suggestions(state_dir: Path, kind: str) -> None:
    async with rig(kind, state_dir) as setup, phone_on(setup) as (phone, sub):
        setup.agent.set(state="idle", ghost="try: write a test for parser.py")
        await screen_shows(phone, sub, "try: write a test")
        # The faint suggestion is no draft; a many-line paste collapses into a token.
        prompt = "Plan:\n1. read the code\n2. fix the bug\n3. add a test"
        assert (await send(phone, sub, setup, prompt))["ok"] is True
        assert await received_settles(setup.agent) == bracketed(prompt) + b"\r"
        assert await submissions_after(setup.agent, 1) == [{"prompt": prompt, "state": "idle"}]
        dispatch = c.AgentsDispatchCommand(pane=str(setup.pane), prompt="next step")
        result = await command(phone, dispatch, sub=sub)
        assert (result["ok"], result["command"], result["schema_version"]) == (
            True, "agents.dispatch", "prowl.cli.agents.dispatch.v1",
        )  # fmt: skip
        assert result["data"]["input"]["trailing_enter_sent"] is True
        await echoed(phone, sub, "next step")
        # Longer than a row: the look-alike prints it as one line and the terminal wraps it.
        long = " ".join(f"step {n}: read the failing test and fix the parser;" for n in range(5))
        assert len(long) > COLUMNS
        assert await send(phone, sub, setup, long) == delivered(long)
        submitted = await submissions_after(setup.agent, 3)
        assert submitted[-1] == {"prompt": long, "state": "idle"}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.slow
async def test_prompts_that_start_like_menu_options(state_dir: Path, kind: str) -> None:
    """`❯ 1. Fix…` in the box is the paste, and its echo above the box is no menu either."""
    async with rig(kind, state_dir) as setup, phone_on(setup) as (phone, sub):
        await screen_shows(phone, sub, "bypass permissions")
        first, second = "1. Fix the bug in parser.py", "2. Then add a regression test"
        assert await send(phone, sub, setup, first) == delivered(first)
        await echoed(phone, sub, first)
        assert await send(phone, sub, setup, second) == delivered(second)
        submitted = await submissions_after(setup.agent, 2)
        assert [s["prompt"] for s in submitted] == [first, second]
        assert await received_settles(setup.agent) == (
            bracketed(first) + b"\r" + bracketed(second) + b"\r"
        )


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.slow
async def test_blocked_draft_busy_and_bad_prompts_get_nothing_typed(
    state_dir: Path, kind: str
) -> None:
    timing = DeliveryTiming(settle_seconds=0.5)
    async with rig(kind, state_dir, timing=timing) as setup, phone_on(setup) as (phone, sub):
        await screen_shows(phone, sub, "❯")
        setup.agent.set(state="blocked")
        await screen_shows(phone, sub, "Do you want to proceed?")
        blocked = await send(phone, sub, setup, "yes")
        assert (blocked["ok"], blocked["error"]["code"]) == (False, "DISPATCH_TARGET_BUSY")
        assert "waiting for an answer" in blocked["error"]["message"]

        setup.agent.set(state="idle", draft="half-written thought")
        await screen_shows(phone, sub, "half-written thought")
        draft = await send(phone, sub, setup, "hello")
        assert (draft["ok"], draft["error"]["code"]) == (False, "DISPATCH_TARGET_BUSY")
        assert "draft" in draft["error"]["message"]

        setup.agent.set(state="working", draft="")
        await screen_shows(phone, sub, "Puzzling")
        busy = await send(phone, sub, setup, "hello")
        assert (busy["ok"], busy["error"]["code"]) == (False, "DISPATCH_TARGET_BUSY")
        assert "still working" in busy["error"]["message"]

        setup.agent.set(state="idle")
        await screen_shows(phone, sub, "bypass permissions")
        for prompt in ("   \n", "ok\x1b[201~\rrm -rf /\r", "bell\x07"):
            bad = await send(phone, sub, setup, prompt)
            assert (bad["ok"], bad["error"]["code"]) == (False, "INVALID_ARGUMENT"), prompt
        assert await received_settles(setup.agent) == b""
        assert setup.agent.submissions() == []


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.slow
async def test_a_turn_ending_within_the_grace_period_is_waited_for(
    state_dir: Path, kind: str
) -> None:
    async with rig(kind, state_dir, timing=DeliveryTiming(settle_seconds=60)) as setup:
        async with phone_on(setup) as (phone, sub):
            setup.agent.set(state="working")
            await screen_shows(phone, sub, "Puzzling")
            results: list[Any] = []

            async def ask() -> None:
                results.append(await send(phone, sub, setup, "after your turn"))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(ask)
                await trio.sleep(0.5)
                assert setup.agent.received() == b""  # nothing typed while it works
                setup.agent.set(state="idle")
            assert results == [delivered("after your turn")]
            assert await submissions_after(setup.agent, 1) == [
                {"prompt": "after your turn", "state": "idle"}
            ]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.slow
async def test_recent_typing_on_a_mac_refuses_delivery(state_dir: Path, kind: str) -> None:
    async with rig(kind, state_dir, timing=DeliveryTiming(quiet_seconds=300)) as setup:
        async with login("127.0.0.1", port_of(setup.host), await paired(setup.host, "Mac")) as mac:
            lease = await subscribe(mac, setup.pane)
            await screen_shows(mac, lease, "bypass permissions")
            await mac.send(c.Input(data=b"\x1b[A", subscription_id=lease))  # an arrow key
            assert await received_settles(setup.agent) == b"\x1b[A"
            async with phone_on(setup) as (phone, sub):
                await screen_shows(phone, sub, "❯")
                result = await send(phone, sub, setup, "hello")
                assert (result["ok"], result["error"]["code"]) == (False, "DISPATCH_TARGET_BUSY")
                assert "typing" in result["error"]["message"]
        assert await received_settles(setup.agent) == b"\x1b[A"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.slow
async def test_a_shell_pane_has_no_agent(state_dir: Path, kind: str) -> None:
    async with rig(kind, state_dir) as setup, phone_on(setup, setup.shell) as (phone, sub):
        result = await command(
            phone, c.AgentsInputCommand(pane=str(setup.shell), prompt="ls"), sub=sub
        )
        assert (result["ok"], result["error"]["code"]) == (False, "AGENT_NOT_FOUND")


@pytest.mark.parametrize("kind", KINDS)
async def test_a_vanished_pane_gets_nothing(state_dir: Path, kind: str) -> None:
    async with rig(kind, state_dir) as setup:
        async with phone_on(setup) as (phone, sub):
            await screen_shows(phone, sub, "❯")
            if setup.tmux is not None:
                setup.tmux.tmux("kill-session", "-t", "agents")
            else:
                assert isinstance(setup.source, LocalSource)
                os.kill(setup.source.pane(setup.pane).process.pid, signal.SIGKILL)
            ended = await phone.expect_closed()
            assert c.Ended(reason=c.EndReason.PANE_CLOSED) in ended
        with trio.fail_after(10):
            while setup.source.is_listed(setup.pane):
                await trio.sleep(0.02)
        result: Any = await setup.commands.agent_input(
            setup.pane, "hello", dispatch=False, authorized=lambda: True
        )
        assert (result["ok"], result["error"]["code"]) == (False, "TARGET_NOT_FOUND")
        assert setup.agent.received() == b""


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.slow
async def test_an_agent_without_bracketed_paste(state_dir: Path, kind: str) -> None:
    """It reads a paste as keys: one line goes as plain text, as a terminal would send it,
    and a line break never reaches it where it could act as Enter."""
    async with rig(kind, state_dir, agent_args=("--no-bracketed-paste",)) as setup:
        async with phone_on(setup) as (phone, sub):
            await screen_shows(phone, sub, "❯")
            assert await send(phone, sub, setup, "one line") == delivered("one line")
            assert await received_settles(setup.agent) == b"one line\r"
            first = [{"prompt": "one line", "state": "idle"}]
            assert await submissions_after(setup.agent, 1) == first
            await echoed(phone, sub, "one line")
            result = await send(phone, sub, setup, "line one\nline two")
            if kind == "local":  # the host's own screen knows the mode is off: nothing written
                assert (result["ok"], result["error"]["code"]) == (False, "DISPATCH_TARGET_BUSY")
                assert "bracketed paste" in result["error"]["message"]
                tab = await send(phone, sub, setup, "a\tb")
                assert (tab["ok"], tab["error"]["code"]) == (False, "DISPATCH_TARGET_BUSY")
                assert await received_settles(setup.agent) == b"one line\r"
            else:  # tmux cannot tell: the markers go, show up as text, and no Enter follows
                assert (result["ok"], result["error"]["code"]) == (False, "SEND_FAILED")
                after = b"one line\r" + bracketed("line one\nline two")
                assert await received_settles(setup.agent) == after
            assert setup.agent.submissions() == first
