"""Text frames as Prowl's host writes them: soft-wrapped lines joined, for phones to reflow.

Prowl's host reads a ``text-v1`` frame with Ghostty's ``read_text`` (soft
wraps joined; ``../shared/spec/prowl-clients.md``, "Frames as the apps render
them"), and the iPhone and Android apps reflow text to their width: a line
sent cut at the host's column would break mid-word on the phone. VT frames
keep the host's rows (the Mac replays them into a replica of the same size).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import trio

from mirror_host import control as c
from mirror_host.client.client import login
from mirror_host.panes.local import LocalSource
from mirror_host.terminal import Screen
from mirror_host.wire import TextFramePacket, VTFramePacket
from tests.integration.conftest import paired, port_of, running_host
from tests.integration.mirror_helpers import frame_containing, list_panes, subscribe
from tests.integration.test_agliteterm import aglite_host, client_of, fake_agliteterm, key
from tests.integration.test_tmux import TmuxServer, tmux_host, tmux_server  # noqa: F401

pytestmark = pytest.mark.timeout(60)

#: 150 characters on a 120-column pane, then a line exactly 120 wide that ends
#: with a line break (no wrap: the next line is a line of its own).
LONG = "L" * 145 + "-tail"
EXACT = "E" * 120
PRINT = f"printf '%s\\n%s\\nafter\\n' {LONG} {EXACT}; exec sleep 60"


def lines_of(frame: TextFramePacket) -> list[str]:
    return frame.text.split("\n")


async def test_a_soft_wrapped_line_reaches_a_text_lease_as_one_line(state_dir: Path) -> None:
    source = LocalSource([PRINT], columns=120, rows=24)
    async with running_host(state_dir, source) as host:
        credential = await paired(host)
        async with login("127.0.0.1", port_of(host), credential) as phone:
            pane = (await list_panes(phone)).panes[0]
            sub = await subscribe(phone, pane.id, c.Representation.TEXT)
            frame = await frame_containing(phone, sub, "after")
            assert isinstance(frame, TextFramePacket)
            assert lines_of(frame) == [LONG, EXACT, "after"]
            assert (frame.columns, frame.rows) == (120, 24)  # the real grid all the same
        async with login("127.0.0.1", port_of(host), credential) as mac:
            sub = await subscribe(mac, pane.id)
            vt = await frame_containing(mac, sub, "after")
            assert isinstance(vt, VTFramePacket)
            replica = Screen(vt.columns, vt.rows)
            replica.feed(b"\x1bc" + vt.data)
            # The Mac's replica has the host's rows: the long line on two.
            assert replica.active_text().split("\n")[:4] == [LONG[:120], LONG[120:], EXACT, "after"]


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
async def test_tmux_text_frames_join_what_tmux_wrapped(
    state_dir: Path,
    tmux_server: TmuxServer,  # noqa: F811
) -> None:
    """Lines wrapped before the phone came (the seeded screen) and after (its output)."""
    async with tmux_host(state_dir, tmux_server) as (host, _client, _source):
        tmux_server.tmux(
            "send-keys", "-t", "work:main", "printf 'B%.0s' $(seq 100); echo -seeded", "Enter"
        )
        with trio.fail_after(10):  # on tmux's screen before anyone subscribes
            while "B-seeded" not in tmux_server.tmux("capture-pane", "-p", "-J", "-t", "work"):
                await trio.sleep(0.05)
        async with login("127.0.0.1", port_of(host), await paired(host, "Phone")) as phone:
            pane = (await list_panes(phone)).panes[0]
            sub = await subscribe(phone, pane.id, c.Representation.TEXT)
            frame = await frame_containing(phone, sub, "B-seeded")
            assert isinstance(frame, TextFramePacket)
            assert "B" * 100 + "-seeded" in lines_of(frame)
            tmux_server.tmux(
                "send-keys", "-t", "work:main", "printf 'C%.0s' $(seq 100); echo -live", "Enter"
            )
            frame = await frame_containing(phone, sub, "C-live")
            assert isinstance(frame, TextFramePacket)
            assert "C" * 100 + "-live" in lines_of(frame)
            assert "B" * 100 + "-seeded" in lines_of(frame)


async def test_agliteterm_reports_no_wraps_so_its_rows_are_kept(state_dir: Path) -> None:
    """agliteterm's rows carry no wrap flag (``src/styled_text.h``), and a full-width
    row may as well be a border as a wrapped line: nothing is guessed."""
    async with fake_agliteterm(state_dir, columns=120, rows=24) as fake:
        session = await fake.add_session(fake.add_workspace("w"), PRINT)
        async with aglite_host(state_dir, fake) as (host, _source), client_of(host) as phone:
            sub = await subscribe(phone, key(fake, session), c.Representation.TEXT)
            frame = await frame_containing(phone, sub, "after")
            assert isinstance(frame, TextFramePacket)
            assert lines_of(frame)[:4] == [LONG[:120], LONG[120:], EXACT, "after"]
