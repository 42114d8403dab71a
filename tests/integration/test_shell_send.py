"""Phones running commands in shell panes (``send``), end to end over real TLS.

Real shells in real PTYs (local panes, with the host's own integration) and in
a real tmux server (bash set up with ``mirror-host shell-init bash``). A phone
routes Send the way Prowl's apps do: ``list`` with its lease, the pane's item
without an agent must say ``task.status == "idle"`` and the host must advertise
``shell-send``; then ``send``. The command appends to a file, so each test
proves the shell ran it exactly once, byte for byte, or not at all; nothing of
it is ever typed (the shell takes it into its own line editor:
mirror_host/shell/exchange.py). The cases of tests/integration/test_shell_send_cases.py
cover what the screen could not show (vi modes, hidden lines, autosuggestions,
paste widgets, abbreviations, right prompts, long lines, the race).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
import trio

from mirror_host import control as c
from mirror_host.client.client import MirrorClient, login
from mirror_host.commands.local import LocalCommands
from mirror_host.commands.service import CommandService
from mirror_host.commands.tmux import TmuxCommands
from mirror_host.host.server import Host
from mirror_host.host.service import run_host
from mirror_host.panes.local import LocalSource
from mirror_host.panes.tmux import TmuxSource
from mirror_host.shell.environment import SHELL_DIR_VARIABLE
from mirror_host.shell.marks import MarkKind
from mirror_host.shell.nonce import NONCE_VARIABLE, is_nonce, started_with_nonce
from mirror_host.terminal import Screen
from mirror_host.wire import ControlPacket, TextFramePacket, encode_packet
from tests.integration.agent_helpers import command
from tests.integration.conftest import host_config, paired, port_of
from tests.integration.mirror_helpers import list_panes, subscribe
from tests.integration.test_tmux import TmuxServer
from tests.pane_process import wait_program_in_place

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

HAS_TMUX = shutil.which("tmux") is not None


@dataclass
class ShellRig:
    """A host mirroring one shell pane; ``type`` types on the host's side of the pane."""

    host: Host
    pane: UUID
    out: Path
    type: Callable[[bytes], Awaitable[None]]
    screen: Callable[[], Screen | None]
    advance: Callable[[], Awaitable[None]]
    tmux_source: TmuxSource | None = None
    tmux_server: TmuxServer | None = None
    local_source: LocalSource | None = None
    commands: LocalCommands | TmuxCommands | None = None


def quiet_env(home: Path) -> dict[str, str]:
    """The test's own HOME, so no start-up file or history of the real user is touched."""
    return {**os.environ, "HOME": str(home), "HISTFILE": str(home / "history")}


@asynccontextmanager
async def local_rig(
    state_dir: Path,
    shell_command: str,
    *,
    shell_send: bool = True,
    env: dict[str, str] | None = None,
    backend: type[LocalCommands] = LocalCommands,
    columns: int = 100,
    rows: int = 30,
) -> AsyncIterator[ShellRig]:
    """A local pane running ``shell_command`` (the host adds its integration)."""
    home = state_dir / "home"
    home.mkdir(exist_ok=True)
    source = LocalSource(
        [shell_command], columns=columns, rows=rows, cwd=str(state_dir),
        env={**quiet_env(home), **(env or {})}, shell_integration=shell_send,
        shell_dir=state_dir / "shells",
    )  # fmt: skip
    commands = backend(source, profiles=(), shell_send=shell_send)
    async with trio.open_nursery() as nursery:
        host: Host = await nursery.start(
            lambda task_status: run_host(
                host_config(state_dir),
                source,
                commands=CommandService(commands),
                task_status=task_status,
            )
        )
        with trio.fail_after(10):
            while not source.live_panes():
                await trio.sleep(0.02)
        pane = source.live_panes()[0].id

        async def type_keys(data: bytes) -> None:
            await source.write_for_host(pane, data)

        async def advance() -> None:
            await source.write_for_host(pane, b"\r")

        try:
            yield ShellRig(
                host, pane, state_dir / "out.txt", type_keys,
                lambda: source.pane(pane).screen, advance, local_source=source,
                commands=commands,
            )  # fmt: skip
        finally:
            nursery.cancel_scope.cancel()


def shell_init_rc(state_dir: Path) -> Path:
    """An rcfile that sets bash up the documented way: ``eval "$(mirror-host shell-init bash)"``."""
    rc = state_dir / "bashrc"
    init = shlex.join([sys.executable, "-m", "mirror_host", "shell-init", "bash"])
    rc.write_text(f"PS1='tmux-shell$ '\nunset HISTFILE\neval \"$({init})\"\n")
    return rc


def shell_init_bash(state_dir: Path) -> str:
    """bash set up with ``mirror-host shell-init bash``, as a tmux pane's command."""
    return f"bash --noprofile --rcfile {shlex.quote(str(shell_init_rc(state_dir)))}"


@asynccontextmanager
async def tmux_rig(
    state_dir: Path, command: str | None = None, *, fresh: bool = True
) -> AsyncIterator[ShellRig]:
    """A tmux pane running ``command``: by default bash with ``mirror-host shell-init bash``.

    The server and the pane start before the host follows them; with ``fresh``
    the pane's program is started again once the host has put its nonce and
    directory in tmux's global environment (as a new window would be).
    """
    server = TmuxServer(state_dir)
    server.env["HOME"] = str(state_dir)
    server.start()
    program = command or shell_init_bash(state_dir)
    server.tmux("new-session", "-d", "-s", "shell", "-x", "100", "-y", "30", "-c", str(state_dir),
                program)  # fmt: skip
    target = "shell:0.0"
    source = TmuxSource(socket_name=server.name, shell_dir=state_dir / "shells")
    commands = TmuxCommands(source, profiles=())
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
            await source.wait_listed()
            with trio.fail_after(10):
                while source.shell_directory is None:
                    await trio.sleep(0.02)
            if fresh:
                server.tmux("respawn-pane", "-k", "-t", target, program)
            with trio.fail_after(10):
                while not (
                    found := [p for p, r in source.pane_rows() if r.session_name == "shell"]
                ):
                    await trio.sleep(0.02)
            pane = found[0]

            async def type_keys(data: bytes) -> None:
                await trio.to_thread.run_sync(
                    server.tmux, "send-keys", "-t", target, "-H", *(f"{b:02x}" for b in data)
                )

            async def advance() -> None:
                await type_keys(b"\r")

            try:
                yield ShellRig(
                    host, pane, state_dir / "out.txt", type_keys,
                    lambda: source.pane_screen(pane), advance, source, server,
                    commands=commands,
                )  # fmt: skip
            finally:
                nursery.cancel_scope.cancel()
    finally:
        server.stop()


@asynccontextmanager
async def phone_on(setup: ShellRig) -> AsyncIterator[tuple[MirrorClient, UUID, tuple[str, ...]]]:
    """A phone (``text-v1``) holding the shell pane's lease, and the advertised capabilities."""
    async with login("127.0.0.1", port_of(setup.host), await paired(setup.host)) as phone:
        listing = await list_panes(phone)
        sub = await subscribe(phone, setup.pane, c.Representation.TEXT, c.Intent.TAKEOVER)
        yield phone, sub, listing.capabilities


async def item_for(phone: MirrorClient, sub: UUID, pane: UUID) -> dict[str, Any]:
    """The pane's item of the ``list`` command, found by id as Android does."""
    result = await command(phone, c.ListCommand(), sub=sub)
    assert result["ok"] is True
    items = [i for i in result["data"]["items"] if i["pane"]["id"] == str(pane).upper()]
    assert len(items) == 1
    return dict(items[0])


async def status_becomes(
    phone: MirrorClient, sub: UUID, setup: ShellRig, wanted: str | None, *, timeout: float = 15
) -> dict[str, Any]:
    """Run ``list`` until the pane's ``task.status`` is ``wanted`` (``None``: absent)."""
    with trio.fail_after(timeout):
        while True:
            item = await item_for(phone, sub, setup.pane)
            if item["task"].get("status") == wanted:
                return item
            await trio.sleep(0.1)


def cursor_row(screen: Screen) -> str:
    """The text of the row the cursor is on, trailing blanks trimmed."""
    rows = screen.active_text().split("\n")
    y = screen.cursor[1]
    return rows[y].rstrip() if y < len(rows) else ""


async def line_shows(setup: ShellRig, text: str, *, timeout: float = 10) -> None:
    """Wait until the shell's command line (after a prompt ending ``$``, ``#``, ``%`` or
    ``>``) reads ``text``."""
    wanted = re.compile(r"[$#%>] " + re.escape(text) + "$" if text else r"[$#%>]$")
    seen = None
    with trio.move_on_after(timeout):
        while True:
            screen = setup.screen()
            seen = cursor_row(screen) if screen is not None else None
            if seen is not None and wanted.search(seen):
                return
            await trio.sleep(0.02)
    raise AssertionError(f"the command line never read {text!r}: the cursor's row is {seen!r}")


def send_command(pane: UUID, text: str) -> c.SendCommand:
    return c.SendCommand(
        pane=str(pane).upper(), text=text, trailing_enter=True, source="argv",
        wait=False, capture_output=False,
    )  # fmt: skip


def ran(text: str) -> dict[str, Any]:
    return {
        "ok": True,
        "command": "send",
        "schema_version": "prowl.cli.send.v1",
        "data": {
            "input": {
                "bytes": len(text.encode()),
                "characters": len(text),
                "source": "argv",
                "trailing_enter_sent": True,
            }
        },
    }


async def next_result(phone: MirrorClient, sub: UUID) -> c.CommandResult:
    """The next ``commandResult`` (frames meanwhile are acknowledged)."""
    with trio.fail_after(30):
        while True:
            item = await phone.receive(timeout=30)
            if isinstance(item, c.CommandResult):
                return item
            if isinstance(item, TextFramePacket):
                await phone.send(c.Acknowledge(sequence=item.sequence, subscription_id=sub))


async def file_reads(path: Path, text: str, *, timeout: float = 10) -> None:
    with trio.fail_after(timeout):
        while not (path.exists() and path.read_text() == text):
            await trio.sleep(0.02)


def appends(setup: ShellRig, word: str) -> str:
    """A command line that appends ``word-42`` to the rig's file (the shell does the sum)."""
    return f"echo {word}-$((6*7)) >> {shlex.quote(str(setup.out))}"


async def the_send_story(setup: ShellRig) -> None:
    """Idle at the prompt, Send runs once; a half-typed line and a running job get nothing."""
    async with phone_on(setup) as (phone, sub, capabilities):
        assert "shell-send" in capabilities
        item = await status_becomes(phone, sub, setup, "idle")
        assert "agent" not in item["pane"]

        first = appends(setup, "first")
        assert await command(phone, send_command(setup.pane, first), sub=sub) == ran(first)
        await file_reads(setup.out, "first-42\n")

        # A half-typed line: the shell waits at its prompt (idle; the screen cannot
        # know what its line holds), and the shell itself refuses the Send.
        await status_becomes(phone, sub, setup, "idle")
        await setup.type(b"echo hal")
        await line_shows(setup, "echo hal")
        await status_becomes(phone, sub, setup, "idle")
        refused = await command(phone, send_command(setup.pane, appends(setup, "no")), sub=sub)
        assert (refused["ok"], refused["error"]["code"]) == (False, "SHELL_NOT_READY")
        assert "not empty" in refused["error"]["message"]
        assert "typed on Host" in refused["error"]["message"]
        await line_shows(setup, "echo hal")

        # Ctrl-U clears it: idle again.
        await setup.type(b"\x15")
        await line_shows(setup, "")
        await status_becomes(phone, sub, setup, "idle")

        # While `sleep` runs: running, Send refused, nothing typed.
        await setup.type(b"sleep 2\r")
        await status_becomes(phone, sub, setup, "running")
        busy = await command(phone, send_command(setup.pane, appends(setup, "busy")), sub=sub)
        assert (busy["ok"], busy["error"]["code"]) == (False, "SHELL_BUSY")
        await status_becomes(phone, sub, setup, "idle")
        await line_shows(setup, "")  # nothing was typed ahead into the next prompt

        second = appends(setup, "second")
        assert await command(phone, send_command(setup.pane, second), sub=sub) == ran(second)
        await file_reads(setup.out, "first-42\nsecond-42\n")


async def test_local_bash_pane(state_dir: Path) -> None:
    async with local_rig(state_dir, "bash --norc --noprofile") as setup:
        await the_send_story(setup)


@pytest.mark.skipif(not HAS_TMUX, reason="tmux is not installed")
async def test_tmux_bash_set_up_with_shell_init(state_dir: Path) -> None:
    async with tmux_rig(state_dir) as setup:
        await the_send_story(setup)


@pytest.mark.parametrize(
    "shell",
    [
        pytest.param(name, marks=pytest.mark.skipif(not shutil.which(name), reason=f"no {name}"))
        for name in ("zsh", "fish")
    ],
)
async def test_local_zsh_and_fish_panes(state_dir: Path, shell: str) -> None:
    async with local_rig(state_dir, f"{shell} -i") as setup, phone_on(setup) as (phone, sub, _):
        await status_becomes(phone, sub, setup, "idle")
        text = f"echo {shell}-ran >> {shlex.quote(str(setup.out))}"
        assert await command(phone, send_command(setup.pane, text), sub=sub) == ran(text)
        await file_reads(setup.out, f"{shell}-ran\n")


async def test_android_route_with_the_exact_json(state_dir: Path) -> None:
    """list, then the very ``send`` JSON Prowl's Android app writes, over real TLS."""
    async with local_rig(state_dir, "bash --norc --noprofile") as setup:
        async with phone_on(setup) as (phone, sub, capabilities):
            item = await status_becomes(phone, sub, setup, "idle")
            assert "shell-send" in capabilities and "agent" not in item["pane"]
            text = f"echo android-\u00e9 >> {setup.out}"
            request_id = str(uuid.uuid4()).upper()
            # Exactly what the app writes (prowl-clients.md, "How a phone's Send is routed").
            send = (
                '{"send":{"_0":{"selector":{"pane":{"_0":"PANE"}},"text":"TEXT",'
                '"trailing_enter":true,"source":"argv","wait":false,"capture_output":false}}}'
            )
            send = send.replace("PANE", item["pane"]["id"]).replace("TEXT", text)
            body = (
                f'{{"command":{{"_0":{{"subscriptionID":"{str(sub).upper()}","commandRequest":'
                f'{{"requestID":"{request_id}","request":{{"output":"json","command":{send}}}}}}}}}}}'
            )
            await phone.send_raw(encode_packet(ControlPacket(body.encode())))
            answer = await next_result(phone, sub)
            assert str(answer.command_response.request_id).upper() == request_id
            response = answer.command_response.response
            assert isinstance(response, dict)
            assert response["ok"] is True and response["command"] == "send"
            assert response["data"]["input"]["bytes"] == len(text.encode("utf-8"))
            assert response["data"]["input"]["trailing_enter_sent"] is True
            await file_reads(setup.out, "android-\u00e9\n")


async def test_duplicates_run_once_and_receipts_return_the_result(state_dir: Path) -> None:
    async with local_rig(state_dir, "bash --norc --noprofile") as setup:
        async with phone_on(setup) as (phone, sub, _):
            await status_becomes(phone, sub, setup, "idle")
            text = appends(setup, "once")
            request_id = uuid.uuid4()
            envelope = c.CommandRequest(
                request_id=request_id,
                request=c.CommandEnvelope(output="json", command=send_command(setup.pane, text)),
            )
            await phone.send(c.Command(subscription_id=sub, command_request=envelope))
            await phone.send(c.Command(subscription_id=sub, command_request=envelope))
            first = await next_result(phone, sub)
            assert first.command_response.response == ran(text)
            await file_reads(setup.out, "once-42\n")
            await phone.send(c.CommandReceipt(subscription_id=sub, command_receipt_id=request_id))
            receipt = await next_result(phone, sub)
            assert receipt.command_response.response == ran(text)
            await status_becomes(phone, sub, setup, "idle")
            assert setup.out.read_text() == "once-42\n"


async def test_bad_text_is_refused_before_anything_is_typed(state_dir: Path) -> None:
    async with local_rig(state_dir, "bash --norc --noprofile") as setup:
        async with phone_on(setup) as (phone, sub, _):
            await status_becomes(phone, sub, setup, "idle")
            for text in ("", "   ", "ls\nrm -rf /", "ls\r", "ls\tx", "printf '\x1b[2J'",
                         "x" * 65_537):  # fmt: skip
                result = await command(phone, send_command(setup.pane, text), sub=sub)
                assert (result["ok"], result["error"]["code"]) == (False, "INVALID_ARGUMENT")
            not_argv = c.SendCommand(
                pane=str(setup.pane).upper(), text="ls", trailing_enter=True, source="argv",
                wait=True, capture_output=True,
            )  # fmt: skip
            result = await command(phone, not_argv, sub=sub)
            assert (result["ok"], result["error"]["code"]) == (False, "INVALID_ARGUMENT")
            await line_shows(setup, "")
            await status_becomes(phone, sub, setup, "idle")
            assert not setup.out.exists()


async def test_with_shell_send_off_send_is_refused_as_before(state_dir: Path) -> None:
    async with local_rig(state_dir, "bash --norc --noprofile", shell_send=False) as setup:
        async with phone_on(setup) as (phone, sub, capabilities):
            assert "shell-send" not in capabilities
            item = await item_for(phone, sub, setup.pane)
            assert item["task"].get("status") != "idle"
            result = await command(phone, send_command(setup.pane, appends(setup, "x")), sub=sub)
            assert result["error"] == {
                "code": "REMOTE_COMMAND_REJECTED",
                "message": "Host cannot verify an empty shell command line. "
                "Use an Agent Profile or control the shell on Host.",
            }
            assert not setup.out.exists()


async def test_doubled_marks_from_another_integration(state_dir: Path) -> None:
    """Another integration marking the same prompt (as Ghostty's or kitty's would) is fine."""
    home = state_dir / "home"
    home.mkdir()
    (home / ".bashrc").write_text(
        "PROMPT_COMMAND='printf \"\\e]133;D;0\\a\"'\n"
        "PS1='\\[\\e]133;A;cl=m\\e\\\\\\]other$ \\[\\e]133;B\\e\\\\\\]'\n"
        "PS0='\\e]133;C\\a'\n"
    )
    async with local_rig(state_dir, "bash") as setup, phone_on(setup) as (phone, sub, _):
        await status_becomes(phone, sub, setup, "idle")
        # Idle may come from the shell's registration before its prompt is drawn.
        await line_starting(setup, "other$")
        text = appends(setup, "doubled")
        assert await command(phone, send_command(setup.pane, text), sub=sub) == ran(text)
        await file_reads(setup.out, "doubled-42\n")
        await status_becomes(phone, sub, setup, "idle")


# ---------------------------------------------------------------- prompts drawn by programs

#: A prompt drawn by a program rather than the shell: bytes any output can carry.
FORGED = r"\e]133;D\a\e]133;A\a\e]133;B\a"


async def line_starting(setup: ShellRig, start: str, *, timeout: float = 10) -> None:
    """Wait until a row of the screen starts with ``start`` (output, not the typed command)."""
    with trio.fail_after(timeout):
        while True:
            screen = setup.screen()
            rows = screen.active_text().split("\n") if screen is not None else []
            if any(row.startswith(start) for row in rows):
                return
            await trio.sleep(0.02)


async def refused(phone: MirrorClient, sub: UUID, setup: ShellRig, code: str) -> str:
    """The pane is not idle and a ``send`` is refused with ``code``; the refusal's message."""
    item = await item_for(phone, sub, setup.pane)
    assert item["task"].get("status") != "idle"
    result = await command(phone, send_command(setup.pane, "echo typed"), sub=sub)
    assert (result["ok"], result["error"]["code"]) == (False, code), result
    return str(result["error"]["message"])


async def read_gets_nothing(setup: ShellRig, got: Path) -> None:
    """End the waiting ``read`` with an empty line: it read nothing the phone sent."""
    await setup.type(b"\r")
    await file_reads(got, "got:\n")


@pytest.mark.parametrize(
    "where",
    ["local", pytest.param("tmux", marks=pytest.mark.skipif(not HAS_TMUX, reason="no tmux"))],
)
async def test_a_job_forging_a_prompt_gets_nothing_typed(state_dir: Path, where: str) -> None:
    """A job the shell started (a shell itself, here) prints a prompt and waits in ``read``:
    its group is not the pane's own shell's, so no prompt it draws counts."""
    got = state_dir / "got.txt"
    rig = (
        local_rig(state_dir, "bash --norc --noprofile") if where == "local" else tmux_rig(state_dir)
    )
    async with rig as setup, phone_on(setup) as (phone, sub, _):
        if where == "tmux":
            await setup.advance()
        await status_becomes(phone, sub, setup, "idle")
        job = f"""bash -c 'printf "forged> {FORGED}"; read x; echo "got:$x" > {got}'"""
        await setup.type(job.encode() + b"\r")
        await line_starting(setup, "forged>")
        await status_becomes(phone, sub, setup, "running")
        assert "Another shell" in await refused(phone, sub, setup, "SHELL_BUSY")
        await read_gets_nothing(setup, got)
        await status_becomes(phone, sub, setup, "idle")


async def test_marks_printed_before_the_shells_own_read_are_ignored(state_dir: Path) -> None:
    """The pane's own bash in its builtin ``read`` right after output that draws a prompt:
    the printed marks lack the pane's nonce, so the shell's own ``C`` still stands."""
    got = state_dir / "got.txt"
    async with local_rig(state_dir, "bash --norc --noprofile") as setup:
        async with phone_on(setup) as (phone, sub, _):
            await status_becomes(phone, sub, setup, "idle")
            screen = setup.screen()
            assert screen is not None and screen.prompt.signed_only
            await setup.type(
                f"""printf 'forged> {FORGED}'; read x; echo "got:$x" > {got}\r""".encode()
            )
            await line_starting(setup, "forged>")
            await status_becomes(phone, sub, setup, "running")
            assert "command is running" in await refused(phone, sub, setup, "SHELL_BUSY")
            await read_gets_nothing(setup, got)
            await status_becomes(phone, sub, setup, "idle")


def dash_with_marks(state_dir: Path) -> Path:
    """A start-up file (dash reads ``$ENV``) whose prompt carries OSC 133 marks."""
    rc = state_dir / "dashrc"
    rc.write_text("PS1=$(printf '\\033]133;P;k=i\\007dash> \\033]133;B\\007')\n")
    return rc


@pytest.mark.parametrize(
    ("where", "shell"),
    [
        ("local", "sh"),
        pytest.param("local", "dash", marks=pytest.mark.skipif(not shutil.which("dash"), reason="no dash")),
        pytest.param("tmux", "dash", marks=pytest.mark.skipif(
            not (HAS_TMUX and shutil.which("dash")), reason="no tmux or dash")),
    ],
)  # fmt: skip
async def test_sh_and_dash_panes_are_never_idle(state_dir: Path, where: str, shell: str) -> None:
    """Shells without an integration: any mark in them was printed, so they are never idle."""
    rc = dash_with_marks(state_dir)
    if where == "local":
        rig = local_rig(state_dir, f"exec {shell} -i", env={"ENV": str(rc)})
    else:
        rig = tmux_rig(state_dir, f"exec env ENV={shlex.quote(str(rc))} {shell} -i")
    async with rig as setup, phone_on(setup) as (phone, sub, _):
        await setup.advance()
        await line_starting(setup, "dash>")
        screen = setup.screen()
        assert screen is not None
        # Marks or not, it is not idle, and gets nothing typed.
        assert "no shell integration" in await refused(phone, sub, setup, "SHELL_NOT_READY")
        await trio.sleep(0.3)
        assert "typed" not in screen.active_text()


@pytest.mark.skipif(not HAS_TMUX, reason="tmux is not installed")
async def test_tmux_shells_started_after_the_host_sign_their_marks(state_dir: Path) -> None:
    """The host hands tmux's new shells a nonce and its directory: their screens take only
    signed marks and they take phones' commands; a shell started before is told what to do."""
    got = state_dir / "got.txt"
    async with tmux_rig(state_dir, fresh=False) as setup:
        server, source = setup.tmux_server, setup.tmux_source
        assert server is not None and source is not None and source.shell_directory is not None
        name, _, nonce = (
            server.tmux("show-environment", "-g", NONCE_VARIABLE).strip().partition("=")
        )
        assert name == NONCE_VARIABLE and is_nonce(nonce)
        shown = server.tmux("show-environment", "-g", SHELL_DIR_VARIABLE).strip()
        assert shown == f"{SHELL_DIR_VARIABLE}={source.shell_directory.path}"
        async with phone_on(setup) as (phone, sub, _):
            # Started before the host: no nonce, no directory (docs/security.md).
            first = setup.screen()
            assert first is not None and not first.prompt.signed_only
            message = await refused(phone, sub, setup, "SHELL_NOT_READY")
            assert "shell-init bash" in message and "exec bash" in message

        server.tmux("new-window", "-d", "-t", "shell:", "-n", "signed", shell_init_bash(state_dir))
        with trio.fail_after(10):
            while not (found := [p for p, r in source.pane_rows() if r.window_name == "signed"]):
                await trio.sleep(0.02)
        pane = found[0]

        async def type_keys(data: bytes) -> None:
            hex_bytes = (f"{b:02x}" for b in data)
            await trio.to_thread.run_sync(
                server.tmux, "send-keys", "-t", "shell:signed", "-H", *hex_bytes
            )

        async def advance() -> None:
            await type_keys(b"\r")

        signed = ShellRig(
            setup.host, pane, setup.out, type_keys, lambda: source.pane_screen(pane), advance
        )
        async with phone_on(signed) as (phone, sub, _):
            screen = signed.screen()
            assert screen is not None and screen.prompt.signed_only
            await status_becomes(phone, sub, signed, "idle")
            text = appends(signed, "signed")
            assert await command(phone, send_command(pane, text), sub=sub) == ran(text)
            await file_reads(signed.out, "signed-42\n")

            await status_becomes(phone, sub, signed, "idle")
            await signed.type(
                f"""printf 'forged> {FORGED}'; read x; echo "got:$x" > {got}\r""".encode()
            )
            await line_starting(signed, "forged>")
            await status_becomes(phone, sub, signed, "running")
            await refused(phone, sub, signed, "SHELL_BUSY")
            await read_gets_nothing(signed, got)
            await status_becomes(phone, sub, signed, "idle")


@pytest.mark.parametrize(
    "shell",
    [
        pytest.param(name, marks=pytest.mark.skipif(not shutil.which(name), reason=f"no {name}"))
        for name in ("bash", "zsh", "fish")
    ],
)
async def test_the_nonce_stays_in_the_shell(state_dir: Path, shell: str) -> None:
    """The integration keeps the pane's nonce from the programs the shell starts."""
    env_file = state_dir / "env.txt"
    async with local_rig(state_dir, f"{shell} -i") as setup, phone_on(setup) as (phone, sub, _):
        assert setup.local_source is not None
        shell_pid = setup.local_source.pane(setup.pane).pid
        await wait_program_in_place(shell_pid)  # its environment is recorded
        nonce = started_with_nonce(shell_pid)
        assert nonce is not None  # the host started the shell with one …
        await status_becomes(phone, sub, setup, "idle")  # … and it signs its marks with it
        # bash's prompt strings name the nonce, so exporting them gives nothing away;
        # zsh's PS1 holds the marks only while the prompt waits.
        exports = {"bash": "export PS1 PS0; ", "zsh": "export PS1; "}.get(shell, "")
        text = f"{exports}env > {env_file}"
        assert await command(phone, send_command(setup.pane, text), sub=sub) == ran(text)
        await status_becomes(phone, sub, setup, "idle")
        inherited = env_file.read_text()
        assert "PATH=" in inherited
        assert NONCE_VARIABLE not in inherited and nonce not in inherited
        assert SHELL_DIR_VARIABLE not in inherited


@pytest.mark.skipif(not shutil.which("zsh"), reason="no zsh")
async def test_zsh_hands_on_its_exported_prompt_without_the_marks(state_dir: Path) -> None:
    """A PS1 zsh imported from its environment stays exported, but never with the
    marks: a shell ``exec``'d in zsh's place would draw signed prompts."""
    env_file = state_dir / "env.txt"
    async with (
        local_rig(state_dir, "zsh -i", env={"PS1": "zsh%# "}) as setup,
        phone_on(setup) as (phone, sub, _),
    ):
        assert setup.local_source is not None
        shell_pid = setup.local_source.pane(setup.pane).pid
        await wait_program_in_place(shell_pid)  # its environment is recorded
        nonce = started_with_nonce(shell_pid)
        assert nonce is not None
        await status_becomes(phone, sub, setup, "idle")
        text = f"env > {env_file}"
        assert await command(phone, send_command(setup.pane, text), sub=sub) == ran(text)
        await status_becomes(phone, sub, setup, "idle")  # marked again for the next prompt
        inherited = env_file.read_bytes()
        assert b"\nPS1=zsh%# \n" in inherited  # still exported, as it came
        assert nonce.encode() not in inherited and b"133;" not in inherited


class _Unadvertised(LocalCommands):
    """A backend that could run command lines but does not offer ``shell-send``."""

    @property
    def capabilities(self) -> tuple[str, ...]:
        return tuple(name for name in super().capabilities if name != "shell-send")


async def test_send_is_refused_where_shell_send_is_not_advertised(state_dir: Path) -> None:
    async with local_rig(state_dir, "bash --norc --noprofile", backend=_Unadvertised) as setup:
        async with phone_on(setup) as (phone, sub, capabilities):
            assert "shell-send" not in capabilities
            with trio.fail_after(10):  # the shell waits at its prompt: the backend would run it
                while (screen := setup.screen()) is None or (
                    screen.prompt.signed is None or screen.prompt.signed.kind is not MarkKind.INPUT
                ):
                    await trio.sleep(0.02)
            await line_shows(setup, "")
            result = await command(phone, send_command(setup.pane, appends(setup, "x")), sub=sub)
            assert result["error"] == {
                "code": "REMOTE_COMMAND_REJECTED",
                "message": "Host cannot verify an empty shell command line. "
                "Use an Agent Profile or control the shell on Host.",
            }
            await trio.sleep(0.3)
            await line_shows(setup, "")
            assert not setup.out.exists()
