"""Guarded shell delivery's edges that real shells cannot be timed into: the lease lost
between the text and Enter, an echo that never comes or differs, a command starting, a
Mac typing, another program taking the foreground. The pane is a real libghostty screen
with prompt marks; only the source around it is scripted."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from uuid import uuid4

import trio
import trio.testing

from mirror_host.agents import ForegroundProcess
from mirror_host.commands.agent_input import DeliveryTiming
from mirror_host.commands.shell_input import deliver_command
from mirror_host.control import SendCommand
from mirror_host.errors import PaneNotFound, PaneSourceError
from mirror_host.shell.verdict import PaneForeground
from mirror_host.terminal import Screen

#: The host's own timing: every test runs on Trio's virtual clock (``autojump_clock``),
#: so waiting out a 2 s echo or a 5 s grace costs no real time, and order is all that counts.
TIMING = DeliveryTiming()
BASH = ForegroundProcess(pid=50, name="bash", argv=("bash",))
PROMPT = b"\x1b]133;P;k=i\x07~/src$ \x1b]133;B\x07"


class ScriptedShell:
    """:class:`AgentPanes` over a drawn prompt; the shell echoes what is pasted."""

    def __init__(self) -> None:
        self.current = Screen(60, 10)
        self.current.feed(b"earlier output\r\n" + PROMPT)
        self.processes: tuple[ForegroundProcess, ...] = (BASH,)
        self.written: list[bytes] = []
        self.echo: Callable[[str], bytes] = lambda text: text.encode()
        self.after_paste: Callable[[], None] = lambda: None
        self.paste_error: Exception | None = None
        self.raw_input: float | None = None
        self.gone = False

    async def foreground(self, pane_id: object) -> tuple[ForegroundProcess, ...]:
        if self.gone:
            raise PaneNotFound("gone")
        return self.processes

    async def shell_foreground(self, pane_id: object) -> PaneForeground:
        """The pane's own process is the bash; the foreground group is whatever leads now."""
        processes = await self.foreground(pane_id)
        group = processes[0].pid if processes else None
        return PaneForeground(shell_pid=BASH.pid, group=group, processes=processes)

    async def screen(self, pane_id: object) -> Screen:
        if self.gone:
            raise PaneNotFound("gone")
        return self.current

    async def paste(self, pane_id: object, text: str) -> None:
        if self.paste_error is not None:
            raise self.paste_error
        self.written.append(text.encode())
        self.current.feed(self.echo(text))
        self.after_paste()

    async def press_enter(self, pane_id: object) -> None:
        self.written.append(b"\r")

    def last_raw_input(self, pane_id: object) -> float | None:
        return self.raw_input


def send(text: str) -> SendCommand:
    return SendCommand(
        pane="", text=text, trailing_enter=True, source="argv", wait=False, capture_output=False
    )


async def run(shell: ScriptedShell, text: str = "make test", **options: Any) -> Any:
    authorized = options.pop("authorized", lambda: True)
    return await deliver_command(shell, uuid4(), send(text), authorized=authorized, timing=TIMING)  # type: ignore[arg-type]


def error(result: Any) -> tuple[str, str]:
    assert result["ok"] is False
    return result["error"]["code"], result["error"]["message"]


async def test_text_then_one_enter(autojump_clock: trio.testing.MockClock) -> None:
    shell = ScriptedShell()
    result = await run(shell, "echo 'ünï' 👋")
    assert result["ok"] is True and result["command"] == "send"
    assert result["data"]["input"] == {
        "source": "argv", "characters": 12, "bytes": len("echo 'ünï' 👋".encode()),
        "trailing_enter_sent": True,
    }  # fmt: skip
    assert shell.written == ["echo 'ünï' 👋".encode(), b"\r"]


async def test_lease_lost_after_the_text_withholds_enter(
    autojump_clock: trio.testing.MockClock,
) -> None:
    shell = ScriptedShell()
    owned = [True]
    shell.after_paste = lambda: owned.__setitem__(0, False)
    code, message = error(await run(shell, authorized=lambda: owned[0]))
    assert code == "SEND_FAILED" and "lost the pane" in message
    assert shell.written == [b"make test"]


async def test_no_lease_before_writing_writes_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    shell = ScriptedShell()
    result = await run(shell, authorized=lambda: False)
    assert result["error"]["code"] == "REMOTE_COMMAND_REJECTED"
    assert shell.written == []


async def test_an_echo_that_never_comes_or_differs_withholds_enter(
    autojump_clock: trio.testing.MockClock,
) -> None:
    shell = ScriptedShell()
    shell.echo = lambda text: b""
    code, message = error(await run(shell))
    assert code == "SEND_FAILED" and "never appeared" in message
    other = ScriptedShell()
    other.echo = lambda text: b"make tset"  # a key binding rewrote it
    code, message = error(await run(other))
    assert code == "SEND_FAILED" and "something other" in message
    assert shell.written == other.written == [b"make test"]


async def test_a_command_starting_meanwhile_withholds_enter(
    autojump_clock: trio.testing.MockClock,
) -> None:
    shell = ScriptedShell()
    shell.after_paste = lambda: shell.current.feed(b"\r\n\x1b]133;C\x07")
    code, message = error(await run(shell))
    assert code == "SEND_FAILED" and "running something" in message
    assert shell.written == [b"make test"]


async def test_a_mac_typing_or_another_program_meanwhile_withholds_enter(
    autojump_clock: trio.testing.MockClock,
) -> None:
    typing = ScriptedShell()
    typing.after_paste = lambda: setattr(typing, "raw_input", time.monotonic())
    code, message = error(await run(typing))
    assert code == "SEND_FAILED" and "Mac" in message
    vim = ScriptedShell()
    vim.after_paste = lambda: setattr(
        vim, "processes", (ForegroundProcess(pid=51, name="vim", argv=("vim",)),)
    )
    code, message = error(await run(vim))
    assert code == "SEND_FAILED" and "foreground" in message
    assert typing.written == vim.written == [b"make test"]


async def test_failures_before_and_during_the_write(autojump_clock: trio.testing.MockClock) -> None:
    gone = ScriptedShell()
    gone.gone = True
    assert error(await run(gone))[0] == "TARGET_NOT_FOUND"
    broken = ScriptedShell()
    broken.paste_error = PaneSourceError("tmux went away")
    code, message = error(await run(broken))
    assert code == "SEND_FAILED" and "unconfirmed" in message
    busy = ScriptedShell()
    busy.processes = (ForegroundProcess(pid=52, name="sleep", argv=("sleep", "9")),)
    assert error(await run(busy))[0] == "SHELL_BUSY"
    typed = ScriptedShell()
    typed.current.feed(b"git st")
    assert error(await run(typed))[0] == "SHELL_NOT_READY"
    assert gone.written == busy.written == typed.written == []


async def test_losing_the_lease_does_not_cut_the_write_off_halfway(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Once the text is written, cancellation waits for the checks; Enter needs the lease."""
    shell = ScriptedShell()
    owned = [True]
    with trio.CancelScope() as scope:

        def lost() -> None:
            owned[0] = False
            scope.cancel()

        shell.after_paste = lost
        result = await run(shell, authorized=lambda: owned[0])
    assert error(result)[0] == "SEND_FAILED"
    assert shell.written == [b"make test"]
