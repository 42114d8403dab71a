"""The session's state table, driven by Hypothesis from both ends.

One ``RuleBasedStateMachine`` plays a client and a host over a run of
connections. The client's rules send what a well-behaved client sends in the
current state (acknowledgements, input, scrolls and their retries, history
pages, commands), and one more rule sends what none does: messages only a host
sends, frames, a second subscribe, a wrong lease or sequence, input of the wrong
size or on a text lease, an unknown snapshot, a scroll id reused the other way,
commands against the lease rules. The host's rules verify, pair, grant, refuse,
capture history, apply or fail scrolls, answer commands, close, revoke, end the
lease, stop the host, stop confirming what it wrote, and take decisions out of
turn. A few
rules run a whole exchange (frames flowing, a scroll from request to result, a
snapshot with requests queued behind it), so that most steps reach the deeper
states.

A model written from docs/protocol.md, not from the session's code, predicts
after every step the exact messages the session sends and the events it
reports. Invariants check what must hold over the whole transcript:

* the state and the timer are the model's, and so is everything read off the
  state alone: whether the session is closed, whether a close keeps its last
  message, and the lease, held (the one granted) exactly while ``SUBSCRIBED``
  (a closed session holds none);
* at most 16 MiB is ever queued or in flight;
* a closed session says nothing more and reports nothing more, whatever the
  host still asks of it;
* every frame of a lease that opted in follows its ``viewport`` and
  ``scrollState``, with the frame's sequence;
* sequences go 1, 2, 3 … and at most one frame is unacknowledged;
* never a second ``subscribed`` on a connection;
* history requests are answered in the order they came.

It runs for a few seconds, so it is marked ``slow``.
"""

from __future__ import annotations

import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from mirror_host import control as c
from mirror_host.capture.values import ScrollBounds, TextCapture, VTCapture
from mirror_host.errors import LocalProtocolError
from mirror_host.session.connection import Phase, Session
from mirror_host.session.events import (
    AuthenticateRequested,
    CommandRequested,
    ConnectionClosed,
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
from mirror_host.session.lease import Lease
from mirror_host.session.link import MAX_OUTBOUND_BYTES
from mirror_host.session.logged_in import (
    HISTORY_UNAVAILABLE,
    PANE_BUSY,
    SCROLL_BUSY,
    SCROLL_CANNOT,
    SCROLL_COULD_NOT,
)
from mirror_host.wire import (
    ControlPacket,
    PacketDecoder,
    TextFramePacket,
    VTFramePacket,
    encode_packet,
)
from tests.strategies import message_of

HOST = UUID("00000000-0000-0000-0000-0000000000AA")
DEVICE = UUID("00000000-0000-0000-0000-0000000000D1")
OTHER = UUID("00000000-0000-0000-0000-0000000000D2")
PANE = UUID("00000000-0000-0000-0000-0000000000B1")
RUN = UUID("00000000-0000-0000-0000-0000000000C1")
NONCE = b"n" * 32
ALL_CAPS = frozenset({"history", "remote-scroll", "viewport-text-v1", "scroll-state-v1"})
BIG = 4 * 1024 * 1024 - 100  # a VT frame just under Prowl's 4 MiB

#: Messages only a host sends: every state must refuse them from a client.
HOST_ONLY = st.one_of(
    [
        message_of(cls)
        for cls in (
            c.Challenge,
            c.Paired,
            c.Authenticated,
            c.Panes,
            c.Subscribed,
            c.Viewport,
            c.HistoryPage,
            c.Failure,
            c.Ended,
            c.ScrollResult,
            c.ScrollState,
            c.CommandResult,
        )
    ]
)
SUBSCRIBES = st.builds(
    c.Subscribe,
    pane_id=st.just(PANE),
    representation=st.sampled_from(c.Representation),
    intent=st.just(c.Intent.IF_FREE),
    include_viewport_text=st.sampled_from([None, True]),
    include_scroll_state=st.sampled_from([None, True]),
)
PAIRING = st.sampled_from([False, False, False, True])
STARTS = st.sampled_from(["subscribed", "subscribed", "subscribed", "logged in", "challenged"])
CAPABILITIES = st.sampled_from([ALL_CAPS, frozenset()])
MISBEHAVIOURS = [
    "host message",
    "frame",
    "authenticate",
    "authenticate as another",
    "pair",
    "second subscribe",
    "wrong lease",
    "lease-bound without a lease",
    "wrong ack",
    "empty input",
    "input (perhaps on a text lease)",
    "second command",
    "input too long",
    "unknown snapshot",
    "offset out of range",
    "scroll id again, other way",
    "command on another lease",
    "command while subscribed",
    "targeted command without a lease",
]
#: A stand-in for a binary frame sent by the client.
CLIENT_FRAME = VTFramePacket(PANE, 1, 80, 24, b"x")

LOGIN = (Phase.AUTHENTICATING, Phase.VERIFYING, Phase.PAIRING)
LOGGED_IN = (Phase.AUTHENTICATED, Phase.SUBSCRIBING, Phase.SUBSCRIBED)


def size_of(item: Any) -> int:
    if isinstance(item, VTFramePacket | TextFramePacket):
        return len(encode_packet(item))
    return len(encode_packet(ControlPacket(c.encode_control(item))))


@dataclass
class Scroll:
    request_id: UUID
    direction: c.ScrollDirection
    stage: str = "applying"  # applying, applied, completed, failed
    applied_at: float = 0.0
    sequence: int = 0


@dataclass
class Model:
    """What docs/protocol.md says the session must do, one step at a time."""

    pairing: bool
    phase: Phase = Phase.AUTHENTICATING
    flushed: bool = False  # the close kept its last message (paired, ended)
    now: float = 0.0
    next_ping: float = 2.0
    idle_deadline: float = 8.0
    login_deadline: float = 5.0
    waiting: list[Any] = field(default_factory=list)  # packets held while the host decides
    # output of the current step
    out: list[Any] = field(default_factory=list)
    events: list[Any] = field(default_factory=list)
    queued: int = 0
    in_flight: int = 0
    acks: int = 0
    # the lease
    request: c.Subscribe | None = None
    subscription_id: UUID | None = None
    viewport: bool = False
    scroll_state: bool = False
    can_scroll: bool = False
    next_sequence: int = 1
    outstanding: int | None = None
    last_key: Any = None
    scroll: Scroll | None = None
    # history and commands
    snapshot: tuple[UUID, tuple[str, ...]] | None = None
    capturing: bool = False
    history_waiting: list[c.History] = field(default_factory=list)
    in_flight_command: c.Command | None = None

    # ---------------------------------------------------------------- output

    def queue(self, item: Any) -> None:
        if self.phase is Phase.CLOSED:
            return
        size = size_of(item)
        if self.queued + self.in_flight + size > MAX_OUTBOUND_BYTES:
            event("closed: more than 16 MiB outbound")
            self.close()
            return
        self.out.append(item)
        self.queued += size

    def close(self, *, failure: bool = False, flush: bool = False) -> None:
        if self.phase is Phase.CLOSED:
            return
        event(f"closed in {self.phase.value}")
        self.phase, self.flushed = Phase.CLOSED, flush
        self.events = [ConnectionClosed("", failure)]
        if not flush:
            self.out.clear()
            self.queued = 0

    def violation(self) -> None:
        self.close(failure=self.phase in LOGIN)

    # ---------------------------------------------------------------- input

    def receive(self, message: Any) -> None:
        if self.phase is Phase.CLOSED:
            return
        self.idle_deadline = self.now + 8.0
        if self.phase in (Phase.VERIFYING, Phase.PAIRING):
            self.waiting.append(message)  # read once the host has decided
            return
        self.handle(message)

    def handle(self, message: Any) -> None:
        if message is CLIENT_FRAME:
            self.violation()
        elif isinstance(message, c.Ping):
            self.queue(c.Pong())
        elif isinstance(message, c.Pong):
            pass
        elif self.phase is Phase.AUTHENTICATING:
            self.login(message)
        elif isinstance(message, c.ListPanes):
            self.events.append(ListRequested())
        elif isinstance(message, c.Subscribe):
            if self.phase is not Phase.AUTHENTICATED:
                self.violation()  # one subscribe per connection
                return
            self.phase, self.request = Phase.SUBSCRIBING, message
            self.events.append(SubscribeRequested(message))
        elif isinstance(message, c.Command):
            self.command(message)
        elif isinstance(
            message, c.Acknowledge | c.Refresh | c.Input | c.Scroll | c.History | c.CommandReceipt
        ):
            if self.phase is not Phase.SUBSCRIBED or (
                message.subscription_id != self.subscription_id
            ):
                self.violation()
                return
            self.lease_bound(message)
        else:
            self.violation()  # a host's message

    def login(self, message: Any) -> None:
        if isinstance(message, c.Authenticate) and not self.pairing and message.device_id == DEVICE:
            self.phase = Phase.VERIFYING
            self.events.append(AuthenticateRequested(message.device_id, message.proof))
        elif isinstance(message, c.Pair) and self.pairing:
            self.phase = Phase.PAIRING
            self.events.append(PairRequested(message.name, message.proof))
        else:
            self.violation()

    def lease_bound(self, message: Any) -> None:
        sub = self.subscription_id
        if isinstance(message, c.Acknowledge):
            if message.sequence != self.outstanding:
                self.violation()
                return
            self.outstanding = None
            self.acks += 1
            self.events.append(FrameAcknowledged(sub))  # type: ignore[arg-type]
        elif isinstance(message, c.Refresh):
            self.last_key = None
            self.events.append(RefreshRequested(sub))  # type: ignore[arg-type]
        elif isinstance(message, c.Input):
            assert self.request is not None
            if self.request.representation is not c.Representation.VT or not (
                1 <= len(message.data) <= 65_536
            ):
                self.violation()
                return
            self.events.append(InputReceived(sub, PANE, message.data))  # type: ignore[arg-type]
        elif isinstance(message, c.Scroll):
            self.scroll_request(message)
        elif isinstance(message, c.History):
            if self.capturing:
                if len(self.history_waiting) >= 64:
                    self.violation()
                else:
                    self.history_waiting.append(message)
                return
            self.answer_history(message, announce=True)
        else:
            self.events.append(ReceiptRequested(message))

    def scroll_request(self, message: c.Scroll) -> None:
        sub, rid, latest = self.subscription_id, message.request_id, self.scroll
        if latest is not None and latest.request_id == rid:
            if latest.direction is not message.direction:
                self.violation()
            elif latest.stage == "failed":
                self.queue(c.Failure(error=SCROLL_COULD_NOT, subscription_id=sub, request_id=rid))
            elif latest.stage == "completed":
                self.queue(c.ScrollResult(request_id=rid, sequence=latest.sequence, subscription_id=sub))  # type: ignore[arg-type]  # fmt: skip
        elif latest is not None and latest.stage in ("applying", "applied"):
            self.queue(c.Failure(error=SCROLL_BUSY, subscription_id=sub, request_id=rid))
        elif not self.can_scroll:
            self.queue(c.Failure(error=SCROLL_CANNOT, subscription_id=sub, request_id=rid))
        else:
            self.scroll = Scroll(rid, message.direction)
            self.events.append(ScrollRequested(sub, PANE, rid, message.direction))  # type: ignore[arg-type]  # fmt: skip

    def answer_history(self, message: c.History, *, announce: bool) -> None:
        if message.history_id is None:
            self.capturing = True
            if announce:
                self.events.append(HistoryRequested(self.subscription_id, PANE))  # type: ignore[arg-type]  # fmt: skip
            return
        if self.snapshot is None or message.history_id != self.snapshot[0]:
            self.violation()
            return
        self.page(message.offset)

    def page(self, offset: int | None) -> None:
        assert self.snapshot is not None
        history_id, lines = self.snapshot
        end = len(lines) if offset is None else offset
        if not 0 <= end <= len(lines):
            self.violation()
            return
        start = max(0, end - 200)
        self.queue(
            c.HistoryPage(
                history_id=history_id,
                offset=start,
                lines=lines[start:end],
                total=len(lines),
                subscription_id=self.subscription_id,  # type: ignore[arg-type]
                captured_at=1.0,
                truncated=False,
            )
        )

    def history_done(self, lines: tuple[str, ...] | None, history_id: UUID) -> bool:
        self.capturing = False
        if lines is None:
            self.queue(c.Failure(error=HISTORY_UNAVAILABLE, subscription_id=self.subscription_id))
        else:
            self.snapshot = (history_id, lines)
            self.page(None)
        if self.history_waiting:
            event("history requests waited for a capture")
        while self.history_waiting and not self.capturing and self.phase is not Phase.CLOSED:
            self.answer_history(self.history_waiting.pop(0), announce=False)
        return self.capturing and self.phase is not Phase.CLOSED

    def command(self, message: c.Command) -> None:
        name = type(message.command_request.request.command).NAME
        sub = message.subscription_id
        subscribed = self.phase is Phase.SUBSCRIBED
        if name in c.PANE_TARGETED_COMMANDS:
            allowed = subscribed and sub == self.subscription_id
        elif subscribed:
            allowed = name == "list" and sub == self.subscription_id
        else:
            allowed = sub is None
        if not allowed:
            self.violation()
        elif self.in_flight_command is None:
            self.in_flight_command = message
            self.events.append(CommandRequested(message))
        elif self.in_flight_command != message:
            self.violation()  # one command in flight

    # ---------------------------------------------------------------- frames

    def offer(self, capture: VTCapture | TextCapture) -> int | None:
        if self.phase is not Phase.SUBSCRIBED:
            return None
        scroll, force, completes = self.scroll, False, False
        if scroll is not None and scroll.stage == "applied":
            elapsed = self.now - scroll.applied_at
            if elapsed < 0.2:
                return None  # settling
            force, completes = elapsed >= 0.8, True
        if self.outstanding is not None:
            return None
        bounds = capture.scroll_bounds if self.scroll_state else None
        if isinstance(capture, VTCapture):
            viewport = capture.viewport_text if self.viewport else None
            key: Any = ("vt", capture.data, viewport, bounds)
        else:
            key = ("text", capture.text, bounds)
        if not force and key == self.last_key:
            return None
        sequence, sub = self.next_sequence, self.subscription_id
        assert sub is not None
        self.next_sequence += 1
        self.outstanding, self.last_key = sequence, key
        if self.viewport and isinstance(capture, VTCapture):
            self.queue(
                c.Viewport(text=capture.viewport_text, sequence=sequence, subscription_id=sub)
            )
        if self.scroll_state:
            shown = capture.scroll_bounds or ScrollBounds()
            self.queue(
                c.ScrollState(
                    at_top=shown.at_top,
                    at_bottom=shown.at_bottom,
                    sequence=sequence,
                    subscription_id=sub,
                )
            )
        if isinstance(capture, VTCapture):
            self.queue(VTFramePacket(sub, sequence, 80, 24, capture.data))
        else:
            self.queue(TextFramePacket(sub, sequence, 80, 24, False, capture.text))
        event(f"frame {min(sequence, 3)}+ sent")
        if completes:
            event("a frame completed a scroll")
            assert scroll is not None
            scroll.stage, scroll.sequence = "completed", sequence
            self.queue(c.ScrollResult(request_id=scroll.request_id, sequence=sequence, subscription_id=sub))  # fmt: skip
        return sequence


class SessionMachine(RuleBasedStateMachine):
    """Drives one session and its model side by side. See the module docstring."""

    def __init__(self) -> None:
        super().__init__()
        self.session: Session
        self.model: Model
        self.transcript: list[Any] = []  # everything the session sent, in order
        self.closed_reported = False
        #: History requests not yet answered, oldest first: (history id or None, offset).
        self.history_owed: deque[tuple[UUID | None, int | None]] = deque()
        self.history_checked = 0  # transcript items already matched against them
        self.captured_ids: deque[UUID] = deque()

    # ---------------------------------------------------------------- plumbing

    def settle(self, *, confirm: bool = True) -> None:
        """Drain the session and compare with the model's prediction for this step."""
        session, model = self.session, self.model
        data = session.data_to_send()
        drained, model.queued = model.queued, 0
        model.in_flight += drained
        if confirm:
            session.confirm_sent(len(data))
            model.in_flight -= drained
        decoder = PacketDecoder()
        decoder.feed(data)
        out: list[Any] = []
        while (packet := decoder.next_packet()) is not None:
            out.append(
                c.decode_control(packet.body) if isinstance(packet, ControlPacket) else packet
            )
        events = []
        while (event := session.next_event()) is not None:
            if isinstance(event, ConnectionClosed):
                event = ConnectionClosed("", event.is_failure)  # the reason is for logs
            events.append(event)
        if self.closed_reported:
            assert out == [] and events == [], "a closed session said more"
        assert out == model.out
        assert events == model.events
        model.out, model.events = [], []
        self.transcript.extend(out)
        self.closed_reported = self.closed_reported or any(
            isinstance(e, ConnectionClosed) for e in events
        )

    def send(self, message: Any) -> None:
        self.settle()
        if message is CLIENT_FRAME:
            data = encode_packet(CLIENT_FRAME)
        else:
            data = encode_packet(ControlPacket(c.encode_control(message)))
        self.session.receive_data(data, self.model.now)
        self.model.receive(message)
        self.settle()

    @property
    def lease_id(self) -> UUID:
        """The lease's id, or (before there is one) an id the connection never held."""
        sub = self.model.subscription_id
        return sub if sub is not None else uuid.uuid4()

    @property
    def phase(self) -> Phase:
        return self.model.phase

    # ---------------------------------------------------------------- connections

    def open(
        self, pairing: bool, start: str, subscribe: c.Subscribe, capabilities: frozenset[str]
    ) -> None:
        """A fresh session, often walked (and checked) along the happy path first,
        so that most steps are spent in the deeper states."""
        event(f"opened {'to pair' if pairing else start}")
        identity = "pair" if pairing else str(DEVICE).upper()
        self.session = Session(host_id=HOST, identity=identity, nonce=NONCE, now=0.0)
        self.model = Model(pairing=pairing)
        self.transcript, self.closed_reported = [], False
        self.history_owed.clear()
        self.history_checked = 0
        self.captured_ids.clear()
        self.model.queue(c.Challenge(host_id=HOST, nonce=NONCE))
        self.settle()
        if start == "challenged" or pairing:
            return
        self.send(c.Authenticate(device_id=DEVICE, proof=b"p" * 32))
        self.accept()
        if start == "subscribed":
            self.send(subscribe)
            self.grant(capabilities, first=True)

    @initialize(pairing=PAIRING, start=STARTS, subscribe=SUBSCRIBES, capabilities=CAPABILITIES)
    def first_connection(
        self, pairing: bool, start: str, subscribe: c.Subscribe, capabilities: frozenset[str]
    ) -> None:
        self.open(pairing, start, subscribe, capabilities)

    @precondition(lambda self: self.closed_reported)
    @rule(pairing=PAIRING, start=STARTS, subscribe=SUBSCRIBES, capabilities=CAPABILITIES)
    def next_connection(
        self, pairing: bool, start: str, subscribe: c.Subscribe, capabilities: frozenset[str]
    ) -> None:
        self.open(pairing, start, subscribe, capabilities)

    # ---------------------------------------------------------------- login

    @precondition(lambda self: self.phase in LOGIN)
    @rule(device=st.sampled_from([DEVICE, DEVICE, OTHER]))
    def authenticate(self, device: UUID) -> None:
        self.send(c.Authenticate(device_id=device, proof=b"p" * 32))

    @precondition(lambda self: self.phase in LOGIN)
    @rule(store_seconds=st.sampled_from([0.0, 0.5, 6.0]))
    def pair(self, store_seconds: float) -> None:
        """``pair``; the host may take a while to store the device (no deadline then)."""
        self.send(c.Pair(name="Phone", proof=b"p" * 32))
        if store_seconds:
            self.time_passes(store_seconds)

    @precondition(lambda self: self.phase is Phase.VERIFYING)
    @rule()
    def accept(self) -> None:
        self.session.accept_authentication(DEVICE, self.model.now)
        model = self.model
        model.phase = Phase.AUTHENTICATED
        model.queue(c.Authenticated(host_id=HOST))
        while model.waiting and model.phase in LOGGED_IN:
            model.handle(model.waiting.pop(0))
        self.settle()

    @precondition(lambda self: self.phase in (Phase.VERIFYING, Phase.PAIRING))
    @rule()
    def reject(self) -> None:
        self.session.reject("wrong proof")
        self.model.close(failure=True)
        self.settle()

    @precondition(lambda self: self.phase is Phase.PAIRING)
    @rule()
    def paired(self) -> None:
        self.session.send_paired(OTHER, b"k" * 32)
        self.model.queue(c.Paired(host_id=HOST, device_id=OTHER, key=b"k" * 32))
        self.model.close(flush=True)
        self.settle()
        assert self.session.flushes_on_close

    # ---------------------------------------------------------------- any state

    @rule()
    def ping(self) -> None:
        self.send(c.Ping())

    @rule(kind=st.sampled_from(MISBEHAVIOURS), data=st.data())
    def client_misbehaves(self, kind: str, data: st.DataObject) -> None:
        """One rule for everything a well-behaved client never sends (so that the
        session lives long enough, most steps, to reach the deeper states); each
        is what the table or a rule refuses in some state, but not in all."""
        model, lease = self.model, uuid.uuid4()  # a lease this connection never held
        history_id = model.snapshot[0] if model.snapshot is not None else uuid.uuid4()
        latest = model.scroll
        scroll_id = latest.request_id if latest is not None else uuid.uuid4()
        direction = latest.direction if latest is not None else c.ScrollDirection.UP
        message: Any = {
            "host message": None,
            "frame": CLIENT_FRAME,
            "authenticate": c.Authenticate(device_id=DEVICE, proof=b"p" * 32),
            "authenticate as another": c.Authenticate(device_id=OTHER, proof=b"p" * 32),
            "pair": c.Pair(name="Phone", proof=b"p" * 32),
            "second subscribe": data.draw(SUBSCRIBES),
            "wrong lease": c.Refresh(subscription_id=lease),
            "lease-bound without a lease": c.Acknowledge(sequence=1, subscription_id=lease),
            "wrong ack": c.Acknowledge(
                sequence=(model.outstanding or 0) + 1, subscription_id=self.lease_id
            ),
            "empty input": c.Input(data=b"", subscription_id=self.lease_id),
            "input (perhaps on a text lease)": c.Input(data=b"k", subscription_id=self.lease_id),
            "second command": self.command_message("list", model.subscription_id),
            "input too long": c.Input(data=b"k" * 65_537, subscription_id=self.lease_id),
            "unknown snapshot": c.History(history_id=uuid.uuid4(), subscription_id=self.lease_id),
            "offset out of range": c.History(
                history_id=history_id,
                offset=data.draw(st.sampled_from([-1, 452])),
                subscription_id=self.lease_id,
            ),
            "scroll id again, other way": c.Scroll(
                request_id=scroll_id,
                direction=c.ScrollDirection.DOWN
                if direction is c.ScrollDirection.UP
                else c.ScrollDirection.UP,
                subscription_id=self.lease_id,
            ),
            "command on another lease": self.command_message("agentsInput", lease),
            "command while subscribed": self.command_message("profiles", self.lease_id),
            "targeted command without a lease": self.command_message("agentsInput", None),
        }[kind]
        self.send(data.draw(HOST_ONLY) if message is None else message)

    @rule(dt=st.sampled_from([0.05, 0.15, 0.3, 0.9, 2.0, 3.5, 5.0]))
    def time_passes(self, dt: float) -> None:
        model = self.model
        model.now += dt
        self.session.handle_timer(model.now)
        if model.phase is not Phase.CLOSED:
            login_over = model.phase in (Phase.AUTHENTICATING, Phase.VERIFYING) and (
                model.now >= model.login_deadline
            )
            if model.now >= model.idle_deadline or login_over:
                model.close()
            elif model.now >= model.next_ping:
                model.queue(c.Ping())
                while model.next_ping <= model.now:
                    model.next_ping += 2.0
        self.settle()

    @precondition(lambda self: self.phase is not Phase.CLOSED)
    @rule(
        how=st.sampled_from(["close", "revoke", "ended", "stop"]),
        reason=st.sampled_from(c.EndReason),
    )
    def host_ends_it(self, how: str, reason: c.EndReason) -> None:
        """The host closes (any state), revokes the device, ends the lease, or stops
        (``ended hostStopped`` to a logged-in session, lease or not; a close before)."""
        if how == "stop":
            self.session.host_stopped()
            if self.phase in LOGGED_IN:
                self.model.queue(c.Ended(reason=c.EndReason.HOST_STOPPED))
                self.model.close(flush=True)
            else:
                self.model.close()
            self.settle()
            return
        if how == "ended":
            stopped = reason is c.EndReason.HOST_STOPPED and self.phase in LOGGED_IN
            if self.phase is not Phase.SUBSCRIBED and not stopped:
                return  # out of turn: host_decision_out_of_turn covers it
            self.session.send_ended(reason)
            self.model.queue(c.Ended(reason=reason))
            self.model.close(flush=True)
            self.settle()
            assert self.session.flushes_on_close
            return
        if how == "revoke":
            self.session.revoke()
        else:
            self.session.close("host stopping")
        self.model.close()
        self.settle()

    @rule(
        decision=st.sampled_from(
            ["accept", "paired", "reject", "busy", "failed", "grant", "ended", "lease ended"]
        )
    )
    def host_decision_out_of_turn(self, decision: str) -> None:
        """Rule 2: a decision the state does not allow is the host's bug; once closed, a
        no-op. ``ended hostStopped`` needs a login; any other ``ended``, the lease."""
        allowed = {
            Phase.VERIFYING: {"accept", "reject"},
            Phase.PAIRING: {"paired", "reject"},
            Phase.AUTHENTICATED: {"ended"},
            Phase.SUBSCRIBING: {"busy", "failed", "grant", "ended"},
            Phase.SUBSCRIBED: {"ended", "lease ended"},
        }
        if decision in allowed.get(self.phase, set()):
            return  # the rules above take the allowed ones
        session = self.session
        lease = Lease.for_request(
            c.Subscribe(pane_id=PANE, representation=c.Representation.VT, intent=c.Intent.IF_FREE),
            subscription_id=uuid.uuid4(),
            capabilities=ALL_CAPS,
        )
        act = {
            "accept": lambda: session.accept_authentication(DEVICE, 0.0),
            "paired": lambda: session.send_paired(DEVICE, b"k"),
            "reject": lambda: session.reject("late"),
            "busy": session.send_pane_busy,
            "failed": lambda: session.subscribe_failed("late"),
            "grant": lambda: session.grant_lease(
                lease, host_run_id=RUN, first_capture=None, now=0.0
            ),
            "ended": lambda: session.send_ended(c.EndReason.HOST_STOPPED),
            "lease ended": lambda: session.send_ended(c.EndReason.PANE_CLOSED),
        }[decision]
        if self.phase is Phase.CLOSED:
            act()
        else:
            with pytest.raises(LocalProtocolError):
                act()
        self.settle()

    # ---------------------------------------------------------------- logged in

    @precondition(lambda self: self.phase in LOGGED_IN)
    @rule()
    def list_panes(self) -> None:
        self.send(c.ListPanes())

    @precondition(lambda self: self.phase in LOGGED_IN)
    @rule()
    def answer_list(self) -> None:
        self.session.send_panes((), ("vt-v1",), RUN)
        self.model.queue(c.Panes(panes=(), capabilities=("vt-v1",), host_run_id=RUN))
        self.settle()

    @precondition(lambda self: self.phase in LOGGED_IN)
    @rule(message=SUBSCRIBES)
    def subscribe(self, message: c.Subscribe) -> None:
        """The connection's subscribe; once it has one, a second (a violation)."""
        self.send(message)

    @precondition(lambda self: self.phase is Phase.SUBSCRIBING)
    @rule()
    def pane_busy(self) -> None:
        self.session.send_pane_busy()
        self.model.phase = Phase.AUTHENTICATED
        self.model.queue(c.Failure(error=PANE_BUSY))
        self.settle()

    @precondition(lambda self: self.phase is Phase.SUBSCRIBING)
    @rule()
    def subscribe_failed(self) -> None:
        self.session.subscribe_failed("unknown pane")
        self.model.close()
        self.settle()

    @precondition(lambda self: self.phase is Phase.SUBSCRIBING)
    @rule(capabilities=st.sampled_from([ALL_CAPS, frozenset()]), first=st.booleans())
    def grant(self, capabilities: frozenset[str], first: bool) -> None:
        model = self.model
        request = model.request
        assert request is not None
        lease = Lease.for_request(request, subscription_id=uuid.uuid4(), capabilities=capabilities)
        is_vt = request.representation is c.Representation.VT
        model.phase, model.subscription_id = Phase.SUBSCRIBED, lease.subscription_id
        model.viewport = bool(request.include_viewport_text) and is_vt and bool(capabilities)
        model.scroll_state = bool(request.include_scroll_state) and bool(capabilities)
        model.can_scroll = bool(capabilities)
        model.queue(
            c.Subscribed(pane_id=PANE, subscription_id=lease.subscription_id, host_run_id=RUN)
        )
        capture = self.capture(b"first", None, None) if first else None
        sequence = self.session.grant_lease(
            lease, host_run_id=RUN, first_capture=capture, now=model.now
        )
        expected = model.offer(capture) if capture is not None else None
        assert sequence == expected
        self.settle()

    def capture(
        self, content: bytes, viewport: str | None, at_top: bool | None
    ) -> VTCapture | TextCapture:
        bounds = None if at_top is None else ScrollBounds(at_top=at_top)
        request = self.model.request
        if request is not None and request.representation is c.Representation.TEXT:
            return TextCapture(columns=80, rows=24, text=content.decode(), scroll_bounds=bounds)
        return VTCapture(
            columns=80, rows=24, data=content, viewport_text=viewport, scroll_bounds=bounds
        )

    @rule(
        content=st.sampled_from([b"a", b"b"]),
        viewport=st.sampled_from([None, "old"]),
        at_top=st.sampled_from([None, True, False]),
    )
    def offer_frame(self, content: bytes, viewport: str | None, at_top: bool | None) -> None:
        capture = self.capture(content, viewport, at_top)
        sequence = self.session.offer_frame(capture, self.model.now)
        assert sequence == self.model.offer(capture)
        self.settle()

    def _vt(self) -> bool:
        request = self.model.request
        return (
            self.phase is Phase.SUBSCRIBED
            and request is not None
            and request.representation is c.Representation.VT
        )

    @precondition(lambda self: self.phase is Phase.SUBSCRIBED)
    @rule(
        changes=st.lists(st.sampled_from([b"a", b"b", b"c"]), min_size=1, max_size=4),
        dt=st.sampled_from([0.02, 0.1, 0.25, 0.5]),
        viewport=st.sampled_from([None, "old"]),
        at_top=st.sampled_from([None, True, False]),
    )
    def mirror_runs(
        self, changes: list[bytes], dt: float, viewport: str | None, at_top: bool | None
    ) -> None:
        """The steady state, a few rounds of it: the client acknowledges the
        outstanding frame, time passes, the pane changes, the host offers a frame."""
        for content in changes:
            if self.model.outstanding:
                self.acknowledge()
            if self.phase is not Phase.SUBSCRIBED:
                return
            self.model.now += dt
            self.offer_frame(content, viewport, at_top)

    @precondition(lambda self: self.phase is Phase.SUBSCRIBED and self.model.outstanding)
    @rule()
    def acknowledge(self) -> None:
        sequence, sub = self.model.outstanding, self.model.subscription_id
        self.send(c.Acknowledge(sequence=sequence, subscription_id=sub))  # type: ignore[arg-type]

    @precondition(lambda self: self.phase is Phase.SUBSCRIBED)
    @rule()
    def refresh(self) -> None:
        self.send(c.Refresh(subscription_id=self.lease_id))

    @precondition(_vt)
    @rule(size=st.sampled_from([1, 3, 65_536]))
    def input(self, size: int) -> None:
        self.send(c.Input(data=b"k" * size, subscription_id=self.lease_id))

    @precondition(_vt)
    @rule(frames=st.sampled_from([2, 5, 5]))
    def writer_stops_confirming(self, frames: int) -> None:
        """The transport takes big frames and confirms none: past 16 MiB, the session closes."""
        model = self.model
        if model.outstanding:
            self.acknowledge()
        for i in range(frames):
            capture = VTCapture(columns=80, rows=24, data=b"x" * BIG + bytes([i]))
            sequence = self.session.offer_frame(capture, model.now)
            assert sequence == model.offer(capture)
            self.settle(confirm=False)
            if model.phase is Phase.CLOSED or sequence is None:
                return
            self.send(c.Acknowledge(sequence=sequence, subscription_id=model.subscription_id))  # type: ignore[arg-type]  # fmt: skip

    @precondition(lambda self: self.model.in_flight > 0)
    @rule()
    def writer_catches_up(self) -> None:
        self.session.confirm_sent(self.model.in_flight)
        self.model.in_flight = 0

    # ---------------------------------------------------------------- scroll

    @precondition(lambda self: self.phase is Phase.SUBSCRIBED)
    @rule(again=st.booleans(), direction=st.sampled_from(c.ScrollDirection))
    def scroll(self, again: bool, direction: c.ScrollDirection) -> None:
        """A new scroll, or the latest one again (a client's retry)."""
        latest, rid = self.model.scroll, uuid.uuid4()
        if again and latest is not None:
            rid, direction = latest.request_id, latest.direction
        self.send(c.Scroll(request_id=rid, direction=direction, subscription_id=self.lease_id))

    def _applying(self) -> bool:
        scroll = self.model.scroll
        return self.phase is Phase.SUBSCRIBED and scroll is not None and scroll.stage == "applying"

    @precondition(_applying)
    @rule()
    def scroll_applied(self) -> None:
        scroll = self.model.scroll
        assert scroll is not None
        self.session.scroll_applied(scroll.request_id, self.model.now)
        scroll.stage, scroll.applied_at = "applied", self.model.now
        self.settle()

    @precondition(_applying)
    @rule()
    def scroll_failed(self) -> None:
        scroll, sub = self.model.scroll, self.model.subscription_id
        assert scroll is not None
        self.session.scroll_failed(scroll.request_id)
        scroll.stage = "failed"
        self.model.queue(
            c.Failure(error=SCROLL_COULD_NOT, subscription_id=sub, request_id=scroll.request_id)
        )
        self.settle()

    @precondition(lambda self: self.phase is Phase.SUBSCRIBED)
    @rule(
        direction=st.sampled_from(c.ScrollDirection),
        wait=st.sampled_from([0.1, 0.3, 0.9]),
        changed=st.booleans(),
        retry=st.booleans(),
    )
    def scroll_round_trip(
        self, direction: c.ScrollDirection, wait: float, changed: bool, retry: bool
    ) -> None:
        """A scroll from request to result: applied, a wait, a frame (changed or
        not), perhaps the client's retry of the same id."""
        self.scroll(again=False, direction=direction)
        if self._applying():
            self.scroll_applied()
        if self.model.outstanding and self.phase is Phase.SUBSCRIBED:
            self.acknowledge()
        if self.phase is Phase.SUBSCRIBED:
            self.model.now += wait
            content = b"scrolled" if changed else self.last_content()
            self.offer_frame(content, "old", False)
        if retry and self.phase is Phase.SUBSCRIBED:
            self.scroll(again=True, direction=direction)

    def last_content(self) -> bytes:
        key = self.model.last_key
        return key[1] if isinstance(key, tuple) and isinstance(key[1], bytes) else b"a"

    # ---------------------------------------------------------------- history

    @precondition(lambda self: self.phase is Phase.SUBSCRIBED and not self.model.capturing)
    @rule(
        meanwhile=st.lists(
            st.tuples(st.booleans(), st.sampled_from([None, "top", "middle", "bottom"])),
            max_size=4,
        ),
        lines=st.lists(st.sampled_from([0, 3, 250, 451]), min_size=1, max_size=3),
    )
    def history_round_trip(
        self, meanwhile: list[tuple[bool, str | None]], lines: list[int]
    ) -> None:
        """A new snapshot, more requests while it is captured (pages of the old
        snapshot, more new ones), then the captures until nothing waits."""
        if self.model.snapshot is None:  # a snapshot first, so the pages differ
            self.history(new=True, where=None)
            self.history_capture_done(lines[0], available=True)
            if self.phase is not Phase.SUBSCRIBED:
                return
        self.history(new=True, where=None)
        for new, where in meanwhile:
            if self.phase is Phase.SUBSCRIBED:
                self.history(new=new, where=where)
        for count in lines:
            if self.phase is not Phase.SUBSCRIBED or not self.model.capturing:
                return
            self.history_capture_done(count, available=count != 3)

    @precondition(lambda self: self.phase is Phase.SUBSCRIBED)
    @rule(
        new=st.booleans(),
        where=st.sampled_from([None, "top", "middle", "bottom"]),
    )
    def history(self, new: bool, where: str | None) -> None:
        """A new snapshot, or a page of the current one (if there is one)."""
        model, history_id, offset = self.model, None, None
        if not new and model.snapshot is not None:
            history_id, total = model.snapshot[0], len(model.snapshot[1])
            offset = {None: None, "top": 0, "middle": total // 2, "bottom": total}[where]
        message = c.History(history_id=history_id, offset=offset, subscription_id=self.lease_id)
        self.history_owed.append((history_id, offset))
        self.send(message)

    @precondition(lambda self: self.phase is Phase.SUBSCRIBED and self.model.capturing)
    @rule(lines=st.sampled_from([0, 3, 250, 451]), available=st.booleans())
    def history_capture_done(self, lines: int, available: bool) -> None:
        history_id = uuid.uuid4()
        if available:
            self.captured_ids.append(history_id)
            text = "\n".join(str(i) for i in range(lines))
            another = self.session.history_captured(
                history_id, text, truncated=False, captured_at=1.0
            )
            expected = self.model.history_done(tuple(text.split("\n")), history_id)
        else:
            another = self.session.history_unavailable()
            expected = self.model.history_done(None, history_id)
        assert another == expected
        self.settle()

    # ---------------------------------------------------------------- commands

    @staticmethod
    def command_message(kind: str, subscription_id: UUID | None) -> c.Command:
        commands: dict[str, c.RemoteCommand] = {
            "profiles": c.ProfilesCommand(),
            "list": c.ListCommand(),
            "agentsInput": c.AgentsInputCommand(pane=str(PANE), prompt="hi"),
        }
        request = c.CommandRequest(
            request_id=uuid.uuid4(),
            request=c.CommandEnvelope(output="json", command=commands[kind]),
        )
        return c.Command(subscription_id=subscription_id, command_request=request)

    @precondition(lambda self: self.phase in LOGGED_IN and self.model.in_flight_command is None)
    @rule(kind=st.sampled_from(["profiles", "list", "agentsInput"]), retried=st.booleans())
    def command(self, kind: str, retried: bool) -> None:
        """A command as the rules allow it here (a targeted one needs the lease; a
        subscribed connection names its lease and may only ``list``), perhaps sent
        twice, as a client retries: the duplicate is dropped."""
        subscribed = self.phase is Phase.SUBSCRIBED
        if subscribed and kind == "profiles":
            kind = "list"
        elif not subscribed and kind == "agentsInput":
            kind = "profiles"
        message = self.command_message(kind, self.model.subscription_id if subscribed else None)
        self.send(message)
        if retried:
            self.send(message)

    @precondition(lambda self: self.model.in_flight_command is not None)
    @rule()
    def command_again(self) -> None:
        self.send(self.model.in_flight_command)

    @precondition(lambda self: self.phase in LOGGED_IN)
    @rule(answers_it=st.booleans())
    def command_result(self, answers_it: bool) -> None:
        model = self.model
        in_flight = model.in_flight_command
        rid = uuid.uuid4()
        if answers_it and in_flight is not None:
            rid = in_flight.command_request.request_id
            model.in_flight_command = None
        self.session.send_command_result(rid, {"ok": True})
        model.queue(
            c.CommandResult(
                command_response=c.CommandResponse(request_id=rid, response={"ok": True})
            )
        )
        self.settle()

    @precondition(lambda self: self.phase is Phase.SUBSCRIBED)
    @rule()
    def receipt(self) -> None:
        self.send(c.CommandReceipt(subscription_id=self.lease_id, command_receipt_id=uuid.uuid4()))

    # ---------------------------------------------------------------- invariants

    @invariant()
    def the_state_and_the_timer_are_the_models(self) -> None:
        model, session = self.model, self.session
        assert session.phase is model.phase
        assert session.is_closed == (model.phase is Phase.CLOSED)
        assert session.flushes_on_close == (model.phase is Phase.CLOSED and model.flushed)
        lease = session.lease
        assert (lease is not None) == (model.phase is Phase.SUBSCRIBED)
        assert lease is None or lease.subscription_id == model.subscription_id
        if model.phase is not Phase.CLOSED:
            deadline = min(model.next_ping, model.idle_deadline)
            if model.phase in (Phase.AUTHENTICATING, Phase.VERIFYING):
                deadline = min(deadline, model.login_deadline)
            assert session.get_timer() == pytest.approx(deadline)
        else:
            assert session.get_timer() is None

    @invariant()
    def at_most_16_mib_is_ever_queued(self) -> None:
        assert self.session.outbound_bytes <= MAX_OUTBOUND_BYTES

    @invariant()
    def a_closed_session_says_nothing_more(self) -> None:
        if self.closed_reported:
            assert self.session.next_event() is None
            assert self.session.data_to_send() == b""
            assert self.session.offer_frame(VTCapture(columns=1, rows=1, data=b"z"), 99.0) is None
            self.session.send_command_result(uuid.uuid4(), None)
            assert self.session.data_to_send() == b""

    @invariant()
    def every_frame_follows_its_viewport_and_scroll_state(self) -> None:
        model, transcript = self.model, self.transcript
        for i, item in enumerate(transcript):
            if not isinstance(item, VTFramePacket | TextFramePacket):
                continue
            j = i - 1
            if model.scroll_state:
                assert isinstance(transcript[j], c.ScrollState), "a frame without its scrollState"
                assert transcript[j].sequence == item.sequence
                j -= 1
            if model.viewport and isinstance(item, VTFramePacket):
                assert isinstance(transcript[j], c.Viewport), "a frame without its viewport"
                assert transcript[j].sequence == item.sequence

    @invariant()
    def frames_are_numbered_and_gated(self) -> None:
        sequences = [
            item.sequence
            for item in self.transcript
            if isinstance(item, VTFramePacket | TextFramePacket)
        ]
        assert sequences == list(range(1, len(sequences) + 1))
        assert len(sequences) - self.model.acks in (0, 1), "two frames unacknowledged"

    @invariant()
    def never_a_second_subscribed(self) -> None:
        assert sum(isinstance(item, c.Subscribed) for item in self.transcript) <= 1

    @invariant()
    def history_is_answered_in_request_order(self) -> None:
        answers = [
            item
            for item in self.transcript[self.history_checked :]
            if isinstance(item, c.HistoryPage)
            or (isinstance(item, c.Failure) and item.error == HISTORY_UNAVAILABLE)
        ]
        self.history_checked = len(self.transcript)
        for answer in answers:
            history_id, offset = self.history_owed.popleft()
            if history_id is None:  # a new snapshot: the next capture, or its failure
                if isinstance(answer, c.HistoryPage):
                    assert answer.history_id == self.captured_ids.popleft()
                    assert answer.offset + len(answer.lines) == answer.total
            else:
                assert isinstance(answer, c.HistoryPage)
                assert answer.history_id == history_id
                end = answer.total if offset is None else offset
                assert (answer.offset, answer.offset + len(answer.lines)) == (
                    max(0, end - 200),
                    end,
                )


@pytest.mark.slow
class TestSessionStateMachine(SessionMachine.TestCase):
    settings = settings(max_examples=120, stateful_step_count=50, deadline=None)
