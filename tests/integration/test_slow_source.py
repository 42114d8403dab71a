"""A slow pane source never breaks a connection (issues 10 and 16), end to end.

Real TLS, the real host and the faithful fake Herdr, holding its history reads
(``pane.read`` of ``recent``) for 10 s as a loaded Herdr with a big scrollback
does. What is checked is order, not speed: typed input comes back as a frame
while the history read is still being held, the host keeps pinging through it,
the phone is told ``HISTORY_UNAVAILABLE`` while Herdr still holds the read (so
before 10 s: Android gives up at 8), and a retry once Herdr answered gets the
page at once, from that same read.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import trio

from mirror_host import control as c
from mirror_host.session.logged_in import HISTORY_UNAVAILABLE
from mirror_host.wire import TextFramePacket, VTFramePacket
from tests.integration.mirror_helpers import frame_containing, list_panes, subscribe
from tests.integration.test_herdr import add_demo, fake_herdr, herdr_host

pytestmark = pytest.mark.timeout(90)

HISTORY_DELAY = 10.0


def history_reads(params: object) -> bool:
    return isinstance(params, dict) and params.get("source") == "recent"


async def test_input_shows_while_herdr_answers_history_10_s_late(state_dir: Path) -> None:
    # The observe stream (Herdr's own push); polling reads only `visible`, which
    # the delay does not touch, so it would show the same thing again.
    observe = True
    async with fake_herdr(state_dir) as fake:
        pane = await add_demo(fake)
        fake.delay_method("pane.read", HISTORY_DELAY, when=history_reads)
        async with herdr_host(state_dir, fake, observe=observe) as (_host, client, _source):
            pane_id = (await list_panes(client)).panes[0].id
            sub = await subscribe(client, pane_id)
            await client.send(c.Input(data=b"echo before-$((1+1))\r", subscription_id=sub))
            await frame_containing(client, sub, "before-2")
            await client.send(c.History(subscription_id=sub))
            with trio.fail_after(10):
                await fake.wait_held("pane.read")
            pings_before = client.pings_received
            await client.send(c.Input(data=b"echo during-$((2+2))\r", subscription_id=sub))
            await frame_containing(client, sub, "during-4")
            assert fake.holding("pane.read") == 1, "typed input waited for the history read"
            # Keep acknowledging until the host answers the history request.
            failure = None
            with trio.fail_after(HISTORY_DELAY + 20):
                while failure is None:
                    item = await client.receive(timeout=HISTORY_DELAY + 20)
                    if isinstance(item, VTFramePacket | TextFramePacket):
                        await client.send(
                            c.Acknowledge(sequence=item.sequence, subscription_id=sub)
                        )
                    elif isinstance(item, c.Failure):
                        failure = item
                    else:
                        assert isinstance(item, c.Ping | c.Pong), item
            assert failure == c.Failure(error=HISTORY_UNAVAILABLE, subscription_id=sub)
            assert fake.holding("pane.read") == 1, "the answer waited for Herdr's read"
            assert client.pings_received - pings_before >= 2  # heartbeats went on
            with trio.fail_after(HISTORY_DELAY + 10):
                while fake.holding("pane.read"):  # Herdr answers the read in the end
                    await trio.sleep(0.05)
            reads = len([r for r in fake.requests_for("pane.read") if history_reads(r["params"])])
            await client.send(c.History(subscription_id=sub))  # the phone's retry
            page = None
            with trio.fail_after(5):
                while page is None:
                    item = await client.receive(timeout=5)
                    if isinstance(item, VTFramePacket | TextFramePacket):
                        await client.send(
                            c.Acknowledge(sequence=item.sequence, subscription_id=sub)
                        )
                    elif isinstance(item, c.HistoryPage):
                        page = item
                    else:
                        assert isinstance(item, c.Ping | c.Pong), item
            assert any("before-2" in line for line in page.lines)
            assert fake.holding("pane.read") == 0, "the retry waited for a new read"
            assert reads == len(
                [r for r in fake.requests_for("pane.read") if history_reads(r["params"])]
            ), "the retry read Herdr again instead of taking the finished read"
            await client.send(c.ListPanes())
            assert isinstance(await client.expect(c.Panes), c.Panes)  # still up
            assert b"during" in fake.received_input(pane)


async def test_a_slow_scroll_on_herdr_leaves_input_flowing(state_dir: Path) -> None:
    async with fake_herdr(state_dir) as fake:
        await add_demo(fake, "seq 1 200; exec bash --norc --noprofile -i")
        fake.delay_method("pane.scroll", 2.0)
        async with herdr_host(state_dir, fake) as (_host, client, _source):
            pane_id = (await list_panes(client)).panes[0].id
            sub = await subscribe(client, pane_id)
            await frame_containing(client, sub, "200")
            await client.send(
                c.Scroll(
                    request_id=uuid.uuid4(),
                    direction=c.ScrollDirection.UP,
                    subscription_id=sub,
                )
            )
            with trio.fail_after(10):
                await fake.wait_held("pane.scroll")
            await client.send(c.Input(data=b"echo typed-$((3+3))\r", subscription_id=sub))
            await frame_containing(client, sub, "typed-6")
            assert fake.holding("pane.scroll") == 1, "typed input waited for the scroll"
