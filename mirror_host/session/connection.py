"""One Prowl connection as a pure state machine (docs/protocol.md §4, §8).

Theory of operation
-------------------

A :class:`Session` is created when TLS is up. It owns the packet decoder, the
authentication phase, the heartbeat and idle timers, the outbound byte queue and
(after login) the connection's one :class:`~mirror_host.session.lease.Lease`.

Inputs: ``receive_data(bytes, now)``, ``handle_timer(now)`` and the host's
decisions (``accept_authentication``, ``grant_lease``, ``offer_frame`` …).
Outputs: ``next_event()`` and ``data_to_send()``. Nothing here reads a clock,
touches a socket or awaits. Whoever drives the session may register a *waker*
(:meth:`set_waker`): it is called whenever bytes are queued or the session
closes, so a decision taken anywhere (a sampler's frame, a takeover, a command
result) wakes the connection's writer without the caller having to.

Requests that need a pane source (a subscribe's first capture, a scroll, a new
history snapshot) are only *announced* as events; the host answers them later,
from other tasks, while this session goes on reading, answering pings and
taking acknowledgements. The session keeps the order Prowl's clients check:
history requests are answered in the order they came, so paging requests that
arrive while a snapshot is being captured wait behind it.

Phases::

    AUTHENTICATING --authenticate--> VERIFYING --host accepts--> AUTHENTICATED
          |        --pair (pair identity)--> PAIRING --host stored it--> CLOSED (after `paired`)
          +--anything else / timeout / bad proof--> CLOSED

While VERIFYING or PAIRING the session decodes nothing further: packets that
arrive meanwhile wait in the decoder until the host has decided.

Rules enforced here, so the host never re-checks them:

* before login only ``authenticate``/``pair`` (and ``ping``/``pong``) are
  accepted; ``pair`` only on a ``pair``-identity TLS session and
  ``authenticate`` only for the device whose key made the session;
* every ``ping`` is answered with ``pong`` in any phase; a ``ping`` goes out
  every 2 s; 8 s without any inbound packet closes the connection;
* 5 s after ``challenge`` without login closes the connection;
* more than 16 MiB queued outbound closes the connection;
* after login, each lease-bound message must carry the current lease, input
  only on ``vt-v1`` and 1 … 65,536 bytes, one ``subscribe`` per connection, one
  command in flight, at most 64 history requests waiting for a capture.

Any violation closes the connection without a message, as Prowl's host does.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable
from uuid import UUID

from mirror_host.auth.pairing import PAIR_IDENTITY
from mirror_host.control import (
    PANE_TARGETED_COMMANDS,
    Acknowledge,
    Authenticate,
    Authenticated,
    Challenge,
    Command,
    CommandReceipt,
    CommandResponse,
    CommandResult,
    ControlMessage,
    Ended,
    EndReason,
    Failure,
    History,
    HistoryPage,
    Input,
    ListPanes,
    Pair,
    Paired,
    PaneDescriptor,
    Panes,
    Ping,
    Pong,
    Refresh,
    Representation,
    Scroll,
    ScrollResult,
    Subscribe,
    Subscribed,
    decode_control,
    encode_control,
)
from mirror_host.control.swiftjson import JSONValue
from mirror_host.errors import (
    LocalProtocolError,
    ProtocolViolation,
    RemoteProtocolError,
)
from mirror_host.panes.model import Capture
from mirror_host.session.events import (
    AuthenticateRequested,
    CommandRequested,
    ConnectionClosed,
    Event,
    FrameAcknowledged,
    HistoryRequested,
    InputReceived,
    ListRequested,
    PairRequested,
    ReceiptRequested,
    RefreshRequested,
    ScrollRequested,
    SubscribeRequested,
)
from mirror_host.session.history import MAX_WAITING_HISTORY_REQUESTS, HistorySnapshot, HistoryStep
from mirror_host.session.lease import NO_FRAMES, FrameSchedule, Lease, ScrollOutcome, frame_key
from mirror_host.wire import ControlPacket, PacketDecoder, encode_packet

__all__ = [
    "AUTH_TIMEOUT_SECONDS",
    "HEARTBEAT_SECONDS",
    "IDLE_TIMEOUT_SECONDS",
    "MAX_INPUT_BYTES",
    "MAX_OUTBOUND_BYTES",
    "MAX_WAITING_HISTORY_REQUESTS",
    "FrameSchedule",
    "Phase",
    "Session",
]

HEARTBEAT_SECONDS = 2.0
IDLE_TIMEOUT_SECONDS = 8.0
AUTH_TIMEOUT_SECONDS = 5.0
MAX_OUTBOUND_BYTES = 16 * 1024 * 1024
MAX_INPUT_BYTES = 65_536

PANE_BUSY = "PANE_BUSY: This pane already has a remote mirror."
HISTORY_UNAVAILABLE = "HISTORY_UNAVAILABLE: Cannot capture history within the supported limits."
SCROLL_BUSY = "SCROLL_BUSY: Wait for the current scroll to finish."
SCROLL_CANNOT = "SCROLL_UNAVAILABLE: Host cannot scroll this pane."
SCROLL_COULD_NOT = "SCROLL_UNAVAILABLE: Host could not scroll this pane."


class Phase(enum.Enum):
    """Where a connection is in its life."""

    AUTHENTICATING = "authenticating"
    #: ``authenticate`` received; further packets wait for the host's verdict.
    VERIFYING = "verifying"
    #: ``pair`` received; the host is storing the new device.
    PAIRING = "pairing"
    AUTHENTICATED = "authenticated"
    CLOSED = "closed"


class Session:
    """The protocol state of one connection. See the module docstring."""

    def __init__(
        self,
        *,
        host_id: UUID,
        identity: str,
        nonce: bytes,
        now: float,
    ) -> None:
        self.host_id = host_id
        #: The PSK identity that made this TLS session: ``pair`` or a device UUID.
        self.identity = identity
        self.nonce = nonce
        self.phase = Phase.AUTHENTICATING
        #: The device this connection logged in as (after ``accept_authentication``).
        self.device_id: UUID | None = None
        self.lease: Lease | None = None
        self._decoder = PacketDecoder()
        self._events: deque[Event] = deque()
        self._outbound: list[bytes] = []
        self._queued_bytes = 0
        self._in_flight_bytes = 0
        self._closed_event_emitted = False
        self._close_reason = ""
        self._close_is_failure = False
        self._flush_on_close = False
        self._subscribe_pending = False
        self._command_in_flight: Command | None = None
        self._waker: Callable[[], None] | None = None
        self._next_ping = now + HEARTBEAT_SECONDS
        self._idle_deadline = now + IDLE_TIMEOUT_SECONDS
        self._auth_deadline: float | None = now + AUTH_TIMEOUT_SECONDS
        self._queue(Challenge(host_id=host_id, nonce=nonce))

    # ------------------------------------------------------------ state queries

    @property
    def is_closed(self) -> bool:
        """True once the session decided to end (bytes may still be queued)."""
        return self.phase is Phase.CLOSED

    @property
    def flushes_on_close(self) -> bool:
        """True when the session closed after a last message that must be sent."""
        return self._flush_on_close

    @property
    def outbound_bytes(self) -> int:
        """Bytes queued or handed to the transport but not yet confirmed sent."""
        return self._queued_bytes + self._in_flight_bytes

    def set_waker(self, waker: Callable[[], None] | None) -> None:
        """Call ``waker`` whenever bytes are queued or the session closes."""
        self._waker = waker

    def _wake(self) -> None:
        if self._waker is not None:
            self._waker()

    # ------------------------------------------------------------ input

    def receive_data(self, data: bytes, now: float) -> None:
        """Feed bytes from the peer; ``b""`` means the peer closed its side."""
        if self.phase is Phase.CLOSED:
            return
        if not data:
            self._close("peer closed the connection")
            return
        self._idle_deadline = now + IDLE_TIMEOUT_SECONDS
        try:
            self._decoder.feed(data)
        except RemoteProtocolError as exc:
            self._close(f"protocol error: {exc}", is_failure=self._before_login())
            return
        self._process(now)

    def _process(self, now: float) -> None:
        try:
            while self.phase in (Phase.AUTHENTICATING, Phase.AUTHENTICATED):
                packet = self._decoder.next_packet()
                if packet is None:
                    break
                if not isinstance(packet, ControlPacket):
                    raise ProtocolViolation("clients may not send frames")
                self._handle(decode_control(packet.body), now)
        except RemoteProtocolError as exc:
            self._close(f"protocol error: {exc}", is_failure=self._before_login())

    def next_event(self) -> Event | None:
        """The next event for the host, or ``None``."""
        if self._events:
            return self._events.popleft()
        if self.phase is Phase.CLOSED and not self._closed_event_emitted:
            self._closed_event_emitted = True
            return ConnectionClosed(self._close_reason, self._close_is_failure)
        return None

    def data_to_send(self) -> bytes:
        """Drain the outbound queue. Call :meth:`confirm_sent` once it is written."""
        if not self._outbound:
            return b""
        data = b"".join(self._outbound)
        self._outbound.clear()
        self._queued_bytes = 0
        self._in_flight_bytes += len(data)
        return data

    def confirm_sent(self, count: int) -> None:
        """The transport wrote ``count`` bytes previously taken from :meth:`data_to_send`."""
        self._in_flight_bytes = max(0, self._in_flight_bytes - count)

    # ------------------------------------------------------------ time

    def get_timer(self) -> float | None:
        """The next moment :meth:`handle_timer` must run, or ``None`` when closed."""
        if self.phase is Phase.CLOSED:
            return None
        deadlines = [self._next_ping, self._idle_deadline]
        if self._auth_deadline is not None:
            deadlines.append(self._auth_deadline)
        return min(deadlines)

    def handle_timer(self, now: float) -> None:
        """Fire whatever is due at ``now``: idle close, auth timeout, heartbeat."""
        if self.phase is Phase.CLOSED:
            return
        if now >= self._idle_deadline:
            self._close(f"no packet from the peer for {IDLE_TIMEOUT_SECONDS:g} s")
            return
        if self._auth_deadline is not None and now >= self._auth_deadline:
            self._close(f"not authenticated within {AUTH_TIMEOUT_SECONDS:g} s")
            return
        if now >= self._next_ping:
            self._queue(Ping())
            # Skip missed beats rather than sending a burst after a stall.
            while self._next_ping <= now:
                self._next_ping += HEARTBEAT_SECONDS

    # ------------------------------------------------------------ host decisions: auth

    def accept_authentication(self, device_id: UUID, now: float) -> None:
        """The proof was right: log the connection in as ``device_id``."""
        self._require(Phase.VERIFYING)
        self.phase = Phase.AUTHENTICATED
        self.device_id = device_id
        self._auth_deadline = None
        self._queue(Authenticated(host_id=self.host_id))
        self._process(now)  # packets that arrived while the host was deciding

    def send_paired(self, device_id: UUID, key: bytes) -> None:
        """The new device is stored: hand over its credential and close."""
        self._require(Phase.PAIRING)
        self._queue(Paired(host_id=self.host_id, device_id=device_id, key=key))
        self._close("paired", flush=True)

    def reject(self, reason: str) -> None:
        """Authentication or pairing failed: close silently, count a failure."""
        self._close(reason, is_failure=True)

    def close(self, reason: str) -> None:
        """Close without a message (the host's own decision)."""
        self._close(reason)

    def revoke(self) -> None:
        """The device was revoked: close at once, nothing sent."""
        self._close("device access was revoked")

    # ------------------------------------------------------------ host decisions: panes

    def send_panes(
        self, panes: tuple[PaneDescriptor, ...], capabilities: tuple[str, ...], host_run_id: UUID
    ) -> None:
        """Answer ``list``."""
        self._queue(Panes(panes=panes, capabilities=capabilities, host_run_id=host_run_id))

    def send_pane_busy(self) -> None:
        """Refuse an ``ifFree`` subscribe; the connection stays open."""
        self._subscribe_pending = False
        self._queue(Failure(error=PANE_BUSY))

    def subscribe_failed(self, reason: str) -> None:
        """The pane is unknown or its first capture failed: close silently."""
        self._subscribe_pending = False
        self._close(reason)

    def grant_lease(
        self, lease: Lease, *, host_run_id: UUID, first_capture: Capture | None, now: float
    ) -> int | None:
        """Take ``lease`` (see :meth:`Lease.for_request`), send ``subscribed`` and,
        if there is one, the first frame; return that frame's sequence."""
        self._require(Phase.AUTHENTICATED)
        self.lease = lease
        self._subscribe_pending = False
        self._queue(
            Subscribed(
                pane_id=lease.pane_id,
                subscription_id=lease.subscription_id,
                host_run_id=host_run_id,
            )
        )
        if first_capture is None:
            return None
        return self.offer_frame(first_capture, now)

    def send_ended(self, reason: EndReason) -> None:
        """End the lease (taken over, pane closed, host stopping) and close."""
        if self.phase is Phase.CLOSED:
            return
        self._queue(Ended(reason=reason))
        self._close(f"ended: {reason.value}", flush=True)

    def frame_schedule(self, now: float) -> FrameSchedule:
        """What the lease's sampler should do now (see :class:`FrameSchedule`)."""
        lease = self.lease
        if lease is None or self.phase is not Phase.AUTHENTICATED:
            return NO_FRAMES
        return lease.frame_schedule(now)

    def offer_frame(self, capture: Capture, now: float) -> int | None:
        """Send ``capture`` if the gate allows it; return its sequence or ``None``.

        Sends, in order: ``viewport`` (opted-in VT leases; with the styled
        archive for leases that also opted into that), ``scrollState``
        (opted-in leases), the frame, then ``scrollResult`` when this frame
        completes a pending scroll.
        """
        lease = self.lease
        if lease is None or self.phase is not Phase.AUTHENTICATED:
            return None
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
            self._close(f"cannot send frame: {exc}")
            return None
        lease.gate.commit(key)
        for message in lease.companions(capture, sequence):
            self._queue(message)
        self._queue_bytes(frame)
        completed = lease.scroll.completes_with(sequence)
        if completed is not None:
            self._queue(
                ScrollResult(
                    request_id=completed, sequence=sequence, subscription_id=lease.subscription_id
                )
            )
        return sequence

    def scroll_applied(self, request_id: UUID, now: float) -> None:
        """The host scrolled the pane; frames settle for 200 ms."""
        if self.lease is not None:
            self.lease.scroll.applied(request_id, now)

    def scroll_failed(self, request_id: UUID) -> None:
        """The scroll could not be applied: a remembered ``SCROLL_UNAVAILABLE``."""
        lease = self.lease
        if lease is None:
            return
        lease.scroll.failed(request_id)
        self._queue(
            Failure(
                error=SCROLL_COULD_NOT,
                subscription_id=lease.subscription_id,
                request_id=request_id,
            )
        )

    def history_captured(
        self, history_id: UUID, text: str, *, truncated: bool, captured_at: float
    ) -> bool:
        """Freeze a new snapshot (replacing any previous one) and send its newest page.

        Then answer the history requests that waited behind the capture, in
        order. Returns True when one of them asks for another new snapshot: the
        host captures again and calls this (or :meth:`history_unavailable`) again.
        """
        snapshot = HistorySnapshot.build(
            history_id, text, captured_at=captured_at, source_truncated=truncated
        )
        return self._history_done(snapshot)

    def history_unavailable(self) -> bool:
        """History cannot be captured: a non-fatal ``HISTORY_UNAVAILABLE``.

        Returns as :meth:`history_captured` does.
        """
        return self._history_done(None)

    def _history_done(self, snapshot: HistorySnapshot | None) -> bool:
        lease = self.lease
        if lease is None or self.phase is not Phase.AUTHENTICATED:
            return False
        if snapshot is None:
            self._queue(Failure(error=HISTORY_UNAVAILABLE, subscription_id=lease.subscription_id))
        try:
            for page in lease.history.finish(snapshot):
                self._queue(page)
        except RemoteProtocolError as exc:
            self._close(f"protocol error: {exc}")
        return lease.history.capturing and not self.is_closed

    def send_command_result(self, request_id: UUID, response: JSONValue) -> None:
        """Answer the command in flight (or a receipt query)."""
        in_flight = self._command_in_flight
        if in_flight is not None and in_flight.command_request.request_id == request_id:
            self._command_in_flight = None
        self._queue(
            CommandResult(
                command_response=CommandResponse(request_id=request_id, response=response)
            )
        )

    # ------------------------------------------------------------ internals

    def _before_login(self) -> bool:
        return self.phase in (Phase.AUTHENTICATING, Phase.VERIFYING, Phase.PAIRING)

    def _require(self, phase: Phase) -> None:
        if self.phase is not phase:
            raise LocalProtocolError(f"session is {self.phase.value}, not {phase.value}")

    def _queue(self, message: ControlMessage) -> None:
        self._queue_bytes(encode_packet(ControlPacket(encode_control(message))))

    def _queue_bytes(self, data: bytes) -> None:
        if self.phase is Phase.CLOSED:
            return  # nothing follows the last word
        if self.outbound_bytes + len(data) > MAX_OUTBOUND_BYTES:
            self._close("receiver too slow: more than 16 MiB queued")
            return
        self._outbound.append(data)
        self._queued_bytes += len(data)
        self._wake()

    def _close(self, reason: str, *, is_failure: bool = False, flush: bool = False) -> None:
        """Enter CLOSED. Without ``flush`` nothing queued is sent (a silent close)."""
        if self.phase is Phase.CLOSED:
            return
        self.phase = Phase.CLOSED
        self._close_reason = reason
        self._close_is_failure = is_failure
        self._flush_on_close = flush
        self._events.clear()
        if not flush:
            self._outbound.clear()
            self._queued_bytes = 0
        self._wake()

    def _handle(self, message: ControlMessage, now: float) -> None:
        if isinstance(message, Ping):
            self._queue(Pong())
            return
        if isinstance(message, Pong):
            return
        if self.phase is Phase.AUTHENTICATING:
            self._handle_login(message)
        else:
            self._handle_authenticated(message, now)

    def _handle_login(self, message: ControlMessage) -> None:
        if isinstance(message, Authenticate):
            if self.identity == PAIR_IDENTITY:
                raise ProtocolViolation("authenticate on a pairing connection")
            if str(message.device_id).upper() != self.identity:
                raise ProtocolViolation("authenticate names another device than the TLS identity")
            self.phase = Phase.VERIFYING
            self._events.append(AuthenticateRequested(message.device_id, message.proof))
            return
        if isinstance(message, Pair):
            if self.identity != PAIR_IDENTITY:
                raise ProtocolViolation("pair on a device connection")
            self.phase = Phase.PAIRING
            self._auth_deadline = None
            self._events.append(PairRequested(message.name, message.proof))
            return
        raise ProtocolViolation(f"{message.CASE} before authentication")

    def _handle_authenticated(self, message: ControlMessage, now: float) -> None:
        handler = _AUTHENTICATED_HANDLERS.get(type(message))
        if handler is None:
            raise ProtocolViolation(f"{message.CASE} is not accepted from a client")
        handler(self, message, now)

    def _lease_for(self, subscription_id: UUID) -> Lease:
        lease = self.lease
        if lease is None:
            raise ProtocolViolation("lease-bound message without a subscription")
        if subscription_id != lease.subscription_id:
            raise ProtocolViolation("message names another subscription")
        return lease

    def _on_list(self, message: ControlMessage, now: float) -> None:
        self._events.append(ListRequested())

    def _on_subscribe(self, message: ControlMessage, now: float) -> None:
        assert isinstance(message, Subscribe)
        if self.lease is not None or self._subscribe_pending:
            raise ProtocolViolation("a second subscribe on one connection")
        self._subscribe_pending = True
        self._events.append(SubscribeRequested(message))

    def _on_acknowledge(self, message: ControlMessage, now: float) -> None:
        assert isinstance(message, Acknowledge)
        lease = self._lease_for(message.subscription_id)
        lease.gate.acknowledge(message.sequence)
        self._events.append(FrameAcknowledged(lease.subscription_id))

    def _on_refresh(self, message: ControlMessage, now: float) -> None:
        assert isinstance(message, Refresh)
        lease = self._lease_for(message.subscription_id)
        lease.gate.refresh()
        self._events.append(RefreshRequested(lease.subscription_id))

    def _on_input(self, message: ControlMessage, now: float) -> None:
        assert isinstance(message, Input)
        lease = self._lease_for(message.subscription_id)
        if lease.representation is not Representation.VT:
            raise ProtocolViolation("input on a text-v1 subscription")
        if not 1 <= len(message.data) <= MAX_INPUT_BYTES:
            raise ProtocolViolation(f"input of {len(message.data)} bytes (1 … 65536 allowed)")
        self._events.append(InputReceived(lease.subscription_id, lease.pane_id, message.data))

    def _on_scroll(self, message: ControlMessage, now: float) -> None:
        assert isinstance(message, Scroll)
        lease = self._lease_for(message.subscription_id)
        outcome = lease.scroll.request(message.request_id, message.direction)
        sub = lease.subscription_id
        if outcome is ScrollOutcome.APPLY:
            self._events.append(
                ScrollRequested(sub, lease.pane_id, message.request_id, message.direction)
            )
        elif outcome is ScrollOutcome.REPLAY_RESULT:
            result = lease.scroll.latest_result
            assert result is not None
            self._queue(ScrollResult(request_id=result[0], sequence=result[1], subscription_id=sub))
        elif outcome is ScrollOutcome.REPLAY_FAILURE:
            self._queue(
                Failure(error=SCROLL_COULD_NOT, subscription_id=sub, request_id=message.request_id)
            )
        elif outcome is ScrollOutcome.BUSY:
            self._queue(
                Failure(error=SCROLL_BUSY, subscription_id=sub, request_id=message.request_id)
            )
        elif outcome is ScrollOutcome.UNAVAILABLE:
            self._queue(
                Failure(error=SCROLL_CANNOT, subscription_id=sub, request_id=message.request_id)
            )

    def _on_history(self, message: ControlMessage, now: float) -> None:
        assert isinstance(message, History)
        lease = self._lease_for(message.subscription_id)
        answer = lease.history.request(message)
        if isinstance(answer, HistoryPage):
            self._queue(answer)
        elif answer is HistoryStep.CAPTURE:
            self._events.append(HistoryRequested(lease.subscription_id, lease.pane_id))

    def _on_command(self, message: ControlMessage, now: float) -> None:
        assert isinstance(message, Command)
        request = message.command_request
        name = type(request.request.command).NAME
        lease = self.lease
        if name in PANE_TARGETED_COMMANDS:
            if message.subscription_id is None:
                raise ProtocolViolation(f"{name} without a subscription")
            self._lease_for(message.subscription_id)
        elif lease is not None:
            if name != "list" or message.subscription_id != lease.subscription_id:
                raise ProtocolViolation(f"{name} from a subscribed connection")
        elif message.subscription_id is not None:
            raise ProtocolViolation("command names a subscription this connection does not hold")
        in_flight = self._command_in_flight
        if in_flight is not None:
            if in_flight == message:
                return  # an identical duplicate: the original answer will come
            raise ProtocolViolation("a second command while one is in flight")
        self._command_in_flight = message
        self._events.append(CommandRequested(message))

    def _on_receipt(self, message: ControlMessage, now: float) -> None:
        assert isinstance(message, CommandReceipt)
        self._lease_for(message.subscription_id)
        self._events.append(ReceiptRequested(message))


_Handler = Callable[[Session, ControlMessage, float], None]

_AUTHENTICATED_HANDLERS: dict[type, _Handler] = {
    ListPanes: Session._on_list,
    Subscribe: Session._on_subscribe,
    Acknowledge: Session._on_acknowledge,
    Refresh: Session._on_refresh,
    Input: Session._on_input,
    Scroll: Session._on_scroll,
    History: Session._on_history,
    Command: Session._on_command,
    CommandReceipt: Session._on_receipt,
}
