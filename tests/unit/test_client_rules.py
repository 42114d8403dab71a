"""What Prowl's own apps require of the bytes, kept by the pure session and codecs.

``prowl-clients.md`` lists what the Android, iOS and Mac apps check; a host that
breaks one loses that app even when it follows the wire document. The rules
that the session and the codecs decide alone are proven here, without sockets;
``docs/protocol.md`` §12 maps every rule to its test.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import uuid
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from mirror_host import control as c
from mirror_host.capture.values import Capability, ScrollBounds, TextCapture, VTCapture
from mirror_host.commands import responses
from mirror_host.commands.launch import AgentPaneCommands
from mirror_host.commands.service import CommandService
from mirror_host.control.swiftjson import dump_json
from mirror_host.session import connection as connection_module
from mirror_host.session.login import PAIRING_NOT_SAVED
from mirror_host.wire import TextFramePacket, VTFramePacket
from tests.fakes.memory_source import MemorySource
from tests.strategies import message_of
from tests.unit.connection_harness import connect, hub_with
from tests.unit.connection_harness import subscribe as harness_subscribe
from tests.unit.test_agent_delivery import ScriptedPanes
from tests.unit.test_session import (
    HOST,
    PANE,
    events,
    history_session,
    new_session,
    outgoing,
    packet,
    scroll,
    subscribed,
)

# ---------------------------------------------------------------- authentication

#: What the apps accept before they are logged in (prowl-clients.md, "Authentication").
BEFORE_LOGIN = (c.Challenge, c.Paired, c.Authenticated, c.Failure, c.Ping, c.Pong)


def test_before_login_the_host_sends_only_what_the_apps_accept() -> None:
    session = new_session()
    sent = outgoing(session)
    assert sent == [c.Challenge(host_id=HOST, nonce=b"n" * 32)]  # first, and once
    session.receive_data(packet(c.Ping()), 0.5)
    session.handle_timer(2.0)  # a heartbeat while the client thinks
    sent += outgoing(session)
    session.receive_data(packet(c.Authenticate(device_id=uuid.uuid4(), proof=b"p" * 32)), 2.5)
    sent += outgoing(session)  # the proof is being checked: nothing else goes out
    assert [type(m) for m in sent] == [c.Challenge, c.Pong, c.Ping]
    assert all(isinstance(m, BEFORE_LOGIN) for m in sent)


# ---------------------------------------------------------------- frames and scroll state


#: One step a client or the pane takes: a new screen, an acknowledgement, a refresh, a scroll.
steps = st.lists(
    st.one_of(
        st.tuples(st.just("screen"), st.sampled_from(["a", "b", "c"]), st.booleans()),
        st.tuples(st.just("ack"), st.just(""), st.just(False)),
        st.tuples(st.just("refresh"), st.just(""), st.just(False)),
        st.tuples(st.just("scroll"), st.just(""), st.just(False)),
    ),
    max_size=25,
)


@given(steps)
def test_exactly_one_scroll_state_before_every_frame_and_none_alone(
    script: list[tuple[str, str, bool]],
) -> None:
    session, sub = subscribed(c.Representation.TEXT, scroll_state=True)
    sent: list[Any] = []
    now, outstanding = 0.0, 0
    for action, text, at_top in script:
        now += 0.3
        if action == "screen":
            bounds = ScrollBounds(at_top=at_top, at_bottom=not at_top)
            capture = TextCapture(columns=80, rows=24, text=text, scroll_bounds=bounds)
            session.offer_frame(capture, now)
        elif action == "ack" and outstanding:
            ack = c.Acknowledge(sequence=outstanding, subscription_id=sub)
            session.receive_data(packet(ack), now)
            outstanding = 0
        elif action == "refresh":
            session.receive_data(packet(c.Refresh(subscription_id=sub)), now)
        elif action == "scroll":
            rid = uuid.uuid4()
            scroll(session, sub, rid, c.ScrollDirection.UP, now)
            session.scroll_applied(rid, now)
        while session.next_event() is not None:
            pass
        out = outgoing(session)
        sent += out
        frames = [m.sequence for m in out if isinstance(m, TextFramePacket)]
        outstanding = frames[-1] if frames else outstanding
        assert not session.is_closed
    staged: int | None = None
    for message in sent:
        if isinstance(message, c.ScrollState):
            assert staged is None, "two scrollStates before one frame"
            staged = message.sequence
        elif isinstance(message, TextFramePacket | VTFramePacket):
            assert staged == message.sequence, "a frame without its scrollState"
            staged = None
        elif isinstance(message, c.ScrollResult):
            assert staged is None
    assert staged is None, "a scrollState without its frame"


def test_a_scroll_result_follows_the_frame_that_completes_it() -> None:
    session, sub = subscribed(scroll_state=True)
    session.offer_frame(TextCapture(columns=80, rows=24, text="live"), 0.0)
    session.receive_data(packet(c.Acknowledge(sequence=1, subscription_id=sub)), 0.0)
    outgoing(session)
    rid = uuid.uuid4()
    scroll(session, sub, rid, c.ScrollDirection.UP, 1.0)
    session.scroll_applied(rid, 1.0)
    assert session.offer_frame(TextCapture(columns=80, rows=24, text="back"), 1.25) == 2
    sent = outgoing(session)
    assert [type(m) for m in sent] == [c.ScrollState, TextFramePacket, c.ScrollResult]
    # Above the sequence at request time (1), at most the last frame sent (2).
    assert sent[2] == c.ScrollResult(request_id=rid, sequence=2, subscription_id=sub)


# ---------------------------------------------------------------- numbers

#: Integer members of what the host sends; Android parses them from the number's text.
INTEGER_MEMBERS = {"sequence", "offset", "total", "rowOffset"}
_NUMBER = re.compile(rb'"(\w+)":(-?[0-9][0-9.eE+-]*)')


@given(
    st.one_of(
        message_of(c.ScrollState),
        message_of(c.ScrollResult),
        message_of(c.HistoryPage),
        message_of(c.Viewport),
    )
)
def test_integers_are_written_as_digits(message: Any) -> None:
    for name, number in _NUMBER.findall(c.encode_control(message)):
        if name.decode() in INTEGER_MEMBERS:
            assert re.fullmatch(rb"-?[0-9]+", number), (name, number)


def test_integral_numbers_in_command_results_are_digits() -> None:
    result = {"ok": True, "data": {"input": {"bytes": 12, "characters": 3.0}, "count": 0}}
    encoded = c.encode_control(
        c.CommandResult(
            command_response=c.CommandResponse(request_id=uuid.uuid4(), response=result)
        )
    )
    assert b'"bytes":12' in encoded and b'"characters":3}' in encoded and b'"count":0' in encoded


# ---------------------------------------------------------------- history


def test_every_page_carries_the_same_total_and_captured_at_bytes() -> None:
    session, sub, hid = history_session(451)
    pages = [outgoing(session)[0]]
    for offset in (251, 51):
        session.receive_data(
            packet(c.History(history_id=hid, offset=offset, subscription_id=sub)), 1.1
        )
        pages += outgoing(session)
    encoded = [c.encode_control(page) for page in pages]
    totals = {re.search(rb'"total":([0-9]+)', e).group(1) for e in encoded}  # type: ignore[union-attr]
    stamps = {re.search(rb'"capturedAt":([^,}]+)', e).group(1) for e in encoded}  # type: ignore[union-attr]
    assert totals == {b"451"} and len(stamps) == 1  # bit-identical on every page
    assert {page.history_id for page in pages} == {hid}


# ---------------------------------------------------------------- failures


#: Failures an app survives (prowl-clients.md, "Ending and reconnecting"); any other
#: makes it close, and Android then reconnects, so a device kept off gets `ended`.
RECOVERABLE = ("PANE_BUSY", "HISTORY_UNAVAILABLE", "SCROLL_")
#: The one failure meant to end the connection: a pairing the host could not save
#: (issue 29). Every app shows a pre-login failure's error as the reason; Android
#: retries only with a saved credential, which a pairing phone has not, so nothing
#: reconnects. Sent only on a pairing connection (tests/unit/test_device_book.py).
SHOWN_THEN_CLOSED = (PAIRING_NOT_SAVED,)


def test_the_session_sends_only_failures_the_apps_recover_from() -> None:
    # Every module of the session package (the state table split it in parts).
    errors = []
    for path in sorted(Path(connection_module.__file__).parent.glob("*.py")):
        module = importlib.import_module(f"mirror_host.session.{path.stem}")
        tree = ast.parse(path.read_text())
        # A local picked from a table of refusals (`error = _TABLE[outcome]`) stands
        # for every entry of that table.
        picked = {
            target.id: node.value.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Subscript)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Failure":
                (error,) = [k.value for k in node.keywords if k.arg == "error"]
                assert isinstance(error, ast.Name), ast.unparse(error)
                if error.id in picked:
                    errors.extend(getattr(module, ast.unparse(picked[error.id])).values())
                else:
                    errors.append(getattr(module, error.id))
    assert errors and all(e.startswith(RECOVERABLE) or e in SHOWN_THEN_CLOSED for e in errors), (
        errors
    )
    assert PAIRING_NOT_SAVED in errors  # the scan above sees the session's failures
    # And ending a lease is `ended`, the last word.
    session, _ = subscribed()
    session.send_ended(c.EndReason.TAKEN_OVER)
    assert outgoing(session) == [c.Ended(reason=c.EndReason.TAKEN_OVER)]
    assert session.is_closed


# ---------------------------------------------------------------- pane list and commands


def test_pane_entries_carry_the_four_required_fields() -> None:
    bare = c.PaneDescriptor(id=uuid.UUID(int=1), title="t", directory="/d", busy=False)
    full = c.PaneDescriptor(
        id=uuid.UUID(int=2), title="u", directory="/e", busy=True, project_name="p", subtitle="s"
    )
    panes = c.Panes(panes=(bare, full), capabilities=("text-v1",), host_run_id=uuid.uuid4())
    entries = json.loads(c.encode_control(panes))["panes"]["_0"]["panes"]
    for entry in entries:
        uuid.UUID(entry["id"])
        assert isinstance(entry["title"], str) and isinstance(entry["directory"], str)
        assert isinstance(entry["busy"], bool)
        assert all(isinstance(entry.get(k, ""), str) for k in ("projectName", "subtitle"))
    assert set(entries[0]) == {"id", "title", "directory", "busy"}  # absent, never null


def test_every_command_answer_is_an_object_with_ok_and_a_coded_error() -> None:
    answers = [
        responses.rejected(responses.NOT_ALLOWED),
        responses.unconfirmed(),
        responses.cli_error("agentsInput", "SEND_FAILED", "m"),
        responses.cli_success("list", {"count": 0, "items": []}),
    ]
    for answer in answers:
        assert isinstance(answer, dict) and isinstance(answer["ok"], bool)
        if answer["ok"] is False:
            error = answer["error"]
            assert isinstance(error, dict)
            assert isinstance(error["code"], str) and isinstance(error["message"], str)
        json.loads(dump_json(answer))  # plain JSON


# ---------------------------------------------------------------- frames as the apps render them


class LoneSurrogateSource(MemorySource):
    """A source whose text carries a lone surrogate, as a ``\\ud800`` escape in
    Herdr's or agliteterm's JSON becomes in Python."""

    capabilities = MemorySource.capabilities | {Capability.VIEWPORT_TEXT}

    async def capture(self, pane_id: UUID, representation: c.Representation, **kw: bool) -> Any:
        await super().capture(pane_id, representation, **kw)
        if representation is c.Representation.TEXT:
            return TextCapture(columns=40, rows=10, text="lone \ud800 surrogate")
        return VTCapture(columns=40, rows=10, data=b"x", viewport_text="view \udfff")


async def test_text_reaches_the_apps_as_valid_utf8(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Every app drops a connection on text that is not UTF-8: a lone surrogate from
    a source is sent as U+FFFD, in text frames, viewport text and history."""
    source = LoneSurrogateSource()
    pane = source.add_pane()
    async with hub_with(source) as (_, owner, nursery):
        phone = await connect(owner, nursery)
        sub = await harness_subscribe(phone, pane, c.Representation.TEXT)
        frame = await phone.next(TextFramePacket)
        assert frame.subscription_id == sub and frame.text == "lone \ufffd surrogate"
        mac = await connect(owner, nursery)
        await mac.send(
            c.Subscribe(pane_id=pane, representation=c.Representation.VT,
                        intent=c.Intent.TAKEOVER, include_viewport_text=True)
        )  # fmt: skip
        await mac.next(c.Subscribed)
        viewport = await mac.next(c.Viewport)
        assert viewport.text == "view \ufffd"
        assert not any("cannot send" in closed.reason for closed in owner.closed)
    session, sub, _ = history_session(0)
    outgoing(session)
    session.receive_data(packet(c.History(subscription_id=sub)), 2.0)
    session.history_captured(uuid.uuid4(), "a\ud800b", truncated=False, captured_at=1.0)
    (page,) = outgoing(session)
    assert page.lines == ("a\ufffdb",)


def test_history_pages_say_truncated_as_a_boolean_and_are_never_empty() -> None:
    """All three apps require ``truncated``; no page is empty but the first of an
    empty history, which is one empty line here (``total`` 1)."""
    for lines in (0, 1, 450):
        session, _, _ = history_session(lines)
        (page,) = outgoing(session)
        body = json.loads(c.encode_control(page))["historyPage"]["_0"]
        assert body["truncated"] is False
        assert body["lines"] and body["offset"] + len(body["lines"]) == body["total"]


def test_a_scroll_answer_never_outlives_its_lease() -> None:
    """The Mac closes on a ``scrollResult`` or ``SCROLL_…`` failure for a lease that is
    not its current one: every one names the connection's lease, and once the lease
    has ended (taken over, closed) a scroll finishing late sends nothing."""
    session, sub = subscribed()
    rid = uuid.uuid4()
    scroll(session, sub, rid, c.ScrollDirection.UP, 0.0)
    outgoing(session)
    session.send_ended(c.EndReason.TAKEN_OVER)
    assert outgoing(session) == [c.Ended(reason=c.EndReason.TAKEN_OVER)]
    session.scroll_failed(rid)
    session.scroll_applied(rid, 0.5)
    assert session.offer_frame(TextCapture(columns=1, rows=1, text="x"), 1.5) is None
    assert outgoing(session) == []


# ---------------------------------------------------------------- results a phone can read


GOOD_INPUT = responses.cli_success("agentsInput", responses.input_delivered("hi", "argument"))


@pytest.mark.parametrize(
    ("command", "result"),
    [
        ("agentsInput", {**GOOD_INPUT, "data": None}),
        ("agentsInput", {**GOOD_INPUT, "data": {"input": None}}),
        ("send", {**GOOD_INPUT, "data": {"input": {"bytes": 2.0, "trailing_enter_sent": True}}}),
        ("send", {**GOOD_INPUT, "data": {"input": {"bytes": 2, "trailing_enter_sent": "yes"}}}),
        ("agentsInput", {**GOOD_INPUT, "data": {"input": {"bytes": True, "trailing_enter_sent": True}}}),
        ("agentsInput", {"ok": False, "command": "agents.input", "error": None}),
        ("create", {"ok": False, "command": "create", "error": {"code": "X"}}),
        ("list", {"ok": True, "command": "list", "data": None}),
        ("list", None),
    ],
)  # fmt: skip
def test_a_result_android_would_drop_the_connection_for_is_sent_as_unconfirmed(
    command: str, result: Any
) -> None:
    sent, problem = responses.for_the_apps(command, result)
    assert problem is not None
    assert sent == responses.unconfirmed()  # "unknown": the draft stays, nothing is replayed


def test_results_the_apps_read_go_unchanged() -> None:
    for command, result in (
        ("agentsInput", GOOD_INPUT),
        ("send", responses.cli_success("send", responses.input_delivered("ls", "argv"))),
        ("agentsInput", responses.cli_error("agentsInput", "SEND_FAILED", "m")),
        ("list", responses.cli_success("list", {"count": 0, "items": []})),
    ):
        assert responses.for_the_apps(command, result) == (result, None)


class NullResultBackend(AgentPaneCommands):
    """A backend with a bug: its delivered input has ``data.input`` null."""

    async def agent_input(self, pane_id: UUID, prompt: str, **kw: Any) -> Any:
        return {
            "ok": True,
            "command": "agents.input",
            "schema_version": "x",
            "data": {"input": None},
        }


async def test_the_command_service_never_sends_a_result_android_cannot_read(
    autojump_clock: trio.testing.MockClock,
) -> None:
    service = CommandService(NullResultBackend(ScriptedPanes()))
    session, sub = subscribed()
    envelope = c.CommandEnvelope(
        output="json", command=c.AgentsInputCommand(pane=str(PANE), prompt="hi")
    )
    request = c.CommandRequest(request_id=uuid.uuid4(), request=envelope)
    session.receive_data(packet(c.Command(subscription_id=sub, command_request=request)), 0.0)
    (requested,) = events(session)
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        service.handle(session, requested)
        await trio.sleep(1)
        nursery.cancel_scope.cancel()
    (answer,) = [m for m in outgoing(session) if isinstance(m, c.CommandResult)]
    assert answer.command_response.response == responses.unconfirmed()
