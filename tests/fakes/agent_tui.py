"""A scripted coding agent for tests: a Claude-Code-like screen in a terminal.

    python3 tests/fakes/claude --control FILE --log FILE --submissions FILE
                               [--no-bracketed-paste]

It draws the layout of the real Claude Code captures (a welcome box at the top,
the transcript, the input box between two rules with ``❯``, status rows under
it) on whatever terminal it runs in, and plays the states a test puts in the
*control* file, a JSON object re-read whenever it changes:

* ``{"state": "idle"}``: the input box waits (optionally ``"ghost": "…"``, a
  faint suggestion in the empty box, or ``"draft": "…"``, unsent text in it);
* ``{"state": "working"}``: a live spinner row above the box;
* ``{"state": "blocked"}``: a Bash permission prompt replaces the box.

Input: every byte it reads is appended to the *log* file, so a test can prove
what was (or was not) typed. A bracketed paste lands in the input box (three
lines or more collapse into ``[Pasted text #N +K lines]``, as Claude Code
does), printable keys are typed into it, Backspace deletes, and Enter submits:
the box's text and the state it was submitted in go to the *submissions* file
as one JSON line, and the box empties. With ``--no-bracketed-paste`` it never
turns bracketed paste on and reads everything as keys, like a naive program:
an ESC is dropped and the rest of a paste marker (``[200~``) is typed as text.
A draft longer than the row is printed as one line and left to the terminal to
wrap. Standard library only, but for mirror_host's ``text_width``: one width
everywhere.
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import json
import os
import select
import signal
import sys
import termios
import time
import tty
from pathlib import Path
from typing import Any

from agent_control import ControlFile  # a sibling: run as scripts from this folder

# Cells are counted the one way the host and its emulator count them. The
# interpreter running this (the tests' own, sys.executable) has mirror_host;
# the checkout is put on the path too, for a run by another python3.
sys.path.append(str(Path(__file__).resolve().parents[2]))
from mirror_host.width import text_width

PASTE_START = b"\x1b[200~"
PASTE_END = b"\x1b[201~"
RULE = "─"
NBSP = "\u00a0"


class Agent:
    def __init__(self, args: argparse.Namespace) -> None:
        self.control = ControlFile(Path(args.control))
        self.log = Path(args.log)
        self.submissions = Path(args.submissions)
        self.bracketed = not args.no_bracketed_paste
        self.settings: dict[str, Any] = {"state": "idle"}
        self.composer = ""
        self.paste_token: str | None = None  # what the box shows instead of a long paste
        self.pastes = 0
        self.transcript: list[str] = []
        self.pending = b""
        self.in_paste = False
        self.paste_buffer = b""
        self.working_since = time.monotonic()
        self.dirty = True
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")

    # ------------------------------------------------------------ control

    def read_control(self) -> None:
        settings = self.control.changed()
        if settings is None:
            return
        if settings.get("state") == "working" and self.settings.get("state") != "working":
            self.working_since = time.monotonic()
        self.settings = settings
        if "draft" in settings:
            self.composer = str(settings["draft"])
            self.paste_token = None
        self.dirty = True

    @property
    def state(self) -> str:
        return str(self.settings.get("state", "idle"))

    # ------------------------------------------------------------ input

    def feed(self, data: bytes) -> None:
        with self.log.open("ab") as log:
            log.write(data)
        self.dirty = True
        if not self.bracketed:
            self.keys(data)  # a paste is keys here, markers and all
            return
        self.pending += data
        while self.pending:
            if self.in_paste:
                end = self.pending.find(PASTE_END)
                if end < 0:
                    self.paste_buffer += self.pending
                    self.pending = b""
                    return
                self.paste_buffer += self.pending[:end]
                self.pending = self.pending[end + len(PASTE_END) :]
                self.in_paste = False
                self.pasted(self.paste_buffer.decode("utf-8", "replace"))
                self.paste_buffer = b""
                continue
            if self.pending.startswith(PASTE_START):
                self.in_paste = True
                self.pending = self.pending[len(PASTE_START) :]
                continue
            if self.pending.startswith(b"\x1b"):
                if len(self.pending) < len(PASTE_START) and PASTE_START.startswith(self.pending):
                    return  # maybe the start of a paste: wait for more
                if self.pending.startswith(b"\x1b["):  # a key's CSI sequence: ignored whole
                    end = next(
                        (i for i in range(2, len(self.pending)) if 0x40 <= self.pending[i] <= 0x7E),
                        None,
                    )
                    if end is None:
                        return  # incomplete: wait for more
                    self.pending = self.pending[end + 1 :]
                    continue
                self.pending = self.pending[1:]  # a lone ESC or an Alt chord: ignored
                continue
            end = self.pending.find(b"\x1b")
            end = len(self.pending) if end < 0 else end
            self.keys(self.pending[:end])
            self.pending = self.pending[end:]

    def pasted(self, text: str) -> None:
        # Terminals deliver a paste's line breaks as CR (agliteterm's session.paste
        # and session.type turn LF into CR); Claude Code reads them as line breaks.
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        self.composer += text
        if text.count("\n") >= 2:
            self.pastes += 1
            self.paste_token = f"[Pasted text #{self.pastes} +{text.count(chr(10))} lines]"

    def keys(self, data: bytes) -> None:
        """Keys: Enter submits, Backspace deletes, text is typed; ESC and other controls drop."""
        for value in data:
            byte = bytes([value])
            if byte == b"\r":
                self.submit()
            elif byte == b"\x7f":
                self.composer = self.composer[:-1]
                self.paste_token = None
            elif byte >= b" ":
                self.composer += self.decoder.decode(byte)
                self.paste_token = None

    def submit(self) -> None:
        record = {"prompt": self.composer, "state": self.state}
        with self.submissions.open("a", encoding="utf-8") as out:
            out.write(json.dumps(record) + "\n")
        if self.state == "idle" and self.composer:
            self.transcript += [f"❯ {self.composer.splitlines()[0]}", "", "● Done.", ""]
        self.composer = ""
        self.paste_token = None

    # ------------------------------------------------------------ drawing

    def box_rows(self, width: int) -> list[str]:
        if self.state == "blocked":
            return [
                RULE * width,
                " Bash command",
                "",
                "   rm -rf build",
                "   Remove the build directory",
                "",
                " This command requires approval",
                "",
                " Do you want to proceed?",
                " ❯ 1. Yes",
                "   2. Yes, and don’t ask again for: rm -rf *",
                "   3. No",
                "",
                " Esc to cancel · Tab to amend · ctrl+e to explain",
            ]
        shown = self.paste_token or self.composer
        lines = shown.split("\n") if shown else [""]
        first, rest = lines[0], lines[1:]
        ghost = self.settings.get("ghost")
        prompt = f"❯{NBSP}{first}"
        if not shown and ghost:
            prompt = f"❯{NBSP}\x1b[2m{ghost}\x1b[0m"
        return [
            RULE * (width - 20) + " fake session ──",
            prompt,
            *(f"  {line}" for line in rest),
            RULE * width,
            "  [Opus 4.8] ~/project on main",
            "  ⏵⏵ bypass permissions on (shift+tab to cycle)",
        ]

    def draw(self) -> None:
        width, height = os.get_terminal_size(sys.stdout.fileno())
        top = [
            "╭─── Claude Code v2.1.201 " + RULE * max(0, width - 28) + "╮",
            "│" + " Welcome back Tester!".ljust(max(0, width - 2)) + "│",
            "╰" + RULE * max(0, width - 2) + "╯",
            "",
        ]
        middle = list(self.transcript)
        if self.state == "working":
            seconds = int(time.monotonic() - self.working_since)
            middle += [f"✢ Puzzling… ({seconds}s · ↓ 1.2k tokens)", ""]
        bottom = self.box_rows(width)
        # A long first line is printed whole: the terminal wraps it onto more rows.
        typed = text_width((self.paste_token or self.composer).split("\n")[0])
        wrapped = 0 if self.state == "blocked" else (1 + typed) // width
        room = height - len(top) - len(bottom) - wrapped
        middle = middle[-room:] if room > 0 else []
        rows = top + middle + [""] * max(0, room - len(middle)) + bottom
        out = "\x1b[H\x1b[2J" + "\r\n".join(row for row in rows[: height - wrapped])
        if self.state != "blocked":
            prompt_row = len(rows) - len(bottom) + 2
            row, column = min(divmod(2 + typed, width), (wrapped, width - 1))
            out += f"\x1b[{prompt_row + row};{column + 1}H"
        sys.stdout.write(out)
        sys.stdout.flush()
        self.dirty = False

    # ------------------------------------------------------------ main loop

    def run(self) -> None:
        fd = sys.stdin.fileno()
        saved = termios.tcgetattr(fd)
        tty.setraw(fd, termios.TCSANOW)  # keep input that arrived before we started
        signal.signal(signal.SIGWINCH, lambda *_: setattr(self, "dirty", True))
        try:
            if self.bracketed:
                sys.stdout.write("\x1b[?2004h")
            last_tick = 0
            while True:
                self.read_control()
                ready, _, _ = select.select([fd], [], [], 0.05)
                if ready:
                    data = os.read(fd, 65536)
                    if not data:
                        return
                    self.feed(data)
                tick = int(time.monotonic())
                if self.state == "working" and tick != last_tick:
                    last_tick, self.dirty = tick, True
                if self.dirty:
                    self.draw()
        finally:
            with contextlib.suppress(termios.error):
                termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="claude")
    parser.add_argument("--control", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--submissions", required=True)
    parser.add_argument("--no-bracketed-paste", action="store_true")
    args = parser.parse_args(argv)
    Agent(args).run()
    return 0
