"""The seam between the pane hub and the remote-command service. I/O (Trio).

The hub hands every ``command`` and ``commandReceipt`` a session announces to a
:class:`CommandHandler`. The default refuses every command, which is what a host
without a command service must answer; :class:`~mirror_host.commands.service.CommandService`
is the real one. Handlers take the connection's :class:`Session` (a pure state
machine): queuing a result on it wakes that connection's writer by itself.
"""

from __future__ import annotations

import trio

from mirror_host.commands.responses import NOT_ALLOWED, rejected, unconfirmed
from mirror_host.session.connection import Session
from mirror_host.session.events import CommandRequested, ReceiptRequested

__all__ = ["CommandHandler"]


class CommandHandler:
    """Remote commands for one host; this base refuses everything."""

    @property
    def capabilities(self) -> tuple[str, ...]:
        """Command capabilities to advertise (none by default)."""
        return ()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Background work; reports started once :meth:`handle` may be called."""
        task_status.started()

    def handle(self, session: Session, event: CommandRequested) -> None:
        """Answer (or start answering) one command; never waits."""
        request = event.message.command_request
        session.send_command_result(request.request_id, rejected(NOT_ALLOWED))

    def receipt(self, session: Session, event: ReceiptRequested) -> None:
        """Answer (or start answering) a receipt query; never waits."""
        session.send_command_result(event.message.command_receipt_id, unconfirmed())

    def lease_lost(self, session: Session) -> None:
        """The session lost its lease: cancel its pane-targeted commands."""

    def stop(self) -> None:
        """The host is stopping: cancel everything."""
