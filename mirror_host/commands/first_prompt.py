"""A launched agent's first prompt: the ``create`` answered in time, the prompt after it. I/O.

The apps give a command 30 s. A ``create`` that starts an agent has to wait for
it before its first prompt can go in, and an agent can take longer than that
to start (Herdr's own start timeout is 30 s). So the create is answered within
:data:`ANSWER_SECONDS` of its start, always:

* once the pane exists and, if the agent was ready in time, after its first
  prompt was delivered (or with the reason it was not);
* otherwise at that deadline, ``ok``, with
  ``data.first_prompt = {"status": "pending", "receipt_id": ID}``: the
  delivery goes on (never cut off half-way) and is what agent input is: the
  same guarded delivery, the same log line, and a retained ``agentsInput``
  result on the new pane under ``ID``, which a client holding the pane's lease
  gets with ``commandReceipt``, as for its own input. Its end is logged too.

The backend runs the delivery through :meth:`FirstPrompts.deliver`; the
command service binds itself as the :class:`ReceiptDesk`, sets
:data:`ANSWER_BY` for each create and adds ``first_prompt`` to its answer.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Protocol
from uuid import UUID

import trio

from mirror_host.commands.responses import CANCELLED_INPUT, INPUT_UNCONFIRMED, cli_error
from mirror_host.control import AgentsInputCommand
from mirror_host.control.swiftjson import JSONValue

__all__ = [
    "ANSWER_BY",
    "ANSWER_SECONDS",
    "FirstPrompts",
    "Pending",
    "ReceiptDesk",
    "Work",
    "failure_message",
    "succeeded",
]

logger = logging.getLogger(__name__)

#: A create is answered within this long of its start (the apps wait 30 s, and the
#: answer has to cross the network).
ANSWER_SECONDS = 20.0
#: When the create being run in this task is due (``trio.current_time``), set by the
#: command service; without it, :data:`ANSWER_SECONDS` from the delivery's start.
ANSWER_BY: ContextVar[float | None] = ContextVar("mirror_host_answer_by", default=None)

#: Starting the agent (if the backend does that too) and delivering its first
#: prompt: an ``agentsInput``-shaped result, ``ok`` or an error saying why.
Work = Callable[[], Awaitable[JSONValue]]


class ReceiptDesk(Protocol):
    """Where a prompt that outlives its create's answer is retained (the command service)."""

    def open_receipt(self, command: AgentsInputCommand, pane_id: UUID) -> UUID | None:
        """Retain ``command`` on ``pane_id`` as running; its new request id (``None``:
        the book is full)."""
        ...

    def close_receipt(self, request_id: UUID, result: JSONValue) -> None:
        """The retained command's result (once)."""
        ...


@dataclass(frozen=True, slots=True)
class Pending:
    """The answer is due and the work goes on; its receipt, if one was retained."""

    receipt_id: UUID | None


@dataclass(eq=False)
class _Delivery:
    pane_id: UUID
    prompt: str | None
    done: trio.Event = field(default_factory=trio.Event)
    result: JSONValue = None
    #: Set when the answer went out first: the end is reported (log, receipt).
    late: bool = False
    receipt_id: UUID | None = None


def succeeded(result: JSONValue) -> bool:
    """Whether a work's result says it went through."""
    return isinstance(result, dict) and result.get("ok") is True


def failure_message(result: JSONValue) -> str:
    """A work's error message (a sentence)."""
    error = result.get("error") if isinstance(result, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return str(message) if message else INPUT_UNCONFIRMED


class FirstPrompts:
    """Runs first prompts so that their creates are answered in time (module docstring)."""

    def __init__(self) -> None:
        self._nursery: trio.Nursery | None = None
        self._desk: ReceiptDesk | None = None
        #: Receipts of prompts still under way whose create has not been answered yet.
        self._pending: dict[UUID, UUID | None] = {}
        #: One per delivery under way: host stop cancels them (the prompt is not typed).
        self._scopes: set[trio.CancelScope] = set()

    def stop(self) -> None:
        """Host stop: cancel every delivery under way, late ones included, as creates
        are (prowl-host.md §8: host stop cancels create preparation)."""
        for scope in list(self._scopes):
            scope.cancel()

    def bind(self, desk: ReceiptDesk) -> None:
        """Retain late prompts at ``desk`` (the command service does this)."""
        self._desk = desk

    async def run(self) -> None:
        """Host the deliveries that outlive their create's answer (until cancelled)."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                await trio.sleep_forever()
            finally:
                self._nursery = None

    def claim(self, pane_id: UUID) -> tuple[bool, UUID | None]:
        """``(pending, receipt id)`` for the create that made ``pane_id`` (asked once)."""
        if pane_id not in self._pending:
            return False, None
        return True, self._pending.pop(pane_id)

    async def deliver(self, pane_id: UUID, prompt: str | None, work: Work) -> JSONValue | Pending:
        """Run ``work`` for the new pane; its result if it ends before the create is due,
        else :class:`Pending` (the work goes on and reports its end itself)."""
        if self._nursery is None:  # not running (no command service): no deadline to keep
            return await work()
        delivery = _Delivery(pane_id, prompt)
        self._nursery.start_soon(self._work, delivery, work)
        answer_by = ANSWER_BY.get()
        if answer_by is None:
            answer_by = trio.current_time() + ANSWER_SECONDS
        try:
            with trio.move_on_at(answer_by):
                await delivery.done.wait()
        finally:
            if not delivery.done.is_set():
                # Due (or the create was cancelled): from here the work reports itself.
                delivery.late = True
        if not delivery.late:
            return delivery.result
        if prompt is not None and self._desk is not None:
            command = AgentsInputCommand(pane=str(pane_id).upper(), prompt=prompt)
            delivery.receipt_id = self._desk.open_receipt(command, pane_id)
            self._pending[pane_id] = delivery.receipt_id
        logger.info(
            "the create of pane %s is answered before its agent %s; it goes on",
            pane_id,
            "took its first prompt" if prompt is not None else "was ready",
        )
        return Pending(delivery.receipt_id)

    async def _work(self, delivery: _Delivery, work: Work) -> None:
        with trio.CancelScope() as scope:
            self._scopes.add(scope)
            try:
                delivery.result = await work()
            except Exception:  # a backend bug must not end the others, nor the host
                logger.exception("launching the agent of pane %s failed", delivery.pane_id)
                delivery.result = cli_error("agentsInput", "SEND_FAILED", INPUT_UNCONFIRMED)
            finally:
                self._scopes.discard(scope)
        if scope.cancelled_caught and delivery.result is None:
            logger.info("the first prompt of pane %s was cancelled: Host stopped", delivery.pane_id)
            delivery.result = cli_error("agentsInput", "TIMEOUT", CANCELLED_INPUT)
        delivery.done.set()
        if delivery.late:
            self._report(delivery)

    def _report(self, delivery: _Delivery) -> None:
        """The end of a delivery whose create was already answered: log and receipt."""
        what = "first prompt" if delivery.prompt is not None else "agent start"
        if succeeded(delivery.result):
            logger.info("the %s of pane %s went through after its create", what, delivery.pane_id)
        else:
            logger.warning(
                "the %s of pane %s failed after its create: %s",
                what,
                delivery.pane_id,
                failure_message(delivery.result),
            )
        if delivery.receipt_id is not None and self._desk is not None:
            self._desk.close_receipt(delivery.receipt_id, delivery.result)
