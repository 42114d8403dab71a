"""OSC 133 prompt marks: the scanner, what a libghostty screen notes of them, and the
verdict before a phone's command is handed to a shell."""

from __future__ import annotations

import pytest

from mirror_host.agents import ForegroundProcess
from mirror_host.shell.marks import Mark, MarkKind, MarkScanner, PromptMarks, parse_mark
from mirror_host.shell.verdict import (
    BUSY,
    NOT_READY,
    PaneForeground,
    ShellEvidence,
    ShellReading,
    command_problem,
    foreground_status,
    read_shell,
    send_options_problem,
)
from mirror_host.terminal import Screen

A, B, C, D = (Mark(kind) for kind in MarkKind)
BASH = ForegroundProcess(pid=10, name="bash", argv=("-bash",))


def scan_whole(data: bytes) -> list[tuple[int, Mark]]:
    return MarkScanner().feed(data)


def test_marks_end_with_bel_or_st_and_keep_their_parameters() -> None:
    data = b"x\x1b]133;A;cl=m;aid=7\x07$ \x1b]133;B\x1b\\ls\x1b]133;C\x07\x1b]133;D;0\x1b\\"
    found = scan_whole(data)
    assert [mark for _, mark in found] == [
        Mark(MarkKind.PROMPT, ("cl=m", "aid=7")),
        B,
        C,
        Mark(MarkKind.DONE, ("0",)),
    ]
    # Each offset is just past the mark's terminator.
    assert [data[:end].endswith((b"\x07", b"\x1b\\")) for end, _ in found] == [True] * 4
    assert data[found[1][0] :].startswith(b"ls")


def test_other_oscs_and_escapes_are_not_marks() -> None:
    data = b"\x1b]0;title\x07\x1b]7;file://h/tmp\x1b\\\x1b[31m\x1b]1330;B\x07\x1b]133;Z\x07"
    assert scan_whole(data) == []


def test_a_mark_split_anywhere_is_found_once_at_the_same_place() -> None:
    data = b"ab\x1b]133;A\x07$ \x1b]133;B;k=x\x1b\\tail"
    whole = scan_whole(data)
    for cut in range(len(data) + 1):
        scanner = MarkScanner()
        first = scanner.feed(data[:cut])
        second = [(end + cut, mark) for end, mark in scanner.feed(data[cut:])]
        assert first + second == whole, cut
    byte_by_byte = MarkScanner()
    found = []
    for index in range(len(data)):
        found += [(end + index, mark) for end, mark in byte_by_byte.feed(data[index : index + 1])]
    assert found == whole


def test_escape_can_and_sub_abort_an_unfinished_osc() -> None:
    # ESC starts a new sequence (here another OSC that is a mark); CAN/SUB drop the string.
    assert [m for _, m in scan_whole(b"\x1b]133;A\x1b]133;B\x07")] == [B]
    assert scan_whole(b"\x1b]133;A\x18\x07") == []
    assert scan_whole(b"\x1b]133;A\x1a\x07") == []
    assert [m for _, m in scan_whole(b"\x1b\x1b]133;C\x07")] == [C]
    assert scan_whole(b"\x1b]133;B" + b"x" * 400 + b"\x07") == []  # too long: not ours


def test_an_a_mark_mid_line_moves_libghostty_to_a_fresh_line_a_p_mark_does_not() -> None:
    """Why the integration marks the prompt's start with ``P`` (tmux would not move)."""
    for mark, cursor in ((b"133;A", (2, 1)), (b"133;P;k=i", (5, 0))):
        screen = Screen(20, 4)
        screen.feed(b"foo\x1b]" + mark + b"\x07$ \x1b]133;B\x07")
        assert screen.cursor == cursor
        assert screen.prompt.waiting


def test_parse_mark() -> None:
    assert parse_mark(b"133;D;130") == Mark(MarkKind.DONE, ("130",))
    assert parse_mark(b"133;") is None
    assert parse_mark(b"2;133;A") is None


def test_the_screen_notes_marks_however_the_output_is_split() -> None:
    data = b"out\r\n\x1b[32mhost\x1b[0m \x1b]133;P;k=i\x07\xe6\x97\xa5$ \x1b]133;B\x07"
    whole = Screen(20, 4)
    whole.feed(data)
    assert whole.prompt.waiting and whole.cursor == (9, 1)
    for cut in range(len(data)):
        split = Screen(20, 4)
        split.feed(data[:cut])
        split.feed(data[cut:])
        assert split.prompt.last == whole.prompt.last and split.cursor == whole.cursor, cut


def test_prompt_marks_say_waiting_or_running() -> None:
    marks = PromptMarks()
    assert not marks.waiting and not marks.running
    marks.note(A)
    marks.note(B)
    assert marks.waiting and not marks.running
    marks.note(B)  # doubled by a second integration: still waiting
    assert marks.waiting
    marks.note(C)
    assert not marks.waiting and marks.running
    marks.note(D)
    assert not marks.waiting and not marks.running
    marks.note(B)
    marks.forget()
    assert not marks.waiting and marks.last is None


def in_front(*processes: ForegroundProcess, shell: int = BASH.pid) -> PaneForeground:
    """A pane whose own process is ``shell`` and whose foreground group ``processes`` lead."""
    group = processes[0].pid if processes else None
    return PaneForeground(shell_pid=shell, group=group, processes=processes)


def verdict(
    screen: Screen,
    processes: tuple[ForegroundProcess, ...] = (BASH,),
    *,
    registered: bool = False,
) -> ShellReading:
    return read_shell(in_front(*processes), ShellEvidence(screen.prompt, registered))


def signed_screen(marks: bytes = b"") -> Screen:
    """A screen whose shell signs its marks (as a local pane's does)."""
    screen = Screen(30, 5)
    screen.prompt.expect(NONCE, known=True)
    screen.feed(marks)
    return screen


def test_a_signed_b_is_idle_and_ready() -> None:
    reading = verdict(signed_screen(signed(b"133;P;k=i") + b"$ " + signed(b"133;B")))
    assert (reading.status, reading.code, reading.ready) == ("idle", None, True)
    assert reading.shell == BASH


def test_text_on_the_line_is_for_the_shell_to_refuse() -> None:
    """The screen cannot tell typed text from a suggestion, a right prompt or output that
    hid it: a waiting shell is idle, and refuses the command itself if its line has text."""
    for typed in (b"git sta", b"make test\r\x1b[2C", b"\x1b[2m suggested\x1b[0m"):
        screen = signed_screen(signed(b"133;P;k=i") + b"$ " + signed(b"133;B") + typed)
        assert verdict(screen).ready


def test_without_a_signed_mark_the_registration_decides() -> None:
    """A tmux pane nobody watches (no marks read), or no signed mark yet."""
    unread = ShellEvidence(marks=None, registered=True)
    assert read_shell(in_front(BASH), unread).ready
    drawing = signed_screen(signed(b"133;D;0") + signed(b"133;P;k=i"))  # the prompt is drawn
    assert verdict(drawing, registered=True).ready
    for evidence in (ShellEvidence(None, False), ShellEvidence(signed_screen().prompt, False)):
        reading = read_shell(in_front(BASH), evidence)
        assert (reading.status, reading.code) == (None, NOT_READY)
        assert "shell-init bash" in reading.message and "exec bash" in reading.message
    # A signed C outweighs a registration: the shell runs a command itself.
    running = signed_screen(signed(b"133;B") + b"read x\r\n" + signed(b"133;C"))
    assert (verdict(running, registered=True).status, verdict(running).code) == ("running", BUSY)


def test_unsigned_marks_prove_nothing() -> None:
    """A shell that does not sign (no nonce) may have had its marks printed by anyone."""
    plain = Screen(30, 5)
    plain.feed(b"\x1b]133;A\x07$ \x1b]133;B\x07")
    assert plain.prompt.waiting and verdict(plain).code == NOT_READY
    assert verdict(plain, ()).code == NOT_READY


def test_running_jobs_and_commands_are_running() -> None:
    sleep = ForegroundProcess(pid=11, name="sleep", argv=("sleep", "5"))
    reading = verdict(signed_screen(signed(b"133;B")), (sleep,))
    assert (reading.status, reading.code) == ("running", BUSY)
    assert "sleep is running" in reading.message
    # The shell runs something itself (`read`, a builtin): its C mark says so.
    builtin = signed_screen(signed(b"133;B") + b"read x\r\n" + signed(b"133;C"))
    assert (verdict(builtin).status, verdict(builtin).code) == ("running", BUSY)
    # A helper sharing the shell's group does not make it busy.
    helper = ForegroundProcess(pid=12, name="fish", argv=("fish", "-c", "update"))
    assert verdict(signed_screen(signed(b"133;B")), (BASH, helper)).ready


def test_an_agent_in_the_foreground_gets_no_shell_command() -> None:
    claude = ForegroundProcess(pid=13, name="claude", argv=("claude",))
    reading = verdict(signed_screen(signed(b"133;B")), (claude,))
    assert reading.code == BUSY and reading.status is None and "Claude Code" in reading.message


@pytest.mark.parametrize(
    "text",
    ["", "  ", "ls\nrm", "ls\r", "a\tb", "x\x1b[2J", "bell\x07", "c1\x9b", "x" * 65_537, "\ud800"],
)
def test_bad_command_lines(text: str) -> None:
    assert command_problem(text) is not None


def test_good_command_lines_and_options() -> None:
    assert command_problem("git status && echo 'ünï 👋' # done") is None
    assert command_problem("x" * 65_536) is None
    assert (
        send_options_problem(trailing_enter=True, wait=False, capture_output=False, source="argv")
        is None
    )
    for options in (
        {"trailing_enter": False, "wait": False, "capture_output": False, "source": "argv"},
        {"trailing_enter": True, "wait": True, "capture_output": False, "source": "argv"},
        {"trailing_enter": True, "wait": False, "capture_output": True, "source": "argv"},
        {"trailing_enter": True, "wait": False, "capture_output": False, "source": "stdin"},
    ):
        assert send_options_problem(**options) is not None  # type: ignore[arg-type]


# ---------------------------------------------------------------- signed marks

NONCE = "0123456789abcdef0123456789abcdef"


def signed(body: bytes, nonce: str = NONCE) -> bytes:
    return b"\x1b]" + body + b";mh=" + nonce.encode() + b"\x07"


def test_a_marks_nonce_is_its_mh_parameter() -> None:
    assert parse_mark(b"133;B;mh=" + NONCE.encode()) == Mark(MarkKind.INPUT, ("mh=" + NONCE,))
    assert Mark(MarkKind.INPUT, ("mh=" + NONCE,)).nonce == NONCE
    assert Mark(MarkKind.DONE, ("0", "mh=abc")).nonce == "abc"
    assert Mark(MarkKind.PROMPT, ("k=i",)).nonce is None


def test_libghostty_reads_signed_marks_as_it_reads_plain_ones() -> None:
    """The nonce parameter changes nothing libghostty does: screen, cursor, mark positions."""
    session = [
        (b"foo", b""),  # output that does not end its line: the prompt starts mid-line
        (b"133;D;0", b""),
        (b"133;P;k=i", b"host \xe6\x97\xa5$ "),
        (b"133;B", b"make"),
        (b"133;C", b"\r\nbuilt\r\n"),
        (b"133;D;2", b""),
        (b"133;P;k=i", b"\x1b[31mhost\x1b[0m$ "),
        (b"133;B", b""),
    ]
    plain, marked = Screen(30, 6), Screen(30, 6)
    marked.prompt.expect(NONCE, known=True)
    for body, after in session:
        plain.feed(b"\x1b]" + body + b"\x07" + after)
        marked.feed(signed(body) + after)
        assert marked.cursor == plain.cursor and marked.vt_frame() == plain.vt_frame()
        assert marked.active_text() == plain.active_text()
        assert marked.prompt.waiting == plain.prompt.waiting
        assert marked.prompt.running == plain.prompt.running
    assert marked.prompt.waiting and marked.cursor == (6, 2)


def test_a_screen_whose_shell_signs_ignores_marks_without_its_nonce() -> None:
    screen = Screen(40, 6)
    screen.prompt.expect(NONCE, known=True)
    assert screen.prompt.signed_only
    # Unsigned marks (no shell drew them) never open a prompt.
    screen.feed(b"\x1b]133;A\x07$ \x1b]133;B\x07")
    assert not screen.prompt.waiting and screen.prompt.last is None
    screen.feed(b"\r\n" + signed(b"133;P;k=i") + b"$ " + signed(b"133;B"))
    assert screen.prompt.waiting
    # The shell's own C, then a program prints a prompt and reads: still running.
    screen.feed(b"read x\r\n" + signed(b"133;C") + b"forged\x1b]133;D\x07\x1b]133;A\x07")
    screen.feed(b"> \x1b]133;B\x07" + signed(b"133;B", "f" * 32))  # another nonce: not ours
    assert screen.prompt.running and not screen.prompt.waiting
    reading = verdict(screen, registered=True)
    assert (reading.status, reading.code) == ("running", BUSY)
    # Without the nonce (a shell that does not sign), the forgery proves nothing.
    unsigned = Screen(40, 6)
    unsigned.feed(b"\x1b]133;C\x07forged\x1b]133;D\x07\x1b]133;A\x07> \x1b]133;B\x07")
    assert unsigned.prompt.waiting and not verdict(unsigned).ready


def test_a_screen_that_may_sign_takes_unsigned_marks_until_a_signed_one() -> None:
    """A tmux shell started before the host handed out its nonce signs nothing."""
    screen = Screen(40, 6)
    screen.prompt.expect(NONCE, known=False)
    screen.feed(b"\x1b]133;A\x07$ \x1b]133;B\x07")
    assert not screen.prompt.signed_only and screen.prompt.waiting
    assert screen.prompt.signed is None  # unsigned: no evidence
    screen.feed(b"ls\r\n" + signed(b"133;C"))
    assert screen.prompt.signed_only and screen.prompt.running
    assert screen.prompt.signed == Mark(MarkKind.COMMAND, ("mh=" + NONCE,))
    screen.feed(b"\x1b]133;D\x07\x1b]133;A\x07$ \x1b]133;B\x07")
    assert screen.prompt.running and not screen.prompt.waiting


# ---------------------------------------------------------------- the pane's own shell

SHELL_PANE = 10  # BASH.pid: the process the host started in the pane


def test_the_foreground_must_be_the_panes_own_shell() -> None:
    """Groups that are not the pane's shell, crafted as /proc would list them."""
    evidence = ShellEvidence(signed_screen(signed(b"133;B")).prompt, registered=True)
    inner = ForegroundProcess(pid=21, name="bash", argv=("bash", "-c", "sleep 5; true"))
    sleep = ForegroundProcess(pid=22, name="sleep", argv=("sleep", "5"))
    subshell = ForegroundProcess(pid=20, name="bash", argv=("bash",))
    root = ForegroundProcess(pid=30, name="bash", argv=("bash",))
    helper = ForegroundProcess(pid=12, name="fish", argv=("fish", "-c", "update"))
    cases = [
        # The reviewer's case: the job's leader (20) exited, its members run on.
        (PaneForeground(SHELL_PANE, 20, (inner, sleep)), "running", BUSY),
        # A subshell, `bash deploy.sh`, `sh -c …`: a shell leads a job of the pane's shell.
        (PaneForeground(SHELL_PANE, 20, (subshell,)), "running", BUSY),
        # A root shell reached with `sudo -s` / `su`.
        (PaneForeground(SHELL_PANE, 30, (root,)), "running", BUSY),
        # The pane's own group, but its leader (the pane's shell) is gone.
        (PaneForeground(SHELL_PANE, SHELL_PANE, (helper,)), None, NOT_READY),
        # A shell that is not the pane's, with the pane's pid unknown or the group unknown.
        (PaneForeground(None, 20, (subshell,)), None, NOT_READY),
        (PaneForeground(SHELL_PANE, None, ()), None, NOT_READY),
    ]
    for foreground, status, code in cases:
        reading = read_shell(foreground, evidence)
        assert (reading.status, reading.code, reading.ready) == (status, code, False), foreground
    assert "Another shell (bash" in read_shell(cases[1][0], evidence).message
    # Only the pane's own shell, leading its own group (helpers may share it), is ready.
    own = PaneForeground(SHELL_PANE, SHELL_PANE, (BASH, helper))
    assert read_shell(own, evidence).ready
    # `list` without a screen proves a job from the foreground alone.
    assert foreground_status(cases[0][0]) == "running"
    assert foreground_status(own) is None
    htop = ForegroundProcess(pid=SHELL_PANE, name="htop", argv=("htop",))
    assert foreground_status(PaneForeground(SHELL_PANE, SHELL_PANE, (htop,))) == "running"


@pytest.mark.parametrize("name", ["sh", "dash", "-sh", "ksh", "mksh", "ash", "tcsh", "yash"])
def test_only_bash_zsh_and_fish_can_be_idle(name: str) -> None:
    """Shells without an integration: a mark in them can only have been printed."""
    shell = ForegroundProcess(pid=SHELL_PANE, name=name, argv=(name,))
    screen = signed_screen(signed(b"133;B"))
    reading = verdict(screen, (shell,), registered=True)
    assert (reading.status, reading.code) == (None, NOT_READY)
    assert "no shell integration" in reading.message
    for sendable in ("bash", "-bash", "zsh", "fish"):
        process = ForegroundProcess(pid=SHELL_PANE, name=sendable, argv=(sendable,))
        assert verdict(screen, (process,)).ready
