"""Checks of panes, leases and the frame rules. I/O.

The pane used is ``--pane`` or the first one no device mirrors (see
:func:`discover`). Frames are judged by the connection's
:class:`~mirror_host.client.conformance.ledger.FrameLedger` on every wait, so
each check also watches sequences, unchanged frames and, whenever it holds a
frame unacknowledged, the one-outstanding-frame gate while it does its own job.
"""

from __future__ import annotations

import uuid

from mirror_host.client.conformance.probe import (
    PANE_BUSY_PREFIX,
    Conn,
    Context,
    device,
    fail,
    subscribed,
)
from mirror_host.client.conformance.rules import choose_pane
from mirror_host.control import (
    Acknowledge,
    Ended,
    EndReason,
    Failure,
    Intent,
    Representation,
    Subscribe,
    Subscribed,
)
from mirror_host.wire import VTFramePacket

__all__ = [
    "REQUIRED_CAPABILITIES",
    "check_frames_ack_rules",
    "check_frames_gate",
    "check_frames_refresh",
    "check_frames_sequence",
    "check_lease_second_subscribe",
    "check_panes_list",
    "check_subscribe",
    "check_subscribe_unknown_pane",
    "check_takeover_busy",
    "check_takeover_takeover",
    "discover",
]

REQUIRED_CAPABILITIES = ("vt-v1", "text-v1", "takeover", "refresh")
PANE_BUSY = "PANE_BUSY: This pane already has a remote mirror."
#: How long a closed gate must hold back a frame the host would otherwise send.
GATE_HOLD_SECONDS = 1.0


async def discover(ctx: Context) -> str:
    """List the panes once for the checks (pane choice, capabilities, hostRunID).

    When every pane is listed busy (and no ``--pane`` was given), one
    ``subscribe`` (ifFree) to the first finds out whether it really is mirrored:
    ``PANE_BUSY`` means it is, and the pane checks are skipped; a lease means the
    host lists a free pane as busy, which ``takeover.busy`` reports, and the
    checks use that pane.
    """
    async with device(ctx, "discovery") as conn:
        panes = await conn.list_panes()
    ctx.panes = panes.panes
    ctx.capabilities = panes.capabilities
    ctx.host_run_id = panes.host_run_id
    choice = choose_pane(panes.panes, ctx.pane_choice)
    if isinstance(choice, str):
        ctx.no_pane = choice
        return f"{len(panes.panes)} pane(s): {choice}"
    if not (choice.busy and ctx.pane_choice is None):
        ctx.chosen = choice
        return f"{len(panes.panes)} pane(s)"
    async with device(ctx, "busy probe") as probe:
        answer = await probe.subscribe(choice.id, Representation.VT, Intent.IF_FREE)
    if isinstance(answer, Subscribed):
        ctx.chosen = choice
        ctx.busy_error = (
            f"every pane is listed busy, yet `subscribe` (ifFree) to the first ({choice.id}) "
            "was granted a lease: a free pane is listed busy"
        )
        return f"{len(panes.panes)} pane(s), all listed busy, but the first was free"
    if not answer.error.startswith(PANE_BUSY_PREFIX):
        fail(f"`subscribe` (ifFree) to a pane listed busy was answered {answer.error!r}")
    ctx.no_pane = (
        "every pane is mirrored by another device (listed busy, and `subscribe` got "
        "PANE_BUSY): free one, or name one with --pane (the checks then fail while it is busy)"
    )
    return f"{len(panes.panes)} pane(s), all mirrored by other devices"


async def _busy(ctx: Context, conn: Conn, pane_id: uuid.UUID) -> bool:
    panes = await conn.list_panes()
    for pane in panes.panes:
        if pane.id == pane_id:
            return pane.busy
    fail(f"pane {pane_id} is no longer listed")


async def check_panes_list(ctx: Context) -> str:
    """``panes``: the base capabilities, a stable hostRunID, well-formed unique entries."""
    async with device(ctx, "first") as first, device(ctx, "second") as second:
        one, two = await first.list_panes(), await second.list_panes()
    missing = [c for c in REQUIRED_CAPABILITIES if c not in one.capabilities]
    if missing:
        fail(f"capabilities {list(one.capabilities)} lack {missing}")
    if one.host_run_id != two.host_run_id:
        fail(f"two connections saw hostRunIDs {one.host_run_id} and {two.host_run_id}")
    ids = [pane.id for pane in one.panes]
    if len(set(ids)) != len(ids):
        fail("a pane id is listed twice")
    note = f"{len(one.panes)} pane(s); capabilities {', '.join(one.capabilities)}"
    return note if one.panes else note + " (no panes: the other pane checks are skipped)"


async def check_subscribe(ctx: Context, representation: Representation) -> str:
    """``subscribed`` (the asked pane, the listed hostRunID) comes before the first frame,
    which has sequence 1, the lease and a legal grid; the pane is then listed busy."""
    pane = ctx.pane()
    async with subscribed(ctx, "subscriber", representation) as conn:
        frame = await conn.frame("the first frame")
        limits = range(1, 1001) if representation is Representation.VT else range(1001)
        if frame.columns not in limits or frame.rows not in limits:
            fail(f"the first frame's grid is {frame.columns}x{frame.rows}")
        async with device(ctx, "observer") as observer:
            if not await _busy(ctx, observer, pane.id):
                fail("another connection's `panes` does not list the subscribed pane as busy")
    kind = "VT" if isinstance(frame, VTFramePacket) else "text"
    return f"subscribed, then {kind} frame 1 ({frame.columns}x{frame.rows}); pane listed busy"


async def check_subscribe_unknown_pane(ctx: Context) -> str:
    """``subscribe`` to a pane the host never listed closes the connection."""
    async with device(ctx, "subscriber") as conn:
        await conn.send(
            Subscribe(pane_id=uuid.uuid4(), representation=Representation.VT, intent=Intent.IF_FREE)
        )
        await conn.expect_closed("`subscribe` to an unknown pane")
    return "closed"


async def check_frames_gate(ctx: Context, representation: Representation) -> str:
    """No frame while one is unacknowledged, even after ``refresh``, for the first frame
    and a later one; each ACK releases the frame the refresh owes."""
    async with subscribed(ctx, "subscriber", representation) as conn:
        held = await conn.frame("frame 1", ack=False)
        released: list[int] = []
        for _ in range(2):
            await conn.refresh()
            # The ledger fails the check if a frame comes while `held` is outstanding.
            await conn.quiet(
                GATE_HOLD_SECONDS, f"frame {held.sequence} is unacknowledged", ack=False
            )
            await conn.ack(held)
            held = await conn.frame("the frame the refresh owes, after the ACK", ack=False)
            released.append(held.sequence)
        await conn.ack(held)
    shown = " and ".join(f"{s} until {s - 1} was acknowledged" for s in released)
    return f"held frame {shown}"


async def check_frames_sequence(ctx: Context) -> str:
    """Sequences start at 1 and grow by one (three frames, each forced by ``refresh``)."""
    async with subscribed(ctx, "subscriber") as conn:
        sequences = [(await conn.frame("frame 1")).sequence]
        for _ in range(2):
            await conn.refresh()
            sequences.append((await conn.frame("a frame after refresh")).sequence)
    return "sequences " + ", ".join(map(str, sequences))


async def check_frames_refresh(ctx: Context) -> str:
    """No unchanged frame without ``refresh``; after ``refresh`` the screen comes again."""
    async with subscribed(ctx, "subscriber") as conn:
        await conn.frame("frame 1")
        await conn.settle()
        await conn.refresh()
        frame = await conn.frame("frame after `refresh` (the unchanged screen again)")
    return f"frame {frame.sequence} re-sent after refresh"


async def check_frames_ack_rules(ctx: Context) -> str:
    """A wrong sequence (for the first frame, and a stale one for a later frame), an ACK
    with nothing outstanding and another lease's ACK each close the connection."""
    async with subscribed(ctx, "wrong sequence") as conn:
        frame = await conn.frame("frame 1", ack=False)
        await conn.send(Acknowledge(sequence=frame.sequence + 1, subscription_id=conn.lease))
        await conn.expect_closed(f"an ACK of {frame.sequence + 1} for frame {frame.sequence}")
    async with subscribed(ctx, "stale sequence") as conn:
        first = await conn.frame("frame 1")
        await conn.refresh()
        later = await conn.frame("the frame after `refresh`", ack=False)
        await conn.send(Acknowledge(sequence=first.sequence, subscription_id=conn.lease))
        await conn.expect_closed(
            f"an ACK of {first.sequence} (already acknowledged) for frame {later.sequence}"
        )
    async with subscribed(ctx, "repeated ACK") as conn:
        frame = await conn.frame("frame 1")
        await conn.send(Acknowledge(sequence=frame.sequence, subscription_id=conn.lease))
        await conn.expect_closed(f"a second ACK of frame {frame.sequence}")
    async with subscribed(ctx, "foreign lease") as conn:
        frame = await conn.frame("frame 1", ack=False)
        await conn.send(Acknowledge(sequence=frame.sequence, subscription_id=uuid.uuid4()))
        await conn.expect_closed("an ACK naming another subscription")
    return (
        "wrong sequence, stale sequence, repeated ACK and foreign lease each closed the connection"
    )


async def check_lease_second_subscribe(ctx: Context) -> str:
    """One lease per connection: a second ``subscribe`` closes it, and frees the pane."""
    pane = ctx.pane()
    async with subscribed(ctx, "subscriber") as conn:
        await conn.frame("frame 1")
        await conn.send(
            Subscribe(pane_id=pane.id, representation=Representation.VT, intent=Intent.IF_FREE)
        )
        await conn.expect_closed("a second `subscribe` on the same connection")
    async with device(ctx, "observer") as observer:
        for _ in range(20):
            if not await _busy(ctx, observer, pane.id):
                return "closed; the pane was free again"
            await observer.quiet(0.2, "waiting for the pane to be released")
    fail("the pane was still listed busy 4 s after its only subscriber was closed")


async def check_takeover_busy(ctx: Context) -> str:
    """``ifFree`` on a busy pane: ``PANE_BUSY`` (no lease), the connection and the owner stay;
    a free pane is not listed busy."""
    pane = ctx.pane()
    if ctx.busy_error is not None:
        fail(ctx.busy_error)
    async with subscribed(ctx, "owner") as owner:
        await owner.frame("frame 1")
        async with device(ctx, "second device") as other:
            if not await _busy(ctx, other, pane.id):
                fail("the subscribed pane is not listed busy")
            answer = await other.subscribe(pane.id, Representation.VT, Intent.IF_FREE)
            if isinstance(answer, Subscribed):
                fail("`subscribe` (ifFree) to a busy pane was granted a lease")
            if not answer.error.startswith(PANE_BUSY_PREFIX):
                fail(f"a busy pane was refused with {answer.error!r}, not {PANE_BUSY!r}")
            if answer.subscription_id is not None:
                fail("the PANE_BUSY failure carries a subscriptionID")
            await other.stays_open("after PANE_BUSY")
        await owner.quiet(0.3, "the owner keeps its lease")
        await owner.stays_open("the owner, after another device was refused")
    note = "" if answer.error == PANE_BUSY else f" (text {answer.error!r})"
    return "PANE_BUSY; both connections stayed open" + note


async def check_takeover_takeover(ctx: Context) -> str:
    """``takeover`` ends the old lease (``ended takenOver``, then closed) and grants a new one."""
    pane = ctx.pane()
    async with subscribed(ctx, "first owner") as first:
        await first.frame("frame 1")
        old_lease = first.lease
        async with device(ctx, "new owner") as second:
            answer = await second.subscribe(pane.id, Representation.VT, Intent.TAKEOVER)
            if isinstance(answer, Failure):
                fail(f"`subscribe` with takeover was refused: {answer.error!r}")
            if second.lease == old_lease:
                fail("the takeover was granted the old owner's lease")
            await second.frame("the new owner's frame 1")
            ended = await first.expect(Ended, "`ended` for the old owner")
            if ended.reason is not EndReason.TAKEN_OVER:
                fail(f"the old owner got `ended {ended.reason.value}`, not takenOver")
            await first.expect_closed("`ended takenOver`")
            async with device(ctx, "observer") as observer:
                if not await _busy(ctx, observer, pane.id):
                    fail("after the takeover the pane is not listed busy")
            await second.quiet(0.2, "the new owner keeps its lease")
    return "old owner got `ended takenOver` and was closed; new lease granted"
