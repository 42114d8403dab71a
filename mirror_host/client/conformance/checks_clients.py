"""Checks of what Prowl's own apps require beyond the wire rules. I/O.

A host can follow the wire document and still lose a phone: the iPhone and
Android apps send no command without ``launch-profile``; Android gives up on
history after 8 s and disconnects on the late answer; an unasked ``panes``
makes the iPhone subscribe a second time (which closes the connection); a
frame without its ``scrollState`` closes Android and the Mac. Each check names
the app and what the user would see. (An unasked ``panes`` fails every check
that meets one, see :mod:`.probe`; ``clients.panes-unasked`` gives the host
the occasions to send one.)
"""

from __future__ import annotations

import trio

from mirror_host.client.conformance.probe import (
    CheckSkipped,
    Context,
    device,
    fail,
    new_id,
    subscribed,
)
from mirror_host.client.conformance.rules import (
    ANDROID_HISTORY_SECONDS,
    history_answer_problem,
    launch_profile_problem,
)
from mirror_host.control import (
    Failure,
    History,
    HistoryPage,
    Representation,
    Scroll,
    ScrollDirection,
    ScrollResult,
    Subscribed,
)

__all__ = [
    "check_history_within_8_s",
    "check_launch_profile",
    "check_panes_unasked",
    "check_scroll_state",
]

HISTORY_UNAVAILABLE_PREFIX = "HISTORY_UNAVAILABLE"


async def check_launch_profile(ctx: Context) -> str:
    """A host that advertises any command capability advertises ``launch-profile`` too
    (the iPhone and Android apps send no command at all without it)."""
    if ctx.discovery_error is not None:
        raise CheckSkipped(f"listing the panes failed: {ctx.discovery_error}")
    problem = launch_profile_problem(ctx.capabilities)
    if problem is not None:
        fail(problem)
    if "launch-profile" not in ctx.capabilities:
        raise CheckSkipped("the host advertises no command service")
    return "launch-profile is advertised with the command service"


async def check_history_within_8_s(ctx: Context) -> str:
    """A new history snapshot is answered (a page, or ``HISTORY_UNAVAILABLE``) within 8 s:
    Android gives up then and treats a late answer as fatal."""
    ctx.needs("history")
    late_limit = ANDROID_HISTORY_SECONDS + 3 * ctx.wait
    async with subscribed(ctx, "phone") as conn:
        await conn.frame("frame 1")
        asked = trio.current_time()
        await conn.send(History(subscription_id=conn.lease))
        reply = await conn.maybe_one(
            (HistoryPage, Failure), "an answer to `history`", timeout=late_limit
        )
        took = trio.current_time() - asked
        if reply is None:
            fail(history_answer_problem(None, late_limit) or "no answer to `history`")
    if isinstance(reply, Failure) and not reply.error.startswith(HISTORY_UNAVAILABLE_PREFIX):
        fail(f"`history` was answered {reply.error!r}")
    problem = history_answer_problem(took, late_limit)
    if problem is not None:
        fail(problem)
    answer = "a page" if isinstance(reply, HistoryPage) else "HISTORY_UNAVAILABLE"
    return f"answered with {answer} after {took:.1f} s"


async def check_panes_unasked(ctx: Context) -> str:
    """``panes`` only in reply to ``list``: nothing unasked while another device lists,
    subscribes and leaves (the iPhone re-subscribes on an unasked one, which closes it)."""
    pane = ctx.pane()
    others = [p for p in ctx.panes if p.id != pane.id]
    async with subscribed(ctx, "watcher") as watcher:
        await watcher.frame("frame 1")
        async with device(ctx, "other device") as other:
            await other.list_panes()
            if others:
                answer = await other.subscribe(others[0].id, Representation.TEXT)
                if isinstance(answer, Subscribed):
                    await other.frame("the other pane's frame 1")
            await other.list_panes()
        # The pane list changed twice (a lease came and went): nothing unasked follows.
        await watcher.quiet(ctx.wait, "another device came and went")
        await watcher.stays_open("one `panes` for one `list`")
        await watcher.quiet(min(ctx.wait, 1.0), "after the answered `list`")
    lease = " took a lease on another pane and" if others else ""
    return f"no unasked `panes` while another device listed,{lease} left"


async def check_scroll_state(ctx: Context) -> str:
    """With ``includeScrollState``, exactly one ``scrollState`` carrying the frame's
    sequence comes before every frame, and never one without its frame."""
    ctx.needs("scroll-state-v1")
    async with subscribed(ctx, "phone", Representation.TEXT, scroll_state=True) as conn:
        await conn.frame("frame 1")
        await conn.refresh()
        await conn.frame("the frame after `refresh`")
        scrolled = ""
        if "remote-scroll" in ctx.capabilities:
            request = new_id()
            await conn.send(
                Scroll(
                    request_id=request,
                    direction=ScrollDirection.DOWN,
                    subscription_id=conn.lease,
                )
            )
            reply = await conn.expect_one(
                (ScrollResult, Failure), "`scrollResult`", timeout=ctx.wait + 1.0
            )
            if isinstance(reply, ScrollResult):
                scrolled = ", a scroll"
        frames = await conn.quiet(ctx.wait, "watching for a `scrollState` without its frame")
        ledger = conn.ledger
        assert ledger is not None
        if ledger.staged is not None:
            fail(
                f"a `scrollState` for sequence {ledger.staged} came without its frame "
                "(Prowl's Android and Mac clients close the connection on it)"
            )
        count = ledger.frames
    extra = f", {len(frames)} more" if frames else ""
    return (
        f"{count} frames (the first, after `refresh`{scrolled}{extra}), each after its scrollState"
    )
