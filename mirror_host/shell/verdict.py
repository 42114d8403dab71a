"""Whether a phone's command line may be handed to a shell pane, and ``list``'s status. Pure.

A phone's command is never typed: the pane's own shell takes it into its
line editor itself, and refuses it there when its command line holds text
(:mod:`mirror_host.shell.exchange`). What the host proves first, before
anything is sent to the pane:

1. the foreground process group of its terminal is the pane's own shell: the
   group's id is the pid of the pane's own process (the program the host
   started for a local pane, tmux's ``pane_pid``), that process is alive and
   leads the group, and it is bash, zsh or fish, the shells mirror-host has an
   integration for. A job, an agent, a subshell, a shell started from the
   pane's shell (``bash``, ``su``, ``sudo -s``) each run in a group of their
   own; what may share the shell's group are its own helpers, such as fish's
   completion builder, which do not read the terminal;
2. that shell runs mirror-host's integration and waits at its prompt:
   where the host reads the pane's output (local panes; tmux panes while
   watched), the latest OSC 133 mark signed with the pane's nonce is ``B``
   (a command line starts) rather than ``C`` (a command runs)
   (:mod:`mirror_host.shell.marks`); elsewhere, or before any signed mark,
   the shell registered itself since it started
   (:meth:`~mirror_host.shell.directory.ShellDirectory.registered`).

``list`` reports ``task.status`` from the same evidence: ``idle`` when the
pane's own shell waits at its prompt (whether its line holds text only the
shell knows: it refuses then), ``running`` while a job or a command the
shell runs itself is in the foreground, and nothing when neither is proven.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mirror_host.agents import ForegroundProcess, identify_group
from mirror_host.shell.integration import SHELL_NAMES, setup_hint
from mirror_host.shell.marks import MarkKind, PromptMarks

__all__ = [
    "MAX_COMMAND_BYTES",
    "NOT_READY",
    "SENDABLE_SHELLS",
    "SHELLS",
    "BUSY",
    "PaneForeground",
    "ShellEvidence",
    "ShellReading",
    "command_problem",
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
class ShellEvidence:
    """What says a pane's own shell runs the integration and waits at its prompt.

    ``marks`` are the pane's prompt marks where the host reads its output now
    (``None``: a tmux pane nobody watches); ``registered`` whether the shell
    touched its registration file since it started.
    """

    marks: PromptMarks | None
    registered: bool

    @property
    def mark(self) -> MarkKind | None:
        """The kind of the latest mark the shell signed, if any is known."""
        signed = self.marks.signed if self.marks is not None else None
        return signed.kind if signed is not None else None


@dataclass(frozen=True, slots=True)
class ShellReading:
    """What a pane's foreground and its shell's evidence prove.

    ``code`` is ``None`` when the command may be handed to ``shell`` now;
    otherwise the refusal code, with ``message`` saying why.
    """

    status: str | None
    code: str | None
    message: str
    shell: ForegroundProcess | None = None

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


def read_shell(foreground: PaneForeground, evidence: ShellEvidence) -> ShellReading:
    """The verdict on a pane (module docstring)."""
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
            f"{name} has no shell integration, so Host cannot hand it a command; "
            "commands from a phone run only in bash, zsh and fish. Nothing was sent.",
        )
    mark = evidence.mark
    if mark is MarkKind.COMMAND:
        return _refuse(
            BUSY,
            "A command is running in this pane's shell; send again when it is back at its "
            "prompt. Nothing was sent.",
            "running",
        )
    if mark is not MarkKind.INPUT and not evidence.registered:
        return _refuse(
            NOT_READY,
            f"This {name} has not set up mirror-host's shell integration, so it cannot take "
            f"a command from a phone: {setup_hint(name)}. Nothing was sent.",
        )
    return ShellReading(status="idle", code=None, message="", shell=leader)


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
