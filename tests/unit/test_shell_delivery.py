"""Shell delivery's edges that real shells cannot be timed into: an answer that never
comes, comes half written or names other text, a cancel racing the shell, the lease lost
before or during the exchange, a trigger that fails. The exchange files are real (a
private directory under the test's tmp_path); only the pane and the shell that answers
in it are scripted. Everything runs on Trio's virtual clock."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
import trio
import trio.testing

from mirror_host.agents import ForegroundProcess
from mirror_host.commands.shell_input import deliver_command
from mirror_host.control import SendCommand
from mirror_host.errors import PaneNotFound, PaneSourceError
from mirror_host.shell.directory import ShellDirectory, UnsafeDirectory
from mirror_host.shell.exchange import TRIGGER, registration_name, request_name
from mirror_host.shell.marks import Mark, MarkKind, PromptMarks
from mirror_host.shell.verdict import PaneForeground

#: The pane's own shell: this test process, so /proc knows when it started.
SHELL = ForegroundProcess(pid=os.getpid(), name="bash", argv=("bash",))
NONCE = "0123456789abcdef0123456789abcdef"


def waiting_marks() -> PromptMarks:
    """A local pane's marks: the shell signs them, and its latest is ``B``."""
    marks = PromptMarks()
    marks.expect(NONCE, known=True)
    marks.note(Mark(MarkKind.INPUT, ("mh=" + NONCE,)))
    return marks


class ScriptedPane:
    """:class:`ShellPanes` over a scripted shell that answers through the real directory."""

    def __init__(self, directory: ShellDirectory | None) -> None:
        self.directory = directory
        self.marks: PromptMarks | None = waiting_marks()
        self.processes: tuple[ForegroundProcess, ...] = (SHELL,)
        self.triggers: list[bytes] = []
        #: What the shell does when the trigger arrives (default: loads the line).
        self.on_trigger: Callable[[], None] = self.load
        self.trigger_error: Exception | None = None
        self.gone = False
        self.seen_request: bytes | None = None

    async def shell_foreground(self, pane_id: object) -> PaneForeground:
        if self.gone:
            raise PaneNotFound("gone")
        group = self.processes[0].pid if self.processes else None
        return PaneForeground(shell_pid=SHELL.pid, group=group, processes=self.processes)

    def shell_directory(self, pane_id: object) -> ShellDirectory | None:
        if self.gone:
            raise PaneNotFound("gone")
        return self.directory

    def prompt_marks(self, pane_id: object) -> PromptMarks | None:
        return self.marks

    async def send_trigger(
        self, pane_id: object, data: bytes, authorized: Callable[[], bool]
    ) -> bool:
        if not authorized():
            return False
        self.triggers.append(data)
        if self.trigger_error is not None:
            raise self.trigger_error
        self.on_trigger()
        return True

    # ------------------------------------------------------------ the scripted shell

    def request(self) -> tuple[str, str]:
        assert self.directory is not None
        data = (self.directory.path / request_name(SHELL.pid)).read_bytes()
        self.seen_request = data
        request_id, expires, text = data.decode().split("\n")[:3]
        assert int(expires) > time.time()  # the shell takes it only until then
        return request_id, text

    def answer(self, data: bytes) -> bool:
        """Create the answer exclusively, as the integration does; whether it could."""
        request_id, _ = self.request()
        assert self.directory is not None
        return self.directory.create_answer(SHELL.pid, request_id, data)

    def load(self) -> None:
        _, text = self.request()
        self.answer(b"loaded\n" + text.encode() + b"\n")


def send(text: str) -> SendCommand:
    return SendCommand(
        pane="", text=text, trailing_enter=True, source="argv", wait=False, capture_output=False
    )


async def run(pane: ScriptedPane, text: str = "make test", **options: Any) -> Any:
    authorized = options.pop("authorized", lambda: True)
    return await deliver_command(pane, uuid4(), send(text), authorized=authorized)  # type: ignore[arg-type]


def error(result: Any) -> tuple[str, str]:
    assert result["ok"] is False, result
    return result["error"]["code"], result["error"]["message"]


@pytest.fixture
def directory(tmp_path: Path) -> ShellDirectory:
    shells = ShellDirectory(tmp_path / "shells")
    shells.prepare()
    return shells


def leftovers(directory: ShellDirectory) -> list[str]:
    return sorted(p.name for p in directory.path.iterdir())


async def test_the_shell_loads_the_text_and_the_files_go(
    directory: ShellDirectory, autojump_clock: trio.testing.MockClock
) -> None:
    pane = ScriptedPane(directory)
    result = await run(pane, "  echo 'ünï' 👋")
    assert result["ok"] is True and result["command"] == "send"
    assert result["data"]["input"] == {
        "source": "argv", "characters": 14, "bytes": len("  echo 'ünï' 👋".encode()),
        "trailing_enter_sent": True,
    }  # fmt: skip
    assert pane.triggers == [TRIGGER]  # nothing of the text is ever typed
    assert pane.seen_request is not None and pane.seen_request.endswith(
        "  echo 'ünï' 👋\n".encode()
    )
    assert leftovers(directory) == []
    mode = (directory.path).stat().st_mode & 0o777
    assert mode == 0o700


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        (b"refused line\n", "not empty"),
        (b"refused prompt\n", "not at its prompt"),
        (b"refused abbr\n", "abbreviation"),
    ],
)
async def test_the_shells_refusals_are_told(
    directory: ShellDirectory, autojump_clock: trio.testing.MockClock, answer: bytes, words: str
) -> None:
    pane = ScriptedPane(directory)
    pane.on_trigger = lambda: pane.answer(answer) and None
    code, message = error(await run(pane))
    assert code == "SHELL_NOT_READY" and words in message and "Nothing was sent" in message
    assert leftovers(directory) == []


async def test_no_answer_is_cancelled_and_the_shell_can_no_longer_act(
    directory: ShellDirectory, autojump_clock: trio.testing.MockClock
) -> None:
    """The trigger went to another program (cat, vim): nobody answers; the host's cancel
    takes the answer file, so a shell reading the request later could not load it."""
    pane = ScriptedPane(directory)
    pane.on_trigger = lambda: None
    real_create = directory.create_answer
    cancels: list[tuple[bool, bool]] = []

    def cancel(pid: int, request_id: str, data: bytes) -> bool:
        created = real_create(pid, request_id, data)
        late_shell = real_create(pid, request_id, b"loaded\nmake test\n")
        cancels.append((created, late_shell))
        return created

    directory.create_answer = cancel  # type: ignore[method-assign]
    started = trio.current_time()
    code, message = error(await run(pane))
    assert code == "SHELL_NOT_READY" and "did not take" in message and "nothing was run" in message
    assert trio.current_time() - started == pytest.approx(2.0, abs=0.05)
    assert cancels == [(True, False)]
    assert leftovers(directory) == []


async def test_a_cancel_racing_a_late_shell_is_decided_by_the_file(
    directory: ShellDirectory, autojump_clock: trio.testing.MockClock
) -> None:
    """The shell creates its answer just as the host gives up: the host's exclusive
    creation fails, and it reads and reports the shell's answer."""
    pane = ScriptedPane(directory)
    real_create = directory.create_answer

    def shell_first(pid: int, request_id: str, data: bytes) -> bool:
        _, text = pane.request()
        assert real_create(pid, request_id, f"loaded\n{text}\n".encode())  # by a hair
        return real_create(pid, request_id, data)

    pane.on_trigger = lambda: None
    directory.create_answer = shell_first  # type: ignore[method-assign]
    result = await run(pane)
    assert result["ok"] is True


async def test_an_answer_never_finished_or_naming_other_text_is_uncertain(
    directory: ShellDirectory, autojump_clock: trio.testing.MockClock
) -> None:
    half = ScriptedPane(directory)
    half.on_trigger = lambda: half.answer(b"loaded\nmake") and None
    code, message = error(await run(half))
    assert code == "SEND_FAILED" and "cannot tell" in message and "incomplete" in message
    other = ScriptedPane(directory)
    other.on_trigger = lambda: other.answer(b"loaded\nmake tset\n") and None
    code, message = error(await run(other))
    assert code == "SEND_FAILED" and "other text" in message
    assert leftovers(directory) == []


async def test_no_lease_before_the_request_writes_nothing(
    directory: ShellDirectory, autojump_clock: trio.testing.MockClock
) -> None:
    pane = ScriptedPane(directory)
    result = await run(pane, authorized=lambda: False)
    assert result["error"]["code"] == "REMOTE_COMMAND_REJECTED"
    assert pane.triggers == [] and leftovers(directory) == []


async def test_a_lease_lost_before_the_trigger_sends_nothing(
    directory: ShellDirectory, autojump_clock: trio.testing.MockClock
) -> None:
    """Checked before the request and again right before the trigger (tmux awaits a
    copy-mode check between them)."""
    pane = ScriptedPane(directory)
    checks = iter([True, False])
    result = await run(pane, authorized=lambda: next(checks))
    assert result["error"]["code"] == "REMOTE_COMMAND_REJECTED"
    assert pane.triggers == [] and leftovers(directory) == []


async def test_losing_the_lease_meanwhile_does_not_cut_the_exchange_off(
    directory: ShellDirectory, autojump_clock: trio.testing.MockClock
) -> None:
    """Once the trigger is out, the exchange settles (here: the shell answers late)."""
    pane = ScriptedPane(directory)
    results: list[Any] = []

    async def phone() -> None:
        with trio.CancelScope() as scope:
            pane.on_trigger = scope.cancel  # the connection ends right after the trigger
            results.append(await run(pane))

    async def late_shell() -> None:
        await trio.sleep(1.0)
        pane.load()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(phone)
        nursery.start_soon(late_shell)
    assert results and results[0]["ok"] is True


async def test_a_trigger_that_fails_is_cancelled_at_once(
    directory: ShellDirectory, autojump_clock: trio.testing.MockClock
) -> None:
    pane = ScriptedPane(directory)
    pane.trigger_error = PaneSourceError("tmux went away")
    started = trio.current_time()
    code, message = error(await run(pane))
    # Said as it was: the trigger failed (not "did not take it within 2 s").
    assert code == "SHELL_NOT_READY" and "tmux went away" in message and "nothing ran" in message
    assert trio.current_time() - started < 0.1
    assert leftovers(directory) == []
    closed = ScriptedPane(directory)
    closed.trigger_error = PaneNotFound("the pane closed")
    assert error(await run(closed)) == ("TARGET_NOT_FOUND", "The selected pane is gone.")


async def test_refusals_before_anything_reaches_the_pane(
    directory: ShellDirectory, autojump_clock: trio.testing.MockClock
) -> None:
    gone = ScriptedPane(directory)
    gone.gone = True
    assert error(await run(gone))[0] == "TARGET_NOT_FOUND"
    busy = ScriptedPane(directory)
    busy.processes = (ForegroundProcess(pid=1, name="sleep", argv=("sleep", "9")),)
    code, message = error(await run(busy))
    assert code == "SHELL_BUSY" and "sleep is running" in message
    nowhere = ScriptedPane(None)
    code, message = error(await run(nowhere))
    assert code == "SHELL_NOT_READY" and "private directory" in message
    bad = ScriptedPane(directory)
    assert error(await run(bad, "ls\nrm -rf ~"))[0] == "INVALID_ARGUMENT"
    assert error(await run(bad, "x" * 65_537))[0] == "INVALID_ARGUMENT"
    for pane in (gone, busy, nowhere, bad):
        assert pane.triggers == []
    assert leftovers(directory) == []


async def test_a_paused_pane_is_proven_by_a_registration_newer_than_its_shell(
    directory: ShellDirectory, autojump_clock: trio.testing.MockClock
) -> None:
    pane = ScriptedPane(directory)
    pane.marks = None  # a tmux pane nobody watches: its output is not read
    code, message = error(await run(pane))
    assert code == "SHELL_NOT_READY" and "exec bash" in message and pane.triggers == []
    registration = directory.path / registration_name(SHELL.pid)
    registration.touch()
    assert (await run(pane))["ok"] is True
    os.utime(registration, (0, 0))  # older than the process: another shell's with this pid
    assert error(await run(pane))[0] == "SHELL_NOT_READY"


def test_the_directory_must_be_private(tmp_path: Path) -> None:
    (tmp_path / "open").mkdir(mode=0o755)
    os.chmod(tmp_path / "open", 0o755)
    with pytest.raises(UnsafeDirectory):
        ShellDirectory(tmp_path / "open").prepare()
    (tmp_path / "target").mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(tmp_path / "target")
    with pytest.raises(UnsafeDirectory):
        ShellDirectory(tmp_path / "link").prepare()
    made = ShellDirectory(tmp_path / "runtime" / "mirror-host" / "shells")
    (tmp_path / "runtime").mkdir(mode=0o700)
    made.prepare()
    assert made.usable()
    assert (tmp_path / "runtime" / "mirror-host").stat().st_mode & 0o777 == 0o700


def test_stale_exchange_files_go_at_start(tmp_path: Path) -> None:
    shells = ShellDirectory(tmp_path / "shells")
    shells.prepare()
    old, fresh = shells.path / "1.request", shells.path / "2.request"
    for path in (old, fresh, shells.path / f"1.{'0' * 32}.answer", shells.path / "3.prompt"):
        path.write_text("x")
    an_hour_ago = time.time() - 3600
    os.utime(old, (an_hour_ago, an_hour_ago))
    os.utime(shells.path / f"1.{'0' * 32}.answer", (an_hour_ago, an_hour_ago))
    os.utime(shells.path / "3.prompt", (an_hour_ago, an_hour_ago))
    shells.prepare()
    assert sorted(p.name for p in shells.path.iterdir()) == ["2.request", "3.prompt"]
