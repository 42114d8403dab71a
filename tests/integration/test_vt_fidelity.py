"""A client replaying RIS + the VT frame sees the host's screen cell by cell.

This is what Prowl's Mac client does with every frame: reset its replica
terminal, write the frame bytes, and show the result. The replica here is a
fresh libghostty terminal of the same size; the reference is the host's own
screen for the pane.
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
from mirror_host.wire import VTFramePacket
from tests.integration.conftest import paired, port_of, running_host
from tests.integration.mirror_helpers import list_panes, next_frame, settle, subscribe

pytestmark = pytest.mark.timeout(90)

#: Modes whose state the replica must reproduce (DEC private unless noted).
MODES = [1, 6, 7, 25, 47, 1000, 1002, 1003, 1004, 1005, 1006, 1015, 1047, 1049, 2004]

GENERATED = (
    # 16, 256 and true colours, attributes, on the primary screen
    "\x1b[1;31mbold red\x1b[0m \x1b[3;4;32mitalic underline green\x1b[0m "
    "\x1b[7minverse\x1b[0m \x1b[38;5;208;48;5;17m256 colours\x1b[0m "
    "\x1b[38;2;10;200;30;48;2;40;0;80mtrue colour\x1b[0m \x1b[9;2mstruck faint\x1b[0m\r\n"
    "wide: 中文字 ok \U0001f600 end\r\n"
    + "w" * 80  # exactly one full row: wraps pending at the last column
    + "\x1b[?2004h\x1b[?1h"  # bracketed paste and application cursor keys
    + "\x1b[10;5H\x1b[44m  blue box  \x1b[0m\x1b[12;30Hcursor moved"
    + "\x1b[20;1H\x1b[K\x1b[1;33mlast\x1b[0m"
)

ALT_SCREEN = (
    "primary text\r\n"
    "\x1b[?1049h\x1b[2J\x1b[H\x1b[1;36m== full screen ==\x1b[0m"
    "\x1b[5;10H\x1b[41m red \x1b[0m\x1b[?1000h\x1b[?1006h\x1b[?25l"
    "\x1b[24;1H\x1b[7m status line \x1b[0m\x1b[3;3H"
)


def _cells(screen: Screen) -> list[list[tuple[str, object]]]:
    # A never-written cell and a written space look the same; compare them as equal.
    return [[(text or " ", style) for text, style in row] for row in screen.cells()]


def compare(replica: Screen, reference: Screen) -> None:
    assert replica.size == reference.size
    expected_rows, got_rows = _cells(reference), _cells(replica)
    for y, (want, got) in enumerate(zip(expected_rows, got_rows, strict=True)):
        for x, (w, g) in enumerate(zip(want, got, strict=True)):
            assert g == w, f"cell {x},{y}: replica {g} != host {w}"
    assert replica.cursor == reference.cursor
    assert replica.on_alternate_screen == reference.on_alternate_screen
    for mode in MODES:
        assert replica.mode(mode) == reference.mode(mode), f"mode {mode}"
    assert replica.mode(4, ansi=True) == reference.mode(4, ansi=True)


async def mirror_and_compare(
    state_dir: Path, command: str, *, wait_for: str, size: tuple[int, int] = (80, 24)
) -> None:
    columns, rows = size
    source = LocalSource([command], columns=columns, rows=rows, cwd=str(state_dir))
    async with running_host(state_dir, source) as host:
        credential = await paired(host)
        async with login("127.0.0.1", port_of(host), credential) as client:
            pane = (await list_panes(client)).panes[0]
            sub = await subscribe(client, pane.id)
            reference = source._panes[pane.id].screen
            with trio.fail_after(30):
                while wait_for not in reference.active_text():
                    await trio.sleep(0.05)
            await settle(client, sub, quiet=0.6)
            # Ask for the current screen explicitly: refresh resends even when unchanged.
            await client.send(c.Refresh(subscription_id=sub))
            frame = await next_frame(client, sub)
            assert isinstance(frame, VTFramePacket)
            assert b"\x1bc" not in frame.data  # no RIS: the client adds its own
            replica = Screen(columns, rows)
            replica.feed(b"\x1bc" + frame.data)
            compare(replica, reference)


def script(state_dir: Path, name: str, payload: str) -> str:
    path = state_dir / name
    path.write_bytes(payload.encode())
    return f"cat {path}; exec sleep 120"


@pytest.mark.slow
async def test_generated_styles_modes_and_cursor(state_dir: Path) -> None:
    await mirror_and_compare(state_dir, script(state_dir, "gen.txt", GENERATED), wait_for="last")


@pytest.mark.slow
async def test_alternate_screen_with_mouse_and_hidden_cursor(state_dir: Path) -> None:
    await mirror_and_compare(
        state_dir, script(state_dir, "alt.txt", ALT_SCREEN), wait_for="status line"
    )


@pytest.mark.skipif(shutil.which("vim") is None, reason="vim is not installed")
@pytest.mark.slow
async def test_vim(state_dir: Path) -> None:
    sample = state_dir / "sample.py"
    sample.write_text("".join(f"def f{i}(x):\n    return x * {i}  # comment\n" for i in range(30)))
    command = f"exec vim -u NONE -N -i NONE -c 'syntax on' -c 'set number' {sample}"
    await mirror_and_compare(state_dir, command, wait_for="def f10")


@pytest.mark.skipif(shutil.which("less") is None, reason="less is not installed")
@pytest.mark.slow
async def test_less(state_dir: Path) -> None:
    sample = state_dir / "notes.txt"
    sample.write_text("".join(f"line {i}: \x1b[1mbold\x1b[0m words here\n" for i in range(200)))
    await mirror_and_compare(state_dir, f"exec less -R {sample}", wait_for="line 10")


@pytest.mark.skipif(shutil.which("top") is None, reason="top is not installed")
@pytest.mark.slow
async def test_top(state_dir: Path) -> None:
    await mirror_and_compare(state_dir, "exec top -d 100", wait_for="PID", size=(100, 30))
