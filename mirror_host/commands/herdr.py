"""Remote commands carried out on Herdr (docs/operations.md, "Commands on Herdr"). I/O.

* ``list``: the ``prowl.cli.list.v1`` catalogue built from the session snapshot
  (workspace → tab → pane, Herdr's array order) plus ``data.worktrees``.
* ``profiles``: the ``[profiles]`` table of the config file, or by default the
  agents Herdr can start that are installed on ``PATH``.
* ``create``: ``tab.create`` in the chosen workspace, then (with a profile)
  ``agent.start`` and, once Herdr says the agent is ready the way its own CLI
  waits for it (an explicit ``interactive_ready: true``), its first prompt,
  exactly once. Answered in time, always: a launch that takes longer has its
  prompt follow the answer (:mod:`mirror_host.commands.first_prompt`). Never
  arbitrary shell input, never a second tab.
* ``agentsInput`` / ``agentsDispatch``: the phone's reply box, the guarded
  delivery of :mod:`mirror_host.commands.delivery` with Herdr's own agent
  states (:mod:`mirror_host.commands.herdr_input`): refused while Herdr
  reports the agent ``blocked``, when no agent runs there, or when the agent
  is still ``working`` after a 5 s grace; delivered with ``agent.prompt``
  (bracketed text, then Enter) where the server has it, on older servers with
  ``pane.send_input`` into an input box the host reads empty, followed by
  Enter only once the box holds exactly the prompt. Success means every byte
  and the Enter were handed to Herdr; anything less is ``SEND_FAILED`` saying
  how far it got, and nothing is retried.
* ``send``: refused with Prowl's own words ("Host cannot verify an empty shell
  command line. Use an Agent Profile or control the shell on Host."), which is
  exactly so here: Herdr reports an agent's state, but nothing that proves a
  plain shell waits at an empty prompt (no prompt marks, no cursor position in
  its reads). So a shell pane is never listed ``idle`` and ``shell-send`` is not
  advertised.
"""

from __future__ import annotations

import logging
import re
import secrets
from typing import Any, Protocol
from uuid import UUID

import trio

from mirror_host.commands import catalogue
from mirror_host.commands.agent_input import AgentInput, agent_delivery
from mirror_host.commands.delivery import DeliveryTiming, deliver
from mirror_host.commands.first_prompt import FirstPrompts, Pending, failure_message, succeeded
from mirror_host.commands.herdr_input import (
    HERDR_TIMING,
    HerdrAim,
    HerdrCaller,
    HerdrPanes,
    HerdrTarget,
)
from mirror_host.commands.responses import cli_error, cli_success
from mirror_host.config import Profile
from mirror_host.control import CreateCommand
from mirror_host.control.swiftjson import JSONValue
from mirror_host.errors import PaneSourceError, PaneSourceUnavailable
from mirror_host.panes.herdr.protocol import (
    HerdrError,
    HerdrPane,
    HerdrUnknownMethod,
    LaunchFailed,
    LaunchProgress,
    Snapshot,
    Tab,
    Workspace,
    launch_progress,
    pane_name,
    parse_pane,
    parse_tab,
)

__all__ = [
    "DEFAULT_AGENTS",
    "HerdrCaller",
    "HerdrCommandSource",
    "HerdrCommands",
    "default_profiles",
]

logger = logging.getLogger(__name__)

#: Agents Herdr can start (``agent.start`` kinds), with the names people know them by.
DEFAULT_AGENTS = (
    ("claude", "Claude Code"),
    ("codex", "Codex"),
    ("opencode", "OpenCode"),
    ("gemini", "Gemini CLI"),
    ("pi", "Pi"),
    ("amp", "Amp"),
)
_START_RETRY_SECONDS = 2.0
#: Herdr's own start timeout (DEFAULT_AGENT_START_TIMEOUT, src/app/agents.rs 0.8.2):
#: it drops the launch then.
_READY_SECONDS = 30.0
_READY_POLL_SECONDS = 0.1


def default_profiles() -> tuple[Profile, ...]:
    """One profile per agent Herdr can start that is installed on ``PATH``."""
    return catalogue.default_profiles(DEFAULT_AGENTS)


class HerdrCommandSource(HerdrPanes, Protocol):
    """What the Herdr backend uses of the Herdr source (``cli.sources`` hands it a
    :class:`~mirror_host.panes.herdr.source.HerdrSource`): its panes, as agent input
    uses them, and these."""

    @property
    def client(self) -> HerdrCaller: ...

    @property
    def snapshot(self) -> Snapshot | None:
        """The latest snapshot (``None`` before Herdr was first read)."""
        ...

    async def wait_listed(self) -> None:
        """Wait for the first discovery attempt."""
        ...

    async def poll(self) -> None:
        """Read the whole session once and reconcile the pane list.

        Raises:
            PaneSourceError: Herdr could not be read.
        """
        ...


class HerdrCommands(AgentInput):
    """The command backend for a :class:`HerdrCommandSource`."""

    def __init__(
        self,
        source: HerdrCommandSource,
        *,
        profiles: tuple[Profile, ...] | None = None,
        timing: DeliveryTiming = HERDR_TIMING,
    ) -> None:
        self.source = source
        self.client = source.client
        self.profiles_table = profiles if profiles is not None else default_profiles()
        self.timing = timing
        #: Where agent input goes (it learns whether the server has ``agent.prompt``).
        self.target = HerdrTarget(source, self.client)
        self._has_tab_create = False
        self._has_agent_start = False
        #: Launched agents' first prompts (answered in time, retained by the service).
        self.first_prompts = FirstPrompts()

    @property
    def capabilities(self) -> tuple[str, ...]:
        """Only what really works on this server (``launch-profile`` is the service's)."""
        capabilities = []
        if self._has_tab_create:
            capabilities.append("launch-shell")
        capabilities += ["agents-dispatch", "agent-input"]
        return tuple(capabilities)

    async def run(self) -> None:
        """Learn which methods the server has; host first prompts that outlive their create."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.first_prompts.run)
            await self._probe()

    async def _probe(self) -> None:
        """Learn which methods the server has (by the ``unknown variant`` error)."""
        await self.source.wait_listed()
        while True:
            try:
                self._has_tab_create = await self._knows(
                    "tab.create", {"workspace_id": "mirror-host-probe"}
                )
                self._has_agent_start = await self._knows(
                    "agent.start",
                    {"name": "mirror-host-probe", "kind": "claude", "pane_id": "mirror-host-probe"},
                )
                return
            except PaneSourceUnavailable:
                await trio.sleep(2.0)

    async def _knows(self, method: str, params: dict[str, Any]) -> bool:
        try:
            await self.client.call(method, params)
        except HerdrUnknownMethod:
            return False
        except HerdrError:
            return True
        return True

    # ------------------------------------------------------------ catalogue

    def _snapshot(self) -> Snapshot | None:
        return self.source.snapshot

    @staticmethod
    def _worktree(workspace: Workspace, panes: list[HerdrPane]) -> dict[str, JSONValue]:
        path = workspace.cwd or next((p.cwd for p in panes if p.cwd), None) or ""
        root = workspace.repo_root or catalogue.git_root(path)
        return catalogue.worktree_record(workspace.id, workspace.label, path, root)

    @staticmethod
    def _tab(tab: Tab) -> dict[str, JSONValue]:
        return {"id": tab.id, "title": tab.label, "selected": tab.focused}

    def _pane(self, pane: HerdrPane) -> dict[str, JSONValue]:
        record: dict[str, JSONValue] = {
            "id": str(self.source.uuid_of(pane)).upper(),
            "title": pane_name(pane),
        }
        if pane.cwd:
            record["cwd"] = pane.cwd
        record["focused"] = pane.focused
        if pane.agent:
            record["agent"] = pane.agent
        return record

    async def list(self) -> JSONValue:
        """``prowl.cli.list.v1`` from a fresh snapshot."""
        try:
            await self.source.poll()
        except PaneSourceError as exc:
            return cli_error("list", "LIST_FAILED", f"Failed to list panes ({exc}).")
        snapshot = self._snapshot()
        assert snapshot is not None
        tabs = {t.id: t for t in snapshot.tabs}
        by_workspace: dict[str, list[HerdrPane]] = {}
        for pane in snapshot.panes:
            by_workspace.setdefault(pane.workspace_id, []).append(pane)
        worktrees = {
            w.id: self._worktree(w, by_workspace.get(w.id, [])) for w in snapshot.workspaces
        }
        tab_order = {t.id: i for i, t in enumerate(snapshot.tabs)}
        listing = catalogue.Listing(worktrees.values())
        for workspace in snapshot.workspaces:
            panes = sorted(
                by_workspace.get(workspace.id, []), key=lambda p: tab_order.get(p.tab_id, 1 << 30)
            )
            for pane in panes:
                tab = tabs.get(pane.tab_id)
                if tab is None:
                    continue
                worktree = worktrees[workspace.id]
                listing.add(worktree, self._tab(tab), self._pane(pane), self._task(pane))
        return listing.result()

    @staticmethod
    def _task(pane: HerdrPane) -> dict[str, JSONValue]:
        """An agent's state; nothing for a shell (Herdr cannot prove it idle or busy).

        Only what the apps know: ``running`` or ``idle`` (Herdr's ``done`` is idle
        here; the pane list's subtitle tells the two apart)."""
        if not pane.agent:
            return {}
        return {"status": "running" if pane.agent_status == "working" else "idle"}

    async def profiles(self) -> JSONValue:
        """The profile catalogue with availability on this machine."""
        return catalogue.profiles_result(self.profiles_table)

    # ------------------------------------------------------------ create

    async def create(self, command: CreateCommand) -> JSONValue:
        """A background tab with a shell, or with the profile's agent and first prompt."""
        snapshot = self._snapshot()
        workspace = (
            next((w for w in snapshot.workspaces if w.id == command.worktree_id), None)
            if snapshot
            else None
        )
        if workspace is None:
            return catalogue.unknown_worktree(command)
        profile, refusal = catalogue.launch_profile(self.profiles_table, command)
        if refusal is not None:
            return refusal
        if profile is not None and not (self._has_tab_create and self._has_agent_start):
            return cli_error(
                "create",
                "PROFILE_UNAVAILABLE",
                f"Agent Profile “{profile.name}” cannot start here: this Herdr has no "
                f"{'tab.create' if not self._has_tab_create else 'agent.start'}. Update Herdr.",
            )
        try:
            params: dict[str, Any] = {"workspace_id": workspace.id, "focus": False}
            if workspace.cwd:
                params["cwd"] = workspace.cwd
            created = await self.client.call("tab.create", params)
        except (HerdrError, PaneSourceError) as exc:
            return cli_error("create", "CREATE_FAILED", f"Could not create the tab: {exc}")
        root = created.get("root_pane")
        pane = parse_pane(root) if isinstance(root, dict) else None
        tab_record = created.get("tab")
        tab = parse_tab(tab_record) if isinstance(tab_record, dict) else None
        if pane is None or tab is None:
            return cli_error("create", "CREATE_FAILED", "Herdr did not describe the new tab.")
        try:
            await self.source.poll()  # the new pane listed, under its id
        except PaneSourceError:
            pass
        key = self.source.uuid_of(pane)
        if profile is not None and command.launch is not None:
            prompt = command.launch.prompt or None
            outcome = await self.first_prompts.deliver(
                key, prompt, lambda: self._launch(profile, pane, key, prompt)
            )
            if not isinstance(outcome, Pending) and not succeeded(outcome):
                why = failure_message(outcome).rstrip(".")
                failed = "its first prompt was not sent" if prompt else "its agent did not start"
                return cli_error(
                    "create", "CREATE_FAILED", f"The tab was opened, but {failed}: {why}."
                )
        pane_record = {
            k: v for k, v in self._pane(pane).items() if k in ("id", "title", "cwd", "focused")
        }
        return catalogue.created_result(
            self._worktree(workspace, [pane]), self._tab(tab), pane_record, profile
        )

    async def _launch(
        self, profile: Profile, pane: HerdrPane, key: UUID, prompt: str | None
    ) -> JSONValue:
        """``agent.start`` in the new pane (listed as ``key``), its readiness, then its
        first prompt (once): an ``agentsInput``-shaped result, or an error saying what
        went wrong."""
        command = "agentsInput"
        try:
            name, started = await self._start_agent(profile, pane)
        except (HerdrError, PaneSourceError) as exc:
            return cli_error(command, "AGENT_NOT_FOUND", f"{profile.name} did not start ({exc}).")
        failed = await self._until_ready(name, pane, started)
        if failed is not None:
            return cli_error(command, "AGENT_NOT_FOUND", f"{profile.name} {failed.reason}.")
        if prompt is None:
            return cli_success("create", {"agent": name})
        # Herdr said it is ready: the prompt goes to the agent by its name. The create
        # outlives its connection: no lease to hold.
        delivery = agent_delivery(
            key, prompt, dispatch=False, authorized=lambda: True, timing=self.timing
        )
        return await deliver(self.target, delivery, ready=HerdrAim(pane, name))

    async def _start_agent(self, profile: Profile, pane: HerdrPane) -> tuple[str, dict[str, Any]]:
        """``agent.start`` (again while the fresh shell is briefly busy): its name and record."""
        name = (
            f"{re.sub('[^a-z0-9_-]', '', profile.agent.lower()) or 'agent'}-{secrets.token_hex(3)}"
        )
        if not name[0].isalpha():
            name = "a" + name
        name = name[:32]
        params: dict[str, Any] = {"name": name, "kind": profile.agent, "pane_id": pane.pane_id}
        if profile.args:
            params["args"] = list(profile.args)
        deadline = trio.current_time() + _START_RETRY_SECONDS
        while True:
            try:
                started = await self.client.call("agent.start", params)
                break
            except HerdrError as exc:
                # A fresh shell is briefly "busy" while it starts (research notes §4.2).
                if exc.code != "agent_pane_busy" or trio.current_time() > deadline:
                    raise
                await trio.sleep(0.1)
        record = started.get("agent")
        return name, record if isinstance(record, dict) else {}

    async def _until_ready(
        self, name: str, pane: HerdrPane, started: dict[str, Any]
    ) -> LaunchFailed | None:
        """Wait for an explicit ``interactive_ready`` as Herdr's own CLI does
        (:func:`~mirror_host.panes.herdr.protocol.launch_progress`); ``None`` once ready."""
        terminal = started.get("terminal_id")
        kind = started.get("agent")
        seen = False
        with trio.move_on_after(_READY_SECONDS):
            while True:
                try:
                    record = await self._agent_record(name, pane)
                except PaneSourceError:  # Herdr did not answer: ask again
                    await trio.sleep(_READY_POLL_SECONDS)
                    continue
                progress = launch_progress(
                    record,
                    name=name,
                    terminal_id=terminal if isinstance(terminal, str) else None,
                    kind=kind if isinstance(kind, str) else None,
                    seen=seen,
                )
                if progress is LaunchProgress.READY:
                    return None
                if isinstance(progress, LaunchFailed):
                    return progress
                seen = seen or record is not None
                await trio.sleep(_READY_POLL_SECONDS)
        return LaunchFailed("timeout", f"was not ready within {_READY_SECONDS:g} s")

    async def _agent_record(self, name: str, pane: HerdrPane) -> dict[str, Any] | None:
        """The agent by its name, else by its pane (as the CLI falls back); ``None``: neither.

        Raises:
            PaneSourceError: Herdr could not be asked (not an answer about the agent).
        """
        for target in (name, pane.pane_id):
            try:
                info = await self.client.call("agent.get", {"target": target})
            except HerdrError:
                continue  # not found by this target
            agent = info.get("agent")
            if isinstance(agent, dict):
                return agent
        return None
