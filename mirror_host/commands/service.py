"""Running remote commands: rules, deduplication, receipts, cancellation. I/O.

The session has already checked the envelope's lease rules (a targeted command
carries the current lease; a subscribed connection sends only ``list``; one
command in flight). This service adds the rest of Prowl's rules (host docs §8):

* ``output`` is exactly ``json`` (the decoder refuses anything else, which
  closes the connection, as every command outside the allowlist does);
* ``send`` goes to a backend that can run shell command lines
  (:class:`ShellSender`) and advertises ``shell-send``, and is refused otherwise
  (as Prowl's host refuses it); prompts are at most 64 KiB; a targeted command
  names exactly the leased pane (a *different* pane closes the connection);
* mutations are retained by request id (:mod:`mirror_host.commands.receipts`);
* authorisation is checked when execution starts and again, by the backend,
  right before anything is written to a pane;
* pane-targeted commands are cancelled when their connection loses its lease
  (disconnect, takeover, ``ended``); ``create`` survives a plain disconnect;
  host stop cancels everything.

Each command runs in its own task, so a slow one (an agent not ready yet) never
blocks the connection's other messages. A ``create`` that starts an agent is
answered within :data:`~mirror_host.commands.first_prompt.ANSWER_SECONDS`; a
first prompt still under way then is retained here like agent input
(:mod:`mirror_host.commands.first_prompt`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Protocol, runtime_checkable
from uuid import UUID

import trio

from mirror_host.commands import first_prompt
from mirror_host.commands.first_prompt import ANSWER_BY, FirstPrompts
from mirror_host.commands.handler import CommandHandler
from mirror_host.commands.receipts import Admission, Receipt, ReceiptBook
from mirror_host.commands.responses import (
    BAD_PROFILE,
    BAD_REQUEST,
    BAD_TARGET,
    CANCELLED_INPUT,
    INPUT_UNCONFIRMED,
    MAX_PROMPT_BYTES,
    NO_LONGER_OWNS,
    NOT_ALLOWED,
    REQUEST_LIMIT,
    REUSED_ID,
    SEND_REFUSED,
    cli_error,
    for_the_apps,
    rejected,
    unconfirmed,
)
from mirror_host.control import (
    PANE_TARGETED_COMMANDS,
    AgentsDispatchCommand,
    AgentsInputCommand,
    CreateCommand,
    ListCommand,
    ProfilesCommand,
    RemoteCommand,
    SendCommand,
)
from mirror_host.control.swiftjson import JSONValue
from mirror_host.session.connection import Session
from mirror_host.session.events import CommandRequested, ReceiptRequested

__all__ = ["LAUNCH_PROFILE", "CommandBackend", "CommandService", "ShellSender"]

#: The capability the mobile apps gate every command on (prowl-clients.md).
LAUNCH_PROFILE = "launch-profile"

logger = logging.getLogger(__name__)

Authorized = Callable[[], bool]


class CommandBackend(Protocol):
    """Where commands are carried out (Herdr, tmux, local PTYs, agliteterm)."""

    @property
    def capabilities(self) -> tuple[str, ...]:
        """Which of launch-shell, agents-dispatch, agent-input, shell-send work, in that order.

        Never ``launch-profile``: the service advertises that itself.
        """
        ...

    async def run(self) -> None:
        """Background work (feature detection); may return at once."""
        ...

    async def list(self) -> JSONValue:
        """The ``prowl.cli.list.v1`` result."""
        ...

    async def profiles(self) -> JSONValue:
        """The profiles catalogue result."""
        ...

    async def create(self, command: CreateCommand) -> JSONValue:
        """Create a background tab (agent or shell)."""
        ...

    async def agent_input(
        self, pane_id: UUID, prompt: str, *, dispatch: bool, authorized: Authorized
    ) -> JSONValue:
        """Deliver a prompt to the agent in a pane; ``authorized`` right before writing."""
        ...


@runtime_checkable
class ShellSender(Protocol):
    """A backend that answers ``send`` itself (running it, or saying why it cannot)."""

    async def shell_send(
        self, pane_id: UUID, command: SendCommand, *, authorized: Authorized
    ) -> JSONValue:
        """Run ``command.text`` in the shell pane, or refuse (``authorized`` before writing)."""
        ...


def _prompt_too_long(prompt: str | None) -> bool:
    return prompt is not None and len(prompt.encode("utf-8", "surrogatepass")) > MAX_PROMPT_BYTES


class CommandService(CommandHandler):
    """Prowl's remote-command rules on top of a backend."""

    def __init__(self, backend: CommandBackend) -> None:
        self.backend = backend
        self.receipts = ReceiptBook()
        self._finished: dict[UUID, trio.Event] = {}
        self._targeted: dict[Session, set[trio.CancelScope]] = {}
        self._all: set[trio.CancelScope] = set()
        self._nursery: trio.Nursery | None = None
        #: The backend's first prompts (every backend here has them): retained here.
        first_prompts = getattr(backend, "first_prompts", None)
        self._first_prompts = first_prompts if isinstance(first_prompts, FirstPrompts) else None
        if self._first_prompts is not None:
            self._first_prompts.bind(self)

    @property
    def capabilities(self) -> tuple[str, ...]:
        """Advertised in ``panes.capabilities`` after the base four.

        ``launch-profile`` whenever the service runs, on every source, as Prowl's
        host does: the iOS and Android apps send no command at all (not ``list``,
        not ``agentsInput``) without it. Whether a profile can really start is
        ``profiles``' ``availability``; a ``create`` naming one that cannot is
        refused by the backend with the reason, and nothing is started.
        """
        return (LAUNCH_PROFILE, *(c for c in self.backend.capabilities if c != LAUNCH_PROFILE))

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Host the command tasks until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self.backend.run)
            task_status.started()
            await trio.sleep_forever()

    # ------------------------------------------------------------ entry points

    def handle(self, session: Session, event: CommandRequested) -> None:
        """Validate, deduplicate and start one command (its own task: never waits)."""
        message = event.message
        request = message.command_request
        request_id = request.request_id
        command = request.request.command

        def reply(result: JSONValue) -> None:
            if not session.is_closed:
                session.send_command_result(request_id, result)

        if isinstance(command, ListCommand | ProfilesCommand):
            self._spawn(None, self._read_catalogue, command, reply)
            return
        pane_id: UUID | None = None
        if command.NAME in PANE_TARGETED_COMMANDS:
            assert isinstance(command, AgentsInputCommand | AgentsDispatchCommand | SendCommand)
            try:
                pane_id = UUID(command.pane)
            except ValueError:
                reply(rejected(BAD_TARGET))
                return
            lease = session.lease
            if lease is None or lease.pane_id != pane_id:
                session.close("a targeted command names another pane than the lease")
                return
        problem = self._validate(command)
        if problem is not None:
            reply(rejected(problem))
            return
        admission, receipt = self.receipts.admit(request_id, command, pane_id)
        if admission is Admission.FULL:
            reply(rejected(REQUEST_LIMIT))
        elif admission is Admission.REUSED:
            reply(rejected(REUSED_ID))
        elif admission is Admission.DUPLICATE:
            assert receipt is not None
            self._spawn(None, self._await_receipt, receipt, reply)
        else:
            assert receipt is not None
            self._finished[request_id] = trio.Event()
            targeted = session if pane_id is not None else None
            self._spawn(targeted, self._execute, receipt, session, reply)

    def receipt(self, session: Session, event: ReceiptRequested) -> None:
        """Answer ``commandReceipt`` with the retained result (waiting if it still runs)."""
        receipt_id = event.message.command_receipt_id
        lease = session.lease
        retained = self.receipts.get(receipt_id)
        if retained is None or lease is None or retained.pane_id != lease.pane_id:
            session.send_command_result(receipt_id, unconfirmed())
            return
        subscription = lease.subscription_id

        def reply(result: JSONValue) -> None:
            current = session.lease
            if session.is_closed or current is None or current.subscription_id != subscription:
                return  # the lease changed meanwhile: the answer would be stale
            session.send_command_result(receipt_id, result)

        self._spawn(None, self._await_receipt, retained, reply)

    def open_receipt(self, command: AgentsInputCommand, pane_id: UUID) -> UUID | None:
        """Retain a first prompt still under way after its create's answer, as agent
        input on its pane; its request id (``None``: the book is full)."""
        request_id = uuid.uuid4()
        admission, _ = self.receipts.admit(request_id, command, pane_id)
        if admission is not Admission.NEW:
            return None
        self._finished[request_id] = trio.Event()
        return request_id

    def close_receipt(self, request_id: UUID, result: JSONValue) -> None:
        """That first prompt's result."""
        receipt = self.receipts.get(request_id)
        if receipt is not None:
            self.receipts.finish(receipt, result)
        self._finished.pop(request_id, trio.Event()).set()

    def lease_lost(self, session: Session) -> None:
        """Cancel the session's pane-targeted commands that are still running."""
        for scope in self._targeted.pop(session, set()):
            scope.cancel()

    def stop(self) -> None:
        """Host stop: cancel everything, creates and their first prompts included."""
        for scope in list(self._all):
            scope.cancel()
        if self._first_prompts is not None:
            self._first_prompts.stop()

    # ------------------------------------------------------------ internals

    @staticmethod
    def _validate(command: RemoteCommand) -> str | None:
        if isinstance(command, SendCommand):
            return None  # retained, then refused with its own message
        if isinstance(command, AgentsInputCommand | AgentsDispatchCommand):
            return BAD_TARGET if _prompt_too_long(command.prompt) else None
        if isinstance(command, CreateCommand):
            if command.resource != "tab" or command.background is not True:
                return BAD_REQUEST
            if command.launch is not None and (
                not command.launch.profile or _prompt_too_long(command.launch.prompt)
            ):
                return BAD_PROFILE
        return None

    def _spawn(
        self, targeted: Session | None, fn: Callable[..., Awaitable[None]], *args: object
    ) -> None:
        assert self._nursery is not None, "CommandService.run() has not started"
        self._nursery.start_soon(self._guarded, targeted, fn, args)

    async def _guarded(
        self,
        targeted: Session | None,
        fn: Callable[..., Awaitable[None]],
        args: tuple[object, ...],
    ) -> None:
        scope = trio.CancelScope()
        self._all.add(scope)
        if targeted is not None:
            self._targeted.setdefault(targeted, set()).add(scope)
        try:
            with scope:
                await fn(*args)
        finally:
            self._all.discard(scope)
            if targeted is not None:
                scopes = self._targeted.get(targeted)
                if scopes is not None:
                    scopes.discard(scope)
                    if not scopes:
                        self._targeted.pop(targeted, None)

    async def _read_catalogue(
        self, command: ListCommand | ProfilesCommand, reply: Callable[[JSONValue], None]
    ) -> None:
        try:
            result = await (
                self.backend.list() if isinstance(command, ListCommand) else self.backend.profiles()
            )
        except Exception:  # pragma: no cover - a backend bug must not kill the host
            logger.exception("the %s command failed", command.NAME)
            result = unconfirmed()
        result, problem = for_the_apps(command.NAME, result)
        if problem is not None:  # a backend's bug: the apps would drop the connection
            logger.error("the %s result is unreadable to the apps (%s)", command.NAME, problem)
        reply(result)

    async def _await_receipt(self, receipt: Receipt, reply: Callable[[JSONValue], None]) -> None:
        finished = self._finished.get(receipt.request_id)
        if finished is not None:
            await finished.wait()
        reply(receipt.result if receipt.done else unconfirmed())

    async def _execute(
        self, receipt: Receipt, session: Session, reply: Callable[[JSONValue], None]
    ) -> None:
        command = receipt.command
        assert command is not None, "a new receipt keeps its command until it finishes"
        lease = session.lease
        subscription = lease.subscription_id if lease is not None else None

        def authorized() -> bool:
            current = session.lease
            return (
                not session.is_closed
                and current is not None
                and current.subscription_id == subscription
            )

        result: JSONValue | None = None
        try:
            result, problem = for_the_apps(
                command.NAME, await self._run(command, receipt.pane_id, authorized)
            )
            if problem is not None:  # a backend's bug: the apps would drop the connection
                logger.error("the %s result is unreadable to the apps (%s); sent as "
                             "unconfirmed", command.NAME, problem)  # fmt: skip
        finally:
            if result is None:  # cancelled: the lease went away (or the host stopped)
                result = (
                    cli_error(command.NAME, "TIMEOUT", CANCELLED_INPUT)
                    if isinstance(command, AgentsInputCommand | AgentsDispatchCommand | SendCommand)
                    else rejected(NO_LONGER_OWNS)
                )
            self.receipts.finish(receipt, result)
            self._finished.pop(receipt.request_id, trio.Event()).set()
        reply(result)

    async def _run(
        self, command: RemoteCommand, pane_id: UUID | None, authorized: Authorized
    ) -> JSONValue:
        capabilities = self.capabilities
        if isinstance(command, SendCommand):
            return await self._send(command, pane_id, authorized)
        if isinstance(command, CreateCommand):
            needed = LAUNCH_PROFILE if command.launch is not None else "launch-shell"
            if needed not in capabilities:
                return rejected(NOT_ALLOWED)
            due = ANSWER_BY.set(trio.current_time() + first_prompt.ANSWER_SECONDS)
            try:
                return self._with_first_prompt(await self.backend.create(command))
            except Exception:  # pragma: no cover - a backend bug must not kill the host
                logger.exception("create failed")
                return unconfirmed()
            finally:
                ANSWER_BY.reset(due)
        assert (
            isinstance(command, AgentsInputCommand | AgentsDispatchCommand) and pane_id is not None
        )
        dispatch = isinstance(command, AgentsDispatchCommand)
        if ("agents-dispatch" if dispatch else "agent-input") not in capabilities:
            return rejected(NOT_ALLOWED)
        if not authorized():
            return rejected(NO_LONGER_OWNS)
        try:
            return await self.backend.agent_input(
                pane_id, command.prompt, dispatch=dispatch, authorized=authorized
            )
        except Exception:  # pragma: no cover - a backend bug must not kill the host
            logger.exception("agent input failed")
            return cli_error(command.NAME, "SEND_FAILED", INPUT_UNCONFIRMED)

    def _with_first_prompt(self, result: JSONValue) -> JSONValue:
        """A create's answer, saying so when its first prompt is still under way."""
        if self._first_prompts is None or not isinstance(result, dict):
            return result
        data = result.get("data")
        target = data.get("target") if isinstance(data, dict) else None
        pane = target.get("pane") if isinstance(target, dict) else None
        pane_id = pane.get("id") if isinstance(pane, dict) else None
        if not isinstance(data, dict) or not isinstance(pane_id, str):
            return result
        try:
            pending, receipt_id = self._first_prompts.claim(UUID(pane_id))
        except ValueError:
            return result
        if pending:
            first: dict[str, JSONValue] = {"status": "pending"}
            if receipt_id is not None:
                first["receipt_id"] = str(receipt_id).upper()
            data["first_prompt"] = first
        return result

    async def _send(
        self, command: SendCommand, pane_id: UUID | None, authorized: Authorized
    ) -> JSONValue:
        """``send``: the backend's own answer; refused as Prowl's host does without one.

        Only where ``shell-send`` is advertised: a backend that has the method but
        does not offer it (turned off, or a source that cannot prove an empty
        prompt) never gets the command.
        """
        backend = self.backend
        if (
            not isinstance(backend, ShellSender)
            or "shell-send" not in self.capabilities
            or pane_id is None
        ):
            return rejected(SEND_REFUSED)
        if not authorized():
            return rejected(NO_LONGER_OWNS)
        try:
            return await backend.shell_send(pane_id, command, authorized=authorized)
        except Exception:  # pragma: no cover - a backend bug must not kill the host
            logger.exception("shell send failed")
            return cli_error(command.NAME, "SEND_FAILED", INPUT_UNCONFIRMED)
