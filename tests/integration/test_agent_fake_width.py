"""The scripted agent (``tests/fakes/claude``) counts cells as the host does."""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import termios
import time
from pathlib import Path

import pytest

from mirror_host.terminal import Screen
from mirror_host.width import text_width
from tests.integration.agent_helpers import FakeAgent

pytestmark = pytest.mark.timeout(30)

COLUMNS, ROWS = 80, 24


def _screen_of_agent(agent: FakeAgent, shown: str) -> Screen:
    """Run the agent on a PTY of COLUMNS x ROWS until its screen shows ``shown``."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
    process = subprocess.Popen(
        agent.argv(), stdin=slave, stdout=slave, stderr=subprocess.DEVNULL, start_new_session=True
    )
    os.close(slave)
    screen = Screen(COLUMNS, ROWS)
    try:
        deadline = time.monotonic() + 15
        while shown not in screen.text_frame():
            left = deadline - time.monotonic()
            assert left > 0, screen.text_frame()
            ready, _, _ = select.select([master], [], [], left)
            if ready:
                screen.feed(os.read(master, 65536))
        # The cursor goes last in each draw: read on until it stops coming.
        while select.select([master], [], [], 0.3)[0]:
            screen.feed(os.read(master, 65536))
        return screen
    finally:
        process.kill()
        process.wait(timeout=10)
        os.close(master)


def test_the_agents_cursor_follows_a_draft_by_the_hosts_width(tmp_path: Path) -> None:
    # Found in review: the fake counted cells by east_asian_width, so a
    # combining mark (0 cells to libghostty and the host) moved its cursor one
    # cell past the text, where no real terminal program would put it.
    draft = "cafe\u0301 nai\u0308ve \u4f60\u597d"  # two combining marks, two wide
    agent = FakeAgent(tmp_path)
    agent.set(state="idle", draft=draft)
    screen = _screen_of_agent(agent, "ve ")
    x, y = screen.cursor
    assert x == 2 + text_width(draft) == 2 + 15
    assert "\u276f" in screen.text_frame().split("\n")[y]
