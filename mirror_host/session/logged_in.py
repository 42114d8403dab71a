"""A logged-in connection: its requests, its lease and its command in flight. Pure.

Theory of operation
-------------------

:class:`LoggedIn` is the second half of a session, as wsproto's ``Connection``
is the second half of its handshake. The session's state table
(:mod:`mirror_host.session.states`) has already decided that a message is
accepted in the current state before :meth:`LoggedIn.receive` sees it, so a
lease-bound message always finds a lease here. Whether the connection holds its
lease is the table's to say (``SUBSCRIBED``, the link's
:attr:`~mirror_host.session.link.Link.phase`); the lease kept here is only what
that state carries, read through it. What is left are the rules about the
message's own content:

* each lease-bound message must name the current lease;
* input only on ``vt-v1`` and 1 … 65,536 bytes;
* one command in flight (:class:`CommandSlot`), targeted commands only on the
  lease they target, and a subscribed connection sends no other command than
  ``list``;
* at most 64 history requests waiting for a capture (the lease's
  :class:`~mirror_host.session.history.HistoryDesk`).

A broken rule raises ``ProtocolViolation`` and the session closes silently.
Requests that need a pane source are only reported as events; the host answers
them later through the methods below, from other tasks.
"""

from __future__ import annotations

from typing import assert_never
from uuid import UUID

from mirror_host.capture.values import Capture
from mirror_host.control import (
    PANE_TARGETED_COMMANDS,
    Acknowledge,
    Command,
    CommandReceipt,
    CommandResponse,
    CommandResult,
    Failure,
    History,
    HistoryPage,
    Input,
    ListPanes,
    PaneDescriptor,
    Panes,
    Refresh,
    Representation,
    Scroll,
    ScrollResult,
    Subscribe,
    Subscribed,
)
from mirror_host.control.swiftjson import JSONValue
from mirror_host.errors import LocalProtocolError, ProtocolViolation, RemoteProtocolError
from mirror_host.limits import MAX_INPUT_BYTES
from mirror_host.session.events import (
    CommandRequested,
    FrameAcknowledged,
    HistoryRequested,
    InputReceived,
    ListRequested,
    ReceiptRequested,
    RefreshRequested,
    ScrollRequested,
    SubscribeRequested,
)
from mirror_host.session.history import HistorySnapshot, HistoryStep
from mirror_host.session.lease import Lease, ScrollOutcome, frame_key
from mirror_host.session.link import Link
from mirror_host.session.states import Phase, SessionMessage

__all__ = [
    "HISTORY_UNAVAILABLE",
    "PANE_BUSY",
    "SCROLL_BUSY",
    "SCROLL_CANNOT",
    "SCROLL_COULD_NOT",
    "CommandSlot",
    "LoggedIn",
]


PANE_BUSY = "PANE_BUSY: This pane already has a remote mirror."
HISTORY_UNAVAILABLE = "HISTORY_UNAVAILABLE: Cannot capture history within the supported limits."
SCROLL_BUSY = "SCROLL_BUSY: Wait for the current scroll to finish."
SCROLL_CANNOT = "SCROLL_UNAVAILABLE: Host cannot scroll this pane."
SCROLL_COULD_NOT = "SCROLL_UNAVAILABLE: Host could not scroll this pane."


class CommandSlot:
    """One command in flight per connection.

    Two states: *free*, or *busy* with one command until the host answers it.
    While busy, an identical duplicate is dropped (the original's answer is
    coming) and any other command is a violation.
    """

    def __init__(self) -> None:
        self.in_flight: Command | None = None

    def admit(self, message: Command) -> bool:
        """Take ``message``; False for a duplicate of the command in flight.

        Raises:
            ProtocolViolation: another command is in flight.
        """
        in_flight = self.in_flight
        if in_flight is not None:
            if in_flight == message:
                return False
            raise ProtocolViolation("a second command while one is in flight")
        self.in_flight = message
        return True

    def finish(self, request_id: UUID) -> None:
        """The host answered ``request_id``: free, if that was the command in flight."""
        in_flight = self.in_flight
        if in_flight is not None and in_flight.command_request.request_id == request_id:
            self.in_flight = None


class LoggedIn:
    """What a logged-in connection holds. See the module docstring."""

    def __init__(self, link: Link, *, device_id: UUID) -> None:
        #: The device this connection logged in as.
        self.device_id = device_id
        #: What ``SUBSCRIBED`` carries: the lease, set as the table enters that
        #: state (:meth:`grant`), read only through it (:meth:`held`).
        self._lease: Lease | None = None
        self.commands = CommandSlot()
        self._link = link

    @property
    def subscribed(self) -> bool:
        """The table says the connection holds its lease."""
        return self._link.phase is Phase.SUBSCRIBED

    def held(self) -> Lease:
        """The lease; only while :attr:`subscribed`."""
        lease = self._lease
        # Several times per frame: the table read here, not through the property.
        assert lease is not None and self._link.phase is Phase.SUBSCRIBED, "only while subscribed"
        return lease

    # ------------------------------------------------------------ client messages

    def receive(self, message: SessionMessage, now: float) -> None:
        """Act on a message the state table accepted, which arrived at ``now``.

        Raises:
            ProtocolViolation: the message breaks one of the rules above.
        """
        match message:
            case ListPanes():
                self._link.emit(ListRequested())
            case Subscribe():
                self._link.emit(SubscribeRequested(message))
            case Acknowledge():
                lease = self._lease_for(message.subscription_id)
                lease.gate.acknowledge(message.sequence)
                self._link.emit(FrameAcknowledged(lease.subscription_id))
            case Refresh():
                lease = self._lease_for(message.subscription_id)
                lease.gate.refresh()
                self._link.emit(RefreshRequested(lease.subscription_id))
            case Input():
                self._on_input(message)
            case Scroll():
                self._on_scroll(message)
            case History():
                self._on_history(message, now)
            case Command():
                self._on_command(message)
            case CommandReceipt():
                self._lease_for(message.subscription_id)
                self._link.emit(ReceiptRequested(message))
            case _:
                assert_never(message)

    def _lease_for(self, subscription_id: UUID) -> Lease:
        if not self.subscribed:
            raise ProtocolViolation("lease-bound message without a subscription")
        lease = self.held()
        if subscription_id != lease.subscription_id:
            raise ProtocolViolation("message names another subscription")
        return lease

    def _on_input(self, message: Input) -> None:
        lease = self._lease_for(message.subscription_id)
        if lease.representation is not Representation.VT:
            raise ProtocolViolation("input on a text-v1 subscription")
        if not 1 <= len(message.data) <= MAX_INPUT_BYTES:
            raise ProtocolViolation(f"input of {len(message.data)} bytes (1 … 65536 allowed)")
        self._link.emit(InputReceived(lease.subscription_id, lease.pane_id, message.data))

    def _on_scroll(self, message: Scroll) -> None:
        lease = self._lease_for(message.subscription_id)
        outcome = lease.scroll.request(message.request_id, message.direction)
        subscription_id, request_id = lease.subscription_id, message.request_id
        match outcome:
            case ScrollOutcome.APPLY:
                self._link.emit(
                    ScrollRequested(subscription_id, lease.pane_id, request_id, message.direction)
                )
            case ScrollOutcome.REPLAY_RESULT:
                result = lease.scroll.latest_result
                assert result is not None
                self._link.send(
                    ScrollResult(
                        request_id=result[0], sequence=result[1], subscription_id=subscription_id
                    )
                )
            case ScrollOutcome.IGNORE:
                pass  # the pending request's answer is coming
            case ScrollOutcome.REPLAY_FAILURE | ScrollOutcome.BUSY | ScrollOutcome.UNAVAILABLE:
                error = _SCROLL_REFUSALS[outcome]
                self._link.send(
                    Failure(error=error, subscription_id=subscription_id, request_id=request_id)
                )
            case _:
                assert_never(outcome)

    def _on_history(self, message: History, now: float) -> None:
        lease = self._lease_for(message.subscription_id)
        answer = lease.history.request(message, now)
        match answer:
            case HistoryPage():
                self._link.send(answer)
            case HistoryStep.CAPTURE:
                self._link.emit(HistoryRequested(lease.subscription_id, lease.pane_id))
            case HistoryStep.WAIT:
                pass  # answered in request order, after the capture under way
            case _:
                assert_never(answer)

    def _on_command(self, message: Command) -> None:
        name = type(message.command_request.request.command).NAME
        if name in PANE_TARGETED_COMMANDS:
            if message.subscription_id is None:
                raise ProtocolViolation(f"{name} without a subscription")
            self._lease_for(message.subscription_id)
        elif self.subscribed:
            if name != "list" or message.subscription_id != self.held().subscription_id:
                raise ProtocolViolation(f"{name} from a subscribed connection")
        elif message.subscription_id is not None:
            raise ProtocolViolation("command names a subscription this connection does not hold")
        if self.commands.admit(message):
            self._link.emit(CommandRequested(message))

    # ------------------------------------------------------------ host decisions

    def send_panes(
        self, panes: tuple[PaneDescriptor, ...], capabilities: tuple[str, ...], host_run_id: UUID
    ) -> None:
        """Answer ``list``."""
        self._link.send(Panes(panes=panes, capabilities=capabilities, host_run_id=host_run_id))

    def grant(
        self, lease: Lease, *, host_run_id: UUID, first_capture: Capture | None, now: float
    ) -> int | None:
        """Hold ``lease`` (the table has just entered ``SUBSCRIBED``): ``subscribed``,
        then the first frame if there is one."""
        self._lease = lease
        self._link.send(
            Subscribed(
                pane_id=lease.pane_id,
                subscription_id=lease.subscription_id,
                host_run_id=host_run_id,
            )
        )
        if first_capture is None:
            return None
        return self.offer_frame(first_capture, now)

    def offer_frame(self, capture: Capture, now: float) -> int | None:
        """Send ``capture`` if the lease's gate and scroll allow it; its sequence or ``None``.

        Sends, in order: the frame's companions (``viewport``, ``scrollState``,
        as opted in), the frame, then ``scrollResult`` when this frame completes
        a pending scroll.
        """
        lease = self.held()
        may_send, force = lease.scroll.frame_policy(now)
        if not may_send:
            return None
        key = frame_key(capture, lease.opt_ins)
        if not lease.gate.would_send(key, force=force):
            return None
        sequence = lease.gate.next_sequence
        try:
            frame = lease.frame_packet(capture, sequence)
        except LocalProtocolError as exc:
            self._link.close(f"cannot send frame: {exc}")
            return None
        lease.gate.commit(key)
        for message in lease.companions(capture, sequence):
            self._link.send(message)
        self._link.send_bytes(frame)
        completed = lease.scroll.completes_with(sequence)
        if completed is not None:
            self._link.send(
                ScrollResult(
                    request_id=completed, sequence=sequence, subscription_id=lease.subscription_id
                )
            )
        return sequence

    def scroll_failed(self, request_id: UUID) -> None:
        """The scroll could not be applied: a remembered ``SCROLL_UNAVAILABLE``."""
        lease = self.held()
        lease.scroll.failed(request_id)
        self._link.send(
            Failure(
                error=SCROLL_COULD_NOT,
                subscription_id=lease.subscription_id,
                request_id=request_id,
            )
        )

    def history_done(self, snapshot: HistorySnapshot | None) -> bool:
        """The capture under way ended with ``snapshot`` (``None``: it failed).

        Sends ``HISTORY_UNAVAILABLE`` for a failed one, else the page before the request's offset
        (the newest without one; out of range closes), then the answers to the requests that
        waited. Returns True when one of them asks for another snapshot.
        """
        lease = self.held()
        if snapshot is None:
            self._link.send(
                Failure(error=HISTORY_UNAVAILABLE, subscription_id=lease.subscription_id)
            )
        try:
            for page in lease.history.finish(snapshot):
                self._link.send(page)
        except RemoteProtocolError as exc:
            self._link.close(f"protocol error: {exc}")
        return lease.history.capturing and not self._link.is_closed

    def send_command_result(self, request_id: UUID, response: JSONValue) -> None:
        """Answer the command in flight (or a receipt query)."""
        self.commands.finish(request_id)
        self._link.send(
            CommandResult(
                command_response=CommandResponse(request_id=request_id, response=response)
            )
        )


_SCROLL_REFUSALS = {
    ScrollOutcome.REPLAY_FAILURE: SCROLL_COULD_NOT,
    ScrollOutcome.BUSY: SCROLL_BUSY,
    ScrollOutcome.UNAVAILABLE: SCROLL_CANNOT,
}
