"""Remote commands on Herdr: host + fake Herdr over real TLS, every command and error path."""

from __future__ import annotations

import os
import signal
import stat
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
import trio

from mirror_host import control as c
from mirror_host.client.client import MirrorClient, login
from mirror_host.commands.delivery import DeliveryTiming
from mirror_host.commands.herdr import HerdrCommands
from mirror_host.commands.herdr_input import HERDR_TIMING
from mirror_host.commands.receipts import MAX_RECEIPTS
from mirror_host.commands.responses import NO_LONGER_OWNS, rejected
from mirror_host.commands.service import CommandService
from mirror_host.config import Profile
from mirror_host.host.server import Host
from mirror_host.host.service import run_host
from mirror_host.panes.herdr.protocol import pane_uuid
from mirror_host.panes.herdr.source import HerdrSource
from tests.fakes.herdr_fake import FakeHerdr
from tests.integration.agent_helpers import FakeAgent, received_settles, submissions_after
from tests.integration.conftest import host_config, paired, port_of
from tests.integration.mirror_helpers import list_panes, next_frame, subscribe

pytestmark = pytest.mark.timeout(120)

FAKE_CLI = str(Path(__file__).resolve().parent.parent / "fakes" / "herdr")
AGENT = "exec bash --norc --noprofile -i"


def scripted_agent(state_dir: Path) -> tuple[FakeAgent, str]:
    """The scripted Claude Code look-alike, and its pane's command (``exec``: the pane's
    process is the agent). An old server's fallback types only into a composer it can read."""
    agent = FakeAgent(state_dir / "agent")
    return agent, f"exec {agent.command()}"


async def composer_drawn(fake: FakeHerdr, pane: str, shown: str) -> None:
    """Wait until the agent's input box row shows ``shown`` (on Herdr's own screen)."""
    with trio.fail_after(15):
        while not any(
            row.startswith("❯") and row[1:].strip() == shown
            for row in fake.pane_screen(pane).active_text().splitlines()
        ):
            await trio.sleep(0.05)


@pytest.fixture
def agent_bin(state_dir: Path) -> Path:
    """A stand-in `claude` program on PATH, so the profile counts as installed."""
    bin_dir = state_dir / "bin"
    bin_dir.mkdir()
    program = bin_dir / "claude"
    program.write_text("#!/bin/sh\necho 'fake claude ready'\nexec cat\n")
    program.chmod(program.stat().st_mode | stat.S_IEXEC)
    return bin_dir


@asynccontextmanager
async def command_host(
    state_dir: Path,
    *,
    protocol: int = 22,
    profiles: tuple[Profile, ...] | None = None,
    timing: DeliveryTiming = HERDR_TIMING,
    agent: str = AGENT,
) -> AsyncIterator[tuple[Host, FakeHerdr, dict[str, str]]]:
    fake = FakeHerdr(state_dir / "herdr.sock", protocol=protocol)
    workspace = fake.add_workspace("api", cwd=str(state_dir))
    empty = fake.add_workspace("docs", cwd="/tmp")
    tab = fake.add_tab(workspace, "agents")
    ids = {
        "workspace": workspace,
        "empty": empty,
        "agent": await fake.add_pane(tab, agent, agent="claude", agent_status="idle"),
        "shell": await fake.add_pane(tab, AGENT),
    }
    source = HerdrSource(state_dir / "herdr.sock", herdr_bin=FAKE_CLI)
    commands = CommandService(HerdrCommands(source, profiles=profiles, timing=timing))
    async with trio.open_nursery() as nursery:
        await nursery.start(fake.serve)
        host: Host = await nursery.start(
            lambda task_status: run_host(
                host_config(state_dir), source, commands=commands, task_status=task_status
            )
        )
        await source.wait_listed()
        with trio.fail_after(10):
            while (
                "agent-input" not in commands.capabilities or not commands.backend._has_tab_create
            ):  # type: ignore[attr-defined]
                await trio.sleep(0.02)
        try:
            yield host, fake, ids
        finally:
            await fake.stop()
            nursery.cancel_scope.cancel()


def request(
    command: c.RemoteCommand, *, request_id: UUID | None = None, output: str = "json"
) -> c.CommandRequest:
    return c.CommandRequest(
        request_id=request_id or uuid.uuid4(),
        request=c.CommandEnvelope(output=output, command=command),
    )


async def run(client: MirrorClient, command: c.RemoteCommand, *, sub: UUID | None = None,
              request_id: UUID | None = None, output: str = "json") -> Any:  # fmt: skip
    envelope = request(command, request_id=request_id, output=output)
    await client.send(c.Command(subscription_id=sub, command_request=envelope))
    while True:
        result = await client.receive(timeout=20)
        if isinstance(result, c.CommandResult):
            assert result.command_response.request_id == envelope.request_id
            return result.command_response.response


async def agent_lease(
    host: Host, fake: FakeHerdr, pane: str, name: str = "Phone"
) -> tuple[Any, UUID]:
    credential = await paired(host, name)
    return credential, pane_uuid(fake.socket_path, pane)


async def test_list_and_profiles(
    state_dir: Path, agent_bin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", f"{agent_bin}{os.pathsep}{os.environ['PATH']}")
    profiles = (
        Profile(id="cc", name="Claude Code", agent="claude"),
        Profile(id="ghost", name="Ghost", agent="no-such-agent"),
    )
    async with command_host(state_dir, profiles=profiles) as (host, fake, ids):
        async with login("127.0.0.1", port_of(host), await paired(host)) as client:
            listing = await list_panes(client)
            assert listing.capabilities[:8] == (
                "vt-v1", "text-v1", "takeover", "refresh",
                "launch-profile", "launch-shell", "agents-dispatch", "agent-input",
            )  # fmt: skip
            result = await run(client, c.ListCommand())
            assert (result["ok"], result["command"], result["schema_version"]) == (
                True,
                "list",
                "prowl.cli.list.v1",
            )
            data = result["data"]
            assert data["count"] == 2 == len(data["items"])
            first = data["items"][0]
            assert first["pane"]["id"] == str(pane_uuid(fake.socket_path, ids["agent"])).upper()
            assert first["pane"]["agent"] == "claude" and first["task"] == {"status": "idle"}
            assert "agent" not in data["items"][1]["pane"]
            assert set(first["worktree"]) == {"id", "name", "path", "root_path", "kind"}
            assert first["worktree"]["kind"] in ("git", "plain")
            assert first["tab"] == {
                "id": first["tab"]["id"],
                "title": "agents",
                "selected": first["tab"]["selected"],
            }
            # data.worktrees also lists the workspace without panes
            assert [w["name"] for w in data["worktrees"]] == ["api", "docs"]
            catalogue = await run(client, c.ProfilesCommand())
            assert catalogue["schema_version"] == "prowl.cli.profiles.v1"
            by_id = {p["id"]: p for p in catalogue["data"]["profiles"]}
            assert by_id["cc"]["availability"] == {"status": "available"}
            assert by_id["ghost"]["availability"]["status"] == "unavailable"
            for entry in by_id.values():
                assert set(entry) == {"id", "name", "enabled", "runtime", "availability"}
            # Android parses every item's pane.id as a UUID until it finds its pane.
            for item in data["items"]:
                assert str(uuid.UUID(item["pane"]["id"])).upper() == item["pane"]["id"]
                assert isinstance(item["task"], dict)


async def test_create_shell_and_agent_tabs(
    state_dir: Path, agent_bin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", f"{agent_bin}{os.pathsep}{os.environ['PATH']}")
    profiles = (Profile(id="cc", name="Claude Code", agent="claude"),)
    async with command_host(state_dir, profiles=profiles) as (host, fake, ids):
        async with login("127.0.0.1", port_of(host), await paired(host)) as client:
            shell = await run(
                client,
                c.CreateCommand(
                    resource="tab", worktree_id=ids["empty"], launch=None, background=True
                ),
            )
            assert shell["ok"] is True and shell["command"] == "create"
            assert shell["data"]["resource"] == "tab" and "launch" not in shell["data"]
            assert shell["data"]["target"]["worktree"]["id"] == ids["empty"]
            launched = await run(
                client,
                c.CreateCommand(
                    resource="tab",
                    worktree_id=ids["workspace"],
                    launch=c.Launch(profile="cc", prompt="hello agent"),
                    background=True,
                ),
            )
            assert launched["ok"] is True, launched
            assert launched["data"]["launch"] == {
                "profile_id": "cc",
                "profile_name": "Claude Code",
                "agent": "claude",
            }
            new_pane = launched["data"]["target"]["pane"]["id"]
            for created in (shell, launched):  # what Android reads before it subscribes
                target = created["data"]["target"]
                uuid.UUID(target["pane"]["id"])
                assert isinstance(target["pane"]["title"], str)
                assert {"id", "name", "path", "root_path"} <= set(target["worktree"])
            assert fake.requests_for("agent.start") and fake.requests_for("agent.prompt")
            assert any(
                req["params"]["text"] == "hello agent" for req in fake.requests_for("agent.prompt")
            )
            unknown = await run(
                client,
                c.CreateCommand(resource="tab", worktree_id="w99", launch=None, background=True),
            )
            assert unknown["error"]["code"] == "TARGET_NOT_FOUND"
            bad = await run(
                client,
                c.CreateCommand(
                    resource="pane", worktree_id=ids["empty"], launch=None, background=True
                ),
            )
            assert bad["error"] == {
                "code": "REMOTE_COMMAND_REJECTED",
                "message": "Invalid command request.",
            }
            no_profile = await run(
                client,
                c.CreateCommand(
                    resource="tab",
                    worktree_id=ids["empty"],
                    launch=c.Launch(profile="nope"),
                    background=True,
                ),
            )
            assert no_profile["error"]["code"] == "PROFILE_NOT_FOUND"
            assert new_pane


def created_tabs(fake: FakeHerdr) -> list[dict[str, Any]]:
    """``tab.create`` requests other than the host's feature probe."""
    return [
        r for r in fake.requests_for("tab.create")
        if r["params"].get("workspace_id") != "mirror-host-probe"
    ]  # fmt: skip


async def test_launch_profile_is_advertised_with_no_profile_installed(state_dir: Path) -> None:
    ghost = Profile(id="ghost", name="Ghost", agent="no-such-agent")
    async with command_host(state_dir, profiles=(ghost,)) as (host, fake, ids):
        async with login("127.0.0.1", port_of(host), await paired(host)) as client:
            listing = await list_panes(client)
            assert "launch-profile" in listing.capabilities
            catalogue = await run(client, c.ProfilesCommand())
            assert catalogue["data"]["profiles"][0]["availability"]["status"] == "unavailable"
            refused = await run(
                client,
                c.CreateCommand(
                    resource="tab",
                    worktree_id=ids["workspace"],
                    launch=c.Launch(profile="ghost"),
                    background=True,
                ),
            )
            assert refused["error"]["code"] == "PROFILE_UNAVAILABLE", refused
            assert "Ghost" in refused["error"]["message"]
            assert created_tabs(fake) == []  # nothing was started
            commands_backend = host.hub.commands
            assert isinstance(commands_backend, CommandService)
            backend = commands_backend.backend
            assert isinstance(backend, HerdrCommands)
            backend._has_agent_start = False  # an older Herdr: no agent.start
            monkey = Profile(id="sh", name="Shell agent", agent="sh")
            backend.profiles_table = (monkey,)
            older = await run(
                client,
                c.CreateCommand(
                    resource="tab",
                    worktree_id=ids["workspace"],
                    launch=c.Launch(profile="sh"),
                    background=True,
                ),
            )
            assert older["error"]["code"] == "PROFILE_UNAVAILABLE", older
            assert "agent.start" in older["error"]["message"]
            assert created_tabs(fake) == []


async def test_agent_input_reaches_an_agent_whose_pane_moved(state_dir: Path) -> None:
    """The reply box works right after the pane moved, before the host's next snapshot."""
    async with command_host(state_dir) as (host, fake, ids):
        credential, pane = await agent_lease(host, fake, ids["agent"])
        async with login("127.0.0.1", port_of(host), credential) as phone:
            sub = await subscribe(phone, pane, c.Representation.TEXT)
            await next_frame(phone, sub)
            fake.delay_method("session.snapshot", 1.0)
            moved = fake.move_pane(ids["agent"], fake.add_tab(ids["empty"], "moved"))
            result = await run(phone, c.AgentsInputCommand(pane=str(pane), prompt="hi"), sub=sub)
            assert result["ok"] is True, result
            targets = [r["params"]["target"] for r in fake.requests_for("agent.prompt")]
            assert targets == [moved]
            fake.clear_delay()


async def test_agent_input_delivers_text_and_enter(state_dir: Path) -> None:
    async with command_host(state_dir) as (host, fake, ids):
        credential, pane = await agent_lease(host, fake, ids["agent"])
        async with login("127.0.0.1", port_of(host), credential) as phone:
            sub = await subscribe(phone, pane, c.Representation.TEXT)
            await next_frame(phone, sub)
            prompt = "fix the failing test 👍🏽"
            result = await run(phone, c.AgentsInputCommand(pane=str(pane), prompt=prompt), sub=sub)
            assert result["ok"] is True and result["command"] == "agents.input", result
            assert result["schema_version"] == "prowl.cli.agents.input.v1"
            assert result["data"]["input"] == {
                "source": "argument",
                "characters": 22,  # the thumbs-up with its skin tone is one character
                "bytes": len(prompt.encode()),
                "trailing_enter_sent": True,
            }
            with trio.fail_after(5):
                while not fake.received_input(ids["agent"]).endswith(b"\r"):
                    await trio.sleep(0.05)
            assert prompt.encode() in fake.received_input(ids["agent"])


async def test_agent_input_on_an_old_server_confirms_before_enter(state_dir: Path) -> None:
    # A loaded machine may take more than the product's 2 s to echo the paste.
    slow_echo = replace(HERDR_TIMING, echo_seconds=20.0)
    _, command = scripted_agent(state_dir)
    async with command_host(state_dir, protocol=16, timing=slow_echo, agent=command) as (
        host,
        fake,
        ids,
    ):
        await composer_drawn(fake, ids["agent"], "")  # the agent is up, its input box empty
        credential, pane = await agent_lease(host, fake, ids["agent"])
        async with login("127.0.0.1", port_of(host), credential) as phone:
            sub = await subscribe(phone, pane, c.Representation.TEXT)
            await next_frame(phone, sub)
            result = await run(
                phone, c.AgentsInputCommand(pane=str(pane), prompt="echo old-server-ok"), sub=sub
            )
            assert result["ok"] is True, result
            sent = fake.received_input(ids["agent"])
            assert sent.endswith(b"\r") and b"echo old-server-ok" in sent
            assert (
                fake.requests_for("pane.send_input") and not fake.requests_for("agent.prompt")[1:]
            )


async def test_agent_input_on_an_old_server_types_nothing_once_the_lease_is_lost(
    state_dir: Path,
) -> None:
    # The lease holds when the host asks for agent.prompt and is lost by the time
    # the old server has refused it as unknown: the fallback must not type the text.
    async with command_host(state_dir, protocol=16) as (host, fake, ids):
        backend = host.hub.commands.backend
        assert isinstance(backend, HerdrCommands)
        pane = pane_uuid(fake.socket_path, ids["agent"])
        before = fake.received_input(ids["agent"])

        def authorized() -> bool:
            return not fake.requests_for("agent.prompt")

        with trio.fail_after(30):
            result = await backend.agent_input(
                pane, "echo too-late", dispatch=False, authorized=authorized
            )
        assert result == rejected(NO_LONGER_OWNS)
        assert fake.requests_for("agent.prompt")  # it was asked, and refused as unknown
        assert not fake.requests_for("pane.send_input") and not fake.requests_for("pane.send_keys")
        assert fake.received_input(ids["agent"]) == before


async def test_an_old_server_never_types_into_a_draft(state_dir: Path) -> None:
    """Without agent.prompt the text would be typed after the user's half-written draft
    and submitted with it: refused, nothing written (as on tmux panes)."""
    agent, command = scripted_agent(state_dir)
    agent.set(state="idle", draft="half-typed idea")
    async with command_host(state_dir, protocol=16, agent=command) as (host, fake, ids):
        await composer_drawn(fake, ids["agent"], "half-typed idea")
        credential, pane = await agent_lease(host, fake, ids["agent"])
        async with login("127.0.0.1", port_of(host), credential) as phone:
            sub = await subscribe(phone, pane, c.Representation.TEXT)
            await next_frame(phone, sub)
            result = await run(
                phone, c.AgentsInputCommand(pane=str(pane), prompt="fix it"), sub=sub
            )
            assert result["ok"] is False, result
            assert result["error"]["code"] == "DISPATCH_TARGET_BUSY"
            assert "draft" in result["error"]["message"]
            assert "nothing was sent" in result["error"]["message"]
            assert fake.requests_for("agent.prompt")  # asked first, refused as unknown
            assert not fake.requests_for("pane.send_input") and not fake.requests_for(
                "pane.send_keys"
            )
            assert agent.received() == b"" and agent.submissions() == []


async def test_an_old_server_refuses_a_screen_it_cannot_read(state_dir: Path) -> None:
    """Herdr names an agent but the screen shows no input box the host can read (here a
    shell): the fallback does not type blindly."""
    async with command_host(state_dir, protocol=16) as (host, fake, ids):
        credential, pane = await agent_lease(host, fake, ids["agent"])
        async with login("127.0.0.1", port_of(host), credential) as phone:
            sub = await subscribe(phone, pane, c.Representation.TEXT)
            await next_frame(phone, sub)
            before = fake.received_input(ids["agent"])
            result = await run(phone, c.AgentsInputCommand(pane=str(pane), prompt="hi"), sub=sub)
            assert result["ok"] is False and result["error"]["code"] == "DISPATCH_TARGET_BUSY"
            assert "cannot recognise" in result["error"]["message"], result
            assert not fake.requests_for("pane.send_input")
            assert fake.received_input(ids["agent"]) == before


async def test_an_old_server_waits_for_the_second_paste_of_the_same_prompt(
    state_dir: Path,
) -> None:
    """``continue`` twice: the first one is still on screen (the transcript) when the
    second is typed. Enter waits for the composer to hold it; an agent that has not
    drawn the paste (stopped here) gets none."""
    agent, command = scripted_agent(state_dir)
    short_echo = replace(HERDR_TIMING, echo_seconds=1.5)
    async with command_host(state_dir, protocol=16, timing=short_echo, agent=command) as (
        host,
        fake,
        ids,
    ):
        await composer_drawn(fake, ids["agent"], "")
        credential, pane = await agent_lease(host, fake, ids["agent"])
        async with login("127.0.0.1", port_of(host), credential) as phone:
            sub = await subscribe(phone, pane, c.Representation.TEXT)
            await next_frame(phone, sub)
            prompt = c.AgentsInputCommand(pane=str(pane), prompt="continue")
            first = await run(phone, prompt, sub=sub)
            assert first["ok"] is True, first
            assert await submissions_after(agent, 1) == [{"prompt": "continue", "state": "idle"}]
            await composer_drawn(fake, ids["agent"], "")  # emptied, "❯ continue" above it
            pid = fake.pane_pids()[ids["agent"]]
            os.kill(pid, signal.SIGSTOP)  # the paste will not be drawn
            try:
                second = await run(phone, prompt, sub=sub)
                sent = fake.received_input(ids["agent"])
            finally:
                os.kill(pid, signal.SIGCONT)
            assert second["ok"] is False and second["error"]["code"] == "SEND_FAILED", second
            assert "never appeared in the composer" in second["error"]["message"]
            assert len(fake.requests_for("pane.send_input")) == 2
            assert len(fake.requests_for("pane.send_keys")) == 1  # the first one's Enter
            assert sent.endswith(b"continue\x1b[201~")
            # Drawn now, and left unsent in the composer.
            await composer_drawn(fake, ids["agent"], "continue")
            assert (await received_settles(agent)).endswith(b"continue\x1b[201~")
            assert len(agent.submissions()) == 1


async def test_blocked_or_agentless_panes_get_nothing(state_dir: Path) -> None:
    async with command_host(state_dir) as (host, fake, ids):
        fake.set_agent_status(ids["agent"], "blocked")
        credential, pane = await agent_lease(host, fake, ids["agent"])
        async with login("127.0.0.1", port_of(host), credential) as phone:
            sub = await subscribe(phone, pane, c.Representation.TEXT)
            await next_frame(phone, sub)
            before = fake.received_input(ids["agent"])
            result = await run(phone, c.AgentsInputCommand(pane=str(pane), prompt="yes"), sub=sub)
            assert result["ok"] is False and result["error"]["code"] == "DISPATCH_TARGET_BUSY"
            await trio.sleep(0.5)
            assert fake.received_input(ids["agent"]) == before
        shell = pane_uuid(fake.socket_path, ids["shell"])
        async with login("127.0.0.1", port_of(host), credential) as phone:
            sub = await subscribe(phone, shell, c.Representation.TEXT)
            await next_frame(phone, sub)
            result = await run(
                phone, c.AgentsDispatchCommand(pane=str(shell), prompt="ls"), sub=sub
            )
            assert result["error"]["code"] == "AGENT_NOT_FOUND"
            assert fake.received_input(ids["shell"]) == b""


async def test_prompts_over_64_kib_are_refused(state_dir: Path) -> None:
    """Prowl's limit for an agent or create prompt: 65,536 UTF-8 bytes."""
    async with command_host(state_dir) as (host, fake, ids):
        credential, pane = await agent_lease(host, fake, ids["agent"])
        async with login("127.0.0.1", port_of(host), credential) as phone:
            sub = await subscribe(phone, pane, c.Representation.TEXT)
            await next_frame(phone, sub)
            too_long = "é" * 32_768 + "x"  # 65,537 bytes
            refused = await run(
                phone, c.AgentsInputCommand(pane=str(pane), prompt=too_long), sub=sub
            )
            assert refused["error"] == {
                "code": "REMOTE_COMMAND_REJECTED",
                "message": "Invalid dispatch target or prompt size.",
            }
            at_limit = await run(
                phone, c.AgentsInputCommand(pane=str(pane), prompt="é" * 32_768), sub=sub
            )
            assert at_limit["ok"] is True, at_limit
        async with login("127.0.0.1", port_of(host), await paired(host, "Mac")) as mac:
            create = c.CreateCommand(
                resource="tab",
                worktree_id=ids["workspace"],
                launch=c.Launch(profile="cc", prompt=too_long),
                background=True,
            )
            assert (await run(mac, create))["error"] == {
                "code": "REMOTE_COMMAND_REJECTED",
                "message": "Choose a valid Host Profile and a prompt within the size limit.",
            }
        assert not [r for r in fake.requests_for("agent.prompt") if r["params"]["text"] == too_long]


async def test_send_is_refused_and_disallowed_commands_close(state_dir: Path) -> None:
    async with command_host(state_dir) as (host, fake, ids):
        credential, pane = await agent_lease(host, fake, ids["agent"])
        async with login("127.0.0.1", port_of(host), credential) as mac:
            sub = await subscribe(mac, pane)
            await next_frame(mac, sub)
            send = c.SendCommand(
                pane=str(pane),
                text="rm -rf /",
                trailing_enter=True,
                source="argv",
                wait=False,
                capture_output=False,
            )
            result = await run(mac, send, sub=sub)
            assert result["error"] == {
                "code": "REMOTE_COMMAND_REJECTED",
                "message": "Host cannot verify an empty shell command line. Use an Agent Profile or control the shell on Host.",
            }
            raw = (
                b'{"command":{"_0":{"subscriptionID":"%s","commandRequest":{"requestID":"%s",'
                b'"request":{"output":"json","command":{"exec":{"_0":{"argv":["sh"]}}}}}}}}'
                % (str(sub).upper().encode(), str(uuid.uuid4()).upper().encode())
            )
            from mirror_host.wire import ControlPacket, encode_packet

            await mac.send_raw(encode_packet(ControlPacket(raw)))
            await mac.expect_closed()
        assert fake.received_input(ids["agent"]) == b""


async def test_request_ids_receipts_and_reuse(state_dir: Path) -> None:
    async with command_host(state_dir) as (host, fake, ids):
        credential, pane = await agent_lease(host, fake, ids["agent"])
        port = port_of(host)
        first_id = uuid.uuid4()
        async with login("127.0.0.1", port, credential) as phone:
            sub = await subscribe(phone, pane, c.Representation.TEXT)
            await next_frame(phone, sub)
            command = c.AgentsInputCommand(pane=str(pane), prompt="once only")
            original = await run(phone, command, sub=sub, request_id=first_id)
            assert original["ok"] is True
            again = await run(phone, command, sub=sub, request_id=first_id)
            assert again == original
            reused = await run(
                phone,
                c.AgentsInputCommand(pane=str(pane), prompt="other"),
                sub=sub,
                request_id=first_id,
            )
            assert reused["error"] == {
                "code": "REMOTE_COMMAND_REJECTED",
                "message": "Request ID was reused with different parameters.",
            }
        assert fake.received_input(ids["agent"]).count(b"once only") == 1  # exactly one execution
        async with login("127.0.0.1", port, credential) as phone:  # a new connection, a new lease
            # As Prowl's phones do on reconnecting: the host may not have seen the
            # old connection close yet, so an ifFree subscribe could find it busy.
            sub = await subscribe(phone, pane, c.Representation.TEXT, c.Intent.TAKEOVER)
            await next_frame(phone, sub)
            await phone.send(c.CommandReceipt(subscription_id=sub, command_receipt_id=first_id))
            receipt = await phone.expect(c.CommandResult)
            assert receipt.command_response == c.CommandResponse(
                request_id=first_id, response=original
            )  # type: ignore[union-attr]
            unknown = uuid.uuid4()
            await phone.send(c.CommandReceipt(subscription_id=sub, command_receipt_id=unknown))
            missing = await phone.expect(c.CommandResult)
            assert missing.command_response.request_id == unknown  # type: ignore[union-attr]
            assert missing.command_response.response["error"] == {  # type: ignore[index,union-attr]
                "code": "REMOTE_COMMAND_UNCONFIRMED",
                "message": "Could not encode the command result. Check Host before retrying.",
            }


@pytest.mark.slow
async def test_the_1025th_mutation_is_refused(state_dir: Path) -> None:
    async with command_host(state_dir) as (host, fake, ids):
        credential, pane = await agent_lease(host, fake, ids["agent"])
        async with login("127.0.0.1", port_of(host), credential) as mac:
            sub = await subscribe(mac, pane)
            await next_frame(mac, sub)
            send = c.SendCommand(
                pane=str(pane),
                text="x",
                trailing_enter=True,
                source="argv",
                wait=False,
                capture_output=False,
            )
            for _ in range(MAX_RECEIPTS):
                result = await run(mac, send, sub=sub)
                assert result["error"]["code"] == "REMOTE_COMMAND_REJECTED"
            over = await run(mac, send, sub=sub)
            assert over["error"]["message"] == (
                "The remote command request limit has been reached. Restart Prowl before issuing more commands."
            )
            listing = await run(mac, c.ListCommand(), sub=sub)  # catalogue reads are not retained
            assert listing["ok"] is True


@pytest.mark.slow
async def test_takeover_cancels_a_pending_input(state_dir: Path) -> None:
    # The input must still be waiting when the takeover lands, however slow the machine.
    long_grace = replace(HERDR_TIMING, settle_seconds=60.0)
    async with command_host(state_dir, timing=long_grace) as (host, fake, ids):
        fake.set_agent_status(ids["agent"], "working")  # input waits for the agent to settle
        credential, pane = await agent_lease(host, fake, ids["agent"])
        port = port_of(host)
        pending_id = uuid.uuid4()
        async with login("127.0.0.1", port, credential) as phone:
            sub = await subscribe(phone, pane, c.Representation.TEXT)
            await next_frame(phone, sub)
            envelope = request(
                c.AgentsInputCommand(pane=str(pane), prompt="too late"), request_id=pending_id
            )
            await phone.send(c.Command(subscription_id=sub, command_request=envelope))
            await trio.sleep(0.5)
            async with login("127.0.0.1", port, await paired(host, "Mac")) as mac:
                taken = await subscribe(mac, pane, intent=c.Intent.TAKEOVER)
                await next_frame(mac, taken)
                assert c.Ended(reason=c.EndReason.TAKEN_OVER) in await phone.expect_closed()
                fake.set_agent_status(ids["agent"], "idle")
                await trio.sleep(1.0)
                assert b"too late" not in fake.received_input(ids["agent"])
                await mac.send(
                    c.CommandReceipt(subscription_id=taken, command_receipt_id=pending_id)
                )
                receipt = await mac.expect(c.CommandResult)
                response = receipt.command_response.response  # type: ignore[union-attr]
                assert response["error"] == {
                    "code": "TIMEOUT",
                    "message": "Input was cancelled before delivery.",
                }


@pytest.mark.slow
async def test_a_takeover_while_the_echo_is_awaited_leaves_an_unconfirmed_receipt(
    state_dir: Path,
) -> None:
    """An old server: the text is written, then the lease is taken over while its echo
    is read. The delivery finishes without Enter, and the receipt says the text may
    sit unsent (``SEND_FAILED``), not that it was cancelled before delivery."""
    long_echo = replace(HERDR_TIMING, echo_seconds=60.0)
    _, command = scripted_agent(state_dir)
    async with command_host(state_dir, protocol=16, timing=long_echo, agent=command) as (
        host,
        fake,
        ids,
    ):
        await composer_drawn(fake, ids["agent"], "")  # the agent is up, its input box empty
        credential, pane = await agent_lease(host, fake, ids["agent"])
        mac_credential = await paired(host, "Mac")
        port = port_of(host)
        pending_id = uuid.uuid4()
        # The echo check's reads (of the visible screen, once the text is written) are
        # held until cleared.
        fake.delay_method(
            "pane.read",
            60.0,
            when=lambda p: (
                p.get("source") == "visible" and bool(fake.requests_for("pane.send_input"))
            ),
        )
        async with login("127.0.0.1", port, credential) as phone:
            sub = await subscribe(phone, pane, c.Representation.TEXT)
            await next_frame(phone, sub)
            envelope = request(
                c.AgentsInputCommand(pane=str(pane), prompt="half way"), request_id=pending_id
            )
            await phone.send(c.Command(subscription_id=sub, command_request=envelope))
            with trio.fail_after(10):
                while not fake.requests_for("pane.send_input"):
                    await trio.sleep(0.05)
            async with login("127.0.0.1", port, mac_credential) as mac:
                taken = await subscribe(mac, pane, intent=c.Intent.TAKEOVER)
                await next_frame(mac, taken)
                assert c.Ended(reason=c.EndReason.TAKEN_OVER) in await phone.expect_closed()
                fake.clear_delay()  # the echo shows: only the lost lease withholds Enter
                await mac.send(
                    c.CommandReceipt(subscription_id=taken, command_receipt_id=pending_id)
                )
                receipt = await mac.expect(c.CommandResult)
                response = receipt.command_response.response  # type: ignore[union-attr]
                assert response["error"]["code"] == "SEND_FAILED", response
                assert "lost the pane" in response["error"]["message"]
                sent = fake.received_input(ids["agent"])
                assert b"half way" in sent and not sent.endswith(b"\r")


async def test_targeted_command_for_another_pane_closes(state_dir: Path) -> None:
    async with command_host(state_dir) as (host, fake, ids):
        credential, pane = await agent_lease(host, fake, ids["agent"])
        other = pane_uuid(fake.socket_path, ids["shell"])
        async with login("127.0.0.1", port_of(host), credential) as phone:
            sub = await subscribe(phone, pane, c.Representation.TEXT)
            await next_frame(phone, sub)
            envelope = request(c.AgentsInputCommand(pane=str(other), prompt="x"))
            await phone.send(c.Command(subscription_id=sub, command_request=envelope))
            await phone.expect_closed()
            oversize = request(c.AgentsInputCommand(pane="not-a-uuid", prompt="x"))
            del oversize
        assert fake.received_input(ids["shell"]) == b""
