"""Remote commands on agliteterm panes (docs/operations.md, "Commands on agliteterm"). I/O.

* ``list``: every pane of a fresh ``tree``, workspaces as worktrees and
  sessions as tabs; ``task.status`` is ``running`` while agliteterm reports
  the pane's agent working, ``idle`` otherwise, and absent for a pane whose
  agent never reported a status (``idle`` would say a ``send`` is taken). A
  pane's ``agent`` is named only for a watched pane whose screen an agent
  reader recognises (``list`` reads no screen).
* ``profiles``: the ``[profiles]`` table (the programs run on Windows, where
  the host cannot look at ``PATH``, so a configured profile is available).
* ``create``: ``session.new`` in the chosen workspace, with the profile's
  program as its command (quoted for PowerShell, or for agwinterm 0.17.5's own
  split: :mod:`mirror_host.panes.agliteterm.launch`) or a plain shell. Where
  the build has ``no-select`` (agwinterm) it is sent, so the operator's window
  keeps what it shows; agliteterm has none and shows the new session. The
  answer says what the window really shows (the tree read after the
  session appeared: ``tab.selected``, ``pane.focused``) and the workspace the
  session really went to (agliteterm 0.17.7 puts it in the window's active
  one). A first prompt goes through the guarded delivery once the agent shows
  an empty composer; ``create`` answers in time whatever the agent does, and
  a prompt not delivered by then follows the answer, delivered the same
  guarded way, as on every source (:mod:`mirror_host.commands.first_prompt`).
* ``agentsInput`` / ``agentsDispatch``: the guarded delivery of
  :mod:`mirror_host.commands.delivery`, with agliteterm in the place of a
  process table (:class:`AgliteTarget`):

  - the **agent** is what agliteterm's status hooks and the screen say: a
    pane whose agent never reported a status (``tree`` ``status`` empty) has
    none (a shell showing a saved agent screen is still a shell), and which
    agent it is comes from the screen readers that recognise a layout of
    their own (Claude Code, Codex, Gemini CLI, OpenCode, omp; Aider's plain
    ``>`` prompt is indistinguishable from a shell's and is not recognised);
  - agliteterm's **status** comes first: ``blocked`` refuses, ``working`` /
    ``active`` gets Prowl's 5 s grace and then refuses; then the screen, as
    on every agent pane;
  - ``statusChangedAt`` stands for the agent's identity between the first
    look and the Enter: a status written in between (the agent started
    working, a dialog opened) means no Enter is sent;
  - the prompt is pasted with ``session.paste`` (never empty: agliteterm
    would paste the Windows clipboard), which agliteterm brackets exactly
    when the agent asked for bracketed paste; a prompt with line breaks or
    tabs goes between explicit bracketed-paste markers through
    ``session.type`` instead (an agent without bracketed paste would take a
    line break as Enter before any check; every agent the host recognises
    turns bracketed paste on). Enter is ``session.type "\\r"``.

  A refusal that wrote nothing (the pane's input busy or reserved) is
  ``DISPATCH_TARGET_BUSY``; ``N of M bytes written``, a chunk still in flight
  or an unknown outcome is ``SEND_FAILED`` (unconfirmed), never success.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol
from uuid import UUID

from mirror_host.agents import (
    READERS,
    Agent,
    AgentState,
    ForegroundProcess,
    ScreenView,
    detect,
    read_screen,
)
from mirror_host.commands import catalogue
from mirror_host.commands.agent_input import (
    BUSY,
    AgentPaneTarget,
    AgentReading,
    bracketed,
    plain_pasteable,
)
from mirror_host.commands.delivery import DeliveryTiming, Look, NotYet, Refused
from mirror_host.commands.launch import AgentPaneCommands, task_status
from mirror_host.commands.responses import (
    AGENT_WHO,
    cli_error,
    still_working,
    waiting_for_answer,
)
from mirror_host.config import Profile
from mirror_host.control import CreateCommand
from mirror_host.control.swiftjson import JSONValue
from mirror_host.errors import InputRefused, InvalidArgument, PaneSourceError
from mirror_host.panes.activity import InputActivity
from mirror_host.panes.agliteterm.launch import session_command
from mirror_host.panes.agliteterm.protocol import (
    Dialect,
    InputNotWritten,
    SessionPane,
    StyledScreen,
    pane_uuid,
)
from mirror_host.panes.agliteterm.render import StyledView

__all__ = [
    "AgliteAgentPanes",
    "AgliteCaller",
    "AgliteCommandSource",
    "AgliteCommands",
    "AgliteListing",
    "AgliteTarget",
    "recognise",
    "status_state",
]

logger = logging.getLogger(__name__)

#: Agents whose screens are distinctive enough to name them without a process table.
RECOGNISED = tuple(agent for agent in READERS if agent is not Agent.AIDER)

_WORKING = frozenset({"working", "active", "busy", "running", "thinking"})
_BLOCKED = frozenset({"blocked", "waiting", "approval", "question"})


def status_state(status: str) -> AgentState | None:
    """What agliteterm's status says of the agent: working, blocked, idle; ``None``
    when no agent reported one (an unknown word counts as idle: the screen decides)."""
    word = status.strip().lower()
    if not word:
        return None
    if word in _WORKING:
        return AgentState.WORKING
    if word in _BLOCKED or word.startswith("waiting"):
        return AgentState.BLOCKED
    return AgentState.IDLE


def recognise(view: ScreenView) -> Agent | None:
    """The agent whose screen reader recognises ``view``'s layout, if one does."""
    for agent in RECOGNISED:
        if read_screen(agent, view).state is not AgentState.UNKNOWN:
            return agent
    return None


class AgliteCaller(Protocol):
    """Requests to agliteterm over the source's connections (one per lane): the
    backend sends only untargeted ones (``session.new``), on its own lane."""

    async def call(self, cmd: str, *, args: Mapping[str, Any] | None = ..., lane: str = ...) -> Any:
        """Send one request on ``lane`` and return its ``result``.

        Raises:
            PaneSourceUnavailable, AgliteError, PaneSourceError.
        """
        ...


class AgliteListing(Protocol):
    """The source's discovery: the panes of the last tree read, and a read now."""

    @property
    def panes(self) -> Mapping[UUID, SessionPane]: ...
    @property
    def dialect(self) -> Dialect | None:
        """The product ``ping`` named (``None`` before the first answer)."""
        ...

    @property
    def version(self) -> str | None:
        """What ``ping`` answered (``agliteterm 0.1`` is release 0.17.7)."""
        ...

    async def poll(self, *, lane: str = ...) -> None:
        """Read the tree once.

        Raises:
            PaneSourceError: agliteterm could not be read.
        """
        ...


class AgliteCommandSource(Protocol):
    """What the agliteterm backend uses of the agliteterm source (``cli.sources``
    hands it a :class:`~mirror_host.panes.agliteterm.source.AgliteSource`)."""

    @property
    def client(self) -> AgliteCaller: ...
    @property
    def discovery(self) -> AgliteListing: ...
    @property
    def endpoint(self) -> str: ...
    @property
    def input_activity(self) -> InputActivity:
        """When each pane last got raw input from a client."""
        ...

    async def fresh_record(self, pane_id: UUID) -> SessionPane:
        """The pane's record from a tree read now.

        Raises:
            PaneNotFound, PaneSourceError.
        """
        ...

    async def read_screen(self, pane_id: UUID) -> tuple[StyledScreen, tuple[int, int]]:
        """The pane's screen read now, and its grid.

        Raises:
            PaneNotFound, PaneSourceError.
        """
        ...

    def mirrored_screen(self, pane_id: UUID) -> tuple[StyledScreen, tuple[int, int]] | None:
        """The watched pane's last screen and grid, else ``None`` (nothing is read)."""
        ...

    async def paste(self, pane_id: UUID, text: str, authorized: Callable[[], bool]) -> None:
        """``session.paste`` of non-empty ``text``; ``authorized`` asked before each try
        (a busy pane is tried again for a while).

        Raises:
            InputRefused: ``authorized`` said no (nothing was written).
            PaneNotFound, InputNotWritten, InputIncomplete, PaneSourceError.
        """
        ...

    async def type_for_host(
        self,
        pane_id: UUID,
        text: str,
        *,
        allow_control: bool,
        authorized: Callable[[], bool] = lambda: True,
    ) -> None:
        """``session.type`` on the host's own behalf (``authorized`` as for :meth:`paste`).

        Raises:
            InputRefused: ``authorized`` said no (nothing was written).
            PaneNotFound, InputNotWritten, InputIncomplete, PaneSourceError.
        """
        ...


def stand_in(record: SessionPane, view: ScreenView) -> tuple[ForegroundProcess, ...]:
    """The agent ``view`` shows, as one pseudo-process whose ``pid`` is the pane's
    ``statusChangedAt`` (it changes exactly when the agent reports something new)."""
    agent = recognise(view)
    if agent is None:
        return ()
    return (ForegroundProcess(pid=record.status_changed_at or 0, name=agent.value),)


class AgliteAgentPanes:
    """:class:`~mirror_host.commands.agent_input.AgentPanes` over agliteterm's panes."""

    def __init__(self, source: AgliteCommandSource) -> None:
        self.source = source

    async def foreground(self, pane_id: UUID) -> tuple[ForegroundProcess, ...]:
        """The agent agliteterm's hooks and the screen show, as one pseudo-process.

        Its ``pid`` is the pane's ``statusChangedAt``: it changes exactly when
        the agent reports something new.
        """
        record = await self.source.fresh_record(pane_id)
        if status_state(record.status) is None:
            return ()
        return stand_in(record, await self.screen(pane_id))

    async def screen(self, pane_id: UUID) -> ScreenView:
        screen, (_, rows) = await self.source.read_screen(pane_id)
        return StyledView(screen, rows)

    async def paste(self, pane_id: UUID, text: str, authorized: Callable[[], bool]) -> None:
        try:
            if plain_pasteable(text):
                await self.source.paste(pane_id, text, authorized)
            else:
                # Explicit markers: agliteterm's own would come only if the agent
                # asked for bracketed paste, and without them a line break is Enter.
                await self.source.type_for_host(
                    pane_id,
                    bracketed(text).decode("utf-8"),
                    allow_control=True,
                    authorized=authorized,
                )
        except InputNotWritten as exc:
            raise InputRefused(f"agliteterm refused the input ({exc.message})") from exc

    async def press_enter(self, pane_id: UUID) -> None:
        await self.source.type_for_host(pane_id, "\r", allow_control=False)

    def last_raw_input(self, pane_id: UUID) -> float | None:
        return self.source.input_activity.last(pane_id)


class AgliteTarget(AgentPaneTarget):
    """Agent delivery on agliteterm: its status hooks first, then the screen."""

    def __init__(self, panes: AgliteAgentPanes) -> None:
        super().__init__(panes)
        self.aglite_panes = panes
        self.source = panes.source

    async def look(self, pane_id: UUID) -> Look[AgentReading]:
        record = await self.source.fresh_record(pane_id)
        state = status_state(record.status)
        if state is None:
            return Refused(
                "AGENT_NOT_FOUND",
                "No agent has reported its status in the selected pane "
                "(agliteterm's agent hooks); nothing was sent.",
            )
        if state is AgentState.BLOCKED:
            who = f"agliteterm reports the pane's agent {record.status!r}: it"
            return Refused(BUSY, waiting_for_answer(who))
        if state is AgentState.WORKING:
            return NotYet(BUSY, still_working(AGENT_WHO))
        # One read of the screen for the stand-in and the verdict alike.
        view = await self.aglite_panes.screen(pane_id)
        processes = stand_in(record, view)
        return self.verdict(detect(processes, view), processes)


def _configured(_profile: Profile) -> bool:
    # The programs run on the Windows side, whose PATH this host cannot see.
    return True


class AgliteCommands(AgentPaneCommands):
    """The command backend for an :class:`AgliteCommandSource`."""

    def __init__(
        self,
        source: AgliteCommandSource,
        *,
        profiles: tuple[Profile, ...] | None = None,
        timing: DeliveryTiming | None = None,
    ) -> None:
        self.source = source
        self.panes = AgliteAgentPanes(source)
        # No built-in catalogue: which agents are installed on Windows is unknown here.
        # No shell-send (neither advertised nor run): agliteterm reports no prompt marks,
        # so `send` gets Prowl's own refusal (SEND_REFUSED), never a look at the pane.
        super().__init__(
            self.panes,
            target=AgliteTarget(self.panes),
            profiles=profiles or (),
            timing=timing,
            shell_send=False,
        )

    async def profiles(self) -> JSONValue:
        return catalogue.profiles_result(self.profiles_table, available=_configured)

    # ------------------------------------------------------------ catalogue

    @staticmethod
    def _worktree(pane: SessionPane) -> dict[str, JSONValue]:
        path = pane.directory or ""
        return catalogue.worktree_record(pane.workspace_id, pane.workspace_name, path, None)

    @staticmethod
    def _tab(pane: SessionPane) -> dict[str, JSONValue]:
        """A session is a tab, selected as the window shows it."""
        return {"id": pane.session_id, "title": pane.name, "selected": pane.active}

    def _agent(self, pane_id: UUID, pane: SessionPane) -> Agent | None:
        if status_state(pane.status) is None:
            return None
        mirrored = self.source.mirrored_screen(pane_id)
        if mirrored is None:
            return None
        screen, (_, rows) = mirrored
        return recognise(StyledView(screen, rows))

    async def list(self) -> JSONValue:
        """``prowl.cli.list.v1`` from a fresh tree."""
        try:
            await self.source.discovery.poll(lane="commands")
        except PaneSourceError as exc:
            return cli_error("list", "LIST_FAILED", f"Failed to list panes ({exc}).")
        listing = catalogue.Listing()
        for pane_id, pane in self.source.discovery.panes.items():
            record: dict[str, JSONValue] = {
                "id": str(pane_id).upper(),
                "title": pane.pane_title,
                "focused": pane.active,
            }
            if pane.directory:
                record["cwd"] = pane.directory
            agent = self._agent(pane_id, pane)
            if agent is not None:
                record["agent"] = agent.value
            # Without an agent, no status: ``idle`` would mean a ``send`` is taken.
            state = status_state(pane.status)
            task: dict[str, JSONValue] = {} if state is None else {"status": task_status(state)}
            # A workspace is listed as its first pane's directory shows it.
            listing.add(self._worktree(pane), self._tab(pane), record, task)
        return listing.result()

    # ------------------------------------------------------------ create

    async def create(self, command: CreateCommand) -> JSONValue:
        """``session.new`` in the workspace: the profile's program, or a shell."""
        listing = self.source.discovery
        workspace = next(
            (p for p in listing.panes.values() if p.workspace_id == command.worktree_id), None
        )
        if workspace is None:
            return catalogue.unknown_worktree(command)
        profile, refusal = catalogue.launch_profile(
            self.profiles_table, command, available=_configured
        )
        if refusal is not None:
            return refusal
        args: dict[str, object] = {"workspace": workspace.workspace_id}
        if listing.dialect is Dialect.FULL:
            args["no-select"] = True  # agwinterm: leave the operator's selection alone
        if profile is not None:
            try:
                args["command"] = session_command(
                    (profile.agent, *profile.args), listing.dialect, listing.version
                )
            except InvalidArgument as exc:
                why = f"Agent Profile “{profile.name}” cannot start on Host: {exc}."
                return cli_error("create", "PROFILE_UNAVAILABLE", why)
            args["name"] = profile.name
        try:
            created = await self.source.client.call("session.new", args=args, lane="commands")
            if not isinstance(created, str) or not created:
                return cli_error(
                    "create", "CREATE_FAILED", "agliteterm did not name the new session."
                )
            pane_id, pane = await self._listed(created)
        except PaneSourceError as exc:
            return cli_error("create", "CREATE_FAILED", f"Could not create the session: {exc}")
        # What the window shows (agliteterm selects a new session; agwinterm, told
        # no-select, does not, unless nothing was selected).
        tab = self._tab(pane)
        record: dict[str, JSONValue] = {
            "id": str(pane_id).upper(),
            "title": profile.name if profile else pane.name,
            "focused": pane.active,
        }
        return await self.answer_created(
            command, profile, pane_id, (self._worktree(pane), tab, record)
        )

    async def _listed(self, session_id: str) -> tuple[UUID, SessionPane]:
        """Wait until the tree lists the new session (the full app answers before it exists,
        and selects it, or not, a moment later)."""
        key = pane_uuid(self.source.endpoint, session_id)

        async def find() -> tuple[UUID, SessionPane] | None:
            await self.source.discovery.poll(lane="commands")
            pane = self.source.discovery.panes.get(key)
            return None if pane is None else (key, pane)

        return await catalogue.until_listed(find, poll=0.1, what=f"agliteterm session {session_id}")
