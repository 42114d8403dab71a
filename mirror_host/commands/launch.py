"""What the tmux and local command backends share. I/O.

:class:`AgentPaneCommands` holds the parts that do not depend on where panes
come from: the capabilities, the profile catalogue, the shape of ``list``
results, a launched agent's first prompt, and agent input. (Finding a
``create``'s profile and the shape of its result are shared with the Herdr
backend too: :mod:`mirror_host.commands.catalogue`.)

A launched agent gets its first prompt through the same guarded delivery as a
phone's (:mod:`mirror_host.commands.delivery`), once it shows an empty,
idle composer; an agent that never gets there within half a minute, or stops
on a dialog (a trust prompt, a login), gets nothing typed. The ``create`` is
answered in time whatever the agent does: past its deadline the prompt
follows the answer (:mod:`mirror_host.commands.first_prompt`).

A phone's ``send`` runs a command line in a shell pane through
:mod:`mirror_host.commands.shell_input` (``shell-send``, unless turned off).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict
from uuid import UUID

import trio

from mirror_host.agents import Agent, AgentState
from mirror_host.commands import catalogue
from mirror_host.commands.agent_input import (
    BUSY,
    AgentInput,
    AgentPanes,
    AgentPaneTarget,
    agent_delivery,
    observe,
)
from mirror_host.commands.delivery import DeliveryTiming, Target, deliver
from mirror_host.commands.first_prompt import FirstPrompts, Pending, failure_message, succeeded
from mirror_host.commands.responses import SEND_REFUSED, cli_error, rejected
from mirror_host.commands.shell_input import ShellPanes, deliver_command, shell_status
from mirror_host.config import Profile
from mirror_host.control import CreateCommand, SendCommand
from mirror_host.control.swiftjson import JSONValue
from mirror_host.errors import PaneSourceError
from mirror_host.shell.verdict import PaneForeground, ShellEvidence

__all__ = [
    "KNOWN_AGENTS",
    "READY_SECONDS",
    "AgentPaneCommands",
    "BackendOptions",
    "first_prompt",
    "launch_failure",
    "task_status",
]

#: The agents this host can read, as ``(program, name)`` for the default profiles.
KNOWN_AGENTS = tuple((agent.value, agent.display_name) for agent in Agent)
#: How long a freshly started agent may take to show its composer.
READY_SECONDS = 30.0
_READY_POLL = 0.2


async def first_prompt(
    panes: AgentPanes, target: Target[Any], pane_id: UUID, prompt: str, *, timing: DeliveryTiming
) -> JSONValue:
    """Deliver a launched agent's first prompt to ``target`` once ``panes`` show it with an
    empty input box: the ``agentsInput`` result, or an error saying why nothing was typed."""
    why = f"it did not show an empty input box within {READY_SECONDS:g} s"
    with trio.move_on_after(READY_SECONDS):
        while True:
            try:
                found = await observe(panes, pane_id)
            except PaneSourceError as exc:
                why = f"the pane could not be read ({exc})"
                break
            if found.ready:
                # The create outlives its connection: no lease to hold.
                delivery = agent_delivery(
                    pane_id, prompt, dispatch=False, authorized=lambda: True, timing=timing
                )
                return await deliver(target, delivery)
            if found.state is AgentState.BLOCKED:
                why = f"it is waiting for an answer ({found.reason})"
                break
            await trio.sleep(_READY_POLL)
    return cli_error("agentsInput", BUSY, f"Nothing was typed: {why}.")


def launch_failure(result: JSONValue, *, opened: str = "pane") -> JSONValue | None:
    """``None`` when a launched agent's first prompt went in, else the ``create`` error."""
    if succeeded(result):
        return None
    why = failure_message(result).rstrip(".")
    return cli_error(
        "create",
        "CREATE_FAILED",
        f"The {opened} was opened, but its first prompt was not sent: {why}.",
    )


def task_status(state: AgentState | None) -> str:
    """``list``'s ``task.status`` for an agent state (``running`` only while it works)."""
    return "running" if state is AgentState.WORKING else "idle"


class BackendOptions(TypedDict, total=False):
    """What ``serve`` (and a test) may set on a tmux or local backend."""

    #: The ``[profiles]`` table (``None``: the known agents found on ``PATH``).
    profiles: tuple[Profile, ...] | None
    timing: DeliveryTiming | None
    #: Phones' command lines in shell panes (``--no-shell-send`` turns it off).
    shell_send: bool


class AgentPaneCommands(AgentInput):
    """The backend parts shared by tmux and local panes; subclasses list and create."""

    def __init__(
        self,
        panes: AgentPanes,
        *,
        target: Target[Any] | None = None,
        profiles: tuple[Profile, ...] | None = None,
        timing: DeliveryTiming | None = None,
        shell_send: bool = True,
    ) -> None:
        self.agent_panes = panes
        #: Where agent input goes (``panes`` themselves, unless the source adds rules).
        self.target: Target[Any] = target or AgentPaneTarget(panes)
        #: Whether phones may run command lines in shell panes: not with ``--no-shell-send``,
        #: nor where the panes cannot say which process leads a terminal's foreground.
        self.shell_send_enabled = shell_send and isinstance(panes, ShellPanes)
        self.profiles_table = (
            profiles if profiles is not None else catalogue.default_profiles(KNOWN_AGENTS)
        )
        self.timing = timing or DeliveryTiming()
        #: Launched agents' first prompts (answered in time, retained by the service).
        self.first_prompts = FirstPrompts()
        #: One phone's command at a time per pane: a second waits for the first's answer.
        self._sending: dict[UUID, trio.Lock] = {}

    @property
    def capabilities(self) -> tuple[str, ...]:
        """All of these always work (``launch-profile`` is the service's: it is always on);
        ``shell-send`` unless it is turned off."""
        return (
            "launch-shell",
            "agents-dispatch",
            "agent-input",
            *(("shell-send",) if self.shell_send_enabled else ()),
        )

    async def run(self) -> None:
        """Nothing to learn in the background; first prompts that outlive their create."""
        await self.first_prompts.run()

    async def profiles(self) -> JSONValue:
        """The profile catalogue with availability on this machine."""
        return catalogue.profiles_result(self.profiles_table)

    async def shell_send(
        self, pane_id: UUID, command: SendCommand, *, authorized: Callable[[], bool]
    ) -> JSONValue:
        """Run ``command.text`` in the shell pane, guarded; refused when shell-send is off
        (the service runs ``send`` only where it is advertised, so this is a backstop)."""
        panes = self.agent_panes
        if not self.shell_send_enabled or not isinstance(panes, ShellPanes):  # narrows the type
            return rejected(SEND_REFUSED)
        lock = self._sending.setdefault(pane_id, trio.Lock())
        try:
            async with lock:
                return await deliver_command(panes, pane_id, command, authorized=authorized)
        finally:
            if not lock.locked() and not lock.statistics().tasks_waiting:
                self._sending.pop(pane_id, None)

    # ------------------------------------------------------------ helpers for subclasses

    async def answer_created(
        self,
        command: CreateCommand,
        profile: Profile | None,
        pane_id: UUID,
        described: tuple[dict[str, JSONValue], dict[str, JSONValue], dict[str, JSONValue]],
    ) -> JSONValue:
        """``create``'s answer for a new pane: its first prompt delivered first, if it
        has one (the error if that failed; a prompt still waiting for its agent follows
        the answer). ``described`` is the pane's ``(worktree, tab, pane)`` records."""
        failure = await self._prompt_launched(command, profile, pane_id)
        if failure is not None:
            return failure
        worktree, tab, pane = described
        return catalogue.created_result(worktree, tab, pane, profile)

    async def _prompt_launched(
        self, command: CreateCommand, profile: Profile | None, pane_id: UUID
    ) -> JSONValue | None:
        """Deliver a launched agent's first prompt, if it has one; the error if that failed.

        ``None`` too when the create is due first: the prompt follows the answer.
        """
        if profile is None or command.launch is None or not command.launch.prompt:
            return None
        prompt = command.launch.prompt
        outcome = await self.first_prompts.deliver(
            pane_id,
            prompt,
            lambda: first_prompt(
                self.agent_panes, self.target, pane_id, prompt, timing=self.timing
            ),
        )
        return None if isinstance(outcome, Pending) else launch_failure(outcome)

    def task(
        self,
        foreground: PaneForeground,
        evidence: ShellEvidence | None,
        agent_state: AgentState | None,
        *,
        agent: bool,
    ) -> dict[str, JSONValue]:
        """``list``'s ``task`` for a pane: the agent's state, or what its shell proves.

        An agent whose screen could not be read (``agent_state`` ``None``) has
        no status: ``idle`` would say a prompt is taken. A shell pane is
        ``idle`` when its own shell, with mirror-host's integration, waits at
        its prompt (a ``send`` is handed to it), ``running`` while a job runs,
        and has no status when neither is proven.
        """
        if agent:
            return {} if agent_state is None else {"status": task_status(agent_state)}
        status = shell_status(foreground, evidence, sendable=self.shell_send_enabled)
        return {"status": status} if status is not None else {}
