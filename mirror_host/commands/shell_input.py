"""Running a phone's command line in a shell pane, through the shell's own line editor
(tmux and local panes). I/O.

Nothing of the command is ever typed. The steps, each a function below:

1. **Validate** (:func:`validate`): one line of printable text, at most 64 KiB,
   with the options Prowl's apps send.
2. **Verify** (:func:`verify`): the pane's own bash, zsh or fish leads its
   terminal's foreground group and runs mirror-host's integration at its
   prompt: its latest signed prompt mark where the host reads the pane's
   output, else its registration (:mod:`mirror_host.shell.verdict`).
3. **Authorise**: ``authorized()`` (the phone still holds the lease), before
   the request is written and again right before the trigger.
4. **Request and trigger** (:func:`hand_over`): the request file, then the
   trigger key sequence (:mod:`mirror_host.shell.exchange`).
5. **Await the answer**: the shell loads the exact text into its empty
   command line and accepts it, or refuses; after 2 s the host cancels, and
   a cancel that comes first means nothing ran.
6. **Report** (:func:`report`): success only for "loaded"; a refusal before
   or by the shell has its own code (``SHELL_BUSY``, ``SHELL_NOT_READY``,
   ``INVALID_ARGUMENT``, ``TARGET_NOT_FOUND``, ``REMOTE_COMMAND_REJECTED``);
   ``SEND_FAILED`` only where the outcome is uncertain.

From step 4 on the exchange finishes even if the phone's lease is lost or the
host stops meanwhile (within :data:`~mirror_host.commands.agent_input.FINISH_SECONDS`):
the shell's answer, or the host's cancel, settles it either way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable
from uuid import UUID

import trio

from mirror_host.commands.agent_input import finish_writing
from mirror_host.commands.responses import (
    NO_LONGER_OWNS,
    cli_error,
    cli_success,
    input_delivered,
    rejected,
)
from mirror_host.control import SendCommand
from mirror_host.control.swiftjson import JSONValue
from mirror_host.errors import PaneNotFound, PaneSourceError
from mirror_host.panes.foreground import process_start_time
from mirror_host.shell.directory import ShellDirectory, new_request_id
from mirror_host.shell.exchange import (
    ANSWER_SECONDS,
    TRIGGER,
    Cancel,
    Done,
    Exchange,
    Outcome,
    Wait,
)
from mirror_host.shell.marks import MarkKind, PromptMarks
from mirror_host.shell.verdict import (
    NOT_READY,
    PaneForeground,
    ShellEvidence,
    ShellReading,
    command_problem,
    foreground_status,
    read_shell,
    send_options_problem,
)

__all__ = [
    "Handover",
    "ShellPanes",
    "deliver_command",
    "hand_over",
    "report",
    "shell_evidence",
    "shell_status",
    "validate",
    "verify",
]

logger = logging.getLogger(__name__)

_COMMAND = "send"


@runtime_checkable
class ShellPanes(Protocol):
    """What shell delivery needs from a source's panes."""

    async def shell_foreground(self, pane_id: UUID) -> PaneForeground:
        """The pane's own process, its terminal's foreground group id and members.

        Only what the operating system says (never a guess such as tmux's
        ``pane_current_command``).

        Raises:
            PaneNotFound, PaneSourceError.
        """
        ...

    def shell_directory(self, pane_id: UUID) -> ShellDirectory | None:
        """The directory the pane's shells take phones' commands through (``None``: none).

        Raises:
            PaneNotFound: the pane is gone.
        """
        ...

    def prompt_marks(self, pane_id: UUID) -> PromptMarks | None:
        """The pane's prompt marks while the host reads its output (else ``None``).

        Raises:
            PaneNotFound: the pane is gone.
        """
        ...

    async def send_trigger(
        self, pane_id: UUID, data: bytes, authorized: Callable[[], bool]
    ) -> bool:
        """Write the trigger key sequence ``data`` to the pane, as raw input on the host's
        own behalf (a tmux pane in copy mode is returned to its live screen first), if
        ``authorized()`` still holds right before the write; whether it was written.

        Raises:
            PaneNotFound, PaneSourceError: it may or may not have been written.
        """
        ...


@dataclass(frozen=True, slots=True)
class Handover:
    """What the verification proved: the shell (its pid) and the directory to use."""

    pid: int
    directory: ShellDirectory


# ------------------------------------------------------------------ 1. validate


def validate(command: SendCommand) -> JSONValue | None:
    """The refusal of a ``send`` whose text or options this host does not run, or ``None``."""
    problem = command_problem(command.text) or send_options_problem(
        trailing_enter=command.trailing_enter,
        wait=command.wait,
        capture_output=command.capture_output,
        source=command.source,
    )
    return None if problem is None else cli_error(_COMMAND, "INVALID_ARGUMENT", problem)


# ------------------------------------------------------------------ 2. verify


async def shell_evidence(
    panes: ShellPanes, pane_id: UUID, foreground: PaneForeground
) -> ShellEvidence:
    """The pane's signed marks, and (where they do not decide) its shell's registration.

    Raises:
        PaneNotFound: the pane is gone.
    """
    marks = panes.prompt_marks(pane_id)
    signed = marks.signed if marks is not None else None
    if signed is not None and signed.kind in (MarkKind.INPUT, MarkKind.COMMAND):
        return ShellEvidence(marks, registered=False)
    own = foreground.own_process
    directory = panes.shell_directory(pane_id)
    registered = False
    if own is not None and directory is not None:
        started = await process_start_time(own.pid)
        if started is not None:
            registered = directory.registered(own.pid, started[0], slack=started[1])
    return ShellEvidence(marks, registered=registered)


async def verify(panes: ShellPanes, pane_id: UUID) -> Handover | JSONValue:
    """Whether the command may be handed to the pane's shell now: to whom, or the refusal."""
    try:
        foreground = await panes.shell_foreground(pane_id)
        evidence = await shell_evidence(panes, pane_id, foreground)
        directory = panes.shell_directory(pane_id)
    except PaneNotFound:
        return cli_error(_COMMAND, "TARGET_NOT_FOUND", "The selected pane is gone.")
    except PaneSourceError as exc:
        return cli_error(
            _COMMAND, NOT_READY, f"Host could not read the pane ({exc}); nothing was sent."
        )
    reading: ShellReading = read_shell(foreground, evidence)
    if reading.code is not None:
        return cli_error(_COMMAND, reading.code, reading.message)
    assert reading.shell is not None
    if directory is None or not directory.usable():
        where = "" if directory is None else f" ({directory.path})"
        return cli_error(
            _COMMAND,
            NOT_READY,
            f"Host has no private directory to hand shells a command through{where}; "
            "its log says why. Nothing was sent.",
        )
    return Handover(pid=reading.shell.pid, directory=directory)


def shell_status(
    foreground: PaneForeground, evidence: ShellEvidence | None, *, sendable: bool
) -> str | None:
    """``list``'s ``task.status`` for a pane with no agent (``None``: not proven).

    ``idle`` only where a ``send`` is offered (``sendable``) and would be handed
    to the shell now; without evidence (none gathered) only ``running`` can be.
    """
    if evidence is None:
        return foreground_status(foreground)
    status = read_shell(foreground, evidence).status
    return None if status == "idle" and not sendable else status


# ------------------------------------------------------------------ 4, 5. hand over


async def hand_over(
    panes: ShellPanes,
    pane_id: UUID,
    to: Handover,
    text: str,
    authorized: Callable[[], bool] = lambda: True,
) -> JSONValue:
    """Write the request, send the trigger (``authorized()`` checked right before it),
    await the shell's answer (or cancel); report."""
    request_id = new_request_id()
    try:
        to.directory.write_request(to.pid, request_id, text)
    except OSError as exc:
        return cli_error(
            _COMMAND,
            NOT_READY,
            f"Host could not write the request for the shell ({exc.strerror}); nothing was sent.",
        )
    try:
        answer_seconds = ANSWER_SECONDS
        try:
            if not await panes.send_trigger(pane_id, TRIGGER, authorized):
                return rejected(NO_LONGER_OWNS)  # nothing reached the pane
        except (PaneNotFound, PaneSourceError) as exc:
            # It may have reached the shell or not: cancel at once, and the file decides.
            logger.info("the trigger for a shell pane may not have been written: %s", exc)
            answer_seconds = 0.0
        exchange = Exchange(text, trio.current_time(), answer_seconds=answer_seconds)
        done = await _settle(exchange, to, request_id)
    finally:
        to.directory.remove_exchange(to.pid, request_id)
    if done.outcome is Outcome.RAN:
        logger.info("ran a %d-byte command line in a shell pane", len(text.encode()))
    return report(done, text)


async def _settle(exchange: Exchange, to: Handover, request_id: str) -> Done:
    """Drive ``exchange`` with the answer file until it is done."""
    directory, pid = to.directory, to.pid
    step = exchange.observe(trio.current_time(), directory.read_answer(pid, request_id))
    while True:
        if isinstance(step, Done):
            return step
        if isinstance(step, Wait):
            await trio.sleep_until(step.until)
            step = exchange.observe(trio.current_time(), directory.read_answer(pid, request_id))
            continue
        assert isinstance(step, Cancel)
        try:
            created = directory.create_answer(pid, request_id, step.data)
        except OSError as exc:
            logger.warning("could not cancel a request to a shell: %s", exc)
            created = False
        answer = None if created else directory.read_answer(pid, request_id)
        step = exchange.cancel_result(trio.current_time(), created, answer)


# ------------------------------------------------------------------ 6. report


def report(done: Done, text: str) -> JSONValue:
    """The ``send`` result for an exchange of ``text`` that ended ``done``."""
    outcome = done.outcome
    if outcome is Outcome.RAN:
        return cli_success(_COMMAND, input_delivered(text, "argv"))
    message = {
        Outcome.LINE_HAS_TEXT: (
            "The shell's command line is not empty: it holds text typed on Host (output "
            "may hide it). Clear it there first. Nothing was sent."
        ),
        Outcome.NOT_AT_PROMPT: (
            "The shell is not at its prompt: it is in the middle of a multi-line command "
            "or reading input (read, vared). Finish that on Host first. Nothing was sent."
        ),
        Outcome.ABBREVIATIONS: (
            "This fish is older than 3.6 and would expand an abbreviation in the command. "
            "Nothing was sent."
        ),
        Outcome.NOT_TAKEN: (
            f"The shell did not take the command within {ANSWER_SECONDS:g} s (it was busy, "
            "or this shell lost mirror-host's integration, e.g. after exec); nothing was run."
        ),
    }.get(outcome)
    if message is not None:
        return cli_error(_COMMAND, NOT_READY, message)
    detail = f" ({done.detail})" if done.detail else ""
    return cli_error(
        _COMMAND,
        "SEND_FAILED",
        f"Host cannot tell whether the shell ran the command{detail}. "
        "Check the pane before retrying.",
    )


# ------------------------------------------------------------------ the whole


async def deliver_command(
    panes: ShellPanes,
    pane_id: UUID,
    command: SendCommand,
    *,
    authorized: Callable[[], bool],
) -> JSONValue:
    """Run ``command.text`` in the shell in ``pane_id``, or say why not (module docstring)."""
    refusal = validate(command)
    if refusal is not None:
        return refusal
    verified = await verify(panes, pane_id)
    if not isinstance(verified, Handover):
        return verified
    if not authorized():
        return rejected(NO_LONGER_OWNS)
    handover = verified
    return await finish_writing(
        _COMMAND, lambda: hand_over(panes, pane_id, handover, command.text, authorized)
    )
