"""The connection state machine, driven with hand-picked clocks and no sockets."""

from __future__ import annotations

import uuid
from typing import Any
from uuid import UUID

import pytest

from mirror_host import control as c
from mirror_host.capture.values import (
    CaptureOptions,
    ScrollBounds,
    StyledArchive,
    TextCapture,
    VTCapture,
)
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

HOST = UUID("00000000-0000-0000-0000-0000000000AA")
DEVICE = UUID("00000000-0000-0000-0000-0000000000D1")
PANE = UUID("00000000-0000-0000-0000-0000000000B1")
RUN = UUID("00000000-0000-0000-0000-0000000000C1")
ALL_CAPS = frozenset(
    {"history", "remote-scroll", "viewport-text-v1", "styled-scrollback-v1", "scroll-state-v1"}
)


def packet(message: c.ControlMessage) -> bytes:
    return encode_packet(ControlPacket(c.encode_control(message)))


def outgoing(session: Session) -> list[Any]:
    decoder = PacketDecoder()
    decoder.feed(session.data_to_send())
    out: list[Any] = []
    while (p := decoder.next_packet()) is not None:
        out.append(c.decode_control(p.body) if isinstance(p, ControlPacket) else p)
    return out


def events(session: Session) -> list[Any]:
    result = []
    while (event := session.next_event()) is not None:
        result.append(event)
    return result


def new_session(identity: str = str(DEVICE).upper(), now: float = 0.0) -> Session:
    return Session(host_id=HOST, identity=identity, nonce=b"n" * 32, now=now)


def logged_in(now: float = 0.0) -> Session:
    session = new_session(now=now)
    outgoing(session)
    session.receive_data(packet(c.Authenticate(device_id=DEVICE, proof=b"p" * 32)), now)
    assert events(session) == [AuthenticateRequested(DEVICE, b"p" * 32)]
    session.accept_authentication(DEVICE, now)
    assert [type(m) for m in outgoing(session)] == [c.Authenticated]
    return session


def subscribed(
    representation: c.Representation = c.Representation.VT,
    *,
    caps: frozenset[str] = ALL_CAPS,
    viewport: bool | None = None,
    scroll_state: bool | None = None,
    styled: bool | None = None,
) -> tuple[Session, UUID]:
    session = logged_in()
    request = c.Subscribe(
        pane_id=PANE,
        representation=representation,
        intent=c.Intent.IF_FREE,
        include_viewport_text=viewport,
        include_scroll_state=scroll_state,
        include_styled_scrollback=styled,
    )
    session.receive_data(packet(request), 0.0)
    assert events(session) == [SubscribeRequested(request)]
    lease = Lease.for_request(request, subscription_id=uuid.uuid4(), capabilities=caps)
    session.grant_lease(lease, host_run_id=RUN, first_capture=None, now=0.0)
    sub = lease.subscription_id
    assert [type(m) for m in outgoing(session)] == [c.Subscribed]
    return session, sub


def vt(text: bytes = b"hello", **kw: Any) -> VTCapture:
    return VTCapture(columns=80, rows=24, data=text, **kw)


def closed_reason(session: Session) -> ConnectionClosed:
    found = [e for e in events(session) if isinstance(e, ConnectionClosed)]
    assert found, "session did not close"
    return found[0]


# ------------------------------------------------------------------ login phase


def test_challenge_is_the_first_message() -> None:
    session = new_session()
    assert outgoing(session) == [c.Challenge(host_id=HOST, nonce=b"n" * 32)]


def test_pings_every_two_seconds_and_pong_before_login() -> None:
    session = new_session()
    outgoing(session)
    session.receive_data(packet(c.Ping()), 0.5)
    assert outgoing(session) == [c.Pong()]
    assert session.get_timer() == 2.0
    session.handle_timer(2.0)
    assert outgoing(session) == [c.Ping()]
    assert session.get_timer() == 4.0


def test_authentication_deadline_closes_without_counting_a_failure() -> None:
    session = new_session()
    outgoing(session)
    session.receive_data(packet(c.Pong()), 4.0)  # traffic does not extend the login deadline
    session.handle_timer(4.99)
    assert session.phase is Phase.AUTHENTICATING
    session.handle_timer(5.0)
    event = closed_reason(session)
    assert not event.is_failure and "5 s" in event.reason
    assert session.data_to_send() == b""


def test_idle_connection_closes_after_eight_silent_seconds() -> None:
    session = logged_in(now=0.0)
    session.handle_timer(6.0)
    session.receive_data(packet(c.Pong()), 6.0)
    session.handle_timer(13.9)
    assert not session.is_closed
    session.handle_timer(14.0)
    assert "8 s" in closed_reason(session).reason


@pytest.mark.parametrize(
    "message",
    [
        c.ListPanes(),
        c.Refresh(subscription_id=PANE),
        c.Paired(host_id=HOST, device_id=DEVICE, key=b"k"),
    ],
)
def test_anything_but_login_before_authentication_is_a_failure(message: c.ControlMessage) -> None:
    session = new_session()
    session.receive_data(packet(message), 0.1)
    event = closed_reason(session)
    assert event.is_failure
    assert session.data_to_send() == b""  # silent


def test_authenticate_must_name_the_tls_identity() -> None:
    session = new_session(identity=str(uuid.uuid4()).upper())
    session.receive_data(packet(c.Authenticate(device_id=DEVICE, proof=b"p" * 32)), 0)
    assert closed_reason(session).is_failure


def test_pair_only_on_pair_identity_and_authenticate_never_there() -> None:
    session = new_session()
    session.receive_data(packet(c.Pair(name="x", proof=b"p")), 0)
    assert closed_reason(session).is_failure
    session = new_session(identity="pair")
    session.receive_data(packet(c.Authenticate(device_id=DEVICE, proof=b"p")), 0)
    assert closed_reason(session).is_failure


def test_packets_after_authenticate_wait_for_the_verdict() -> None:
    session = new_session()
    outgoing(session)
    data = packet(c.Authenticate(device_id=DEVICE, proof=b"p" * 32)) + packet(c.ListPanes())
    session.receive_data(data, 0.1)
    assert events(session) == [AuthenticateRequested(DEVICE, b"p" * 32)]
    assert session.phase is Phase.VERIFYING
    session.accept_authentication(DEVICE, 0.2)
    assert events(session) == [ListRequested()]


def test_rejected_login_is_silent_and_counted() -> None:
    session = new_session()
    outgoing(session)
    session.receive_data(packet(c.Authenticate(device_id=DEVICE, proof=b"p" * 32)), 0.1)
    events(session)
    session.reject("wrong device proof")
    event = closed_reason(session)
    assert event.is_failure and event.reason == "wrong device proof"
    assert session.data_to_send() == b""


def test_pairing_sends_paired_then_closes() -> None:
    session = new_session(identity="pair")
    outgoing(session)
    session.receive_data(packet(c.Pair(name="Mac", proof=b"p" * 32)), 0.1)
    assert events(session) == [PairRequested("Mac", b"p" * 32)]
    session.send_paired(DEVICE, b"k" * 32)
    assert outgoing(session) == [c.Paired(host_id=HOST, device_id=DEVICE, key=b"k" * 32)]
    assert session.is_closed and session.flushes_on_close


def test_a_pairing_overtaken_by_a_revoke_ends_quietly() -> None:
    """The store write finished after ``revoke --all`` closed the session: no
    ``paired``, and no exception for the host to log as a failed connection."""
    session = new_session(identity="pair")
    outgoing(session)
    session.receive_data(packet(c.Pair(name="Mac", proof=b"p" * 32)), 0.1)
    events(session)
    session.revoke()
    session.send_paired(DEVICE, b"k" * 32)
    assert session.data_to_send() == b""
    assert not closed_reason(session).is_failure


def test_a_host_decision_out_of_turn_is_the_hosts_bug() -> None:
    session = logged_in()
    with pytest.raises(LocalProtocolError):
        session.send_paired(DEVICE, b"k" * 32)
    with pytest.raises(LocalProtocolError):
        session.send_pane_busy()  # no subscribe is waiting
    assert session.phase is Phase.AUTHENTICATED and session.data_to_send() == b""


def test_malformed_packet_closes_silently() -> None:
    session = logged_in()
    session.receive_data(b"\xff\xff\xff\xff", 1.0)
    assert not closed_reason(session).is_failure  # after login it is not a login failure
    assert session.data_to_send() == b""


def test_client_may_not_send_frames() -> None:
    session = logged_in()
    session.receive_data(encode_packet(TextFramePacket(PANE, 1, 1, 1, False, "x")), 1.0)
    assert "frames" in closed_reason(session).reason


def test_outbound_queue_over_16_mib_closes() -> None:
    session, _ = subscribed()
    lease = session.lease  # held until the close below (a closed session holds none)
    assert lease is not None
    big = b"x" * (4 * 1024 * 1024 - 100)
    for i in range(5):
        lease.gate.outstanding = None
        session.offer_frame(vt(big + bytes([i])), 1.0)
    assert session.outbound_bytes <= MAX_OUTBOUND_BYTES
    assert "too slow" in closed_reason(session).reason


# ------------------------------------------------------------------ subscription rules


def test_second_subscribe_closes() -> None:
    session, _ = subscribed()
    request = c.Subscribe(
        pane_id=PANE, representation=c.Representation.VT, intent=c.Intent.TAKEOVER
    )
    session.receive_data(packet(request), 1.0)
    assert "second subscribe" in closed_reason(session).reason


def test_subscribe_while_the_first_is_pending_closes() -> None:
    session = logged_in()
    request = c.Subscribe(pane_id=PANE, representation=c.Representation.VT, intent=c.Intent.IF_FREE)
    session.receive_data(packet(request) + packet(request), 0.0)
    kinds = [type(e) for e in events(session)]
    assert kinds == [ConnectionClosed]


def test_pane_busy_keeps_the_connection_open() -> None:
    session = logged_in()
    request = c.Subscribe(pane_id=PANE, representation=c.Representation.VT, intent=c.Intent.IF_FREE)
    session.receive_data(packet(request), 0.0)
    events(session)
    session.send_pane_busy()
    assert outgoing(session) == [c.Failure(error=PANE_BUSY)]
    assert not session.is_closed
    session.receive_data(packet(request), 0.1)  # may try again
    assert events(session) == [SubscribeRequested(request)]


def test_frame_gate_sequences_suppression_and_acknowledgement() -> None:
    session, sub = subscribed()
    assert session.offer_frame(vt(b"a"), 1.0) == 1
    assert session.offer_frame(vt(b"b"), 1.0) is None  # one outstanding frame at most
    assert [type(m) for m in outgoing(session)] == [VTFramePacket]
    session.receive_data(packet(c.Acknowledge(sequence=1, subscription_id=sub)), 1.1)
    assert events(session) == [FrameAcknowledged(sub)]
    assert session.offer_frame(vt(b"a"), 1.2) is None  # unchanged
    assert session.offer_frame(vt(b"b"), 1.2) == 2
    frame = outgoing(session)[0]
    assert frame == VTFramePacket(sub, 2, 80, 24, b"b")


def test_refresh_resends_unchanged_but_not_past_an_outstanding_frame() -> None:
    session, sub = subscribed()
    session.offer_frame(vt(), 1.0)
    session.receive_data(packet(c.Refresh(subscription_id=sub)), 1.1)
    assert session.offer_frame(vt(), 1.2) is None  # frame 1 still outstanding
    session.receive_data(packet(c.Acknowledge(sequence=1, subscription_id=sub)), 1.3)
    assert session.offer_frame(vt(), 1.4) == 2


@pytest.mark.parametrize("sequence", [0, 2, 99])
def test_wrong_acknowledgement_closes(sequence: int) -> None:
    session, sub = subscribed()
    session.offer_frame(vt(), 1.0)
    outgoing(session)
    session.receive_data(packet(c.Acknowledge(sequence=sequence, subscription_id=sub)), 1.1)
    assert "acknowledge" in closed_reason(session).reason
    assert session.data_to_send() == b""


def test_acknowledgement_with_nothing_outstanding_closes() -> None:
    session, sub = subscribed()
    session.receive_data(packet(c.Acknowledge(sequence=1, subscription_id=sub)), 1.1)
    assert session.is_closed


@pytest.mark.parametrize(
    "message",
    [
        c.Acknowledge(sequence=1, subscription_id=PANE),
        c.Refresh(subscription_id=PANE),
        c.Input(data=b"x", subscription_id=PANE),
        c.History(subscription_id=PANE),
        c.Scroll(request_id=PANE, direction=c.ScrollDirection.UP, subscription_id=PANE),
        c.CommandReceipt(subscription_id=PANE, command_receipt_id=PANE),
    ],
)
def test_every_lease_bound_message_with_a_wrong_lease_closes(message: c.ControlMessage) -> None:
    session, _ = subscribed()
    session.offer_frame(vt(), 1.0)
    session.receive_data(packet(message), 1.1)
    assert session.is_closed


def test_input_rules() -> None:
    session, sub = subscribed()
    session.receive_data(packet(c.Input(data=b"ls\r", subscription_id=sub)), 1.0)
    assert events(session) == [InputReceived(sub, PANE, b"ls\r")]
    session.receive_data(packet(c.Input(data=b"x" * 65_536, subscription_id=sub)), 1.0)
    assert len(events(session)) == 1
    for bad in (b"", b"x" * 65_537):
        session, sub = subscribed()
        session.receive_data(packet(c.Input(data=bad, subscription_id=sub)), 1.0)
        assert session.is_closed
    session, sub = subscribed(c.Representation.TEXT)
    session.receive_data(packet(c.Input(data=b"ls", subscription_id=sub)), 1.0)
    assert [type(e) for e in events(session)] == [ConnectionClosed]


def test_side_messages_in_order_and_only_when_opted_in() -> None:
    session, sub = subscribed(viewport=True, scroll_state=True)
    bounds = ScrollBounds(at_top=False, at_bottom=True)
    session.offer_frame(vt(viewport_text="old\nrows", scroll_bounds=bounds), 1.0)
    sent = outgoing(session)
    assert [type(m) for m in sent] == [c.Viewport, c.ScrollState, VTFramePacket]
    assert sent[0] == c.Viewport(text="old\nrows", sequence=1, subscription_id=sub)
    assert sent[1] == c.ScrollState(at_top=False, at_bottom=True, sequence=1, subscription_id=sub)
    session, sub = subscribed()  # no opt-ins: the frame alone
    session.offer_frame(vt(viewport_text="x", scroll_bounds=bounds), 1.0)
    assert [type(m) for m in outgoing(session)] == [VTFramePacket]


def test_unsupported_opt_ins_are_ignored() -> None:
    session, _ = subscribed(viewport=True, scroll_state=True, caps=frozenset())
    session.offer_frame(vt(), 1.0)
    assert [type(m) for m in outgoing(session)] == [VTFramePacket]
    # viewport text is only for vt-v1; scroll state works for text leases
    session, _ = subscribed(c.Representation.TEXT, viewport=True, scroll_state=True)
    session.offer_frame(TextCapture(columns=80, rows=24, text="t"), 1.0)
    assert [type(m) for m in outgoing(session)] == [c.ScrollState, TextFramePacket]


def test_bounds_only_change_is_a_frame_change_for_opted_in_clients() -> None:
    session, sub = subscribed(scroll_state=True)
    session.offer_frame(vt(scroll_bounds=ScrollBounds(at_top=False)), 1.0)
    session.receive_data(packet(c.Acknowledge(sequence=1, subscription_id=sub)), 1.0)
    assert session.offer_frame(vt(scroll_bounds=ScrollBounds(at_top=True)), 1.1) == 2
    plain, psub = subscribed()
    plain.offer_frame(vt(scroll_bounds=ScrollBounds(at_top=False)), 1.0)
    plain.receive_data(packet(c.Acknowledge(sequence=1, subscription_id=psub)), 1.0)
    assert plain.offer_frame(vt(scroll_bounds=ScrollBounds(at_top=True)), 1.1) is None


ARCHIVE = StyledArchive(data=b"\x1b[0m\x1b[38;5;1mred\x1b[0m\r\nplain", row_offset=3)


def test_styled_scrollback_rides_in_the_viewport_in_the_usual_order() -> None:
    session, sub = subscribed(viewport=True, scroll_state=True, styled=True)
    session.offer_frame(vt(b"live"), 0.0)
    session.receive_data(packet(c.Acknowledge(sequence=1, subscription_id=sub)), 0.0)
    outgoing(session)
    rid = uuid.uuid4()
    scroll(session, sub, rid, c.ScrollDirection.UP, 1.0)
    session.scroll_applied(rid, 1.0)
    bounds = ScrollBounds(at_top=False, at_bottom=False)
    capture = vt(
        b"live", viewport_text="old\nrows", scroll_bounds=bounds, styled_scrollback=ARCHIVE
    )
    assert session.offer_frame(capture, 1.25) == 2
    sent = outgoing(session)
    assert [type(m) for m in sent] == [c.Viewport, c.ScrollState, VTFramePacket, c.ScrollResult]
    assert sent[0] == c.Viewport(
        styled_scrollback=c.StyledScrollback(data=ARCHIVE.data, row_offset=3),
        text="old\nrows",
        sequence=2,
        subscription_id=sub,
    )
    # On the wire: Base64 bytes and the row offset, as Prowl's MirrorStyledScrollback.
    body = c.encode_control(sent[0])
    assert (
        b'"styledScrollback":{"bytes":"G1swbRtbMzg7NTsxbXJlZBtbMG0NCnBsYWlu","rowOffset":3}' in body
    )
    assert [m.sequence for m in sent] == [2, 2, 2, 2]


NO_STYLED = ALL_CAPS - {"styled-scrollback-v1"}
VT, TEXT = c.Representation.VT, c.Representation.TEXT


@pytest.mark.parametrize(
    ("representation", "viewport", "styled", "caps", "expected", "archive"),
    [
        # both opt-ins and the capability: the archive goes
        (VT, True, True, ALL_CAPS, [c.Viewport, VTFramePacket], True),
        # viewport text alone: a viewport without the archive
        (VT, True, None, ALL_CAPS, [c.Viewport, VTFramePacket], False),
        # the archive without viewport text: nothing extra at all
        (VT, None, True, ALL_CAPS, [VTFramePacket], False),
        # a source without styled-scrollback-v1: viewport text only
        (VT, True, True, NO_STYLED, [c.Viewport, VTFramePacket], False),
        # text-v1: neither
        (TEXT, True, True, ALL_CAPS, [TextFramePacket], False),
    ],
)
def test_styled_scrollback_only_with_both_opt_ins_on_vt(
    representation: c.Representation,
    viewport: bool | None,
    styled: bool | None,
    caps: frozenset[str],
    expected: list[type],
    archive: bool,
) -> None:
    session, _ = subscribed(representation, viewport=viewport, styled=styled, caps=caps)
    assert session.lease is not None and session.lease.opt_ins.styled_scrollback is archive
    if representation is VT:
        session.offer_frame(vt(viewport_text="old", styled_scrollback=ARCHIVE), 1.0)
    else:
        session.offer_frame(TextCapture(columns=80, rows=24, text="old"), 1.0)
    sent = outgoing(session)
    assert [type(m) for m in sent] == expected
    if isinstance(sent[0], c.Viewport):
        assert (sent[0].styled_scrollback is not None) is archive


def test_a_lease_never_wants_the_archive_without_viewport_text() -> None:
    lease = Lease(
        subscription_id=uuid.uuid4(),
        pane_id=PANE,
        representation=c.Representation.VT,
        opt_ins=CaptureOptions(viewport_text=False, scroll_bounds=False, styled_scrollback=True),
        can_scroll=True,
    )
    assert not lease.opt_ins.styled_scrollback


def test_an_archive_only_change_is_a_frame_change_for_opted_in_leases_only() -> None:
    other = StyledArchive(data=b"\x1b[0mblue", row_offset=3)
    for styled, second in ((True, 2), (None, None)):
        session, sub = subscribed(viewport=True, styled=styled)
        session.offer_frame(vt(viewport_text="old", styled_scrollback=ARCHIVE), 1.0)
        session.receive_data(packet(c.Acknowledge(sequence=1, subscription_id=sub)), 1.0)
        assert session.offer_frame(vt(viewport_text="old", styled_scrollback=other), 1.1) == second


def test_empty_text_is_a_real_replacement() -> None:
    session, sub = subscribed(c.Representation.TEXT)
    session.offer_frame(TextCapture(columns=80, rows=24, text="abc"), 1.0)
    session.receive_data(packet(c.Acknowledge(sequence=1, subscription_id=sub)), 1.0)
    assert session.offer_frame(TextCapture(columns=80, rows=24, text=""), 1.1) == 2


def test_oversized_frame_closes_the_connection() -> None:
    session, _ = subscribed()
    session.offer_frame(vt(b"x" * (8 * 1024 * 1024)), 1.0)
    assert "cannot send frame" in closed_reason(session).reason


def test_host_stop_ends_every_logged_in_session_and_closes_the_rest() -> None:
    """``ended hostStopped`` once logged in, lease or not (Android does not reconnect
    after ``ended``); before login, a close without a message."""
    listing = logged_in()
    listing.host_stopped()
    waiting = logged_in()
    waiting.receive_data(
        packet(
            c.Subscribe(pane_id=PANE, representation=c.Representation.VT, intent=c.Intent.IF_FREE)
        ),
        0.0,
    )
    assert waiting.phase is Phase.SUBSCRIBING
    waiting.host_stopped()
    holding, _ = subscribed()
    holding.host_stopped()
    for session in (listing, waiting, holding):
        assert outgoing(session) == [c.Ended(reason=c.EndReason.HOST_STOPPED)]
        assert session.is_closed and session.flushes_on_close
    verifying = new_session()
    verifying.receive_data(packet(c.Authenticate(device_id=DEVICE, proof=b"p" * 32)), 0.0)
    for session in (new_session(), verifying):
        session.host_stopped()
        assert session.data_to_send() == b"" and not session.flushes_on_close
        assert not closed_reason(session).is_failure
    with pytest.raises(LocalProtocolError):  # any other `ended` needs the lease
        logged_in().send_ended(c.EndReason.PANE_CLOSED)


def test_ended_is_the_last_word() -> None:
    session, _ = subscribed()
    session.send_ended(c.EndReason.TAKEN_OVER)
    assert outgoing(session) == [c.Ended(reason=c.EndReason.TAKEN_OVER)]
    assert session.is_closed and session.flushes_on_close
    assert session.offer_frame(vt(), 2.0) is None


# ------------------------------------------------------------------ scroll


def scroll(
    session: Session, sub: UUID, rid: UUID, direction: c.ScrollDirection, now: float
) -> None:
    session.receive_data(
        packet(c.Scroll(request_id=rid, direction=direction, subscription_id=sub)), now
    )


def test_scroll_completes_with_the_next_frame_after_settling() -> None:
    session, sub = subscribed()
    session.offer_frame(vt(b"a"), 0.0)
    session.receive_data(packet(c.Acknowledge(sequence=1, subscription_id=sub)), 0.0)
    outgoing(session)
    events(session)
    rid = uuid.uuid4()
    scroll(session, sub, rid, c.ScrollDirection.UP, 1.0)
    assert events(session) == [ScrollRequested(sub, PANE, rid, c.ScrollDirection.UP)]
    session.scroll_applied(rid, 1.0)
    assert not session.frame_schedule(1.1).open
    assert session.offer_frame(vt(b"scrolled"), 1.1) is None  # settling for 200 ms
    assert session.offer_frame(vt(b"scrolled"), 1.25) == 2
    sent = outgoing(session)
    assert [type(m) for m in sent] == [VTFramePacket, c.ScrollResult]
    assert sent[1] == c.ScrollResult(request_id=rid, sequence=2, subscription_id=sub)
    # A duplicate replays the result and applies nothing.
    scroll(session, sub, rid, c.ScrollDirection.UP, 1.5)
    assert events(session) == []
    assert outgoing(session) == [c.ScrollResult(request_id=rid, sequence=2, subscription_id=sub)]


def test_scroll_at_a_boundary_is_forced_out_at_800_ms() -> None:
    session, sub = subscribed()
    session.offer_frame(vt(b"same"), 0.0)
    session.receive_data(packet(c.Acknowledge(sequence=1, subscription_id=sub)), 0.0)
    rid = uuid.uuid4()
    scroll(session, sub, rid, c.ScrollDirection.DOWN, 1.0)
    session.scroll_applied(rid, 1.0)
    assert session.offer_frame(vt(b"same"), 1.3) is None  # unchanged, not yet forced
    assert session.offer_frame(vt(b"same"), 1.8) == 2


def test_scroll_busy_unavailable_and_failures() -> None:
    session, sub = subscribed()
    first, second = uuid.uuid4(), uuid.uuid4()
    scroll(session, sub, first, c.ScrollDirection.UP, 0.0)
    events(session)
    outgoing(session)
    scroll(session, sub, first, c.ScrollDirection.UP, 0.1)  # pending duplicate: nothing
    assert outgoing(session) == [] and events(session) == []
    scroll(session, sub, second, c.ScrollDirection.UP, 0.1)
    assert outgoing(session) == [
        c.Failure(error=SCROLL_BUSY, subscription_id=sub, request_id=second)
    ]
    session.scroll_failed(first)
    assert outgoing(session) == [
        c.Failure(error=SCROLL_COULD_NOT, subscription_id=sub, request_id=first)
    ]
    scroll(session, sub, first, c.ScrollDirection.UP, 0.2)  # replayed, not re-applied
    assert events(session) == []
    assert outgoing(session) == [
        c.Failure(error=SCROLL_COULD_NOT, subscription_id=sub, request_id=first)
    ]
    scroll(session, sub, first, c.ScrollDirection.DOWN, 0.3)  # same id, other direction
    assert session.is_closed

    session, sub = subscribed(caps=frozenset())
    rid = uuid.uuid4()
    for _ in range(2):  # not remembered: the same failure each time
        scroll(session, sub, rid, c.ScrollDirection.UP, 0.0)
        assert outgoing(session) == [
            c.Failure(error=SCROLL_CANNOT, subscription_id=sub, request_id=rid)
        ]


# ------------------------------------------------------------------ history


def history_session(lines: int) -> tuple[Session, UUID, UUID]:
    session, sub = subscribed()
    session.receive_data(packet(c.History(subscription_id=sub)), 1.0)
    assert events(session) == [HistoryRequested(sub, PANE)]
    hid = uuid.uuid4()
    session.history_captured(
        hid, "\n".join(str(i) for i in range(lines)), truncated=False, captured_at=1800000000.5
    )
    return session, sub, hid


def test_history_pages_are_contiguous_and_fixed() -> None:
    session, sub, hid = history_session(451)
    first = outgoing(session)[0]
    assert (first.offset, first.total, first.lines[0], first.lines[-1]) == (251, 451, "251", "450")
    session.receive_data(packet(c.History(history_id=hid, offset=251, subscription_id=sub)), 1.1)
    second = outgoing(session)[0]
    assert (second.offset, len(second.lines), second.lines[-1]) == (51, 200, "250")
    session.receive_data(packet(c.History(history_id=hid, offset=51, subscription_id=sub)), 1.2)
    third = outgoing(session)[0]
    assert (third.offset, third.lines[0], third.lines[-1]) == (0, "0", "50")
    assert {p.captured_at for p in (first, second, third)} == {1800000000.5}
    session.receive_data(packet(c.History(history_id=hid, offset=0, subscription_id=sub)), 1.3)
    assert outgoing(session)[0].lines == ()


#: Offsets outside 0 … count that Prowl's host closes on (prowl-host.md §7): one
#: below, one above, and numbers far past any snapshot (2 MiB holds ~2^21 lines).
BAD_OFFSETS = [-1, 452, 10**6, 2**62]


@pytest.mark.parametrize("offset", BAD_OFFSETS)
def test_history_offset_out_of_range_closes(offset: int) -> None:
    session, sub, hid = history_session(451)
    outgoing(session)
    session.receive_data(packet(c.History(history_id=hid, offset=offset, subscription_id=sub)), 1.1)
    closed = closed_reason(session)
    assert "outside 0 … 451" in closed.reason
    assert not closed.is_failure  # logged in: nothing toward the address's lock-out
    assert outgoing(session) == []  # silent: nothing but the close


@pytest.mark.parametrize("offset", BAD_OFFSETS)
def test_a_new_snapshot_with_an_offset_outside_it_closes_once_captured(offset: int) -> None:
    """Prowl's host pages a new snapshot at the request's offset too, so an
    offset outside it closes, silently, after the capture (not the newest page)."""
    session, sub = subscribed()
    session.receive_data(packet(c.History(offset=offset, subscription_id=sub)), 1.0)
    assert events(session) == [HistoryRequested(sub, PANE)]
    assert not session.is_closed  # judged against the snapshot, once there is one
    lines = "\n".join(str(i) for i in range(451))
    session.history_captured(uuid.uuid4(), lines, truncated=False, captured_at=1.5)
    closed = closed_reason(session)
    assert "outside 0 … 451" in closed.reason
    assert not closed.is_failure
    assert outgoing(session) == []


def test_a_new_snapshot_with_an_offset_inside_it_answers_that_page() -> None:
    session, sub = subscribed()
    session.receive_data(packet(c.History(offset=51, subscription_id=sub)), 1.0)
    events(session)
    lines = "\n".join(str(i) for i in range(451))
    session.history_captured(uuid.uuid4(), lines, truncated=False, captured_at=1.5)
    (page,) = outgoing(session)
    assert (page.offset, page.lines[0], page.lines[-1], page.total) == (0, "0", "50", 451)
    assert not session.is_closed


@pytest.mark.parametrize("offset", BAD_OFFSETS)
def test_a_new_snapshot_that_cannot_be_captured_ignores_its_offset(offset: int) -> None:
    """As in Prowl's host: the capture failed, so the offset is never judged."""
    session, sub = subscribed()
    session.receive_data(packet(c.History(offset=offset, subscription_id=sub)), 1.0)
    events(session)
    session.history_unavailable()
    assert outgoing(session) == [c.Failure(error=HISTORY_UNAVAILABLE, subscription_id=sub)]
    assert not session.is_closed


def test_history_foreign_id_closes_and_unavailable_is_gentle() -> None:
    session, sub, _ = history_session(3)
    outgoing(session)
    session.receive_data(packet(c.History(history_id=uuid.uuid4(), subscription_id=sub)), 1.1)
    assert session.is_closed
    session, sub = subscribed()
    session.history_unavailable()
    assert outgoing(session) == [c.Failure(error=HISTORY_UNAVAILABLE, subscription_id=sub)]
    assert not session.is_closed


def test_empty_history_is_one_line() -> None:
    session, _, _ = history_session(0)
    page = outgoing(session)[0]
    assert (page.total, page.offset, page.lines) == (1, 0, ("",))


def test_history_requests_wait_behind_a_capture_and_are_answered_in_order() -> None:
    session, sub, old = history_session(450)
    outgoing(session)
    session.receive_data(packet(c.History(subscription_id=sub)), 2.0)
    assert events(session) == [HistoryRequested(sub, PANE)]
    # While the source reads, a second snapshot and a page of the old one are asked for.
    session.receive_data(packet(c.History(subscription_id=sub)), 2.1)
    session.receive_data(packet(c.Ping()), 2.1)
    assert events(session) == []  # not announced: the host is told when the first is done
    assert outgoing(session) == [c.Pong()]  # pings go on meanwhile
    assert session.history_captured(uuid.uuid4(), "a\nb", truncated=False, captured_at=1.0)
    first = outgoing(session)
    assert [p.lines for p in first] == [("a", "b")]
    assert not session.history_unavailable()  # the second capture failed: answered in turn
    assert outgoing(session) == [c.Failure(error=HISTORY_UNAVAILABLE, subscription_id=sub)]
    assert old != first[0].history_id


def test_a_queued_page_of_a_replaced_snapshot_closes_as_it_would_in_order() -> None:
    session, sub, old = history_session(450)
    outgoing(session)
    session.receive_data(packet(c.History(subscription_id=sub)), 2.0)
    session.receive_data(packet(c.History(history_id=old, offset=250, subscription_id=sub)), 2.1)
    assert not session.is_closed
    assert not session.history_captured(uuid.uuid4(), "x", truncated=False, captured_at=1.0)
    assert session.is_closed  # the old snapshot was replaced before the page request's turn


def test_a_flood_of_history_requests_behind_a_capture_closes() -> None:
    session, sub = subscribed()
    session.receive_data(packet(c.History(subscription_id=sub)), 1.0)
    flood = b"".join(packet(c.History(subscription_id=sub)) for _ in range(65))
    session.receive_data(flood, 1.0)
    assert "too many history requests" in closed_reason(session).reason


def test_frames_flow_while_a_scroll_is_applied_and_do_not_complete_it() -> None:
    session, sub = subscribed()
    session.offer_frame(vt(b"a"), 0.0)
    session.receive_data(packet(c.Acknowledge(sequence=1, subscription_id=sub)), 0.0)
    outgoing(session)
    rid = uuid.uuid4()
    scroll(session, sub, rid, c.ScrollDirection.UP, 1.0)
    # The source is still scrolling (slowly): typed input must still show.
    assert session.frame_schedule(1.5).open
    assert session.offer_frame(vt(b"typed"), 1.5) == 2
    assert [type(m) for m in outgoing(session)] == [VTFramePacket]
    other = uuid.uuid4()
    scroll(session, sub, other, c.ScrollDirection.UP, 1.6)
    assert outgoing(session) == [
        c.Failure(error=SCROLL_BUSY, subscription_id=sub, request_id=other)
    ]
    session.receive_data(packet(c.Acknowledge(sequence=2, subscription_id=sub)), 1.7)
    session.scroll_applied(rid, 2.0)
    schedule = session.frame_schedule(2.1)
    assert (schedule.open, schedule.due, schedule.wake_at) == (False, False, pytest.approx(2.2))
    schedule = session.frame_schedule(2.3)
    assert (schedule.open, schedule.due, schedule.wake_at) == (True, True, pytest.approx(2.8))
    assert session.offer_frame(vt(b"scrolled"), 2.3) == 3
    assert [type(m) for m in outgoing(session)] == [VTFramePacket, c.ScrollResult]
    assert session.frame_schedule(2.4).wake_at is None


def test_the_waker_runs_when_bytes_are_queued_and_when_the_session_closes() -> None:
    session, sub = subscribed()
    calls: list[bool] = []
    session.set_waker(lambda: calls.append(session.is_closed))
    session.offer_frame(vt(b"a"), 0.0)
    assert calls and calls[-1] is False
    calls.clear()
    events(session)
    session.receive_data(packet(c.Acknowledge(sequence=9, subscription_id=sub)), 0.0)
    assert calls == [True]  # a wrong ACK closes: the connection must learn at once


def test_grant_lease_returns_the_first_frames_sequence() -> None:
    session = logged_in()
    request = c.Subscribe(pane_id=PANE, representation=c.Representation.VT, intent=c.Intent.IF_FREE)
    session.receive_data(packet(request), 0.0)
    events(session)
    lease = Lease.for_request(request, subscription_id=uuid.uuid4(), capabilities=ALL_CAPS)
    assert session.grant_lease(lease, host_run_id=RUN, first_capture=vt(), now=0.0) == 1


# ------------------------------------------------------------------ commands


def command(sub: UUID | None, cmd: c.RemoteCommand, rid: UUID | None = None) -> c.Command:
    request = c.CommandRequest(
        request_id=rid or uuid.uuid4(), request=c.CommandEnvelope(output="json", command=cmd)
    )
    return c.Command(subscription_id=sub, command_request=request)


def test_command_lease_rules() -> None:
    session = logged_in()
    message = command(None, c.ProfilesCommand())
    session.receive_data(packet(message), 1.0)
    assert events(session) == [CommandRequested(message)]
    # identical duplicate while in flight: ignored; a different one: closes
    session.receive_data(packet(message), 1.0)
    assert events(session) == []
    session.receive_data(packet(command(None, c.ListCommand())), 1.0)
    assert session.is_closed

    session, sub = subscribed()
    targeted = command(sub, c.AgentsInputCommand(pane=str(PANE), prompt="hi"))
    session.receive_data(packet(targeted), 1.0)
    assert events(session) == [CommandRequested(targeted)]
    session.send_command_result(targeted.command_request.request_id, {"ok": True})
    session.receive_data(packet(command(sub, c.ListCommand())), 1.0)
    assert len(events(session)) == 1
    session.send_command_result(uuid.uuid4(), {"ok": True})  # (other id: still in flight)
    for bad in (command(None, c.ListCommand()), command(sub, c.ProfilesCommand())):
        session, sub = subscribed()
        session.receive_data(packet(bad), 1.0)
        assert session.is_closed
    session = logged_in()
    session.receive_data(
        packet(command(None, c.AgentsInputCommand(pane=str(PANE), prompt=""))), 1.0
    )
    assert session.is_closed
