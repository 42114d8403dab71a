"""Checks of the optional features and of input: scroll, history, commands, typing. I/O.

Scroll checks scroll *down*: on a pane already at its live bottom that moves
nothing (a host completes a boundary scroll with a forced frame), so a correct
host's screen is left as it was. Only with ``--allow-input`` does
``scroll.duplicate`` scroll *up* (on a ``text-v1`` lease, whose frames show the
scrolled view) to see whether a repeated request is applied again, and then
scrolls back down. The typing checks type one harmless ``echo`` and run only
with ``--allow-input``; ``input.text-lease`` sends one NUL byte, which a correct
host never delivers.
"""

from __future__ import annotations

import contextlib
import secrets
from uuid import UUID

import trio

from mirror_host.client.conformance.probe import (
    CheckFailed,
    CheckSkipped,
    Conn,
    Context,
    Frame,
    device,
    fail,
    frame_text,
    new_id,
    subscribed,
)
from mirror_host.client.conformance.rules import (
    COMMAND_CAPABILITIES,
    MAX_HISTORY_BYTES,
    PAGE_LINES,
    last_page_end,
    moved_up,
    page_bytes,
    page_problem,
    same_snapshot,
    send_refusal_problem,
    view_rows,
)
from mirror_host.control import (
    Command,
    CommandEnvelope,
    CommandRequest,
    CommandResult,
    Failure,
    History,
    HistoryPage,
    Input,
    ListCommand,
    Representation,
    Scroll,
    ScrollDirection,
    ScrollResult,
    SendCommand,
)
from mirror_host.wire import TextFramePacket

__all__ = [
    "COMMAND_CAPABILITIES",
    "check_commands_send_refused",
    "check_commands_output_json",
    "check_history_invalid",
    "check_history_offset_range",
    "check_history_pages",
    "check_input_coalesce",
    "check_input_echo",
    "check_input_empty",
    "check_input_text_lease",
    "check_scroll_busy",
    "check_scroll_duplicate",
    "check_scroll_result",
]

SCROLL_BUSY_PREFIX = "SCROLL_BUSY"
SCROLL_UNAVAILABLE_PREFIX = "SCROLL_UNAVAILABLE"
#: The source has no remote scroll: not remembered, so a repeat gets it again.
SCROLL_CANNOT = "SCROLL_UNAVAILABLE: Host cannot scroll this pane."
HISTORY_UNAVAILABLE_PREFIX = "HISTORY_UNAVAILABLE"
#: Pages walked one after another; a longer history is then checked at line 0.
WALK_PAGES = 20
SEND_REFUSED = (
    "Host cannot verify an empty shell command line. "
    "Use an Agent Profile or control the shell on Host."
)
#: ``output`` values that are not exactly ``json``: Prowl compares the string as it is.
BAD_OUTPUTS = ("text", "", "JSON", "j" * 4096)
#: Offsets outside 0 … total: below it, and far past any snapshot (2 MiB of history
#: holds about 2^21 lines).
BAD_OFFSETS = (-1, 2**62, 10**6)
#: Echo commands typed (with --allow-input) when a pane's history fits one page.
HISTORY_ECHOES = 110
#: How long a repeated scroll has to show that it was applied again.
REPLAY_WATCH_SECONDS = 1.2
#: How long ``input.coalesce`` first holds a frame while the echo runs.
COALESCE_HOLD_SECONDS = 3.0


def _echo_seconds(ctx: Context) -> float:
    """How long a typed echo's output may take to show: twice ``--wait``."""
    return 2 * ctx.wait


# ---------------------------------------------------------------- scroll


async def _scroll(conn: Conn, request_id: UUID, direction: ScrollDirection) -> None:
    await conn.send(Scroll(request_id=request_id, direction=direction, subscription_id=conn.lease))


async def _scroll_outcome(conn: Conn, request_id: UUID, what: str) -> ScrollResult | Failure:
    """The scroll's ``scrollResult`` (checked), or its ``SCROLL_UNAVAILABLE`` failure."""
    # Prowl's host completes a scroll by 800 ms.
    reply = await conn.expect_one((ScrollResult, Failure), what, timeout=conn.ctx.wait + 1.0)
    if isinstance(reply, Failure):
        if reply.request_id != request_id or not reply.error.startswith(SCROLL_UNAVAILABLE_PREFIX):
            fail(f"the scroll was answered {reply.error!r} (requestID {reply.request_id})")
        if reply.subscription_id != conn.lease:
            fail("the SCROLL_UNAVAILABLE failure does not name the lease")
        return reply
    assert isinstance(reply, ScrollResult)
    if reply.request_id != request_id:
        fail(f"`scrollResult` names request {reply.request_id}, not {request_id}")
    if reply.subscription_id != conn.lease:
        fail("`scrollResult` names another subscription than the lease")
    assert conn.ledger is not None
    if reply.sequence != conn.ledger.last_sequence:
        fail(
            f"`scrollResult` names frame {reply.sequence}, but it followed frame "
            f"{conn.ledger.last_sequence} (it must come right after the frame that completes it)"
        )
    return reply


def _unavailable(failure: Failure) -> CheckSkipped:
    return CheckSkipped(f"the host answered {failure.error!r} for this pane")


async def check_scroll_result(ctx: Context) -> str:
    """``scroll`` is completed by a fresh frame followed by ``scrollResult`` naming it
    (a ``SCROLL_UNAVAILABLE`` failure for this pane skips)."""
    ctx.needs("remote-scroll")
    async with subscribed(ctx, "subscriber") as conn:
        before = (await conn.frame("frame 1")).sequence
        request = new_id()
        await _scroll(conn, request, ScrollDirection.DOWN)
        result = await _scroll_outcome(conn, request, "`scrollResult`")
        if isinstance(result, Failure):
            raise _unavailable(result)
        if result.sequence <= before:
            fail(f"`scrollResult` names frame {result.sequence}, sent before the scroll")
    return f"completed by frame {result.sequence}"


def _other(direction: ScrollDirection) -> ScrollDirection:
    return ScrollDirection.UP if direction is ScrollDirection.DOWN else ScrollDirection.DOWN


async def _direction_closes(conn: Conn, request_id: UUID, direction: ScrollDirection) -> None:
    """The latest request id again with the other direction closes the connection."""
    await _scroll(conn, request_id, _other(direction))
    await conn.expect_closed("a repeated scroll request id with another direction")


async def _failure_replayed(
    conn: Conn, request: UUID, direction: ScrollDirection, failure: Failure
) -> str:
    """A scroll that could not be applied: a repeat gets the same failure, never a scroll."""
    if failure.error == SCROLL_CANNOT:
        raise _unavailable(failure)  # not remembered: nothing to replay
    await _scroll(conn, request, direction)
    again = await conn.expect_one((ScrollResult, Failure), "the replayed failure")
    if isinstance(again, ScrollResult):
        fail(
            f"the duplicate of a scroll that failed ({failure.error!r}) was applied again "
            f"(`scrollResult` {again.sequence}) instead of replaying the failure"
        )
    assert isinstance(again, Failure)
    if (again.error, again.request_id, again.subscription_id) != (
        failure.error,
        failure.request_id,
        failure.subscription_id,
    ):
        fail(f"the duplicate got {again.error!r}, not the replayed {failure.error!r}")
    await _direction_closes(conn, request, direction)
    return f"replayed the failure {failure.error!r}; another direction closed the connection"


def _moved_by(scrolled: Frame, frames: list[Frame]) -> tuple[Frame, int] | None:
    """The first of ``frames`` showing ``scrolled``'s view moved further back, if any."""
    if not isinstance(scrolled, TextFramePacket):
        return None
    before = view_rows(scrolled.text, scrolled.rows)
    for frame in frames:
        if isinstance(frame, TextFramePacket):
            shift = moved_up(before, view_rows(frame.text, frame.rows))
            if shift is not None:
                return frame, shift
    return None


async def _replayed(
    conn: Conn, request: UUID, direction: ScrollDirection, first: ScrollResult
) -> None:
    """Repeat ``request``: the host must send the stored ``scrollResult`` again."""
    await _scroll(conn, request, direction)
    again = await conn.expect_one((ScrollResult, Failure), "the replayed `scrollResult`")
    if isinstance(again, Failure):
        fail(f"the duplicate was answered {again.error!r}, not with the stored result")
    assert isinstance(again, ScrollResult)
    if again.request_id != request or again.sequence != first.sequence:
        fail(
            f"the duplicate was applied again: `scrollResult` {again.sequence} "
            f"(the original completed with frame {first.sequence})"
        )
    # A scroll applied again completes with a second `scrollResult` (which fails
    # this wait) or, if the host replays the result but scrolls anyway, moves the view.
    await conn.quiet(REPLAY_WATCH_SECONDS, "after the replayed result")


async def _scroll_back(conn: Conn, times: int) -> UUID:
    """Scroll down ``times`` times (new request ids); return the last id."""
    latest = new_id()
    for _ in range(times):
        latest = new_id()
        await _scroll(conn, latest, ScrollDirection.DOWN)
        await _scroll_outcome(conn, latest, "`scrollResult` for scrolling back down")
    return latest


async def _try_scroll_back(conn: Conn) -> None:
    """After a failure, leave the host's view at its live bottom if the connection lets us."""
    with (
        trio.move_on_after(conn.ctx.wait + 1.0),
        contextlib.suppress(CheckFailed, CheckSkipped),
    ):
        await _scroll_back(conn, 1)


async def _duplicate_scrolled_up(ctx: Context) -> str:
    async with subscribed(ctx, "subscriber", Representation.TEXT) as conn:
        before = await conn.frame("frame 1")
        request = new_id()
        await _scroll(conn, request, ScrollDirection.UP)
        first = await _scroll_outcome(conn, request, "`scrollResult`")
        if isinstance(first, Failure):
            return await _failure_replayed(conn, request, ScrollDirection.UP, first)
        try:
            # A scroll may keep moving the view for a while (wheel events a program
            # handles one by one): judge the duplicate against the view once it rests.
            await conn.settle()
            scrolled = conn.last_frame
            assert scrolled is not None
            conn.mark()
            await _replayed(conn, request, ScrollDirection.UP, first)
        except (CheckFailed, CheckSkipped):
            await _try_scroll_back(conn)
            raise
        moved = _moved_by(scrolled, conn.marked)
        # Put the view back where it was (twice if the host scrolled twice).
        latest = await _scroll_back(conn, 2 if moved else 1)
        if moved is not None:
            frame, shift = moved
            fail(
                f"the duplicate was applied again: the host replayed `scrollResult` "
                f"{first.sequence}, but frame {frame.sequence} shows the view "
                f"{shift} rows further up"
            )
        await _direction_closes(conn, latest, ScrollDirection.DOWN)
    note = ""
    if view_rows(frame_text(before), before.rows) == view_rows(frame_text(scrolled), scrolled.rows):
        note = " (the view did not move up: a scroll applied again would not show)"
    return f"replayed result {first.sequence}; another direction closed the connection{note}"


async def check_scroll_duplicate(ctx: Context) -> str:
    """A repeated request id replays the same result (or failure) and is never applied
    again; with another direction it closes the connection. With ``--allow-input`` it
    scrolls up on a ``text-v1`` lease (then back down), so a scroll applied again would
    move the view."""
    ctx.needs("remote-scroll")
    if ctx.allow_input:
        return await _duplicate_scrolled_up(ctx)
    async with subscribed(ctx, "subscriber") as conn:
        await conn.frame("frame 1")
        request = new_id()
        await _scroll(conn, request, ScrollDirection.DOWN)
        first = await _scroll_outcome(conn, request, "`scrollResult`")
        if isinstance(first, Failure):
            return await _failure_replayed(conn, request, ScrollDirection.DOWN, first)
        await _replayed(conn, request, ScrollDirection.DOWN, first)
        await _direction_closes(conn, request, ScrollDirection.DOWN)
    return f"replayed result {first.sequence}; another direction closed the connection"


async def check_scroll_busy(ctx: Context) -> str:
    """A new request id while a scroll is pending: ``SCROLL_BUSY`` with the lease and
    request id; the pending one still completes."""
    ctx.needs("remote-scroll")
    async with subscribed(ctx, "subscriber") as conn:
        frame = await conn.frame("frame 1", ack=False)
        # Frame 1 stays unacknowledged, so the first scroll cannot complete yet.
        pending, second = new_id(), new_id()
        await _scroll(conn, pending, ScrollDirection.DOWN)
        await _scroll(conn, second, ScrollDirection.DOWN)
        busy = await conn.expect(Failure, "SCROLL_BUSY for the second request", ack=False)
        if busy.request_id == pending and busy.error.startswith(SCROLL_UNAVAILABLE_PREFIX):
            raise _unavailable(busy)  # nothing was pending, so nothing can be busy
        if not busy.error.startswith(SCROLL_BUSY_PREFIX):
            fail(f"the second scroll got {busy.error!r}, not SCROLL_BUSY")
        if busy.request_id != second or busy.subscription_id != conn.lease:
            fail("the SCROLL_BUSY failure does not carry the second request id and the lease")
        await conn.ack(frame)
        outcome = await _scroll_outcome(conn, pending, "`scrollResult` for the pending scroll")
    if isinstance(outcome, Failure):
        return f"SCROLL_BUSY for the second request; the first failed ({outcome.error!r})"
    return "SCROLL_BUSY for the second request; the first completed"


# ---------------------------------------------------------------- history


async def _first_page(conn: Conn) -> HistoryPage:
    await conn.send(History(subscription_id=conn.lease))
    reply = await conn.expect_one((HistoryPage, Failure), "`historyPage`")
    if isinstance(reply, Failure):
        if reply.error.startswith(HISTORY_UNAVAILABLE_PREFIX):
            raise CheckSkipped(f"the host answered {reply.error!r}")
        fail(f"`history` was answered {reply.error!r}")
    assert isinstance(reply, HistoryPage)
    return reply


async def _page(conn: Conn, first: HistoryPage, end: int, what: str) -> HistoryPage:
    """The page of ``first``'s snapshot that ends at ``end``, checked."""
    await conn.send(History(history_id=first.history_id, offset=end, subscription_id=conn.lease))
    page = await conn.expect(HistoryPage, what)
    problem = same_snapshot(page, first) or page_problem(page, end, conn.lease)
    if problem:
        fail(f"{what}: {problem}")
    return page


async def check_history_pages(ctx: Context) -> str:
    """Pages of 200 lines, newest first, each ending where the previous began, with one
    id, total, capturedAt and truncated; asking at the end again gives the newest page;
    a new ``history`` is a new snapshot."""
    ctx.needs("history")
    async with subscribed(ctx, "subscriber") as conn:
        first = await _first_page(conn)
        note = ""
        if first.total <= PAGE_LINES and ctx.allow_input:
            # One page proves little about paging: echo enough lines for three.
            if await _echo_lines(conn, HISTORY_ECHOES, _echo_seconds(ctx)):
                first = await _first_page(conn)
            else:
                note = "; the typed echo commands never ran (not a shell?)"
        problem = page_problem(first, first.total, conn.lease)
        if problem:
            fail(f"the first page: {problem}")
        if first.total > MAX_HISTORY_BYTES + 1:
            fail(f"a snapshot of {first.total} lines (2 MiB hold at most {MAX_HISTORY_BYTES + 1})")
        pages, size, page = 1, page_bytes(first), first
        while page.offset > 0 and pages < WALK_PAGES:
            page = await _page(conn, first, page.offset, f"the page before line {page.offset}")
            pages += 1
            size += page_bytes(page)
        if page.offset > 0:
            # A long history: its remaining pages are not walked, but where they
            # would end is known, so the page at line 0 is checked directly.
            end = last_page_end(page.offset)
            await _page(conn, first, end, f"the page before line {end} (the oldest)")
            walked = f"{pages} contiguous pages, then the oldest (before line {end})"
        else:
            if size > MAX_HISTORY_BYTES + 1:
                fail(f"the snapshot holds {size} bytes (at most 2 MiB)")
            walked = f"{pages} contiguous page(s)"
        again = await _page(conn, first, first.total, f"the page before line {first.total}")
        if (again.offset, again.lines) != (first.offset, first.lines):
            fail(f"the page before line {first.total} (the end) is not the newest page again")
        if first.total >= 2:
            end = first.total - 1
            await _page(conn, first, end, f"the page before line {end}")
        fresh = await _first_page(conn)
        if fresh.history_id == first.history_id:
            fail("a new `history` request reused the previous snapshot's id")
    if first.total <= PAGE_LINES and not note:
        note = " (one page only: --allow-input adds lines)" if not ctx.allow_input else ""
    return f"{first.total} lines in {walked}{note}"


async def check_history_invalid(ctx: Context) -> str:
    """An unknown historyID, or an offset past the total, closes the connection."""
    ctx.needs("history")
    async with subscribed(ctx, "unknown id") as conn:
        await _first_page(conn)
        await conn.send(History(history_id=new_id(), offset=0, subscription_id=conn.lease))
        await conn.expect_closed("`history` naming an unknown historyID")
    async with subscribed(ctx, "offset past the end") as conn:
        page = await _first_page(conn)
        await conn.send(
            History(history_id=page.history_id, offset=page.total + 1, subscription_id=conn.lease)
        )
        await conn.expect_closed(f"`history` at offset {page.total + 1} of {page.total}")
    return "both closed the connection"


async def check_history_offset_range(ctx: Context) -> str:
    """A ``history`` offset outside 0 … total (−1, 2^62, 10^6) closes the connection
    silently, as Prowl's host does: asked as a page of the snapshot, and asked with a
    new snapshot (Prowl's host pages a new snapshot at the request's offset too)."""
    ctx.needs("history")
    for offset in BAD_OFFSETS:
        async with subscribed(ctx, f"page at {offset}") as conn:
            page = await _first_page(conn)
            await conn.send(
                History(history_id=page.history_id, offset=offset, subscription_id=conn.lease)
            )
            await conn.expect_closed(f"`history` at offset {offset} of {page.total}")
        async with subscribed(ctx, f"new snapshot at {offset}") as conn:
            await _first_page(conn)
            await conn.send(History(offset=offset, subscription_id=conn.lease))
            try:
                await conn.expect_closed(f"a new `history` snapshot asked at offset {offset}")
            except CheckFailed:
                refusal = conn.unexpected
                if isinstance(refusal, Failure) and refusal.error.startswith(
                    HISTORY_UNAVAILABLE_PREFIX
                ):  # the capture failed this time: the offset was never judged
                    raise CheckSkipped(f"the host answered {refusal.error!r}") from None
                raise
    offsets = ", ".join(str(offset) for offset in BAD_OFFSETS)
    return f"offsets {offsets}: each closed the connection, as a page and as a new snapshot"


# ---------------------------------------------------------------- commands


async def check_commands_send_refused(ctx: Context) -> str:
    """An empty ``send`` is refused: with Prowl's exact REMOTE_COMMAND_REJECTED message, or,
    where the host advertises ``shell-send`` (it runs command lines), before anything is typed."""
    if not any(c in ctx.capabilities for c in COMMAND_CAPABILITIES):
        raise CheckSkipped("the host advertises no command service")
    pane = ctx.pane()
    async with subscribed(ctx, "subscriber") as conn:
        await conn.frame("frame 1")
        request_id = new_id()
        # Empty text: even a host that wrongly obeyed would type nothing.
        send = SendCommand(
            pane=str(pane.id).upper(),
            text="",
            trailing_enter=False,
            source="argv",
            wait=False,
            capture_output=False,
        )
        await conn.send(
            Command(
                subscription_id=conn.lease,
                command_request=CommandRequest(
                    request_id=request_id, request=CommandEnvelope(output="json", command=send)
                ),
            )
        )
        result = await conn.expect(CommandResult, "`commandResult`", timeout=2 * ctx.wait)
    response = result.command_response
    if response.request_id != request_id:
        fail(f"`commandResult` names request {response.request_id}, not {request_id}")
    body = response.response
    if "shell-send" in ctx.capabilities:
        problem = send_refusal_problem(body)
        if problem is not None:
            fail(problem)
        assert isinstance(body, dict) and isinstance(body["error"], dict)
        return f"shell-send: an empty `send` refused before typing ({body['error']['code']})"
    expected = {
        "ok": False,
        "command": "remote",
        "schema_version": "prowl.remote.command.v1",
        "error": {"code": "REMOTE_COMMAND_REJECTED", "message": SEND_REFUSED},
    }
    if not isinstance(body, dict) or {k: body.get(k) for k in expected} != expected:
        fail(f"`send` was answered {body!r}, not the refusal {expected!r}"[:400])
    return "refused: REMOTE_COMMAND_REJECTED with the exact message"


async def check_commands_output_json(ctx: Context) -> str:
    """A ``command`` whose ``output`` is not exactly ``json`` ("text", "", "JSON", 4,096
    characters) closes the connection, as every command outside Prowl's remote
    allowlist does (prowl-host.md §8); nothing is answered."""
    if not any(c in ctx.capabilities for c in COMMAND_CAPABILITIES):
        raise CheckSkipped("the host advertises no command service")
    for output in BAD_OUTPUTS:
        shown = repr(output) if len(output) < 10 else f"{len(output)} characters"
        async with device(ctx, "commands") as conn:
            envelope = CommandEnvelope(output=output, command=ListCommand())
            await conn.send(
                Command(command_request=CommandRequest(request_id=new_id(), request=envelope))
            )
            await conn.expect_closed(f"a `command` whose output is {shown}")
    return "each closed the connection"


# ---------------------------------------------------------------- input


def _echo() -> tuple[bytes, str]:
    """Keys for a harmless echo, and the text only its output contains."""
    token = secrets.token_hex(4)
    # The quotes keep the typed line from containing the marker itself.
    return f'echo conformance""-{token}\r'.encode(), f"conformance-{token}"


async def _until_marker(conn: Conn, marker: str, seconds: float) -> Frame | None:
    """The first frame (each acknowledged) showing ``marker`` within ``seconds``."""
    with trio.move_on_after(seconds):
        while True:
            frame = await conn.frame("the echo's output", timeout=seconds)
            if marker in frame_text(frame):
                return frame
    return None


async def _echo_lines(conn: Conn, count: int, seconds: float) -> bool:
    """Type ``count`` harmless echo commands at once; True once the last one's output
    shows (within ``seconds``), False when it never does (the pane is not a shell)."""
    token = secrets.token_hex(4)
    keys = "".join(f'echo conformance""-{token}-{n}\r' for n in range(1, count + 1))
    await conn.send(Input(data=keys.encode(), subscription_id=conn.lease))
    return await _until_marker(conn, f"conformance-{token}-{count}", seconds) is not None


async def check_input_echo(ctx: Context) -> str:
    """Input on a ``vt-v1`` lease reaches the pane: a typed echo's output comes back."""
    seconds = _echo_seconds(ctx)
    async with subscribed(ctx, "subscriber") as conn:
        await conn.frame("frame 1")
        keys, marker = _echo()
        await conn.send(Input(data=keys, subscription_id=conn.lease))
        frame = await _until_marker(conn, marker, seconds)
    if frame is None:
        fail(f"the echo's output {marker!r} did not appear within {seconds:g} s")
    return f"the echo's output arrived in frame {frame.sequence}"


async def check_input_coalesce(ctx: Context) -> str:
    """While a frame is unacknowledged the pane changes but nothing is sent; after the ACK
    the latest screen comes at once (no stale frames queued)."""
    seconds = _echo_seconds(ctx)
    hold = COALESCE_HOLD_SECONDS
    latency: float | None = None
    async with subscribed(ctx, "subscriber") as conn:
        held = await conn.frame("frame 1", ack=False)
        while True:
            keys, marker = _echo()
            typed_at = trio.current_time()
            await conn.send(Input(data=keys, subscription_id=conn.lease))
            await conn.quiet(
                hold, f"frame {held.sequence} is unacknowledged and the pane changes", ack=False
            )
            await conn.ack(held)
            latest = await conn.frame("the latest screen, after the ACK")
            if marker in frame_text(latest):
                return (
                    f"frame {latest.sequence}, the first after the ACK, carried the latest screen"
                )
            if latency is not None:
                fail(
                    f"frame {latest.sequence}, the first after the ACK, does not show the "
                    f"echo's output although the frame before was held {hold:.1f} s and the "
                    f"echo took {latency:.1f} s the first time (a stale frame: after an ACK "
                    "the host sends the latest screen)"
                )
            shown = await _until_marker(conn, marker, seconds)
            if shown is None:
                fail(
                    f"frame {latest.sequence}, the first after the ACK, does not show the "
                    f"echo's output, nor did any frame within {seconds:g} s after it (a stale "
                    "frame, or the pane does not run a shell)"
                )
            # Either the echo was slower than the hold, or that frame was stale: once
            # more, holding the frame long enough for an echo this slow.
            latency = trio.current_time() - typed_at
            hold = min(max(2 * latency, 2 * hold), hold + seconds)
            await conn.refresh()
            held = await conn.frame("the frame after `refresh`", ack=False)


async def check_input_text_lease(ctx: Context) -> str:
    """Input on a ``text-v1`` lease closes the connection (one NUL byte is sent, which a
    correct host never delivers)."""
    async with subscribed(ctx, "subscriber", Representation.TEXT) as conn:
        await conn.frame("frame 1")
        await conn.send(Input(data=b"\x00", subscription_id=conn.lease))
        await conn.expect_closed("`input` on a text-v1 lease")
    return "closed"


async def check_input_empty(ctx: Context) -> str:
    """Empty input (the limit is 1 … 65,536 bytes) closes the connection."""
    async with subscribed(ctx, "subscriber") as conn:
        await conn.frame("frame 1")
        await conn.send(Input(data=b"", subscription_id=conn.lease))
        await conn.expect_closed("an empty `input`")
    return "closed"
