"""A scripted agent (``tests/fakes/claude``) and a phone that sends it commands."""

from __future__ import annotations

import json
import shlex
import sys
import uuid
from pathlib import Path
from typing import Any
from uuid import UUID

import trio

from mirror_host import control as c
from mirror_host.client.client import MirrorClient
from mirror_host.wire import TextFramePacket, VTFramePacket
from tests.integration.mirror_helpers import frame_text, next_frame

FAKES = Path(__file__).resolve().parent.parent / "fakes"
FAKE_CLAUDE = FAKES / "claude"


class FakeAgent:
    """The files one scripted agent reads and writes, under ``directory``."""

    def __init__(self, directory: Path, name: str = "agent") -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.control = directory / f"{name}.control.json"
        self.log = directory / f"{name}.input.log"
        self.submissions_file = directory / f"{name}.submissions.jsonl"
        self.set(state="idle")

    def arguments(self, *extra: str) -> list[str]:
        """The scripted agent's own arguments."""
        return [
            str(FAKE_CLAUDE), "--control", str(self.control), "--log", str(self.log),
            "--submissions", str(self.submissions_file), *extra,
        ]  # fmt: skip

    def argv(self, *extra: str, program: str = sys.executable) -> list[str]:
        """``python3 …/claude …``: an interpreter running a script named ``claude``."""
        return [program, *self.arguments(*extra)]

    def command(self, *extra: str, program: str = sys.executable) -> str:
        return shlex.join(self.argv(*extra, program=program))

    def set(self, **settings: Any) -> None:
        """Change what the agent shows (written whole, then renamed into place)."""
        temporary = self.control.with_suffix(".tmp")
        temporary.write_text(json.dumps(settings))
        temporary.replace(self.control)

    def received(self) -> bytes:
        """Every byte the agent has read from its terminal."""
        return self.log.read_bytes() if self.log.exists() else b""

    def submissions(self) -> list[dict[str, str]]:
        if not self.submissions_file.exists():
            return []
        return [json.loads(line) for line in self.submissions_file.read_text().splitlines()]


def bracketed(text: str) -> bytes:
    return b"\x1b[200~" + text.encode() + b"\x1b[201~"


async def command(
    client: MirrorClient, payload: c.RemoteCommand, *, sub: UUID | None = None
) -> Any:
    """Send one command and return its result (frames in between are acknowledged)."""
    request = c.CommandRequest(
        request_id=uuid.uuid4(), request=c.CommandEnvelope(output="json", command=payload)
    )
    await client.send(c.Command(subscription_id=sub, command_request=request))
    while True:
        item = await client.receive(timeout=30)
        if isinstance(item, c.CommandResult):
            assert item.command_response.request_id == request.request_id
            return item.command_response.response
        if sub is not None and isinstance(item, TextFramePacket | VTFramePacket):
            await client.send(c.Acknowledge(sequence=item.sequence, subscription_id=sub))


def agent_input(pane: UUID, prompt: str) -> c.AgentsInputCommand:
    return c.AgentsInputCommand(pane=str(pane).upper(), prompt=prompt)


async def screen_shows(client: MirrorClient, sub: UUID, *needles: str, timeout: float = 15) -> str:
    """Acknowledge frames until one shows every needle; its text."""
    with trio.fail_after(timeout):
        while True:
            text = frame_text(await next_frame(client, sub))
            if all(needle in text for needle in needles):
                return text


async def received_settles(agent: FakeAgent, *, quiet: float = 0.3, timeout: float = 10) -> bytes:
    """What the agent received, once nothing more arrived for ``quiet`` seconds."""
    with trio.fail_after(timeout):
        seen = agent.received()
        while True:
            await trio.sleep(quiet)
            now = agent.received()
            if now == seen:
                return now
            seen = now


async def submissions_after(
    agent: FakeAgent, count: int, *, timeout: float = 10
) -> list[dict[str, str]]:
    """The agent's submissions once there are ``count`` (the Enter may still be in flight)."""
    with trio.fail_after(timeout):
        while len(agent.submissions()) < count:
            await trio.sleep(0.02)
    return agent.submissions()
