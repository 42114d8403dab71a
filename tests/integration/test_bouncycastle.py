"""An Android-like client on BouncyCastle's TLS, against the real host (issue 16).

Prowl's Android app speaks TLS through BouncyCastle (``bctls``), not OpenSSL.
``tests/java/ProwlAndroidLike.java`` is our own small client on that library,
written from ``prowl-clients.md``: a ``PSKTlsClient`` offering TLS 1.2 and
``TLS_ECDHE_PSK_WITH_CHACHA20_POLY1305_SHA256`` only, the app's checks
(challenge first, integers as digits, one ``scrollState`` per frame, nothing
unasked, history given up after 8 s, no command without ``launch-profile``) and
its composer's Send route. It prints one JSON event per line; the tests read
them. It is compiled once per test session with ``javac``; without Java or the
BouncyCastle jars (``apt-get install default-jdk-headless libbctls-java
libbcprov-java``) these tests skip, saying which is missing.

The host runs on whichever TLS route this Python has (``sslpsk3`` on 3.11 and
3.12, the standard library from 3.13), so running the suite on both covers both.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from base64 import b64decode, b64encode
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
import trio

from mirror_host import control as c
from mirror_host.agents import Agent
from mirror_host.client.client import Credential, login
from mirror_host.host.server import Host
from mirror_host.panes.herdr.source import HerdrSource
from tests.integration.agent_helpers import FakeAgent, received_settles, submissions_after
from tests.integration.conftest import paired, port_of, running_host
from tests.integration.mirror_helpers import list_panes, subscribe
from tests.integration.test_agent_serve import serving
from tests.integration.test_cli_admin import cli
from tests.integration.test_herdr import FAKE_CLI, add_demo, fake_herdr
from tests.integration.test_slow_source import HISTORY_DELAY, history_reads

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

SOURCE = Path(__file__).resolve().parent.parent / "java" / "ProwlAndroidLike.java"
JARS = ("bctls", "bcprov", "bcutil")
JAR_DIRS = (Path("/usr/share/java"),)
CHACHA_PSK = "0xCCAC"


@dataclass(frozen=True)
class JavaClient:
    """The compiled client: how to run it."""

    java: str
    classpath: str

    def argv(self, *args: str) -> list[str]:
        return [self.java, "-cp", self.classpath, "ProwlAndroidLike", *args]


def _find_jar(name: str) -> Path | None:
    for directory in JAR_DIRS:
        jar = directory / f"{name}.jar"
        if jar.is_file():
            return jar
    return None


@pytest.fixture(scope="session")
def bc_client(tmp_path_factory: pytest.TempPathFactory) -> JavaClient:
    """``ProwlAndroidLike`` compiled against the system's BouncyCastle (once per session)."""
    java, javac = shutil.which("java"), shutil.which("javac")
    if java is None or javac is None:
        pytest.skip("no Java: apt-get install default-jdk-headless")
    jars = {name: _find_jar(name) for name in JARS}
    missing = [name for name, jar in jars.items() if jar is None]
    if missing:
        pytest.skip(
            f"no BouncyCastle {', '.join(missing)} jar in /usr/share/java: "
            "apt-get install libbctls-java libbcprov-java"
        )
    classes = tmp_path_factory.mktemp("bc-client")
    classpath = os.pathsep.join(str(jar) for jar in jars.values() if jar is not None)
    compiled = subprocess.run(
        [javac, "-cp", classpath, "-d", str(classes), str(SOURCE)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert compiled.returncode == 0, compiled.stderr
    return JavaClient(java, os.pathsep.join([str(classes), classpath]))


@dataclass
class Run:
    """One running client: its events so far, and its exit status once it ended."""

    process: trio.Process
    events: list[dict[str, Any]] = field(default_factory=list)
    stderr: bytes = b""
    changed: trio.Event = field(default_factory=trio.Event)
    done: bool = False

    async def wait_for(self, name: str, *, timeout: float = 30) -> dict[str, Any]:
        """The first event called ``name`` (fails on an ``error`` event or the end)."""
        with trio.fail_after(timeout):
            while True:
                for event in self.events:
                    if event["event"] == name:
                        return event
                    assert event["event"] != "error", (event, self.stderr)
                assert not self.done, (f"ended without {name}", self.events, self.stderr)
                self.changed = trio.Event()
                await self.changed.wait()

    async def finish(self, *, timeout: float = 60) -> int:
        with trio.fail_after(timeout):
            while not self.done:
                self.changed = trio.Event()
                await self.changed.wait()
        code = self.process.returncode
        assert code is not None
        return code

    def named(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["event"] == name]


@asynccontextmanager
async def running(client: JavaClient, *args: str) -> AsyncIterator[Run]:
    """Start the client; read its events as they come; stop it by its pid at the end."""
    process = await trio.lowlevel.open_process(
        client.argv(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    run = Run(process)

    async def read_stdout() -> None:
        assert process.stdout is not None
        pending = b""
        async for chunk in process.stdout:
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if line.strip():
                    run.events.append(json.loads(line))
            run.changed.set()

    async def read_stderr() -> None:
        assert process.stderr is not None
        async for chunk in process.stderr:
            run.stderr += chunk

    async def watch() -> None:
        await read_stdout()
        await process.wait()
        run.done = True
        run.changed.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read_stderr)
        nursery.start_soon(watch)
        try:
            yield run
        finally:
            if process.returncode is None:
                process.kill()
            await process.wait()


async def bc_pair(client: JavaClient, port: int, code: str, name: str) -> Credential:
    """Pair through BouncyCastle (the ``pair`` identity and the HMAC proof)."""
    async with running(client, "pair", "127.0.0.1", str(port), code, name) as run:
        tls = await run.wait_for("tls")
        assert (tls["suite"], tls["version"]) == (CHACHA_PSK, "TLS 1.2")
        # Prowl's clients: no PSK identity hint; BouncyCastle aborts without the
        # server's renegotiation_info, so a handshake at all proves it was sent.
        assert tls["identityHint"] == "" and tls["secureRenegotiation"] is True
        found = await run.wait_for("paired")
        assert await run.finish() == 0, run.events
    return Credential(UUID(found["hostID"]), UUID(found["deviceID"]), b64decode(found["key"]))


def session_args(port: int, credential: Credential, *options: str) -> list[str]:
    return [
        "session", "127.0.0.1", str(port), str(credential.host_id).upper(), credential.identity,
        b64encode(credential.key).decode(), *options,
    ]  # fmt: skip


@pytest.fixture
def without_agents_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """``PATH`` with no directory that holds a coding agent: "a machine with no agent"."""
    names = [agent.value for agent in Agent]
    kept = [
        d
        for d in os.environ.get("PATH", "").split(os.pathsep)
        if d and not any((Path(d) / name).exists() for name in names)
    ]
    monkeypatch.setenv("PATH", os.pathsep.join(kept))
    assert not any(shutil.which(name) for name in names)


async def test_a_phone_on_bouncycastle_sends_to_an_agent_on_serve_local_with_none_installed(
    state_dir: Path, bc_client: JavaClient, without_agents_on_path: None
) -> None:
    """The issue's first "done": pair, log in, list, mirror and Send, over BouncyCastle."""
    agent = FakeAgent(state_dir / "agent")
    bin_dir = state_dir / "bin"
    bin_dir.mkdir()
    claude = bin_dir / "claude"  # not on PATH: only this pane runs it
    claude.symlink_to(sys.executable)
    command = shlex.join([str(claude), *agent.arguments()])
    with serving(
        state_dir, "--source", "local", "--local-size", "215x64", "--local-command", command
    ) as port:
        ticket = await trio.to_thread.run_sync(lambda: cli(state_dir / "host", "pair", "--json"))
        assert ticket.returncode == 0, ticket.stderr
        credential = await bc_pair(bc_client, port, json.loads(ticket.stdout)["code"], "Pixel")
        prompt = "Summarise the failing tests — ünïcode 👋"
        args = session_args(port, credential, "--pane-title", "claude", "--prompt", prompt)
        async with running(bc_client, *args) as run:
            panes = await run.wait_for("panes")
            assert {"text-v1", "launch-profile", "agent-input"} <= set(panes["capabilities"])
            await run.wait_for("frame")
            composer = await run.wait_for("composer", timeout=60)
            assert await run.finish() == 0, run.events
        assert (composer["route"], composer["agent"], composer["outcome"]) == (
            "agentsInput", "claude", "sent"
        ), composer  # fmt: skip
        assert composer["result"]["data"]["input"]["bytes"] == len(prompt.encode())
        assert await submissions_after(agent, 1) == [{"prompt": prompt, "state": "idle"}]
        await received_settles(agent)


async def test_bouncycastle_pages_history_from_a_herdr_taking_10_s_per_read(
    state_dir: Path, bc_client: JavaClient
) -> None:
    """The issue's second "done": answered before the app's own 8 s give-up, then the page.

    The client gives up after 8 s and treats a late answer as fatal, as the app
    does; it asks again 5 s after ``HISTORY_UNAVAILABLE``, once Herdr answered.
    """
    async with fake_herdr(state_dir) as fake:
        await add_demo(fake, "seq 1 40; exec bash --norc --noprofile -i")
        fake.delay_method("pane.read", HISTORY_DELAY, when=history_reads)
        source = HerdrSource(state_dir / "herdr.sock", herdr_bin=FAKE_CLI)
        async with running_host(state_dir, source) as host:
            await source.wait_listed()
            credential = await paired(host, "Pixel")
            args = session_args(port_of(host), credential, "--history", "5")
            async with running(bc_client, *args) as run:
                assert await run.finish(timeout=60) == 0, (run.events, run.stderr)
            outcomes = [e["outcome"] for e in run.named("history")]
            assert outcomes == ["unavailable", "page"], run.events
            page = run.named("history")[-1]
            assert "40" in page["lines"]
            reads = [r for r in fake.requests_for("pane.read") if history_reads(r["params"])]
            assert len(reads) == 1  # the retry got the read that went on, not a new one


# ---------------------------------------------------------------- close_notify


async def hold_until_closed(run: Run) -> dict[str, Any]:
    closed = await run.wait_for("closed")
    assert await run.finish() == 0, run.events
    return closed


@asynccontextmanager
async def host_and_phone(state_dir: Path) -> AsyncIterator[tuple[Host, Credential]]:
    async with running_host(state_dir) as host:
        yield host, await paired(host, "Pixel")


async def test_close_notify_after_a_failed_login(state_dir: Path, bc_client: JavaClient) -> None:
    async with host_and_phone(state_dir) as (host, phone):
        args = session_args(port_of(host), phone, "--bad-proof")
        async with running(bc_client, *args) as run:
            closed = await hold_until_closed(run)
    assert closed["closeNotify"] is True, closed


async def test_close_notify_after_a_protocol_violation(
    state_dir: Path, bc_client: JavaClient
) -> None:
    async with host_and_phone(state_dir) as (host, phone):
        async with running(bc_client, *session_args(port_of(host), phone, "--violate")) as run:
            closed = await hold_until_closed(run)
    assert closed["closeNotify"] is True, closed


async def test_close_notify_after_ended(state_dir: Path, bc_client: JavaClient) -> None:
    async with host_and_phone(state_dir) as (host, phone):
        async with running(bc_client, *session_args(port_of(host), phone, "--hold")) as run:
            await run.wait_for("frame")
            async with login("127.0.0.1", port_of(host), await paired(host, "Mac")) as mac:
                pane = (await list_panes(mac)).panes[0].id
                await subscribe(mac, pane, intent=c.Intent.TAKEOVER)
                closed = await hold_until_closed(run)
    assert run.named("ended") == [{"event": "ended", "reason": "takenOver"}]
    assert closed["closeNotify"] is True, closed


async def test_close_notify_after_the_idle_timeout(state_dir: Path, bc_client: JavaClient) -> None:
    async with host_and_phone(state_dir) as (host, phone):
        async with running(bc_client, *session_args(port_of(host), phone, "--silent")) as run:
            closed = await hold_until_closed(run)
    assert closed["closeNotify"] is True, closed


async def test_close_notify_after_a_revoke(state_dir: Path, bc_client: JavaClient) -> None:
    async with host_and_phone(state_dir) as (host, phone):
        async with running(bc_client, *session_args(port_of(host), phone, "--hold")) as run:
            await run.wait_for("frame")
            await host.book.revoke(phone.device_id)
            closed = await hold_until_closed(run)
    assert closed["closeNotify"] is True, closed


async def test_close_notify_when_the_host_stops(state_dir: Path, bc_client: JavaClient) -> None:
    async with host_and_phone(state_dir) as (host, phone):
        async with running(bc_client, *session_args(port_of(host), phone, "--hold")) as run:
            await run.wait_for("frame")
            await host.shutdown()
            closed = await hold_until_closed(run)
    assert run.named("ended") == [{"event": "ended", "reason": "hostStopped"}]
    assert closed["closeNotify"] is True, closed
