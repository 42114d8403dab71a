"""Helpers for mirroring tests: subscribe, read frames, wait for screen content."""

from __future__ import annotations

import uuid
from uuid import UUID

import trio

from mirror_host import control as c
from mirror_host.capture.values import StyledArchive
from mirror_host.client.client import MirrorClient
from mirror_host.limits import MAX_ARCHIVE_BYTES, MAX_ARCHIVE_ROWS
from mirror_host.terminal import Screen
from mirror_host.terminal.archive import present
from mirror_host.wire import TextFramePacket, VTFramePacket

Frame = VTFramePacket | TextFramePacket


async def list_panes(client: MirrorClient) -> c.Panes:
    await client.send(c.ListPanes())
    panes = await client.expect(c.Panes)
    assert isinstance(panes, c.Panes)
    return panes


async def subscribe(
    client: MirrorClient,
    pane_id: UUID,
    representation: c.Representation = c.Representation.VT,
    intent: c.Intent = c.Intent.IF_FREE,
    **opt_ins: bool,
) -> UUID:
    """Subscribe and return the lease (frames are left for the caller)."""
    await client.send(
        c.Subscribe(pane_id=pane_id, representation=representation, intent=intent, **opt_ins)
    )
    answer = await client.expect(c.Subscribed)
    assert isinstance(answer, c.Subscribed) and answer.pane_id == pane_id
    return answer.subscription_id


async def next_frame(
    client: MirrorClient, sub: UUID, *, ack: bool = True, timeout: float = 10
) -> Frame:
    """The next frame (side messages skipped); acknowledged unless ``ack`` is false."""
    while True:
        item = await client.receive(timeout=timeout)
        if isinstance(item, VTFramePacket | TextFramePacket):
            assert item.subscription_id == sub
            if ack:
                await client.send(c.Acknowledge(sequence=item.sequence, subscription_id=sub))
            return item


def frame_text(frame: Frame) -> str:
    if isinstance(frame, TextFramePacket):
        return frame.text
    return frame.data.decode("utf-8", "replace")


async def frame_containing(
    client: MirrorClient, sub: UUID, needle: str, *, timeout: float = 10
) -> Frame:
    """Acknowledge frames until one contains ``needle``."""
    with trio.fail_after(timeout):
        while True:
            frame = await next_frame(client, sub)
            if needle in frame_text(frame):
                return frame


async def settle(
    client: MirrorClient, sub: UUID, *, quiet: float = 0.4, timeout: float = 15
) -> Frame | None:
    """Acknowledge frames until none arrives for ``quiet`` seconds; return the last."""
    last: Frame | None = None
    with trio.fail_after(timeout):
        while True:
            try:
                last = await next_frame(client, sub, timeout=quiet)
            except trio.TooSlowError:
                return last


async def messages_within(client: MirrorClient, sub: UUID, seconds: float) -> list[object]:
    """Every control message that arrives within ``seconds``, frames acknowledged and left out.

    Raises:
        ClientClosed: the host closed the connection meanwhile.
    """
    seen: list[object] = []
    with trio.move_on_after(seconds):
        while True:
            item = await client.receive(timeout=seconds + 1)
            if isinstance(item, VTFramePacket | TextFramePacket):
                assert item.subscription_id == sub
                await client.send(c.Acknowledge(sequence=item.sequence, subscription_id=sub))
            else:
                seen.append(item)
    return seen


async def scroll_until_result(
    client: MirrorClient, sub: UUID, direction: c.ScrollDirection, *, timeout: float = 10
) -> list[object]:
    """Scroll once; everything received up to its ``scrollResult``, frames acknowledged."""
    request = uuid.uuid4()
    await client.send(c.Scroll(request_id=request, direction=direction, subscription_id=sub))
    seen: list[object] = []
    with trio.fail_after(timeout):
        while not (seen and isinstance(seen[-1], c.ScrollResult)):
            item = await client.receive()
            seen.append(item)
            if isinstance(item, VTFramePacket):
                await client.send(c.Acknowledge(sequence=item.sequence, subscription_id=sub))
    return seen


def styled_view(viewport: c.Viewport, frame: VTFramePacket) -> Screen:
    """The replica Prowl's Mac client shows for a viewport with a styled archive.

    Checks what the Mac client checks: the archive's limits, and that the
    replica presents exactly ``viewport.text`` (else it would fall back to it).
    """
    styled = viewport.styled_scrollback
    assert styled is not None and viewport.text is not None
    assert 1 <= len(styled.data) <= MAX_ARCHIVE_BYTES
    assert 0 <= styled.row_offset <= MAX_ARCHIVE_ROWS
    archive = StyledArchive(data=styled.data, row_offset=styled.row_offset)
    replica = present(archive, columns=frame.columns, rows=frame.rows, frame=frame.data)
    assert replica.viewport_overlay() == viewport.text
    return replica


def row_styles(replica: Screen, needle: str) -> dict[str, dict[str, object]]:
    """For the first viewport row containing ``needle``: each word's first cell's style."""
    rows = replica.viewport_overlay().split("\n")
    y = next(index for index, row in enumerate(rows) if needle in row)
    styles: dict[str, dict[str, object]] = {}
    for word in rows[y].split():
        x = rows[y].index(word)
        styles.setdefault(word, dict(replica.cell(x, y, area="viewport")[1]))
    return styles


def coloured_lines(count: int) -> str:
    """A shell loop printing ``count`` lines: a red number, a bold underlined word, a green one."""
    return (
        f"for i in $(seq 1 {count}); do "
        "printf '\\033[31mred%d\\033[0m \\033[1;4mbold%d\\033[0m \\033[38;5;40mgreen\\033[0m\\n'"
        " $i $i; done"
    )


async def scrolled_back_in_colour(
    client: MirrorClient, sub: UUID, *, newest: int, shown: int
) -> tuple[c.Viewport, VTFramePacket, dict[str, dict[str, object]]]:
    """Scroll a Mac-style lease (viewport text, styled scrollback, scroll state) up
    once and check the archive shows line ``shown`` (not ``newest``) in colour;
    the viewport, the frame and the styles of that line."""
    seen = await scroll_until_result(client, sub, c.ScrollDirection.UP)
    viewport, state, frame, result = seen[-4:]
    assert isinstance(viewport, c.Viewport) and isinstance(frame, VTFramePacket)
    assert isinstance(state, c.ScrollState) and isinstance(result, c.ScrollResult)
    assert viewport.sequence == state.sequence == frame.sequence == result.sequence
    replica = styled_view(viewport, frame)
    assert viewport.text is not None and f"red{shown}" in viewport.text
    assert f"red{newest}" not in viewport.text
    styles = row_styles(replica, f"red{shown}")
    assert styles[f"red{shown}"]["fg"] == ("palette", 1)
    assert styles[f"bold{shown}"]["bold"] and styles[f"bold{shown}"]["underline"] == 1
    assert styles["green"]["fg"] == ("palette", 40)
    return viewport, frame, styles
