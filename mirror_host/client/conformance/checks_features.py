"""Checks of the optional features and of input: scroll, history, commands, typing. I/O.

Scroll checks scroll *down*: on a pane already at its live bottom that moves
nothing (a host completes a boundary scroll with a forced frame), so a correct
host's screen is left as it was. Input checks type one harmless ``echo`` and run
only with ``--allow-input``.
"""

from __future__ import annotations

import math
import secrets
from uuid import UUID

import trio

from mirror_host.client.conformance.probe import (
    CheckSkipped,
    Conn,
    Context,
    Frame,
    fail,
    frame_text,
    new_id,
    subscribed,
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
    Representation,
    Scroll,
    ScrollDirection,
    ScrollResult,
    SendCommand,
)

__all__ = [
    "COMMAND_CAPABILITIES",
    "check_commands_send_refused",
    "check_history_invalid",
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
HISTORY_UNAVAILABLE_PREFIX = "HISTORY_UNAVAILABLE"
PAGE_LINES = 200
MAX_HISTORY_BYTES = 2 * 1024 * 1024
MAX_PAGES = 80
SEND_REFUSED = (
    "Host cannot verify an empty shell command line. "
    "Use an Agent Profile or control the shell on Host."
)
COMMAND_CAPABILITIES = ("launch-profile", "launch-shell", "agents-dispatch", "agent-input")
ECHO_SECONDS = 10.0
#: Echo commands typed (with --allow-input) when a pane's history fits one page.
HISTORY_ECHOES = 110


# ---------------------------------------------------------------- scroll


async def _scroll(conn: Conn, request_id: UUID, direction: ScrollDirection) -> None:
    await conn.send(Scroll(request_id=request_id, direction=direction, subscription_id=conn.lease))


async def _scroll_result(conn: Conn, request_id: UUID, what: str) -> ScrollResult:
    # Prowl's host completes a scroll by 800 ms.
    result = await conn.expect(ScrollResult, what, timeout=conn.ctx.wait + 1.0)
    if result.request_id != request_id:
        fail(f"`scrollResult` names request {result.request_id}, not {request_id}")
    if result.subscription_id != conn.lease:
        fail("`scrollResult` names another subscription than the lease")
    assert conn.ledger is not None
    if result.sequence != conn.ledger.last_sequence:
        fail(
            f"`scrollResult` names frame {result.sequence}, but it followed frame "
            f"{conn.ledger.last_sequence} (it must come right after the frame that completes it)"
        )
    return result


async def check_scroll_result(ctx: Context) -> str:
    """``scroll`` is completed by a fresh frame followed by ``scrollResult`` naming it."""
    ctx.needs("remote-scroll")
    async with subscribed(ctx, "subscriber") as conn:
        before = (await conn.frame("frame 1")).sequence
        request = new_id()
        await _scroll(conn, request, ScrollDirection.DOWN)
        result = await _scroll_result(conn, request, "`scrollResult`")
        if result.sequence <= before:
            fail(f"`scrollResult` names frame {result.sequence}, sent before the scroll")
    return f"completed by frame {result.sequence}"


async def check_scroll_duplicate(ctx: Context) -> str:
    """A repeated request id replays the same result and is never applied again; with
    another direction it closes the connection."""
    ctx.needs("remote-scroll")
    async with subscribed(ctx, "subscriber") as conn:
        await conn.frame("frame 1")
        request = new_id()
        await _scroll(conn, request, ScrollDirection.DOWN)
        first = await _scroll_result(conn, request, "`scrollResult`")
        await _scroll(conn, request, ScrollDirection.DOWN)
        again = await conn.expect(ScrollResult, "the replayed `scrollResult`")
        if again.request_id != request or again.sequence != first.sequence:
            fail(
                f"the duplicate was applied again: `scrollResult` {again.sequence} "
                f"(the original completed with frame {first.sequence})"
            )
        # A scroll applied again would complete with a second `scrollResult` by now.
        await conn.quiet(1.2, "after the replayed result")
        await _scroll(conn, request, ScrollDirection.UP)
        await conn.expect_closed("a repeated scroll request id with another direction")
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
        if not busy.error.startswith(SCROLL_BUSY_PREFIX):
            fail(f"the second scroll got {busy.error!r}, not SCROLL_BUSY")
        if busy.request_id != second or busy.subscription_id != conn.lease:
            fail("the SCROLL_BUSY failure does not carry the second request id and the lease")
        await conn.ack(frame)
        await _scroll_result(conn, pending, "`scrollResult` for the pending scroll")
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


def _page_problems(page: HistoryPage, end: int, lease: object) -> str | None:
    if page.subscription_id != lease:
        return "a page names another subscription than the lease"
    if len(page.lines) > PAGE_LINES:
        return f"a page has {len(page.lines)} lines (at most {PAGE_LINES})"
    if page.offset + len(page.lines) != end:
        return (
            f"the page at offset {page.offset} with {len(page.lines)} lines ends at "
            f"{page.offset + len(page.lines)}, not at {end} (pages must be contiguous)"
        )
    if len(page.lines) != min(PAGE_LINES, end):
        return f"a page ending at {end} has {len(page.lines)} lines, not {min(PAGE_LINES, end)}"
    if not math.isfinite(page.captured_at):
        return "capturedAt is not a finite number"
    return None


async def check_history_pages(ctx: Context) -> str:
    """Pages of 200 lines, newest first, each ending where the previous began, with one
    id, total and capturedAt; a new ``history`` is a new snapshot."""
    ctx.needs("history")
    async with subscribed(ctx, "subscriber") as conn:
        first = await _first_page(conn)
        if first.total <= PAGE_LINES and ctx.allow_input:
            # One page proves little about paging: echo enough lines for three.
            await _echo_lines(conn, HISTORY_ECHOES)
            first = await _first_page(conn)
        problem = _page_problems(first, first.total, conn.lease)
        if problem:
            fail(problem)
        pages, total_bytes, page = 1, 0, first
        total_bytes += sum(len(line.encode()) + 1 for line in first.lines)
        while page.offset > 0:
            if pages >= MAX_PAGES:
                fail(f"more than {MAX_PAGES} pages")
            end = page.offset
            await conn.send(
                History(history_id=first.history_id, offset=end, subscription_id=conn.lease)
            )
            page = await conn.expect(HistoryPage, f"the page before line {end}")
            pages += 1
            if (page.history_id, page.total, page.captured_at, page.truncated) != (
                first.history_id,
                first.total,
                first.captured_at,
                first.truncated,
            ):
                fail("a later page changed the snapshot's id, total, capturedAt or truncated")
            problem = _page_problems(page, end, conn.lease)
            if problem:
                fail(problem)
            if not page.lines:
                fail(f"an empty page before line {end}")
            total_bytes += sum(len(line.encode()) + 1 for line in page.lines)
        if total_bytes > MAX_HISTORY_BYTES + 1:
            fail(f"the snapshot holds {total_bytes} bytes (at most 2 MiB)")
        fresh = await _first_page(conn)
        if fresh.history_id == first.history_id:
            fail("a new `history` request reused the previous snapshot's id")
    note = "" if first.total > PAGE_LINES else " (one page only: --allow-input adds lines)"
    return f"{first.total} lines in {pages} contiguous page(s){note}"


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


# ---------------------------------------------------------------- commands


async def check_commands_send_refused(ctx: Context) -> str:
    """Remote shell ``send`` is refused with Prowl's exact REMOTE_COMMAND_REJECTED message."""
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
    expected = {
        "ok": False,
        "command": "remote",
        "schema_version": "prowl.remote.command.v1",
        "error": {"code": "REMOTE_COMMAND_REJECTED", "message": SEND_REFUSED},
    }
    if not isinstance(body, dict) or {k: body.get(k) for k in expected} != expected:
        fail(f"`send` was answered {body!r}, not the refusal {expected!r}"[:400])
    return "refused: REMOTE_COMMAND_REJECTED with the exact message"


# ---------------------------------------------------------------- input


def _echo() -> tuple[bytes, str]:
    """Keys for a harmless echo, and the text only its output contains."""
    token = secrets.token_hex(4)
    # The quotes keep the typed line from containing the marker itself.
    return f'echo conformance""-{token}\r'.encode(), f"conformance-{token}"


async def _until_marker(conn: Conn, marker: str) -> Frame:
    with trio.move_on_after(ECHO_SECONDS):
        while True:
            frame = await conn.frame("the echo's output", timeout=ECHO_SECONDS)
            if marker in frame_text(frame):
                return frame
    fail(f"the echo's output {marker!r} did not appear within {ECHO_SECONDS:g} s")


async def _echo_lines(conn: Conn, count: int) -> None:
    """Type ``count`` harmless echo commands at once and wait for the last one's output."""
    token = secrets.token_hex(4)
    keys = "".join(f'echo conformance""-{token}-{n}\r' for n in range(1, count + 1))
    await conn.send(Input(data=keys.encode(), subscription_id=conn.lease))
    await _until_marker(conn, f"conformance-{token}-{count}")


async def check_input_echo(ctx: Context) -> str:
    """Input on a ``vt-v1`` lease reaches the pane: a typed echo's output comes back."""
    async with subscribed(ctx, "subscriber") as conn:
        await conn.frame("frame 1")
        keys, marker = _echo()
        await conn.send(Input(data=keys, subscription_id=conn.lease))
        frame = await _until_marker(conn, marker)
    return f"the echo's output arrived in frame {frame.sequence}"


async def check_input_coalesce(ctx: Context) -> str:
    """While a frame is unacknowledged the pane changes but nothing is sent; after the ACK
    the latest screen comes at once (no stale frames queued)."""
    async with subscribed(ctx, "subscriber") as conn:
        first = await conn.frame("frame 1", ack=False)
        keys, marker = _echo()
        await conn.send(Input(data=keys, subscription_id=conn.lease))
        await conn.quiet(1.5, f"frame {first.sequence} is unacknowledged and the pane changes")
        await conn.ack(first)
        latest = await conn.frame("the latest screen, after the ACK")
        if marker not in frame_text(latest):
            fail(
                f"frame {latest.sequence}, the first after the ACK, does not show the echo's "
                "output that was on the pane before the ACK (a stale frame)"
            )
    return f"frame {latest.sequence} carried the latest screen"


async def check_input_text_lease(ctx: Context) -> str:
    """Input on a ``text-v1`` lease closes the connection."""
    async with subscribed(ctx, "subscriber", Representation.TEXT) as conn:
        await conn.frame("frame 1")
        keys, _ = _echo()
        await conn.send(Input(data=keys, subscription_id=conn.lease))
        await conn.expect_closed("`input` on a text-v1 lease")
    return "closed"


async def check_input_empty(ctx: Context) -> str:
    """Empty input (the limit is 1 … 65,536 bytes) closes the connection."""
    async with subscribed(ctx, "subscriber") as conn:
        await conn.frame("frame 1")
        await conn.send(Input(data=b"", subscription_id=conn.lease))
        await conn.expect_closed("an empty `input`")
    return "closed"
