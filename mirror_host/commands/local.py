"""Remote commands on the host's own PTY panes (docs/operations.md, "Commands"). I/O.

* ``list``: every live pane with its worktree (git root or directory) and the
  agent running in it; each pane is its own tab.
* ``profiles``: the ``[profiles]`` table, or the known agents found on ``PATH``.
* ``create``: a new pane in the worktree's directory, running the profile's
  program directly or the login shell; with a prompt, the prompt is delivered
  once the agent shows an empty composer.
* ``agentsInput`` / ``agentsDispatch``: guarded delivery
  (:mod:`mirror_host.commands.delivery`): the paste and the Enter are
  written to the PTY. The host keeps each pane's screen itself, so it knows
  whether the agent turned bracketed paste on. If it did, the prompt goes
  between the bracketed-paste markers; if not, it goes as plain text, as a
  terminal would paste it, and a prompt with line breaks (each would arrive
  as Enter) or tabs is refused with nothing written.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol, Unpack
from uuid import UUID

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
from mirror_host.panes.foreground import process_group
from mirror_host.shell.directory import ShellDirectory
from mirror_host.shell.login import default_shell_command
from mirror_host.shell.marks import PromptMarks
from mirror_host.shell.verdict import PaneForeground
from mirror_host.terminal import Screen
from mirror_host.terminal.view import ScreenText

__all__ = ["LocalAgentPanes", "LocalCommandPane", "LocalCommandSource", "LocalCommands"]

_BRACKETED_PASTE = 2004


class LocalCommandPane(Protocol):
    """What the backend reads of one local pane: its id and title, the pid of the
    program the host started in it, whether it still runs, the screen its PTY
    feeds, its working directory."""

    @property
    def id(self) -> UUID: ...
    @property
    def pid(self) -> int: ...
    @property
    def title(self) -> str: ...
    @property
    def alive(self) -> bool: ...
    @property
    def screen(self) -> Screen: ...

    def directory(self) -> str:
        """Its working directory now (where it started, where the OS cannot say)."""
        ...


class LocalCommandSource(Protocol):
    """What the local backend uses of the local source (``cli.sources`` hands it a
    :class:`~mirror_host.panes.local.LocalSource`)."""

    @property
    def input_activity(self) -> InputActivity:
        """When each pane last got raw input from a Mac client."""
        ...

    @property
    def shell_directory(self) -> ShellDirectory | None:
        """The directory phones' command lines reach the shells through (``None``: none)."""
        ...

    def pane(self, pane_id: UUID) -> LocalCommandPane:
        """One live pane.

        Raises:
            PaneNotFound: it has exited.
        """
        ...

    def live_panes(self) -> Sequence[LocalCommandPane]:
        """The panes whose programs still run, in start order."""
        ...

    def foreground_group(self, pane_id: UUID) -> int | None:
        """The pane's foreground process group, if any."""
        ...

    async def write_for_host(self, pane_id: UUID, data: bytes) -> None:
        """Write bytes on the host's own behalf (not a client's raw input)."""
        ...

    def spawn(self, argv: list[str], *, label: str, cwd: str | None = None) -> UUID:
        """Start one more pane running ``argv``; its id.

        Raises:
            PaneSourceError: the source is not running, or the program cannot start.
        """
        ...


class LocalAgentPanes:
    """:class:`~mirror_host.commands.agent_input.AgentPanes` over a :class:`LocalCommandSource`."""

    def __init__(self, source: LocalCommandSource) -> None:
        self.source = source

    async def foreground(self, pane_id: UUID) -> tuple[ForegroundProcess, ...]:
        return (await self.shell_foreground(pane_id)).processes

    async def shell_foreground(self, pane_id: UUID) -> PaneForeground:
        """The PTY's foreground group (``tcgetpgrp``) and the program the host started."""
        pane = self.source.pane(pane_id)
        pgid = self.source.foreground_group(pane_id)
        processes = await process_group(pgid) if pgid else ()
        return PaneForeground(shell_pid=pane.pid, group=pgid or None, processes=processes)

    async def screen(self, pane_id: UUID) -> Screen:
        return self.source.pane(pane_id).screen

    async def paste(self, pane_id: UUID, text: str, authorized: Callable[[], bool]) -> None:
        screen = self.source.pane(pane_id).screen
        if not authorized():  # no await from here to the write
            raise InputRefused(NO_LONGER_OWNS)
        if screen.mode(_BRACKETED_PASTE):
            await self.source.write_for_host(pane_id, bracketed(text))
            return
        # The agent reads pastes as keys: markers would be typed as text, a
        # line break as Enter. A terminal pastes plain text then; so do we, if
        # the text means the same typed.
        if not plain_pasteable(text):
            raise InputRefused(
                "the agent has not turned bracketed paste on, "
                "so line breaks or tabs would be typed as keys"
            )
        await self.source.write_for_host(pane_id, text.encode("utf-8"))

    async def press_enter(self, pane_id: UUID) -> None:
        await self.source.write_for_host(pane_id, b"\r")

    def shell_directory(self, pane_id: UUID) -> ShellDirectory | None:
        self.source.pane(pane_id)
        return self.source.shell_directory

    def prompt_marks(self, pane_id: UUID) -> PromptMarks | None:
        """The host reads every local pane's output: its marks are always known."""
        return self.source.pane(pane_id).screen.prompt

    async def send_trigger(
        self, pane_id: UUID, data: bytes, authorized: Callable[[], bool]
    ) -> bool:
        if not authorized():
            return False
        await self.source.write_for_host(pane_id, data)
        return True

    def last_raw_input(self, pane_id: UUID) -> float | None:
        return self.source.input_activity.last(pane_id)


class LocalCommands(AgentPaneCommands):
    """The command backend for a :class:`LocalCommandSource`."""

    def __init__(self, source: LocalCommandSource, **options: Unpack[BackendOptions]) -> None:
        self.source = source
        self.panes = LocalAgentPanes(source)
        super().__init__(self.panes, **options)

    # ------------------------------------------------------------ catalogue

    async def _describe(
        self, pane: LocalCommandPane
    ) -> tuple[dict[str, JSONValue], dict[str, JSONValue]]:
        """The pane as ``list`` describes it (with its agent), and its task."""
        foreground = (
            await self.panes.shell_foreground(pane.id)
            if pane.alive
            else PaneForeground(shell_pid=None, group=None, processes=())
        )
        processes = foreground.processes
        found = identify_group(processes)
        state = detect(processes, ScreenText(pane.screen)).state if found else None
        evidence = (
            await shell_evidence(self.panes, pane.id, foreground)
            if pane.alive and not found and self.shell_send_enabled
            else None
        )
        record: dict[str, JSONValue] = {
            "id": str(pane.id).upper(),
            "title": pane.title,
            "cwd": pane.directory(),
            "focused": False,
        }
        if found is not None:
            record["agent"] = found[0].value
        return record, self.task(foreground, evidence, state, agent=found is not None)

    async def list(self) -> JSONValue:
        """``prowl.cli.list.v1``: panes grouped by worktree, one tab each."""
        listing = catalogue.Listing()
        for pane in self.source.live_panes():
            try:
                record, task = await self._describe(pane)
            except PaneSourceError:
                continue  # exited while being listed
            tab: dict[str, JSONValue] = {"id": record["id"], "title": pane.title, "selected": False}
            listing.add(catalogue.worktree_for(str(record["cwd"])), tab, record, task)
        return listing.result()

    # ------------------------------------------------------------ create

    async def create(self, command: CreateCommand) -> JSONValue:
        """A new pane in the worktree, with the login shell or the profile's agent."""
        worktree = next(
            (
                catalogue.worktree_for(pane.directory())
                for pane in self.source.live_panes()
                if catalogue.worktree_for(pane.directory())["id"] == command.worktree_id
            ),
            None,
        )
        if worktree is None:
            return catalogue.unknown_worktree(command)
        profile, refusal = catalogue.launch_profile(self.profiles_table, command)
        if refusal is not None:
            return refusal
        argv = default_shell_command()
        label = Path(argv[0]).name
        if profile is not None:
            argv, label = [profile.agent, *profile.args], profile.name
        try:
            pane_id = self.source.spawn(argv, label=label, cwd=str(worktree["path"]))
        except PaneSourceError as exc:
            return cli_error("create", "CREATE_FAILED", f"Could not start the pane: {exc}")
        tab: dict[str, JSONValue] = {"id": str(pane_id).upper(), "title": label, "selected": False}
        pane: dict[str, JSONValue] = {
            "id": str(pane_id).upper(),
            "title": label,
            "cwd": str(worktree["path"]),
            "focused": False,
        }
        return await self.answer_created(command, profile, pane_id, (worktree, tab, pane))
