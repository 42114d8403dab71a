"""Whether a shell pane waits at an empty prompt, and whether a command may be typed. Pure.

A pane is ready for a phone's ``send`` exactly when all of this is proven:

1. the foreground process group of its terminal is the pane's own shell: the
   group's id is the pid of the pane's own process (the program the host
   started for a local pane, tmux's ``pane_pid``), that process is alive and
   leads the group, and it is bash, zsh or fish, the shells mirror-host has an
   integration for. A job, an agent, a subshell, a shell started from the
   pane's shell (``bash``, ``su``, ``sudo -s``) each run in a group of their
   own; what may share the shell's group are its own helpers, such as fish's
   completion builder, which do not read the terminal;
2. the latest prompt mark is ``B`` (the command line started) with no ``C``
   (a command runs) or any other mark since: on a screen whose shell signs
   its marks, only marks with its nonce count (:mod:`mirror_host.shell.marks`);
3. the command line after that mark is empty: the cursor is where the mark
   left it, the row still shows the same prompt left of it, and nothing follows
   it on the screen (a half-typed or recalled line is not empty).

Anything not proven is not ready (keys a Mac client types while a command line
is delivered withhold its Enter: :mod:`mirror_host.commands.shell_input`).
``list`` reports ``task.status`` from the same reading: ``idle`` exactly when
a ``send`` would be accepted now, ``running`` while a job (or a command the
shell runs itself) is in the foreground, and nothing when neither is proven.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from mirror_host.agents import ForegroundProcess, identify_group
from mirror_host.shell.integration import SHELL_NAMES
from mirror_host.shell.marks import InputMark, PromptMarks

__all__ = [
    "MAX_COMMAND_BYTES",
    "NOT_READY",
    "SENDABLE_SHELLS",
    "SHELLS",
    "BUSY",
    "PaneForeground",
    "ShellReading",
    "command_problem",
    "display_width",
    "fits",
    "foreground_status",
    "is_shell",
    "read_shell",
    "send_options_problem",
]

#: The longest command line a phone may send (Prowl's prompt limit).
MAX_COMMAND_BYTES = 65_536
#: Programs that are interactive shells, by their kernel name.
SHELLS = frozenset(
    {"bash", "zsh", "fish", "sh", "dash", "ash", "ksh", "ksh93", "mksh", "yash", "tcsh", "csh"}
)
#: The shells that can ever be ready: those with an integration that marks prompts
#: (:data:`mirror_host.shell.integration.SHELL_NAMES`). In any other, a mark can only
#: have been printed by a program.
SENDABLE_SHELLS = frozenset(SHELL_NAMES)
#: Refusal codes (nothing was written).
BUSY = "SHELL_BUSY"
NOT_READY = "SHELL_NOT_READY"

#: C0 controls (tab, line breaks included), DEL and C1 controls.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


@dataclass(frozen=True, slots=True)
class PaneForeground:
    """What the operating system says runs in the foreground of a pane's terminal.

    ``shell_pid`` is the pane's own process (the program the host started for a
    local pane, tmux's ``pane_pid``); ``group`` the terminal's foreground
    process group id; ``processes`` that group's members, its leader first if
    it is alive. ``None`` (or no processes) where the OS would not say.
    """

    shell_pid: int | None
    group: int | None
    processes: tuple[ForegroundProcess, ...]

    @property
    def own_process(self) -> ForegroundProcess | None:
        """The pane's own process, if it leads the foreground group and is alive."""
        if not self.processes or self.shell_pid is None or self.group != self.shell_pid:
            return None
        leader = self.processes[0]
        return leader if leader.pid == self.shell_pid else None

    @property
    def job(self) -> bool:
        """Whether a group other than the pane's own process's is in the foreground."""
        return (
            self.shell_pid is not None
            and self.group is not None
            and self.group != self.shell_pid
            and bool(self.processes)
        )


@dataclass(frozen=True, slots=True)
class ShellReading:
    """What a pane's foreground and prompt marks prove.

    ``code`` is ``None`` when a command may be typed now; otherwise the refusal
    code, with ``message`` saying why.
    """

    status: str | None
    code: str | None
    message: str
    shell: ForegroundProcess | None = None
    mark: InputMark | None = None

    @property
    def ready(self) -> bool:
        return self.code is None


def is_shell(process: ForegroundProcess) -> bool:
    """Whether ``process`` is an interactive shell (by its kernel name)."""
    return process.name.lstrip("-") in SHELLS


def _refuse(code: str, message: str, status: str | None = None) -> ShellReading:
    return ShellReading(status=status, code=code, message=message)


def foreground_status(foreground: PaneForeground) -> str | None:
    """``running`` when the foreground proves a job or a program other than a shell runs."""
    own = foreground.own_process
    if foreground.job or (own is not None and not is_shell(own)):
        return "running"
    return None


def _not_own_shell(foreground: PaneForeground) -> ShellReading:
    """Why the pane's own shell does not hold the foreground (no agent runs there)."""
    processes = foreground.processes
    if not foreground.job:  # the pane's own process is gone, or the OS would not say
        return _refuse(NOT_READY, "Host cannot tell what runs in this pane; nothing was sent.")
    leader = processes[0]
    if leader.pid != foreground.group:
        what = "A job is running in this pane"  # its leader exited; its members run on
    elif is_shell(leader):
        what = (
            f"Another shell ({leader.name.lstrip('-')}, started from the pane's own shell) "
            "or a script it runs is in the foreground; commands from a phone run only in "
            "the pane's own shell"
        )
    else:
        what = f"{leader.name} is running in this pane"
    return _refuse(
        BUSY,
        f"{what}; send again when the shell is back at its prompt. Nothing was sent.",
        "running",
    )


def read_shell(
    foreground: PaneForeground,
    marks: PromptMarks,
    *,
    line: str | None,
    cursor: tuple[int, int],
) -> ShellReading:
    """The verdict on a pane (module docstring).

    ``line`` is the screen's text from the latest ``B`` mark to the end of the
    screen, or ``None`` when the mark's row no longer shows the prompt it was
    drawn after (scrolled, redrawn, or the alternate screen is up).
    """
    processes = foreground.processes
    if not processes or foreground.group is None or foreground.shell_pid is None:
        return _refuse(NOT_READY, "Host cannot tell what runs in this pane; nothing was sent.")
    found = identify_group(processes)
    if found is not None:
        return _refuse(
            BUSY,
            f"{found[0].display_name} runs in this pane: send it a prompt instead "
            "(its reply box); nothing was sent.",
        )
    leader = foreground.own_process
    if leader is None:
        return _not_own_shell(foreground)
    if not is_shell(leader):
        return _refuse(
            BUSY,
            f"{leader.name} is running in this pane; send again when the shell is back "
            "at its prompt. Nothing was sent.",
            "running",
        )
    name = leader.name.lstrip("-")
    if name not in SENDABLE_SHELLS:
        return _refuse(
            NOT_READY,
            f"{name} has no shell integration, so Host cannot verify an empty command line; "
            "commands from a phone run only in bash, zsh and fish. Nothing was sent.",
        )
    if marks.running:
        return _refuse(
            BUSY,
            "A command is running in this pane's shell; send again when it is back at its "
            "prompt. Nothing was sent.",
            "running",
        )
    mark = marks.waiting
    if mark is None:
        if marks.last is None:
            return _refuse(
                NOT_READY,
                "Host has not seen this shell mark its prompt, so it cannot verify an empty "
                "command line. Set up shell integration "
                f'(eval "$(mirror-host shell-init {name})", docs/operations.md); '
                "it counts from the next prompt. Nothing was sent.",
            )
        return _refuse(
            NOT_READY,
            "The shell is not waiting at its prompt; send again when it is. Nothing was sent.",
        )
    if line is None:
        return _refuse(
            NOT_READY,
            "The shell's prompt moved on the screen since it was drawn, so Host cannot verify "
            "an empty command line; press Enter in the shell once. Nothing was sent.",
        )
    if line or cursor != (mark.x, mark.y):
        return _refuse(
            NOT_READY,
            "The shell's command line is not empty (a half-typed or recalled command); "
            "clear it on Host first. Nothing was sent.",
        )
    return ShellReading(status="idle", code=None, message="", shell=leader, mark=mark)


def command_problem(text: str) -> str | None:
    """Why ``text`` cannot be typed as one command line, or ``None``."""
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        return "The command is not valid text."
    if size > MAX_COMMAND_BYTES:
        return "The command is longer than 64 KiB."
    if not text.strip():
        return "The command is empty."
    if "\n" in text or "\r" in text:
        return "The command has more than one line; send one command line at a time."
    if _CONTROL.search(text):
        return (
            "The command contains control characters (tab, escape …); only printable text "
            "can be typed."
        )
    return None


def send_options_problem(
    *, trailing_enter: bool, wait: bool, capture_output: bool, source: str
) -> str | None:
    """Why a ``send`` asks for something this host does not do, or ``None``.

    Prowl's phones always send ``trailing_enter: true``, ``wait: false``,
    ``capture_output: false`` and ``source: "argv"``.
    """
    if not trailing_enter:
        return "Only a command run with Enter can be sent (trailing_enter must be true)."
    if wait or capture_output:
        return "Waiting for the command or capturing its output is not supported."
    if source != "argv":
        return f'Unsupported text source {source!r} (only "argv").'
    return None


def display_width(text: str) -> int:
    """Terminal cells ``text`` takes: wide characters two, combining marks none."""
    width = 0
    for char in text:
        if unicodedata.combining(char) or char in "\u200b\u200d\ufe0f":
            continue
        width += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return width


def fits(text: str, mark: InputMark, columns: int, rows: int) -> bool:
    """Whether ``text`` typed at the mark stays on the screen (so its echo can be read)."""
    room = (rows - mark.y) * columns - mark.x - 1
    return display_width(text) <= room
