"""Remote commands on tmux panes (docs/operations.md, "Commands"). I/O.

* ``list``: every pane with its worktree (git root or directory), its window as
  the tab, and the agent running in it; ``data.worktrees`` lists the worktrees.
  An agent's ``task.status`` is read from its screen: the mirrored one, or for
  a pane nobody watches (the source pauses those) one ``capture-pane`` per
  ``list``, all at once within :data:`SCREENS_SECONDS`; an agent whose screen
  could not be read in time has no status rather than a wrong one.
* ``profiles``: the ``[profiles]`` table, or the known agents found on ``PATH``.
* ``create``: a new window in the session of a pane of the chosen worktree,
  in the worktree's directory, running the profile's program (``exec``'d, so
  the agent *is* the pane's process) or the default shell; with a prompt, the
  prompt is delivered once the agent shows an empty composer.
* ``agentsInput`` / ``agentsDispatch``: guarded delivery
  (:mod:`mirror_host.commands.delivery`). The prompt is loaded into a tmux
  buffer and pasted with ``paste-buffer``, which writes to the program
  directly: no copy mode or key table can take it, and Enter goes the same way
  (``-r``: no line feed is turned into a carriage return). Only tmux knows for
  sure whether the program turned bracketed paste on (it has no format for it,
  and our mirror may have started after the program did), so a prompt without
  line breaks and tabs is pasted plain with ``paste-buffer -p``: tmux adds the
  markers exactly when the program asked for them, as a terminal does. A
  prompt with line breaks or tabs always goes between explicit markers. A
  program without bracketed paste would read those markers as keys and a line
  break as Enter, sending the first line before any check; every agent the
  host recognises turns bracketed paste on, which is what makes this safe, and
  tmux gives no way to ask. A pane scrolled back in copy mode is
  returned to the live screen first, as raw input would do.
"""

from __future__ import annotations

import logging
import shlex
import uuid
from collections.abc import Callable
from typing import Protocol, Unpack
from uuid import UUID

import trio

from mirror_host.agents import ForegroundProcess, detect, identify_group
from mirror_host.commands import catalogue
from mirror_host.commands.agent_input import bracketed, plain_pasteable
from mirror_host.commands.launch import AgentPaneCommands, BackendOptions
from mirror_host.commands.responses import NO_LONGER_OWNS, cli_error
from mirror_host.commands.shell_input import shell_evidence
from mirror_host.control import CreateCommand
from mirror_host.control.swiftjson import JSONValue
from mirror_host.errors import InputRefused, PaneSourceError
from mirror_host.panes.activity import InputActivity
from mirror_host.panes.foreground import terminal_foreground, terminal_group
from mirror_host.panes.tmux_protocol import SEPARATOR, PaneRow
from mirror_host.shell.directory import ShellDirectory
from mirror_host.shell.marks import PromptMarks
from mirror_host.shell.verdict import PaneForeground
from mirror_host.terminal import Screen
from mirror_host.terminal.archive import screen_of_rows
from mirror_host.terminal.view import ScreenText

__all__ = ["SCREENS_SECONDS", "TmuxAgentPanes", "TmuxCommandSource", "TmuxCommands"]

logger = logging.getLogger(__name__)

#: How long one ``list`` may spend reading the screens of agents nobody watches.
SCREENS_SECONDS = 2.0
#: How many of those reads (a tmux client each) run at once.
_SCREENS_AT_ONCE = 4
_FOCUS_FORMAT = SEPARATOR.join(("#{pane_id}", "#{window_active}", "#{pane_active}", "#{pane_pid}"))


class TmuxCommandSource(Protocol):
    """What the tmux backend uses of the tmux source (``cli.sources`` hands it a
    :class:`~mirror_host.panes.tmux.TmuxSource`)."""

    @property
    def input_activity(self) -> InputActivity:
        """When each pane last got raw input from a Mac client."""
        ...

    @property
    def shell_directory(self) -> ShellDirectory | None:
        """The directory phones' command lines reach the server's shells through."""
        ...

    async def run_tmux(self, *args: str, stdin: bytes = b"") -> str:
        """Run one tmux command line against the source's server; its standard output.

        Raises:
            PaneSourceError: tmux failed, or its server is not running.
        """
        ...

    def pane_row(self, pane_id: UUID) -> PaneRow:
        """The pane's row of the last listing.

        Raises:
            PaneNotFound: it is not listed.
        """
        ...

    def pane_rows(self) -> list[tuple[UUID, PaneRow]]:
        """Every listed pane with its row, in listing order."""
        ...

    def pane_screen(self, pane_id: UUID) -> Screen | None:
        """The pane's mirrored screen while somebody watches it, else ``None``."""
        ...

    async def leave_copy_mode(self, pane_id: UUID) -> None:
        """Back to the live pane if it is scrolled back (copy mode would take keys)."""
        ...

    def request_relist(self) -> None:
        """Read the pane list again soon."""
        ...


class TmuxAgentPanes:
    """:class:`~mirror_host.commands.agent_input.AgentPanes` over a :class:`TmuxCommandSource`."""

    def __init__(self, source: TmuxCommandSource) -> None:
        self.source = source

    def _target(self, pane_id: UUID) -> str:
        return self.source.pane_row(pane_id).pane_id

    async def _pane_process(self, pane_id: UUID) -> tuple[int, str]:
        """The pane's own process (``pane_pid``) and tmux's name for what runs in it."""
        text = await self.source.run_tmux(
            "display-message", "-p", "-t", self._target(pane_id),
            f"#{{pane_pid}}{SEPARATOR}#{{pane_current_command}}",
        )  # fmt: skip
        pid_text, _, name = text.strip("\n").partition(SEPARATOR)
        try:
            return int(pid_text), name
        except ValueError as exc:
            raise PaneSourceError(f"tmux gave no pane pid ({text.strip()!r})") from exc

    async def foreground(self, pane_id: UUID) -> tuple[ForegroundProcess, ...]:
        """The foreground group of the pane's terminal; tmux's own guess if the OS won't say."""
        pid, name = await self._pane_process(pane_id)
        found = await terminal_foreground(pid)
        return found or ((ForegroundProcess(pid=pid, name=name),) if name else ())

    async def shell_foreground(self, pane_id: UUID) -> PaneForeground:
        """The foreground group of the pane's terminal, as the OS says (never tmux's guess)."""
        pid, _ = await self._pane_process(pane_id)
        group, processes = await terminal_group(pid)
        return PaneForeground(shell_pid=pid, group=group, processes=processes)

    async def screen(self, pane_id: UUID) -> Screen:
        """The mirrored screen if the pane is watched, else a fresh ``capture-pane``."""
        mirrored = self.source.pane_screen(pane_id)
        if mirrored is not None:
            return mirrored
        target = self._target(pane_id)
        text = await self.source.run_tmux(
            "display-message", "-p", "-t", target, "#{pane_width} #{pane_height}", ";",
            "capture-pane", "-p", "-e", "-t", target,
        )  # fmt: skip
        size, _, body = text.partition("\n")
        try:
            columns, rows = (max(1, int(n)) for n in size.split())
        except ValueError as exc:
            raise PaneSourceError(f"tmux gave no pane size ({size!r})") from exc
        lines = [row.encode("utf-8") for row in body.split("\n")[:rows]]
        return screen_of_rows(lines + [b""] * (rows - len(lines)), columns)

    async def _through_buffer(self, pane_id: UUID, data: bytes, *, bracket: bool = False) -> None:
        """Write ``data`` to the pane's program as it is (``-r``: no LF→CR translation).

        With ``bracket``, tmux puts the bracketed-paste markers around it if the
        program turned bracketed paste on (``-p``).
        """
        target = self._target(pane_id)
        name = f"mirror-host-{uuid.uuid4().hex[:12]}"
        paste = ["paste-buffer", *(["-p"] if bracket else []), "-r", "-d", "-b", name, "-t", target]
        try:
            await self.source.run_tmux("load-buffer", "-b", name, "-", ";", *paste, stdin=data)
        except PaneSourceError:
            with trio.CancelScope(shield=True):
                try:
                    await self.source.run_tmux("delete-buffer", "-b", name)
                except PaneSourceError:
                    pass  # pasted (and deleted) after all, or never loaded
            raise

    async def _live(self, pane_id: UUID) -> None:
        """Back to the live pane if it is in copy mode (which would take the keys)."""
        in_mode = await self.source.run_tmux(
            "display-message", "-p", "-t", self._target(pane_id), "#{pane_in_mode}"
        )
        if in_mode.strip() == "1":
            await self.source.leave_copy_mode(pane_id)

    async def paste(self, pane_id: UUID, text: str, authorized: Callable[[], bool]) -> None:
        await self._live(pane_id)
        if not authorized():  # after the awaits above; one tmux command from here
            raise InputRefused(NO_LONGER_OWNS)
        if plain_pasteable(text):
            await self._through_buffer(pane_id, text.encode("utf-8"), bracket=True)
        else:
            await self._through_buffer(pane_id, bracketed(text))

    async def press_enter(self, pane_id: UUID) -> None:
        await self._through_buffer(pane_id, b"\r")

    def shell_directory(self, pane_id: UUID) -> ShellDirectory | None:
        self._target(pane_id)
        return self.source.shell_directory

    def prompt_marks(self, pane_id: UUID) -> PromptMarks | None:
        """The marks of a watched pane; a paused one's output is not read."""
        screen = self.source.pane_screen(pane_id)
        return screen.prompt if screen is not None else None

    async def send_trigger(
        self, pane_id: UUID, data: bytes, authorized: Callable[[], bool]
    ) -> bool:
        """``send-keys -H``: the bytes reach the program as they are."""
        await self._live(pane_id)
        if not authorized():
            return False
        hex_bytes = (f"{byte:02x}" for byte in data)
        await self.source.run_tmux("send-keys", "-H", "-t", self._target(pane_id), *hex_bytes)
        return True

    def last_raw_input(self, pane_id: UUID) -> float | None:
        return self.source.input_activity.last(pane_id)


class TmuxCommands(AgentPaneCommands):
    """The command backend for a :class:`TmuxCommandSource`."""

    def __init__(self, source: TmuxCommandSource, **options: Unpack[BackendOptions]) -> None:
        self.source = source
        self.panes = TmuxAgentPanes(source)
        super().__init__(self.panes, **options)

    # ------------------------------------------------------------ catalogue

    async def _focus(self) -> dict[str, tuple[bool, bool, int]]:
        """``tmux pane id → (window active, pane active, pane pid)``."""
        text = await self.source.run_tmux("list-panes", "-a", "-F", _FOCUS_FORMAT)
        found = {}
        for line in text.splitlines():
            parts = line.split(SEPARATOR)
            if len(parts) == 4 and parts[3].isdigit():
                found[parts[0]] = (parts[1] == "1", parts[2] == "1", int(parts[3]))
        return found

    @staticmethod
    async def _foreground(pid: int) -> PaneForeground:
        """The foreground group of the terminal of the pane whose own process is ``pid``."""
        group, processes = await terminal_group(pid) if pid else (None, ())
        return PaneForeground(shell_pid=pid or None, group=group, processes=processes)

    async def _unwatched_screens(self, pane_ids: list[UUID]) -> dict[UUID, Screen]:
        """One ``capture-pane`` of each pane, all at once, within :data:`SCREENS_SECONDS`:
        the screens ``list`` reads agents' states from where the source mirrors none.
        A pane whose read failed or was late is left out."""
        screens: dict[UUID, Screen] = {}
        limiter = trio.CapacityLimiter(_SCREENS_AT_ONCE)

        async def read(pane_id: UUID) -> None:
            async with limiter:
                try:
                    screens[pane_id] = await self.panes.screen(pane_id)
                except PaneSourceError as exc:
                    logger.debug("list could not read the screen of pane %s: %s", pane_id, exc)

        with trio.move_on_after(SCREENS_SECONDS) as deadline:
            async with trio.open_nursery() as nursery:
                for pane_id in pane_ids:
                    nursery.start_soon(read, pane_id)
        if deadline.cancelled_caught:
            logger.info("list read %d of %d unwatched agents' screens in time",
                        len(screens), len(pane_ids))  # fmt: skip
        return screens

    async def _pane_record(
        self, pane_id: UUID, row: PaneRow, foreground: PaneForeground, screen: Screen | None
    ) -> tuple[dict[str, JSONValue], dict[str, JSONValue]]:
        """The pane as ``list`` describes it (with its agent), and its task (an agent's
        state is read from ``screen``: without one, it has none)."""
        processes = foreground.processes
        found = identify_group(processes)
        state = detect(processes, ScreenText(screen)).state if screen and found else None
        evidence = (
            await shell_evidence(self.panes, pane_id, foreground)
            if not found and self.shell_send_enabled
            else None
        )
        record: dict[str, JSONValue] = {
            "id": str(pane_id).upper(),
            "title": found[0].display_name if found else row.command or "Shell",
            "cwd": row.path,
        }
        if found is not None:
            record["agent"] = found[0].value
        return record, self.task(foreground, evidence, state, agent=found is not None)

    async def list(self) -> JSONValue:
        """``prowl.cli.list.v1``: panes grouped by worktree, windows as tabs."""
        try:
            focus = await self._focus()
        except PaneSourceError as exc:
            return cli_error("list", "LIST_FAILED", f"Failed to list panes ({exc}).")
        panes = [
            (pane_id, row, focus.get(row.pane_id, (False, False, 0)))
            for pane_id, row in self.source.pane_rows()
        ]
        # Read before the first await: every pane listed here is still known to the source
        # (a pane closed after it is skipped below).
        screens = {pane_id: self.source.pane_screen(pane_id) for pane_id, _, _ in panes}
        foregrounds = [await self._foreground(pid) for _, _, (_, _, pid) in panes]
        unwatched = [
            pane_id
            for (pane_id, _, _), foreground in zip(panes, foregrounds, strict=True)
            if screens[pane_id] is None and identify_group(foreground.processes) is not None
        ]
        screens.update(await self._unwatched_screens(unwatched))
        listing = catalogue.Listing()
        for (pane_id, row, (window_active, pane_active, _)), foreground in zip(
            panes, foregrounds, strict=True
        ):
            try:
                record = await self._pane_record(pane_id, row, foreground, screens.get(pane_id))
            except PaneSourceError:
                continue  # closed while being listed (its shell evidence reads it again)
            pane, task = record
            pane["focused"] = window_active and pane_active
            tab: dict[str, JSONValue] = {
                "id": row.window_id,
                "title": row.window_name,
                "selected": window_active,
            }
            listing.add(catalogue.worktree_for(row.path), tab, pane, task)
        return listing.result()

    # ------------------------------------------------------------ create

    async def create(self, command: CreateCommand) -> JSONValue:
        """A background window in the worktree, with a shell or the profile's agent."""
        place = next(
            (
                (row.session_id, catalogue.worktree_for(row.path))
                for _, row in self.source.pane_rows()
                if catalogue.worktree_for(row.path)["id"] == command.worktree_id
            ),
            None,
        )
        if place is None:
            return catalogue.unknown_worktree(command)
        session_id, worktree = place
        profile, refusal = catalogue.launch_profile(self.profiles_table, command)
        if refusal is not None:
            return refusal
        shell_command: list[str] = []
        if profile is not None:
            # One argument: tmux runs it with the shell, which `exec`s the agent.
            shell_command = ["exec " + shlex.join([profile.agent, *profile.args])]
        try:
            created = await self.source.run_tmux(
                "new-window", "-d", "-P", "-F", "#{pane_id}", "-t", f"{session_id}:",
                "-c", str(worktree["path"]), *shell_command,
            )  # fmt: skip
            pane_id, row = await self._listed(created.strip())
        except PaneSourceError as exc:
            return cli_error("create", "CREATE_FAILED", f"Could not create the window: {exc}")
        window: dict[str, JSONValue] = {"id": row.window_id, "title": row.window_name}
        tab = {**window, "selected": False}
        pane: dict[str, JSONValue] = {
            "id": str(pane_id).upper(),
            "title": profile.name if profile else row.command or "Shell",
            "cwd": row.path,
            "focused": False,
        }
        return await self.answer_created(command, profile, pane_id, (worktree, tab, pane))

    async def _listed(self, tmux_id: str) -> tuple[UUID, PaneRow]:
        """Wait until the source lists the new pane (control mode reports the window)."""

        async def find() -> tuple[UUID, PaneRow] | None:
            for pane_id, row in self.source.pane_rows():
                if row.pane_id == tmux_id:
                    return pane_id, row
            self.source.request_relist()
            return None

        return await catalogue.until_listed(find, poll=0.05, what=f"tmux pane {tmux_id}")
