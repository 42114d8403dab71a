"""The phone-answers-Claude check, as a user runs it: ``mirror-host serve`` in a subprocess.

An agent that looks like Claude Code to ``ps``, to tmux and on screen (a program
called ``claude`` drawing the captures' layout on a 215×64 grid) runs in a tmux
pane or in the host's own PTY (``--source local --local-size 215x64
--local-command …``). A phone pairs through ``mirror-host pair``, holds a
``text-v1`` lease, and sends ``agentsInput``: the capability is advertised, the
prompt arrives once with one Enter and ``trailing_enter_sent: true``; with the
agent sitting on a permission prompt, nothing is typed and the answer is
``ok: false``.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import pytest
import trio

from mirror_host import control as c
from mirror_host.client.client import MirrorClient, login, pair_device
from tests.integration.agent_helpers import (
    FakeAgent,
    agent_input,
    bracketed,
    command,
    received_settles,
    screen_shows,
    submissions_after,
)
from tests.integration.mirror_helpers import list_panes, subscribe
from tests.integration.test_cli_admin import cli, stop, wait_until_serving
from tests.integration.test_tmux import TmuxServer

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def claude_bin(state_dir: Path) -> Path:
    """The interpreter under the name ``claude``: ``ps`` and tmux both see ``claude``."""
    directory = state_dir / "bin"
    directory.mkdir()
    program = directory / "claude"
    program.symlink_to(sys.executable)
    return program


@contextmanager
def serving(state_dir: Path, *args: str) -> Iterator[int]:
    """``mirror-host serve`` on a free loopback port; its port. Stopped by pid afterwards."""
    host_dir = state_dir / "host"
    process = subprocess.Popen(
        [sys.executable, "-m", "mirror_host", "serve", *args, "--listen", "127.0.0.1:0",
         "--advertise-address", "192.0.2.10", "--state-dir", str(host_dir)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_until_serving(host_dir, process)
        document = json.loads((host_dir / "serve.json").read_text())
        yield int(document["listen"].rsplit(":", 1)[1])
    finally:
        stop(process)


@asynccontextmanager
async def phone(state_dir: Path, port: int) -> AsyncIterator[MirrorClient]:
    ticket = await trio.to_thread.run_sync(lambda: cli(state_dir / "host", "pair", "--json"))
    assert ticket.returncode == 0, ticket.stderr
    code = json.loads(ticket.stdout)["code"]
    credential = await pair_device("127.0.0.1", port, code, "Phone")
    async with login("127.0.0.1", port, credential) as client:
        yield client


async def answer_claude(client: MirrorClient, agent: FakeAgent) -> None:
    """Deliver once, then be refused on a permission prompt (the held-out check)."""
    listing = await list_panes(client)
    assert "agent-input" in listing.capabilities and "text-v1" in listing.capabilities
    assert len(listing.panes) >= 1
    pane = next(p for p in listing.panes if "claude" in p.title)
    sub = await subscribe(client, pane.id, c.Representation.TEXT, c.Intent.TAKEOVER)
    await screen_shows(client, sub, "❯", "bypass permissions")

    prompt = "Summarise the open issues and propose a fix"
    result = await command(client, agent_input(pane.id, prompt), sub=sub)
    assert result["ok"] is True, result
    assert result["data"]["input"] == {
        "bytes": len(prompt.encode()),
        "characters": len(prompt),
        "source": "argument",
        "trailing_enter_sent": True,
    }
    assert await submissions_after(agent, 1) == [{"prompt": prompt, "state": "idle"}]
    assert await received_settles(agent) == bracketed(prompt) + b"\r"

    agent.set(state="blocked")
    await screen_shows(client, sub, "Do you want to proceed?")
    refused = await command(client, agent_input(pane.id, "yes, go ahead"), sub=sub)
    assert refused["ok"] is False and refused["error"]["code"] == "DISPATCH_TARGET_BUSY"
    assert await received_settles(agent) == bracketed(prompt) + b"\r"  # nothing more
    assert agent.submissions() == [{"prompt": prompt, "state": "idle"}]


async def test_serve_local_claude_look_alike(state_dir: Path, claude_bin: Path) -> None:
    agent = FakeAgent(state_dir / "agent")
    local_command = shlex.join([str(claude_bin), *agent.arguments()])
    with serving(
        state_dir, "--source", "local", "--local-size", "215x64", "--local-command", local_command
    ) as port:
        async with phone(state_dir, port) as client:
            await answer_claude(client, agent)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
async def test_serve_tmux_claude_look_alike(state_dir: Path, claude_bin: Path) -> None:
    agent = FakeAgent(state_dir / "agent")
    server = TmuxServer(state_dir)
    server.start()
    try:
        server.tmux("new-session", "-d", "-s", "claude", "-x", "215", "-y", "64",
                    shlex.join([str(claude_bin), *agent.arguments()]))  # fmt: skip
        with trio.fail_after(10):
            while "claude" not in server.tmux(
                "display-message", "-p", "-t", "claude:", "#{pane_current_command}"
            ):
                await trio.sleep(0.05)  # tmux, too, sees a program called claude
        with serving(state_dir, "--source", "tmux", "--tmux-socket", server.name) as port:
            async with phone(state_dir, port) as client:
                await answer_claude(client, agent)
    finally:
        server.stop()
