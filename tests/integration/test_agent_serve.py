"""The phone-answers-Claude check, as a user runs it: ``mirror-host serve`` in a subprocess.

An agent that looks like Claude Code to ``ps``, to tmux and on screen (a program
called ``claude`` drawing the captures' layout on a 215×64 grid) runs in a tmux
pane or in the host's own PTY (``--source local --local-size 215x64
--local-command …``). A phone pairs through ``mirror-host pair``, holds a
``text-v1`` lease, and sends ``agentsInput``: the capability is advertised, the
prompt arrives once with one Enter and ``trailing_enter_sent: true``; with the
agent sitting on a permission prompt, nothing is typed and the answer is
``ok: false``.

Two look-alikes play the agent: the scripted one (``tests/fakes/claude``), and a
naive one (``tests/fakes/capture_agent.py``) that prints the real captures
verbatim and redraws only its composer row, with or without bracketed paste,
started as a program named ``claude`` or as a bash script named ``claude``
(which ``ps`` shows as ``bash …/claude``; in tmux it leads the pane's process
group, while a local pane's ``/bin/sh -c`` stays in front of it when sh does not
``exec`` its one command).
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import pytest
import trio

from mirror_host import control as c
from mirror_host.client.client import MirrorClient, login, pair_device
from tests.conftest import SHARED
from tests.integration.agent_helpers import (
    FAKES,
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

CAPTURES = SHARED / "data" / "herdr-pane-captures"
CAPTURE_AGENT = FAKES / "capture_agent.py"
needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


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


async def answer_claude(
    client: MirrorClient,
    agent: FakeAgent,
    *,
    idle_text: str = "bypass permissions",
    pasted: Callable[[str], bytes] = bracketed,
) -> None:
    """Deliver once, then be refused on a permission prompt (the held-out check).

    ``idle_text`` is on the agent's screen when it waits; ``pasted`` is what a
    paste of a prompt reaches the agent as.
    """
    listing = await list_panes(client)
    assert "agent-input" in listing.capabilities and "text-v1" in listing.capabilities
    assert len(listing.panes) >= 1
    pane = next((p for p in listing.panes if "claude" in p.title), listing.panes[0])
    sub = await subscribe(client, pane.id, c.Representation.TEXT, c.Intent.TAKEOVER)
    await screen_shows(client, sub, "❯", idle_text)

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
    assert await received_settles(agent) == pasted(prompt) + b"\r"

    agent.set(state="blocked")
    await screen_shows(client, sub, "Do you want to proceed?")
    refused = await command(client, agent_input(pane.id, "yes, go ahead"), sub=sub)
    assert refused["ok"] is False and refused["error"]["code"] == "DISPATCH_TARGET_BUSY"
    assert await received_settles(agent) == pasted(prompt) + b"\r"  # nothing more
    assert agent.submissions() == [{"prompt": prompt, "state": "idle"}]


@pytest.mark.slow
async def test_serve_local_claude_look_alike(state_dir: Path, claude_bin: Path) -> None:
    agent = FakeAgent(state_dir / "agent")
    local_command = shlex.join([str(claude_bin), *agent.arguments()])
    with serving(
        state_dir, "--source", "local", "--local-size", "215x64", "--local-command", local_command
    ) as port:
        async with phone(state_dir, port) as client:
            await answer_claude(client, agent)


@needs_tmux
@pytest.mark.slow
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


# ---------------------------------------------------------------- the naive look-alike


def bash_claude(state_dir: Path) -> Path:
    """A ``#!/usr/bin/env bash`` script named ``claude`` that runs the look-alike as a child.

    ``ps`` shows it as ``comm=bash``, ``bash …/claude``: the agent is the script.
    """
    directory = state_dir / "bash-bin"
    directory.mkdir()
    script = directory / "claude"
    script.write_text(
        "#!/usr/bin/env bash\n"
        f'{shlex.quote(sys.executable)} {shlex.quote(str(CAPTURE_AGENT))} "$@"\n'
    )
    script.chmod(0o755)
    return script


def look_alike_command(
    state_dir: Path, agent: FakeAgent, *, launcher: str, bracketed_paste: bool
) -> str:
    """The shell command that starts the capture look-alike as a program called ``claude``."""
    arguments = [
        "--captures", str(CAPTURES), "--control", str(agent.control), "--log", str(agent.log),
        "--submissions", str(agent.submissions_file),
        *(() if bracketed_paste else ("--no-bracketed-paste",)),
    ]  # fmt: skip
    if launcher == "bash":
        return shlex.join([str(bash_claude(state_dir)), *arguments])
    directory = state_dir / "bin"
    directory.mkdir()
    program = directory / "claude"  # the interpreter, under the name claude
    program.symlink_to(sys.executable)
    return shlex.join([str(program), str(CAPTURE_AGENT), *arguments])


@pytest.mark.skipif(not CAPTURES.is_dir(), reason=f"{CAPTURES} is absent")
@pytest.mark.parametrize(
    ("kind", "bracketed_paste", "launcher"),
    [
        pytest.param("tmux", True, "program", marks=needs_tmux, id="tmux-bracketed-program"),
        pytest.param("tmux", False, "bash", marks=needs_tmux, id="tmux-literal-bash"),
        pytest.param("local", True, "bash", id="local-bracketed-bash"),
        pytest.param("local", False, "program", id="local-literal-program"),
    ],
)
@pytest.mark.slow
async def test_serve_verbatim_capture_look_alike(
    state_dir: Path, kind: str, bracketed_paste: bool, launcher: str
) -> None:
    """Real captures at 215×64: the idle one gets the prompt once, the permission one nothing.

    Without bracketed paste the look-alike types whatever it reads, so the
    prompt must reach it as plain text (tmux's ``paste-buffer -p``, or plain
    bytes on the PTY), never with the markers.
    """
    agent = FakeAgent(state_dir / "agent")
    command_line = look_alike_command(
        state_dir, agent, launcher=launcher, bracketed_paste=bracketed_paste
    )
    pasted = bracketed if bracketed_paste else str.encode

    async def drive(port: int) -> None:
        async with phone(state_dir, port) as client:
            await answer_claude(client, agent, idle_text="for agents", pasted=pasted)

    if kind == "local":
        with serving(
            state_dir, "--source", "local", "--local-size", "215x64",
            "--local-command", command_line,
        ) as port:  # fmt: skip
            await drive(port)
        return
    server = TmuxServer(state_dir)
    server.start()
    try:
        server.tmux("new-session", "-d", "-s", "claude", "-x", "215", "-y", "64", command_line)
        with serving(state_dir, "--source", "tmux", "--tmux-socket", server.name) as port:
            await drive(port)
    finally:
        server.stop()
