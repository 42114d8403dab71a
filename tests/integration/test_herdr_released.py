"""Herdr as it is released (issue 26), against the fake that follows its source.

Each test here failed against mirror-host before the change it covers: a
launch taken as ready, pane ids lost in a Herdr restart, a deferred read turned
into a closed connection, an observe program of another version respawned
silently, Herdr's own pane titles and ``done`` status dropped, a ``create`` that
could outlast the phone's 30 s.
"""

from __future__ import annotations

import logging
import os
import stat
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
import trio

from mirror_host import control as c
from mirror_host.client.client import MirrorClient, login
from mirror_host.commands.herdr import HerdrCommands
from mirror_host.commands.service import CommandService
from mirror_host.config import Profile
from mirror_host.host.server import Host
from mirror_host.host.service import run_host
from mirror_host.panes.herdr import source as herdr_source_module
from mirror_host.panes.herdr.client import HerdrClient
from mirror_host.panes.herdr.source import HerdrSource
from tests.fakes.herdr_fake import FakeHerdr
from tests.fakes.serving import serving
from tests.integration.conftest import host_config, paired, port_of
from tests.integration.mirror_helpers import (
    frame_containing,
    frame_text,
    list_panes,
    next_frame,
    subscribe,
)

pytestmark = pytest.mark.timeout(120)

FAKES = Path(__file__).resolve().parent.parent / "fakes"
FAKE_CLI = str(FAKES / "herdr")
SHELL = "exec bash --norc --noprofile -i"
PROFILE = Profile(id="cc", name="Claude Code", agent="claude")


@pytest.fixture
def agent_bin(state_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `claude` on PATH, so the profile counts as installed."""
    bin_dir = state_dir / "bin"
    bin_dir.mkdir()
    program = bin_dir / "claude"
    program.write_text("#!/bin/sh\nexec cat\n")
    program.chmod(program.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bin_dir


@asynccontextmanager
async def herdr_host(
    state_dir: Path, *, herdr_bin: str = FAKE_CLI, commands: bool = False
) -> AsyncIterator[tuple[Host, HerdrSource]]:
    """A host on the fake's socket (with the Herdr command backend if ``commands``)."""
    source = HerdrSource(state_dir / "herdr.sock", herdr_bin=herdr_bin)
    service = CommandService(HerdrCommands(source, profiles=(PROFILE,))) if commands else None
    async with trio.open_nursery() as nursery:
        host: Host = await nursery.start(
            lambda task_status: run_host(
                host_config(state_dir), source, commands=service, task_status=task_status
            )
        )
        await source.wait_listed()
        if service is not None:
            backend = service.backend
            assert isinstance(backend, HerdrCommands)
            with trio.fail_after(10):
                while not backend._has_agent_start:
                    await trio.sleep(0.02)
        try:
            yield host, source
        finally:
            nursery.cancel_scope.cancel()


async def run(
    client: MirrorClient, command: c.RemoteCommand, *, sub: UUID | None = None, timeout: float = 30
) -> tuple[Any, float]:
    """One command as a phone sends it: its answer and how long it took."""
    request = c.CommandRequest(
        request_id=uuid.uuid4(), request=c.CommandEnvelope(output="json", command=command)
    )
    started = trio.current_time()
    await client.send(c.Command(subscription_id=sub, command_request=request))
    with trio.fail_after(timeout):  # the apps give up after 30 s
        while True:
            item = await client.receive(timeout=timeout)
            if isinstance(item, c.CommandResult):
                assert item.command_response.request_id == request.request_id
                return item.command_response.response, trio.current_time() - started


def created_tabs(fake: FakeHerdr) -> list[dict[str, Any]]:
    """``tab.create`` requests other than the host's feature probe."""
    return [
        r for r in fake.requests_for("tab.create")
        if r["params"].get("workspace_id") != "mirror-host-probe"
    ]  # fmt: skip


def agent_create(workspace: str, prompt: str | None) -> c.CreateCommand:
    return c.CreateCommand(
        resource="tab",
        worktree_id=workspace,
        launch=c.Launch(profile=PROFILE.id, prompt=prompt),
        background=True,
    )


async def prompts_settle(fake: FakeHerdr, count: int, *, quiet: float = 1.0) -> None:
    """Wait for ``count`` accepted prompts, then a while longer for any extra one."""
    with trio.fail_after(40):
        while len(fake.prompts) < count:
            await trio.sleep(0.05)
    await trio.sleep(quiet)


# ---------------------------------------------------------------- 1. agent launch


@pytest.mark.slow
async def test_a_create_waits_out_a_3_s_launch_and_prompts_once(
    state_dir: Path, agent_bin: Path
) -> None:
    """Herdr leaves ``interactive_ready`` out until the launch settles (3 s): the prompt
    waits for it, one tab is made, the prompt is delivered exactly once."""
    fake = FakeHerdr(state_dir / "herdr.sock", agent_ready_after=3.0)
    workspace = fake.add_workspace("api", cwd=str(state_dir))
    async with serving(fake), herdr_host(state_dir, commands=True) as (host, _source):
        async with login("127.0.0.1", port_of(host), await paired(host)) as phone:
            result, took = await run(phone, agent_create(workspace, "fix the login bug"))
        assert result["ok"] is True, result
        assert "first_prompt" not in result["data"]  # delivered before the answer
        assert took >= 3.0
        await prompts_settle(fake, 1)
        assert len(created_tabs(fake)) == 1
        assert fake.launches == 1
        (pane_id,) = fake.pane_ids()
        assert fake.prompts == [(pane_id, "fix the login bug")]
        # Asked once: never while the launch was pending (Herdr answers agent_not_ready).
        assert len(fake.requests_for("agent.prompt")) == 1


async def test_an_agent_gone_before_it_was_ready_fails_the_create_once(
    state_dir: Path, agent_bin: Path
) -> None:
    """Idle with neither ``launch_pending`` nor ``interactive_ready``: "exited before
    becoming interactive", as Herdr's CLI says; no prompt, no second tab."""
    fake = FakeHerdr(state_dir / "herdr.sock", agent_ready_after=1.0, agent_launch="exit")
    workspace = fake.add_workspace("api", cwd=str(state_dir))
    async with serving(fake), herdr_host(state_dir, commands=True) as (host, _source):
        async with login("127.0.0.1", port_of(host), await paired(host)) as phone:
            result, _ = await run(phone, agent_create(workspace, "hello"))
        assert result["ok"] is False and result["error"]["code"] == "CREATE_FAILED", result
        assert "exited before" in result["error"]["message"]
        assert "opened" in result["error"]["message"]  # the tab is there: do not retry
        assert fake.requests_for("agent.prompt") == []
        assert len(created_tabs(fake)) == 1 and fake.launches == 1


# ---------------------------------------------------------------- 9. answered in time


@pytest.mark.slow
async def test_a_slow_launch_is_answered_in_time_and_its_prompt_follows(
    state_dir: Path, agent_bin: Path
) -> None:
    """A launch that takes 25 s: the phone has its answer well within its 30 s, the
    prompt is delivered once afterwards and retained as the pane's receipt."""
    fake = FakeHerdr(state_dir / "herdr.sock", agent_ready_after=25.0)
    workspace = fake.add_workspace("api", cwd=str(state_dir))
    async with serving(fake), herdr_host(state_dir, commands=True) as (host, _source):
        credential = await paired(host)
        async with login("127.0.0.1", port_of(host), credential) as phone:
            result, took = await run(phone, agent_create(workspace, "write the tests"))
            assert result["ok"] is True, result
            assert took < 25.0
            assert fake.prompts == []  # not yet: the agent is still starting
            pending = result["data"]["first_prompt"]
            assert pending["status"] == "pending"
            receipt_id = UUID(pending["receipt_id"])
            pane = UUID(result["data"]["target"]["pane"]["id"])
            # The phone opens the new pane; its receipt answers once the prompt is in.
            sub = await subscribe(phone, pane, c.Representation.TEXT)
            await phone.send(c.CommandReceipt(subscription_id=sub, command_receipt_id=receipt_id))
            with trio.fail_after(40):
                while True:
                    item = await phone.receive(timeout=40)
                    if isinstance(item, c.CommandResult):
                        break
            response = item.command_response.response
            assert item.command_response.request_id == receipt_id
            assert response["ok"] is True and response["command"] == "agents.input", response
            assert response["data"]["input"]["trailing_enter_sent"] is True
        await prompts_settle(fake, 1)
        (pane_id,) = fake.pane_ids()
        assert fake.prompts == [(pane_id, "write the tests")]
        assert len(created_tabs(fake)) == 1 and fake.launches == 1


# ---------------------------------------------------------------- 2. ids across a restart


async def _wait_relisted(source: HerdrSource, terminals: set[str]) -> None:
    """Until the host has read the new server (none of the old terminals left)."""
    with trio.fail_after(30):
        while True:
            snapshot = source.snapshot
            current = {p.terminal_id for p in snapshot.panes} if snapshot else set()
            if current and not current & terminals:
                return
            await trio.sleep(0.1)


@pytest.mark.slow
async def test_pane_ids_survive_a_herdr_restart_with_restore(state_dir: Path) -> None:
    """Herdr restores its session with the same public pane ids and new terminal ids:
    the host's pane ids stay, and a phone's subscription goes on."""
    socket = state_dir / "herdr.sock"
    first = FakeHerdr(socket)
    api = first.add_workspace("api", cwd=str(state_dir))
    tab = first.add_tab(api, "agents")
    await first.add_pane(tab, SHELL)
    await first.add_pane(tab, SHELL)
    web = first.add_tab(first.add_workspace("web", cwd="/tmp"), "server")
    await first.add_pane(web, SHELL)
    herdr_ids = first.pane_ids()
    old_terminals = {first.terminal_id(p) for p in herdr_ids}
    async with trio.open_nursery() as nursery:
        await nursery.start(first.serve)
        async with herdr_host(state_dir) as (host, source):
            credential = await paired(host)
            async with login("127.0.0.1", port_of(host), credential) as phone:
                before = [p.id for p in (await list_panes(phone)).panes]
                assert len(set(before)) == 3
                sub = await subscribe(phone, before[1])
                await phone.send(c.Input(data=b"echo first-$((1+1))\r", subscription_id=sub))
                await frame_containing(phone, sub, "first-2")
                second = first.restarted()  # what Herdr will restore
                await first.stop()  # Herdr exits (a reboot, an upgrade)
                assert second.pane_ids() == herdr_ids  # Herdr keeps its public ids
                await nursery.start(second.serve)
                await _wait_relisted(source, old_terminals)
                assert not {second.terminal_id(p) for p in second.pane_ids()} & old_terminals
                after = [p.id for p in (await list_panes(phone)).panes]
                assert after == before
                # The phone's lease holds; typing reaches the restored pane's new shell.
                await phone.send(c.Input(data=b"echo second-$((2+2))\r", subscription_id=sub))
                await frame_containing(phone, sub, "second-4", timeout=30)
                await second.stop()
        nursery.cancel_scope.cancel()


async def test_pane_ids_survive_a_live_handoff(state_dir: Path) -> None:
    """A live hand-off keeps the programs, moves them to new terminal ids: same ids,
    the same subscription, frames again from the new terminal."""
    fake = FakeHerdr(state_dir / "herdr.sock")
    tab = fake.add_tab(fake.add_workspace("api", cwd=str(state_dir)), "agents")
    herdr_pane = await fake.add_pane(tab, SHELL)
    async with serving(fake), herdr_host(state_dir) as (host, source):
        async with login("127.0.0.1", port_of(host), await paired(host)) as phone:
            (pane,) = (await list_panes(phone)).panes
            sub = await subscribe(phone, pane.id)
            await next_frame(phone, sub)
            old_terminal = fake.terminal_id(herdr_pane)
            fake.live_handoff()
            await _wait_relisted(source, {old_terminal})
            assert [p.id for p in (await _panes_amid_frames(phone, sub)).panes] == [pane.id]
            await phone.send(c.Input(data=b"echo handed-$((3+3))\r", subscription_id=sub))
            await frame_containing(phone, sub, "handed-6", timeout=20)


async def _panes_amid_frames(phone: MirrorClient, sub: UUID) -> c.Panes:
    """``list``'s answer on a subscribed connection: frames from the new terminal may
    come first (acknowledged as a client does)."""
    await phone.send(c.ListPanes())
    with trio.fail_after(10):
        while True:
            item = await phone.receive(timeout=10)
            if isinstance(item, c.Panes):
                return item
            sequence = getattr(item, "sequence", None)
            if isinstance(sequence, int):
                await phone.send(c.Acknowledge(sequence=sequence, subscription_id=sub))


# ---------------------------------------------------------------- 3. deferred reads

#: An agent on the alternate screen with mouse reporting on (what Herdr harvests).
FULL_SCREEN_AGENT = (
    "printf '\\033[?1049h\\033[?1000h\\033[Hfull screen agent ready'; exec sleep 600"
)


@pytest.mark.slow
async def test_a_read_herdr_defers_behind_a_harvest_is_slow_not_a_failure(
    state_dir: Path,
) -> None:
    """Another client's ``recent`` text read makes Herdr harvest the agent's history and
    hold ANSI reads of it meanwhile (up to 15 s, and 5 more to scroll back): the
    phone is subscribed at once, keeps its connection, and gets frame 1 when the read
    comes back."""
    fake = FakeHerdr(state_dir / "herdr.sock", harvest_seconds=17.0)
    tab = fake.add_tab(fake.add_workspace("api", cwd=str(state_dir)), "agents")
    herdr_pane = await fake.add_pane(tab, FULL_SCREEN_AGENT, agent="claude", agent_status="idle")
    async with (
        serving(fake),
        herdr_host(state_dir, herdr_bin="/nonexistent/herdr") as (
            host,
            _source,
        ),
    ):
        with trio.fail_after(10):
            while not fake.pane_screen(herdr_pane).mouse_captured:
                await trio.sleep(0.05)
        async with login("127.0.0.1", port_of(host), await paired(host)) as phone:
            (pane,) = (await list_panes(phone)).panes
            async with trio.open_nursery() as nursery:
                # Another Herdr client asks for the agent's recent text.
                other_client = HerdrClient(state_dir / "herdr.sock", timeout=60)
                nursery.start_soon(
                    other_client.call,
                    "pane.read",
                    {"pane_id": herdr_pane, "source": "recent", "format": "text", "lines": 200},
                )
                with trio.fail_after(10):
                    while not fake.harvests_started:
                        await trio.sleep(0.02)
                started = trio.current_time()
                sub = await subscribe(phone, pane.id, c.Representation.TEXT)
                assert trio.current_time() - started < 8  # answered, frame or not
                frame = await next_frame(phone, sub, timeout=30)
                assert "full screen agent ready" in frame_text(frame)
                assert fake.deferred_reads >= 1
                # Still connected and served: a list goes through.
                await phone.send(c.ListPanes())
                assert isinstance(await phone.expect(c.Panes), c.Panes)


# ---------------------------------------------------------------- 4. observe of another version


def _observe_program(directory: Path, protocol: int | None) -> Path:
    """A copy of the fake ``herdr`` program that speaks ``protocol`` (``None``: any)."""
    program = directory / "herdr"
    text = (FAKES / "herdr").read_text()
    text = text.replace(
        "CLIENT_PROTOCOL: int | None = None", f"CLIENT_PROTOCOL: int | None = {protocol}"
    )
    temporary = directory / "herdr.new"
    temporary.write_text(text)
    temporary.chmod(0o755)
    temporary.replace(program)
    return program


@pytest.mark.slow
async def test_an_observe_program_of_another_version_is_reported_once_and_not_respawned(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch, host_log: pytest.LogCaptureFixture
) -> None:
    # Try the observe program again soon after falling back to polling.
    monkeypatch.setattr(herdr_source_module, "_OBSERVE_RETRY_SECONDS", 1.0)
    program_dir = state_dir / "old-herdr"
    program_dir.mkdir()
    program = _observe_program(program_dir, 20)  # a 0.8.2 program, a 0.9 server

    def said(words: str) -> list[logging.LogRecord]:
        # Each record once (after some tests a record reaches the capture twice).
        return list({id(r): r for r in host_log.records if words in r.getMessage()}.values())

    fake = FakeHerdr(state_dir / "herdr.sock", protocol=22)
    herdr_pane = await fake.add_pane(
        fake.add_tab(fake.add_workspace("api", cwd=str(state_dir)), "agents"), SHELL
    )
    async with serving(fake), herdr_host(state_dir, herdr_bin=str(program)) as (host, source):
        async with login("127.0.0.1", port_of(host), await paired(host)) as phone:
            (pane,) = (await list_panes(phone)).panes
            sub = await subscribe(phone, pane.id)
            await phone.send(c.Input(data=b"echo polled-$((5+5))\r", subscription_id=sub))
            await frame_containing(phone, sub, "polled-10", timeout=20)  # polled
            await trio.sleep(4.0)  # several retry periods
            # Tried once, never again.
            observes = fake.requests_for("fake.observe")
            assert len(observes) == 1, [r.getMessage() for r in said("herdr")]
            assert source.mirror_mode(pane.id) == "poll"
            complaints = said("older than server")
            assert len(complaints) == 1, [r.getMessage() for r in complaints]
            words = complaints[0].getMessage()
            assert str(program) in words and "polling" in words
            assert "same version" in words  # what to do
            assert "server version 22" in source.health()["detail"]
            # The program is replaced by one of the server's version: tried again.
            _observe_program(program_dir, None)
            with trio.fail_after(20):
                while source.mirror_mode(pane.id) != "observe":
                    await trio.sleep(0.1)
            await phone.send(c.Input(data=b"echo observed-$((6+6))\r", subscription_id=sub))
            await frame_containing(phone, sub, "observed-12")
            # Found in review: status went on saying the program was refused.
            assert "refused" not in source.health()["detail"], source.health()
            assert len(fake.requests_for("fake.observe")) == 2, [
                r.getMessage() for r in said("herdr")
            ]
    del herdr_pane


# ---------------------------------------------------------------- 8. titles and "done"

TITLED = "printf '\\033]2;\\342\\234\\263 Fix the login bug\\007'; exec sleep 600"


async def test_herdr_titles_and_done_reach_the_pane_list(state_dir: Path) -> None:
    """The pane's own title (``terminal_title_stripped``, else ``title``) names it where the
    apps show a title; ``done`` (finished, not yet seen) reads apart from idle, in words,
    and the ``list`` command says only what the apps know (``idle``)."""
    fake = FakeHerdr(state_dir / "herdr.sock")
    tab = fake.add_tab(fake.add_workspace("api", cwd=str(state_dir)), "agents")
    titled = await fake.add_pane(tab, TITLED, agent="claude", agent_status="done")
    other = await fake.add_pane(tab, SHELL, agent="codex", agent_status="idle")
    async with serving(fake), herdr_host(state_dir, commands=True) as (host, source):
        with trio.fail_after(10):  # the program has set its terminal's title
            while fake.pane_screen(titled).title != "\u2733 Fix the login bug":
                await trio.sleep(0.05)
        fake.set_pane_title(other, "Review PR 12", display_agent="Codex CLI")
        await source.poll()
        async with login("127.0.0.1", port_of(host), await paired(host)) as phone:
            entries = {p.title: p for p in (await list_panes(phone)).panes}
            assert set(entries) == {
                "api · agents · Fix the login bug · Pane 1",
                "api · agents · Review PR 12 · Pane 2",
            }
            done = entries["api · agents · Fix the login bug · Pane 1"]
            idle = entries["api · agents · Review PR 12 · Pane 2"]
            assert done.subtitle == "agents · Fix the login bug · Pane 1 · Claude · done"
            assert idle.subtitle == "agents · Review PR 12 · Pane 2 · Codex CLI · idle"
            listed, _ = await run(phone, c.ListCommand())
        items = {i["pane"]["id"]: i for i in listed["data"]["items"]}
        assert items[str(done.id).upper()]["pane"]["title"] == "Fix the login bug"
        assert items[str(idle.id).upper()]["pane"]["title"] == "Review PR 12"
        assert items[str(done.id).upper()]["task"] == {"status": "idle"}  # never "done"
