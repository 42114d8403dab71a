"""One Prowl connection as a pure state machine (docs/protocol.md §4, §8).

Theory of operation
-------------------

A :class:`Session` is created when TLS is up and is the one object the host
drives. Inputs: ``receive_data(bytes, now)``, ``handle_timer(now)`` and the
host's decisions (``accept_authentication``, ``grant_lease``, ``offer_frame``
…). Outputs: ``next_event()`` and ``data_to_send()``. Nothing here reads a
clock, touches a socket or awaits. A *waker* (:meth:`set_waker`) is called
whenever bytes are queued or the session closes, so a decision taken in any
task wakes the connection's writer without the caller having to.

This module only joins three parts, as wsproto joins its handshake and its
connection: the :class:`~mirror_host.session.link.Link` every state shares
(decoder, bounded outbound queue, events, heartbeat, idle deadline, the end),
the :class:`~mirror_host.session.login.Login` (who may log in, by when) and,
once logged in, :class:`~mirror_host.session.logged_in.LoggedIn` (requests,
the lease, the command in flight). It moves the state only by the table in
:mod:`mirror_host.session.states`; the state itself is one value, the link's
:attr:`~mirror_host.session.link.Link.phase`, which every part asks (is it
closed, does it hold its lease) and none keeps a copy of.

Requests that need a pane source (a subscribe's first capture, a scroll, a new
history snapshot) are only *announced* as events; the host answers them later,
from other tasks, while the session goes on reading, answering pings and
taking acknowledgements. Any violation closes the connection without a
message, as Prowl's host does.
"""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

from mirror_host.capture.values import Capture
from mirror_host.control import (
    Authenticate,
    Authenticated,
    ControlMessage,
    Ended,
    EndReason,
    Failure,
    Pair,
    Paired,
    PaneDescriptor,
    Ping,
    Pong,
    decode_control,
)
from mirror_host.control.swiftjson import JSONValue
from mirror_host.errors import LocalProtocolError, ProtocolViolation, RemoteProtocolError
from mirror_host.limits import AUTH_TIMEOUT_SECONDS, IDLE_TIMEOUT_SECONDS
from mirror_host.session.events import Event
from mirror_host.session.history import HistorySnapshot
from mirror_host.session.lease import NO_FRAMES, FrameSchedule, Lease
from mirror_host.session.link import Link
from mirror_host.session.logged_in import PANE_BUSY, LoggedIn
from mirror_host.session.login import PAIRING_NOT_SAVED, Login
from mirror_host.session.states import (
    CLIENT_TRANSITIONS,
    HOST_TRANSITIONS,
    LOGIN_DEADLINE_PHASES,
    LOGIN_PHASES,
    Decision,
    Phase,
    accepted,
    refusal,
)
from mirror_host.wire import ControlPacket

__all__ = [
    "FrameSchedule",
    "Phase",
    "Session",
]


class Session:
    """The protocol state of one connection. See the module docstring."""

    def __init__(self, *, host_id: UUID, identity: str, nonce: bytes, now: float) -> None:
        self.host_id = host_id
        #: The challenge's nonce, which a login proof signs.
        self.nonce = nonce
        self._link = Link(now)
        self._login = Login(host_id=host_id, identity=identity, nonce=nonce, now=now)
        self._logged_in: LoggedIn | None = None
        self._link.send(self._login.challenge)

    # ------------------------------------------------------------ state queries

    @property
    def phase(self) -> Phase:
        """The current state of the table."""
        return self._link.phase

    @property
    def device_id(self) -> UUID | None:
        """The device this connection logged in as (after ``accept_authentication``)."""
        return None if self._logged_in is None else self._logged_in.device_id

    @property
    def lease(self) -> Lease | None:
        """The connection's one lease while it holds it (``SUBSCRIBED``), else ``None``."""
        logged_in = self._subscribed()
        return None if logged_in is None else logged_in.held()

    @property
    def is_closed(self) -> bool:
        """True once the session decided to end (bytes may still be queued)."""
        return self._link.phase is _CLOSED

    @property
    def flushes_on_close(self) -> bool:
        """True when the session closed after a last message that must be sent."""
        link = self._link
        return link.phase is _CLOSED and link.flushes_on_close

    @property
    def outbound_bytes(self) -> int:
        """Bytes queued or handed to the transport but not yet confirmed sent."""
        return self._link.outbound_bytes

    def set_waker(self, waker: Callable[[], None] | None) -> None:
        """Call ``waker`` whenever bytes are queued or the session closes."""
        self._link.set_waker(waker)

    # ------------------------------------------------------------ input and output

    def receive_data(self, data: bytes, now: float) -> None:
        """Feed bytes from the peer; ``b""`` means the peer closed its side."""
        if self.is_closed:
            return
        if not data:
            self._link.close("peer closed the connection")
            return
        try:
            self._link.feed(data, now)
        except RemoteProtocolError as exc:
            self._violation(exc)
            return
        self._process(now)

    def next_event(self) -> Event | None:
        """The next event for the host, or ``None``."""
        return self._link.next_event()

    def data_to_send(self) -> bytes:
        """Drain the outbound queue. Call :meth:`confirm_sent` once it is written."""
        return self._link.data_to_send()

    def confirm_sent(self, count: int) -> None:
        """The transport wrote ``count`` bytes previously taken from :meth:`data_to_send`."""
        self._link.confirm_sent(count)

    def _process(self, now: float) -> None:
        # Rule 3 of the table: a state that accepts nothing reads nothing.
        try:
            while CLIENT_TRANSITIONS[self.phase]:
                packet = self._link.next_packet()
                if packet is None:
                    break
                if not isinstance(packet, ControlPacket):
                    raise ProtocolViolation("clients may not send frames")
                self._handle(decode_control(packet.body), now)
        except RemoteProtocolError as exc:
            self._violation(exc)

    def _handle(self, message: ControlMessage, now: float) -> None:
        link = self._link
        phase = link.phase
        if not accepted(message, phase):
            raise ProtocolViolation(refusal(phase, message))
        link.phase = CLIENT_TRANSITIONS[phase][type(message)]
        match message:
            case Ping():
                self._link.send(Pong())
            case Pong():
                pass
            case Authenticate() | Pair():
                self._link.emit(self._login.receive(message))
            case _:  # what is left is a SessionMessage: mypy checks the call
                logged_in = self._logged_in
                assert logged_in is not None, "the table admits these only after login"
                logged_in.receive(message, now)

    def _violation(self, exc: RemoteProtocolError) -> None:
        self._link.close(f"protocol error: {exc}", is_failure=self._link.phase in LOGIN_PHASES)

    # ------------------------------------------------------------ time

    def get_timer(self) -> float | None:
        """The next moment :meth:`handle_timer` must run, or ``None`` when closed."""
        phase = self.phase
        if phase is Phase.CLOSED:
            return None
        if phase in LOGIN_DEADLINE_PHASES:
            return min(self._link.deadline(), self._login.deadline)
        return self._link.deadline()

    def handle_timer(self, now: float) -> None:
        """Fire whatever is due at ``now``: idle close, login deadline, heartbeat."""
        phase = self.phase
        if phase is Phase.CLOSED:
            return
        if now >= self._link.idle_deadline:
            self._link.close(f"no packet from the peer for {IDLE_TIMEOUT_SECONDS:g} s")
        elif phase in LOGIN_DEADLINE_PHASES and now >= self._login.deadline:
            self._link.close(f"not authenticated within {AUTH_TIMEOUT_SECONDS:g} s")
        else:
            self._link.heartbeat(now)

    # ------------------------------------------------------------ host decisions: the table

    def _decide(self, decision: Decision) -> bool:
        """Move by the host's table; False (a no-op) once closed.

        Raises:
            LocalProtocolError: the current state does not allow ``decision``.
        """
        phase = self._link.phase
        if phase is _CLOSED:
            return False
        target = HOST_TRANSITIONS.get(phase, {}).get(decision)
        if target is None:
            raise LocalProtocolError(f"{decision.value} while the session is {phase.value}")
        if target is not _CLOSED:  # the close that follows the last message moves it there
            self._link.phase = target
        return True

    def accept_authentication(self, device_id: UUID, now: float) -> None:
        """The proof was right: log the connection in as ``device_id``."""
        if self._decide(Decision.ACCEPT):
            self._logged_in = LoggedIn(self._link, device_id=device_id)
            self._link.send(Authenticated(host_id=self.host_id))
            self._process(now)  # packets that arrived while the host was deciding

    def send_paired(self, device_id: UUID, key: bytes) -> None:
        """The new device is stored: hand over its credential and close."""
        if self._decide(Decision.PAIRED):
            self._link.send(Paired(host_id=self.host_id, device_id=device_id, key=key))
            self._link.close("paired", flush=True)

    def pairing_failed(self, reason: str) -> None:
        """The new device could not be stored (``reason``, for the log): send the
        ``failure`` the phone shows, then close. Not counted: the host failed."""
        if self._decide(Decision.PAIRING_FAILED):
            self._link.send(Failure(error=PAIRING_NOT_SAVED))
            self._link.close(reason, flush=True)

    def reject(self, reason: str) -> None:
        """Authentication or pairing failed: close silently, count a failure."""
        if self._decide(Decision.REJECT):
            self._link.close(reason, is_failure=True)

    def close(self, reason: str) -> None:
        """Close without a message (the host's own decision, in any state)."""
        self._link.close(reason)

    def revoke(self) -> None:
        """The device was revoked: close at once, nothing sent."""
        self._link.close("device access was revoked")

    def send_pane_busy(self) -> None:
        """Refuse an ``ifFree`` subscribe; the connection stays open."""
        if self._decide(Decision.PANE_BUSY):
            self._link.send(Failure(error=PANE_BUSY))

    def subscribe_failed(self, reason: str) -> None:
        """The pane is unknown or its first capture failed: close silently."""
        if self._decide(Decision.SUBSCRIBE_FAILED):
            self._link.close(reason)

    def grant_lease(
        self, lease: Lease, *, host_run_id: UUID, first_capture: Capture | None, now: float
    ) -> int | None:
        """Take ``lease`` (see :meth:`Lease.for_request`), send ``subscribed`` and,
        if there is one, the first frame; return that frame's sequence."""
        if not self._decide(Decision.GRANT):
            return None
        assert self._logged_in is not None
        return self._logged_in.grant(
            lease, host_run_id=host_run_id, first_capture=first_capture, now=now
        )

    def send_ended(self, reason: EndReason) -> None:
        """End the lease (taken over, pane closed) or, with ``hostStopped``, the
        logged-in session (with or without a lease), and close after ``ended``."""
        stopped = reason is EndReason.HOST_STOPPED
        if self._decide(Decision.HOST_STOPPED if stopped else Decision.ENDED):
            self._link.send(Ended(reason=reason))
            self._link.close(f"ended: {reason.value}", flush=True)

    def host_stopped(self) -> None:
        """The host is stopping: ``ended hostStopped`` where the table allows it (once
        logged in), else (before login) a close without a message."""
        if Decision.HOST_STOPPED in HOST_TRANSITIONS.get(self.phase, {}):
            self.send_ended(EndReason.HOST_STOPPED)
        else:
            self._link.close("host stopped")

    # ------------------------------------------------------------ host answers

    def send_panes(
        self, panes: tuple[PaneDescriptor, ...], capabilities: tuple[str, ...], host_run_id: UUID
    ) -> None:
        """Answer ``list``."""
        logged_in = self._open_logged_in()
        if logged_in is not None:
            logged_in.send_panes(panes, capabilities, host_run_id)

    def send_command_result(self, request_id: UUID, response: JSONValue) -> None:
        """Answer the command in flight (or a receipt query)."""
        logged_in = self._open_logged_in()
        if logged_in is not None:
            logged_in.send_command_result(request_id, response)

    def frame_schedule(self, now: float) -> FrameSchedule:
        """What the lease's sampler should do now (see :class:`FrameSchedule`)."""
        logged_in = self._subscribed()
        return NO_FRAMES if logged_in is None else logged_in.held().frame_schedule(now)

    def offer_frame(self, capture: Capture, now: float) -> int | None:
        """Send ``capture`` if the gate allows it; return its sequence or ``None``
        (see :meth:`LoggedIn.offer_frame`)."""
        logged_in = self._subscribed()
        return None if logged_in is None else logged_in.offer_frame(capture, now)

    def scroll_applied(self, request_id: UUID, now: float) -> None:
        """The host scrolled the pane; frames settle for 200 ms."""
        logged_in = self._subscribed()
        if logged_in is not None:
            logged_in.held().scroll.applied(request_id, now)

    def scroll_failed(self, request_id: UUID) -> None:
        """The scroll could not be applied: a remembered ``SCROLL_UNAVAILABLE``."""
        logged_in = self._subscribed()
        if logged_in is not None:
            logged_in.scroll_failed(request_id)

    @property
    def history_asked_at(self) -> float | None:
        """When the history request the capture under way answers arrived (the
        client's own timer started then), or ``None`` when none is under way."""
        logged_in = self._subscribed()
        history = None if logged_in is None else logged_in.held().history
        return None if history is None or not history.capturing else history.asked_at

    def history_captured(
        self, history_id: UUID, text: str, *, truncated: bool, captured_at: float
    ) -> bool:
        """Freeze a new snapshot (replacing any previous one), send its page before the request's
        offset (the newest without one; out of range closes), then answer the requests that
        waited for it, in order. True when one of them asks for another snapshot: the host
        captures again and calls this (or :meth:`history_unavailable`) again."""
        logged_in = self._subscribed()
        if logged_in is None:
            return False
        snapshot = HistorySnapshot.build(
            history_id, text, captured_at=captured_at, source_truncated=truncated
        )
        return logged_in.history_done(snapshot)

    def history_unavailable(self) -> bool:
        """History cannot be captured: a non-fatal ``HISTORY_UNAVAILABLE``; then as
        :meth:`history_captured`."""
        logged_in = self._subscribed()
        return False if logged_in is None else logged_in.history_done(None)

    def _open_logged_in(self) -> LoggedIn | None:
        """The logged-in half, ``None`` once closed; before login, a host bug."""
        phase = self._link.phase
        if phase is _CLOSED:
            return None
        if phase in LOGIN_PHASES:
            raise LocalProtocolError(f"an answer while the session is {phase.value}")
        return self._logged_in

    def _subscribed(self) -> LoggedIn | None:
        """The logged-in half while the table says it holds its lease, else ``None``."""
        return self._logged_in if self._link.phase is _SUBSCRIBED else None


_CLOSED = Phase.CLOSED
_SUBSCRIBED = Phase.SUBSCRIBED
