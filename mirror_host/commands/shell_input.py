"""Running a phone's command line in a shell pane, guarded (tmux and local panes). I/O.

A phone's ``send`` types one command line into a shell and presses Enter. It
is done only when the shell provably waits at an empty prompt
(:mod:`mirror_host.shell.verdict`: the pane's own bash, zsh or fish leads the
terminal's foreground process group, its latest OSC 133 mark is a ``B`` with
nothing typed after it):

1. The text is one line of printable text, at most 64 KiB, that fits on the
   pane's screen from the prompt on (so its echo can be read back).
2. The pane is read right before writing; ``authorized()`` (the lease still
   holds) is checked right before writing and again right before Enter.
3. The text is pasted the way a terminal pastes (bracketed when the shell
   turned bracketed paste on, as bash, zsh and fish do), then the screen is
   read until the command line after the mark shows exactly it (at most 2 s).
4. Only if the pane's own shell still leads the foreground, its prompt still
   waits (no command started), the line still shows exactly the text and
   nobody typed from a Mac meanwhile, one Enter is sent.

A refusal before anything was written has its own code (``INVALID_ARGUMENT``,
``SHELL_BUSY``, ``SHELL_NOT_READY``, ``TARGET_NOT_FOUND``). Once the text may
have reached the pane, anything less than the Enter is ``SEND_FAILED`` saying
how far it got, and nothing is retried.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable
from uuid import UUID

import trio

from mirror_host.agents import ForegroundProcess
from mirror_host.commands.agent_input import (
    AgentPanes,
    DeliveryTiming,
    PasteUnsupported,
    finish_writing,
)
from mirror_host.commands.responses import (
    INPUT_UNCONFIRMED,
    NO_LONGER_OWNS,
    cli_error,
    cli_success,
    input_delivered,
    rejected,
)
from mirror_host.control import SendCommand
from mirror_host.control.swiftjson import JSONValue
from mirror_host.errors import PaneNotFound, PaneSourceError
from mirror_host.shell.verdict import (
    NOT_READY,
    PaneForeground,
    ShellReading,
    command_problem,
    fits,
    foreground_status,
    read_shell,
    send_options_problem,
)
from mirror_host.terminal import Screen

__all__ = ["ShellPanes", "command_line", "deliver_command", "judge", "shell_status"]

logger = logging.getLogger(__name__)

_COMMAND = "send"


@runtime_checkable
class ShellPanes(AgentPanes, Protocol):
    """What shell delivery needs from a source, beyond agent delivery's."""

    async def shell_foreground(self, pane_id: UUID) -> PaneForeground:
        """The pane's own process, its terminal's foreground group id and members.

        Only what the operating system says (never a guess such as tmux's
        ``pane_current_command``).

        Raises:
            PaneNotFound, PaneSourceError.
        """
        ...


def command_line(screen: Screen) -> str | None:
    """The text after the latest ``B`` mark, or ``None`` if the mark no longer holds.

    The mark holds while it is the latest mark, the normal screen is up, and its
    row still shows the prompt it was drawn after (the screen did not scroll or
    redraw under it).
    """
    mark = screen.prompt.waiting
    if mark is None or screen.on_alternate_screen:
        return None
    columns, rows = screen.size
    if mark.y >= rows or mark.x >= columns or screen.row_text(mark.y, mark.x) != mark.before:
        return None
    return screen.text_from(mark.x, mark.y)


def judge(foreground: PaneForeground, screen: Screen) -> ShellReading:
    """The verdict on the pane whose foreground is ``foreground`` and screen ``screen`` (now)."""
    return read_shell(foreground, screen.prompt, line=command_line(screen), cursor=screen.cursor)


def _typed_since(panes: AgentPanes, pane_id: UUID, since: float) -> bool:
    last = panes.last_raw_input(pane_id)
    return last is not None and last >= since


async def _marked_screen(panes: AgentPanes, pane_id: UUID) -> Screen:
    """The pane's mirrored screen; only one the host emulates itself carries prompt marks.

    Raises:
        PaneSourceError: the source hands over plain rows (no marks, so nothing to prove).
    """
    screen = await panes.screen(pane_id)
    if not isinstance(screen, Screen):
        raise PaneSourceError("this source's screens carry no prompt marks")
    return screen


async def _read(panes: ShellPanes, pane_id: UUID) -> tuple[ShellReading, Screen]:
    foreground = await panes.shell_foreground(pane_id)
    screen = await _marked_screen(panes, pane_id)
    return judge(foreground, screen), screen


def shell_status(
    foreground: PaneForeground,
    screen: Screen | None,
    *,
    sendable: bool,
) -> str | None:
    """``list``'s ``task.status`` for a pane with no agent (``None``: not proven).

    Without a mirrored screen (a tmux pane nobody follows) only ``running`` can
    be proven; ``idle`` only where a ``send`` is accepted (``sendable``).
    """
    if screen is None:
        return foreground_status(foreground)
    status = judge(foreground, screen).status
    return None if status == "idle" and not sendable else status


async def deliver_command(
    panes: ShellPanes,
    pane_id: UUID,
    command: SendCommand,
    *,
    authorized: Callable[[], bool],
    timing: DeliveryTiming,
) -> JSONValue:
    """Type ``command.text`` into the shell in ``pane_id`` and press Enter, or say why not."""
    text = command.text
    problem = command_problem(text) or send_options_problem(
        trailing_enter=command.trailing_enter,
        wait=command.wait,
        capture_output=command.capture_output,
        source=command.source,
    )
    if problem is not None:
        return cli_error(_COMMAND, "INVALID_ARGUMENT", problem)
    try:
        reading, screen = await _read(panes, pane_id)
    except PaneNotFound:
        return cli_error(_COMMAND, "TARGET_NOT_FOUND", "The selected pane is gone.")
    except PaneSourceError as exc:
        return cli_error(
            _COMMAND, NOT_READY, f"Host could not read the pane ({exc}); nothing was sent."
        )
    if not reading.ready:
        assert reading.code is not None
        return cli_error(_COMMAND, reading.code, reading.message)
    assert reading.mark is not None and reading.shell is not None
    columns, rows = screen.size
    if not fits(text, reading.mark, columns, rows):
        return cli_error(
            _COMMAND,
            "INVALID_ARGUMENT",
            f"The command is too long to check on this pane's {columns}x{rows} screen "
            "before running it; nothing was sent.",
        )
    if not authorized():
        return rejected(NO_LONGER_OWNS)
    started = time.monotonic()
    shell = reading.shell
    # From the paste on, finished even if the lease is lost meanwhile (Enter withheld).
    return await finish_writing(
        _COMMAND,
        lambda: _write_and_run(panes, pane_id, text, shell, started, authorized, timing),
    )


async def _write_and_run(
    panes: ShellPanes,
    pane_id: UUID,
    text: str,
    shell: ForegroundProcess,
    started: float,
    authorized: Callable[[], bool],
    timing: DeliveryTiming,
) -> JSONValue:
    def failed(why: str) -> JSONValue:
        return cli_error(
            _COMMAND,
            "SEND_FAILED",
            f"The text was written but Enter was not sent: {why}. Check the pane before retrying.",
        )

    try:
        await panes.paste(pane_id, text)
    except PasteUnsupported as exc:  # a one-line command is always pasteable; kept for safety
        return cli_error(_COMMAND, NOT_READY, f"{exc}; nothing was sent.")
    except PaneNotFound:
        return cli_error(_COMMAND, "SEND_FAILED", f"The pane went away. {INPUT_UNCONFIRMED}")
    except PaneSourceError as exc:
        return cli_error(_COMMAND, "SEND_FAILED", f"{INPUT_UNCONFIRMED} ({exc})")
    try:
        why = await _echoed(panes, pane_id, text, timing)
        if why is not None:
            return failed(why)
        foreground = await panes.shell_foreground(pane_id)
        screen = await _marked_screen(panes, pane_id)
    except PaneNotFound:
        return failed("the pane went away")
    except PaneSourceError as exc:
        return failed(f"the pane could not be read ({exc})")
    if foreground.own_process != shell:
        return failed("the shell is no longer in the foreground")
    if command_line(screen) != text.rstrip():
        return failed("the command line changed")
    if _typed_since(panes, pane_id, started):
        return failed("someone typed in the pane on a Mac meanwhile")
    if not authorized():
        return failed("the mirror lost the pane")
    try:
        await panes.press_enter(pane_id)
    except (PaneNotFound, PaneSourceError) as exc:
        return cli_error(
            _COMMAND, "SEND_FAILED", f"The text was written but Enter may not have been ({exc})."
        )
    logger.info("ran a %d-byte command line in a shell pane", len(text.encode()))
    return cli_success(_COMMAND, input_delivered(text, "argv"))


async def _echoed(
    panes: AgentPanes, pane_id: UUID, text: str, timing: DeliveryTiming
) -> str | None:
    """``None`` once the command line shows exactly ``text``, else why Enter must not be sent."""
    wanted = text.rstrip()
    why = "the text never appeared on the command line"
    with trio.move_on_after(timing.echo_seconds):
        while True:
            screen = await _marked_screen(panes, pane_id)
            if screen.prompt.running:
                return "the shell started running something else"
            line = command_line(screen)
            if line == wanted:
                return None
            if line is None:
                why = "the shell's prompt changed"
            elif line and not wanted.startswith(line):
                why = "the command line shows something other than the text sent"
            await trio.sleep(timing.echo_poll)
    return why
