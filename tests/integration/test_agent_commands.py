"""``list``, ``profiles`` and ``create`` on tmux and local panes, through the real host."""

from __future__ import annotations

import shutil
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import trio

from mirror_host import control as c
from mirror_host.client.client import login
from mirror_host.commands import first_prompt
from mirror_host.commands.responses import SEND_REFUSED
from mirror_host.commands.tmux import TmuxCommands
from mirror_host.config import Profile
from mirror_host.errors import PaneSourceError
from mirror_host.panes.tmux import TmuxSource
from mirror_host.wire import TextFramePacket
from tests.integration.agent_helpers import (
    FakeAgent,
    bracketed,
    command,
    received_settles,
    screen_shows,
    submissions_after,
)
from tests.integration.conftest import paired, port_of
from tests.integration.mirror_helpers import subscribe
from tests.integration.test_agent_input import KINDS, phone_on, rig

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def repo(state_dir: Path) -> Path:
    """A git checkout (a ``.git`` directory is all a worktree root needs) with a subdirectory."""
    root = state_dir / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "src").mkdir()
    return root


@pytest.fixture
def claude_bin(state_dir: Path) -> Path:
    """An interpreter called ``claude``: what ``ps`` and tmux see is the agent's name."""
    directory = state_dir / "bin"
    directory.mkdir()
    program = directory / "claude"
    program.symlink_to(sys.executable)
    return program


@pytest.mark.parametrize("kind", KINDS)
async def test_list_profiles_and_task_status(
    state_dir: Path, repo: Path, claude_bin: Path, kind: str
) -> None:
    profiles = (
        Profile(id="fake", name="Fake Claude", agent=str(claude_bin)),
        Profile(id="ghost", name="Ghost", agent="no-such-agent-anywhere"),
    )
    async with rig(kind, state_dir, cwd=repo / "src", profiles=profiles) as setup:
        async with login("127.0.0.1", port_of(setup.host), await paired(setup.host)) as client:
            listed = await command(client, c.ListCommand())
            assert (listed["ok"], listed["command"], listed["schema_version"]) == (
                True, "list", "prowl.cli.list.v1",
            )  # fmt: skip
            data = listed["data"]
            assert data["count"] == len(data["items"]) >= 2
            by_pane = {item["pane"]["id"]: item for item in data["items"]}
            agent = by_pane[str(setup.pane).upper()]
            assert agent["pane"]["agent"] == "claude"
            assert agent["pane"]["cwd"] == str(repo / "src")
            assert agent["worktree"] == {
                "id": str(repo), "name": "repo", "path": str(repo),
                "root_path": str(repo), "kind": "git",
            }  # fmt: skip
            assert agent["task"] == {"status": "idle"}
            shell = by_pane[str(setup.shell).upper()]
            assert "agent" not in shell["pane"]
            assert shell["worktree"]["kind"] == "plain" and shell["worktree"]["id"] == str(
                state_dir
            )
            assert {w["id"] for w in data["worktrees"]} == {str(repo), str(state_dir)}
            for item in data["items"]:
                assert set(item) == {"worktree", "tab", "pane", "task"}
                assert set(item["tab"]) == {"id", "title", "selected"}
                # Android parses every item's pane.id as a UUID until it finds its pane.
                assert str(uuid.UUID(item["pane"]["id"])).upper() == item["pane"]["id"]
                assert isinstance(item["task"], dict)

            catalogue = await command(client, c.ProfilesCommand())
            assert catalogue["schema_version"] == "prowl.cli.profiles.v1"
            status = {p["id"]: p["availability"]["status"] for p in catalogue["data"]["profiles"]}
            assert status == {"fake": "available", "ghost": "unavailable"}
            for entry in catalogue["data"]["profiles"]:
                assert set(entry) == {"id", "name", "enabled", "runtime", "availability"}
                assert isinstance(entry["enabled"], bool)
        listing: set[str] = set()
        async with phone_on(setup, advertised=listing) as (phone, sub):
            assert "launch-profile" in listing
            setup.agent.set(state="working")
            await screen_shows(phone, sub, "Puzzling")
            # A subscribed connection may still ask for `list`, with its lease. (One
            # look at a screen can catch the agent mid-redraw, so ask until it shows.)
            with trio.fail_after(20):
                while True:
                    watched = await command(phone, c.ListCommand(), sub=sub)
                    mine = next(
                        i
                        for i in watched["data"]["items"]
                        if i["pane"]["id"] == str(setup.pane).upper()
                    )
                    if mine["task"] == {"status": "running"}:
                        break
                    await trio.sleep(0.1)


class CountedCaptures:
    """The real tmux source, counting ``capture-pane`` per pane, or failing or hanging it."""

    def __init__(self, source: TmuxSource, *, failure: str | None = None) -> None:
        self.source = source
        self.failure = failure
        self.captures: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.source, name)

    async def run_tmux(self, *args: str, stdin: bytes = b"") -> str:
        if "capture-pane" in args:
            self.captures.append(args[args.index("-t") + 1])
            if self.failure == "hang":
                await trio.sleep_forever()
            if self.failure == "fail":
                raise PaneSourceError("tmux capture-pane failed (planted)")
        return await self.source.run_tmux(*args, stdin=stdin)


def task_of(listed: dict[str, Any], pane: uuid.UUID) -> dict[str, Any]:
    (item,) = (i for i in listed["data"]["items"] if i["pane"]["id"] == str(pane).upper())
    assert item["pane"]["agent"] == "claude"
    return dict(item["task"])


@pytest.mark.skipif(shutil.which("tmux") is None, reason="no tmux")
async def test_list_reads_an_agent_in_a_tmux_pane_nobody_watches(state_dir: Path) -> None:
    """A paused pane's agent is read from one ``capture-pane`` per ``list``: ``running``
    while it works, ``idle`` once it waits; a capture that fails or is late gives no
    status (``idle`` would say a prompt is taken), and the list is still answered."""
    async with rig("tmux", state_dir) as setup:
        assert isinstance(setup.source, TmuxSource) and setup.tmux is not None
        async with login("127.0.0.1", port_of(setup.host), await paired(setup.host)) as client:
            for state, status in (("working", "running"), ("idle", "idle")):
                setup.agent.set(state=state)
                with trio.fail_after(20):  # until the agent has redrawn
                    while task_of(await command(client, c.ListCommand()), setup.pane) != {
                        "status": status
                    }:
                        await trio.sleep(0.1)
        assert setup.source.pane_screen(setup.pane) is None  # nobody watched it meanwhile
        agent_tmux_id = setup.source.pane_row(setup.pane).pane_id
        counted = CountedCaptures(setup.source)
        setup.agent.set(state="working")
        with trio.fail_after(20):
            while task_of(await TmuxCommands(counted).list(), setup.pane) != {"status": "running"}:
                counted.captures.clear()
                await trio.sleep(0.1)
        assert counted.captures == [agent_tmux_id]  # once per list, the agent's pane only
        for failure in ("fail", "hang"):
            broken = TmuxCommands(CountedCaptures(setup.source, failure=failure))
            with trio.fail_after(20):
                listed = await broken.list()
            assert task_of(listed, setup.pane) == {}, failure
            shell = next(
                i for i in listed["data"]["items"] if i["pane"]["id"] == str(setup.shell).upper()
            )
            assert "agent" not in shell["pane"]


async def new_pane_id(result: dict[str, Any]) -> str:
    assert result["ok"] is True, result
    assert result["command"] == "create" and result["schema_version"] == "prowl.cli.create.v1"
    target = result["data"]["target"]
    assert set(target) == {"worktree", "tab", "pane"}
    # What Android reads before it subscribes to the new pane (prowl-clients.md).
    assert isinstance(target["pane"]["title"], str)
    assert {"id", "name", "path", "root_path"} <= set(target["worktree"])
    uuid.UUID(target["pane"]["id"])
    return str(target["pane"]["id"])


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.slow
async def test_create_a_shell_and_an_agent_with_its_first_prompt(
    state_dir: Path, repo: Path, claude_bin: Path, kind: str
) -> None:
    launched = FakeAgent(state_dir / "launched", "launched")
    profile = Profile(
        id="fake", name="Fake Claude", agent=str(claude_bin), args=tuple(launched.arguments())
    )
    async with rig(kind, state_dir, cwd=repo, profiles=(profile,)) as setup:
        async with login("127.0.0.1", port_of(setup.host), await paired(setup.host)) as client:
            shell = await command(
                client,
                c.CreateCommand(
                    resource="tab", worktree_id=str(repo), launch=None, background=True
                ),
            )
            shell_pane = await new_pane_id(shell)
            assert "launch" not in shell["data"]
            assert shell["data"]["target"]["worktree"]["id"] == str(repo)
            assert shell["data"]["target"]["pane"]["cwd"] == str(repo)

            agent = await command(
                client,
                c.CreateCommand(
                    resource="tab",
                    worktree_id=str(repo),
                    launch=c.Launch(profile="fake", prompt="first task"),
                    background=True,
                ),
            )
            agent_pane = await new_pane_id(agent)
            assert agent["data"]["launch"] == {
                "profile_id": "fake", "profile_name": "Fake Claude", "agent": str(claude_bin),
            }  # fmt: skip
            assert await submissions_after(launched, 1) == [
                {"prompt": "first task", "state": "idle"}
            ]
            assert await received_settles(launched) == bracketed("first task") + b"\r"

            listed = await command(client, c.ListCommand())
            panes = {item["pane"]["id"]: item for item in listed["data"]["items"]}
            assert shell_pane in panes and agent_pane in panes
            assert panes[agent_pane]["pane"]["agent"] == "claude"

            unknown = await command(
                client,
                c.CreateCommand(
                    resource="tab", worktree_id="/nowhere", launch=None, background=True
                ),
            )
            assert unknown["error"]["code"] == "TARGET_NOT_FOUND"
            missing = await command(
                client,
                c.CreateCommand(
                    resource="tab",
                    worktree_id=str(repo),
                    launch=c.Launch(profile="nope", prompt=None),
                    background=True,
                ),
            )
            assert missing["error"]["code"] == "PROFILE_NOT_FOUND"
        assert setup.agent.received() == b""  # nothing reached the first agent


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.slow
async def test_a_create_is_answered_in_time_and_its_first_prompt_follows(
    state_dir: Path, repo: Path, claude_bin: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent not ready by the create's deadline: the phone has its answer (``ok``, the
    prompt pending, a receipt id), the prompt goes in once the agent is ready, and the
    receipt on the new pane says so, as for agent input."""
    monkeypatch.setattr(first_prompt, "ANSWER_SECONDS", 3.0)
    launched = FakeAgent(state_dir / "launched", "launched")
    launched.set(state="working")  # busy from the start: no empty input box yet
    profile = Profile(
        id="fake", name="Fake Claude", agent=str(claude_bin), args=tuple(launched.arguments())
    )
    async with rig(kind, state_dir, cwd=repo, profiles=(profile,)) as setup:
        async with login("127.0.0.1", port_of(setup.host), await paired(setup.host)) as client:
            started = trio.current_time()
            created = await command(
                client,
                c.CreateCommand(
                    resource="tab",
                    worktree_id=str(repo),
                    launch=c.Launch(profile="fake", prompt="first task"),
                    background=True,
                ),
            )
            assert trio.current_time() - started < 10
            pane = uuid.UUID(await new_pane_id(created))
            pending = created["data"]["first_prompt"]
            assert pending["status"] == "pending", created
            receipt_id = uuid.UUID(pending["receipt_id"])
            assert launched.submissions() == []
            sub = await subscribe(client, pane, c.Representation.TEXT)
            launched.set(state="idle")
            await client.send(c.CommandReceipt(subscription_id=sub, command_receipt_id=receipt_id))
            with trio.fail_after(40):
                while not isinstance(item := await client.receive(timeout=40), c.CommandResult):
                    if isinstance(item, TextFramePacket):
                        await client.send(
                            c.Acknowledge(sequence=item.sequence, subscription_id=sub)
                        )
            assert item.command_response.request_id == receipt_id
            response = item.command_response.response
            assert response["ok"] is True and response["command"] == "agents.input", response
        assert await submissions_after(launched, 1) == [{"prompt": "first task", "state": "idle"}]
        assert await received_settles(launched) == bracketed("first task") + b"\r"


@pytest.mark.parametrize("kind", KINDS)
async def test_launch_profile_is_advertised_with_no_agent_installed(
    state_dir: Path, repo: Path, kind: str
) -> None:
    """A phone can still send commands; a profile that cannot start is refused, nothing runs."""
    ghost = Profile(id="ghost", name="Ghost", agent="no-such-agent-anywhere")
    async with rig(kind, state_dir, cwd=repo, profiles=(ghost,)) as setup:
        listing: set[str] = set()
        async with phone_on(setup, advertised=listing):
            assert {"launch-profile", "agent-input"} <= listing
        async with login("127.0.0.1", port_of(setup.host), await paired(setup.host)) as client:
            catalogue = await command(client, c.ProfilesCommand())
            assert catalogue["data"]["profiles"][0]["availability"] == {
                "status": "unavailable",
                "reason": "no-such-agent-anywhere is not on your shell's PATH",
            }
            before = {item["pane"]["id"] for item in (await command(client, c.ListCommand()))[
                "data"]["items"]}  # fmt: skip
            refused = await command(
                client,
                c.CreateCommand(
                    resource="tab",
                    worktree_id=str(repo),
                    launch=c.Launch(profile="ghost", prompt="hello"),
                    background=True,
                ),
            )
            assert refused["ok"] is False and refused["command"] == "create"
            assert refused["error"] == {
                "code": "PROFILE_UNAVAILABLE",
                "message": "Agent Profile “Ghost” cannot start on Host: "
                "no-such-agent-anywhere is not on your shell's PATH.",
            }
            after = {item["pane"]["id"] for item in (await command(client, c.ListCommand()))[
                "data"]["items"]}  # fmt: skip
            assert after == before  # nothing was started


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.slow
async def test_shell_send_is_advertised_only_where_send_works(state_dir: Path, kind: str) -> None:
    """With `shell-send` a phone's Send on a shell pane is a `send`; without it, none is made."""
    async with rig(kind, state_dir) as setup:
        listing: set[str] = set()
        async with phone_on(setup, setup.shell, advertised=listing) as (phone, sub):
            answer = await command(
                phone,
                c.SendCommand(
                    pane=str(setup.shell).upper(), text="", trailing_enter=False,
                    source="argv", wait=False, capture_output=False,
                ),
                sub=sub,
            )  # fmt: skip
        refused = answer.get("error", {}).get("message") == SEND_REFUSED
        assert refused is ("shell-send" not in listing), (listing, answer)
