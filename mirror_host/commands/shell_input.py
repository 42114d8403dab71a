"""Running a phone's command line in a shell pane, through the shell's own line editor
(tmux and local panes): the shell's adapter for guarded delivery. I/O.

Nothing of the command is ever typed. :mod:`mirror_host.commands.delivery` runs
the steps and keeps their rules; :class:`ShellTarget` says what they are for a
shell:

1. **Validate**: one line of printable text, at most 64 KiB
   (:func:`~mirror_host.shell.verdict.command_problem`), with the options
   Prowl's apps send (:func:`deliver_command` checks those first).
2. **Verify** (the look, :func:`verify`): the pane's own bash, zsh or fish
   leads its terminal's foreground group and runs mirror-host's integration at
   its prompt: its latest signed prompt mark where the host reads the pane's
   output, else its registration (:mod:`mirror_host.shell.verdict`).
3. **Authorise**: the phone still holds the lease, before the request is
   written (the engine) and again right before the trigger (the pane's
   ``send_trigger``).
4. **Request and trigger** (the write): the request file, then the trigger
   key sequence (:mod:`mirror_host.shell.exchange`).
5. **Await the answer** (the confirmation): the shell loads the exact text
   into its empty command line and accepts it, or refuses; after 2 s the host
   cancels, and a cancel that comes first means nothing ran.
6. **Report** (:func:`outcome`): delivered only for "loaded"; a refusal
   before or by the shell has its own code (``SHELL_BUSY``,
   ``SHELL_NOT_READY``, ``INVALID_ARGUMENT``, ``TARGET_NOT_FOUND``,
   ``REMOTE_COMMAND_REJECTED``); ``SEND_FAILED`` only where the outcome is
   uncertain.

From step 4 on the exchange finishes even if the phone's lease is lost or the
host stops meanwhile (within :data:`~mirror_host.commands.delivery.FINISH_SECONDS`):
the shell's answer, or the host's cancel, settles it either way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable
from uuid import UUID

import trio

from mirror_host.commands.delivery import (
    Delivered,
    Delivery,
    Guard,
    Look,
    Outcome,
    Ready,
    Refused,
    Unconfirmed,
    Verdict,
    deliver,
)
from mirror_host.commands.responses import NO_LONGER_OWNS, PANE_GONE, cli_error
from mirror_host.control import SendCommand
from mirror_host.control.swiftjson import JSONValue
from mirror_host.errors import InputRefused, PaneNotFound, PaneSourceError
from mirror_host.panes.foreground import process_start_time
from mirror_host.shell.directory import ShellDirectory, new_request_id
from mirror_host.shell.exchange import (
    ANSWER_SECONDS,
    TRIGGER,
    Cancel,
    Done,
    Exchange,
    Wait,
)
from mirror_host.shell.exchange import (
    Outcome as Answer,
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
    "ShellTarget",
    "deliver_command",
    "outcome",
    "shell_evidence",
    "shell_status",
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


@dataclass(slots=True)
class Handover:
    """What the verification proved (the shell, by its pid, and the directory to use),
    and the request under way."""

    pid: int
    directory: ShellDirectory
    request_id: str = field(default_factory=new_request_id)
    #: Why the trigger failed, if it did. It may or may not have reached the shell,
    #: so the host cancels at once and the file decides; if the cancel wins (the
    #: shell never saw it) this is what the phone hears, not "did not take it in 2 s".
    trigger_error: PaneSourceError | None = None

    @property
    def answer_seconds(self) -> float:
        """How long the shell has to answer: none once the trigger failed."""
        return 0.0 if self.trigger_error is not None else ANSWER_SECONDS


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


async def verify(panes: ShellPanes, pane_id: UUID) -> Handover | Refused:
    """Whether the command may be handed to the pane's shell now: to whom, or the refusal.

    Raises:
        PaneNotFound, PaneSourceError.
    """
    foreground = await panes.shell_foreground(pane_id)
    evidence = await shell_evidence(panes, pane_id, foreground)
    directory = panes.shell_directory(pane_id)
    reading: ShellReading = read_shell(foreground, evidence)
    if reading.code is not None:
        return Refused(reading.code, reading.message)
    assert reading.shell is not None
    if directory is None or not directory.usable():
        where = "" if directory is None else f" ({directory.path})"
        return Refused(
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


# ------------------------------------------------------------------ the adapter


class ShellTarget:
    """The delivery adapter for the shell in a pane of :class:`ShellPanes`."""

    problem = staticmethod(command_problem)
    busy_code = NOT_READY

    def __init__(self, panes: ShellPanes) -> None:
        self.panes = panes

    async def look(self, pane_id: UUID) -> Look[Handover]:
        """One look decides (the operating system and the shell's own marks or file:
        nothing half-drawn to wait out)."""
        verified = await verify(self.panes, pane_id)
        return Ready(verified) if isinstance(verified, Handover) else verified

    def last_typed(self, pane_id: UUID) -> None:
        return None  # the shell refuses a command line that holds anything

    async def write(self, delivery: Delivery, state: Handover, guard: Guard) -> Delivered | None:
        """The request file, then the trigger (``guard`` asked right before it).

        Raises:
            InputRefused: nothing reached the pane (the request could not be
                written, or the lease went before the trigger).
        """
        directory, pid, request_id = state.directory, state.pid, state.request_id
        try:
            directory.write_request(pid, request_id, delivery.text)
        except OSError as exc:
            raise InputRefused(
                f"Host could not write the request for the shell ({exc.strerror})"
            ) from exc
        try:
            if not await self.panes.send_trigger(delivery.pane_id, TRIGGER, guard.holds):
                raise InputRefused(NO_LONGER_OWNS)
        except InputRefused:
            directory.remove_exchange(pid, request_id)
            raise
        except PaneSourceError as exc:
            # It may have reached the shell or not: cancel at once, and the file decides.
            logger.info("the trigger for a shell pane may not have been written: %s", exc)
            state.trigger_error = exc
        except BaseException:
            directory.remove_exchange(pid, request_id)
            raise
        return None

    async def confirm(self, delivery: Delivery, state: Handover) -> Verdict:
        """The shell's answer (or the host's cancel), which settles the exchange."""
        try:
            exchange = Exchange(
                delivery.text, trio.current_time(), answer_seconds=state.answer_seconds
            )
            done = await _settle(exchange, state)
            if done.outcome is Answer.NOT_TAKEN and state.trigger_error is not None:
                return _trigger_failed(state.trigger_error)
            return outcome(done)
        finally:
            state.directory.remove_exchange(state.pid, state.request_id)

    async def enter(self, delivery: Delivery, state: Handover) -> None:
        raise AssertionError("a shell accepts its command line itself")  # confirm answers

    def what(self, state: Handover) -> str:
        return "command line to a shell pane"


async def _settle(exchange: Exchange, to: Handover) -> Done:
    """Drive ``exchange`` with the answer file until it is done."""
    directory, pid, request_id = to.directory, to.pid, to.request_id
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


_REFUSALS = {
    Answer.LINE_HAS_TEXT: (
        "The shell's command line is not empty: it holds text typed on Host (output "
        "may hide it). Clear it there first. Nothing was sent."
    ),
    Answer.NOT_AT_PROMPT: (
        "The shell is not at its prompt: it is in the middle of a multi-line command "
        "or reading input (read, vared). Finish that on Host first. Nothing was sent."
    ),
    Answer.ABBREVIATIONS: (
        "This fish is older than 3.6 and would expand an abbreviation in the command. "
        "Nothing was sent."
    ),
    Answer.NOT_TAKEN: (
        f"The shell did not take the command within {ANSWER_SECONDS:g} s (it was busy, "
        "or this shell lost mirror-host's integration, e.g. after exec); nothing was run."
    ),
}


def _trigger_failed(error: PaneSourceError) -> Refused:
    """The trigger failed and the host's cancel won: the shell never acted."""
    if isinstance(error, PaneNotFound):
        return Refused("TARGET_NOT_FOUND", PANE_GONE)
    return Refused(NOT_READY, f"Host could not send the shell its command ({error}); nothing ran.")


def outcome(done: Done) -> Outcome:
    """What an exchange that ended ``done`` came to."""
    if done.outcome is Answer.RAN:
        return Delivered()
    message = _REFUSALS.get(done.outcome)
    if message is not None:
        return Refused(NOT_READY, message)
    detail = f" ({done.detail})" if done.detail else ""
    return Unconfirmed(
        f"Host cannot tell whether the shell ran the command{detail}. "
        "Check the pane before retrying."
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
    problem = send_options_problem(
        trailing_enter=command.trailing_enter,
        wait=command.wait,
        capture_output=command.capture_output,
        source=command.source,
    )
    if problem is not None:
        return cli_error(_COMMAND, "INVALID_ARGUMENT", problem)
    delivery = Delivery(text=command.text, pane_id=pane_id, command=_COMMAND, authorized=authorized)
    return await deliver(ShellTarget(panes), delivery)
