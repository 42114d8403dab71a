"""A naive Claude Code look-alike for tests: it prints a real capture verbatim.

    claude capture_agent.py --captures DIR --control FILE --log FILE
                            --submissions FILE [--no-bracketed-paste]

Unlike ``agent_tui.py``, which lays its screen out itself, this one does what a
quickly written look-alike would: after a clear it prints a recorded Claude
Code screen exactly as the file holds it (rows separated by ``\\r\\n``, SGR
colours and all), meant for a 215×64 terminal, and changes as little as it can:

* ``{"state": "idle"}`` in the *control* file (re-read when it changes) shows
  ``claude--fresh-idle.txt``; ``{"state": "blocked"}`` shows
  ``claude--permission-bash.txt``, a Bash permission prompt;
* a paste, or typed text, redraws just the composer row (the last ``❯`` row
  right above a rule) as ``❯ <text>``, plain;
* Enter appends ``{"prompt", "state"}`` to the *submissions* file and prints
  the capture again, so the composer is empty.

Every byte read goes to the *log* file. With ``--no-bracketed-paste`` it never
turns bracketed paste on and reads everything as keys: an ESC is dropped and
the rest of a paste marker (``[200~``) typed like text. Standard library only.
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import json
import os
import re
import select
import sys
import termios
import tty
from pathlib import Path

from agent_control import ControlFile  # a sibling: run as scripts from this folder

PASTE_START = b"\x1b[200~"
PASTE_END = b"\x1b[201~"
CAPTURES = {"idle": "claude--fresh-idle.txt", "blocked": "claude--permission-bash.txt"}
_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def composer_row(text: str) -> int | None:
    """The row of the capture's input box prompt: the last ``❯`` row with a rule under it."""
    rows = [_ESCAPE.sub("", row) for row in text.split("\r\n")]
    for index in range(len(rows) - 2, -1, -1):
        if rows[index].startswith("❯") and rows[index + 1].startswith("───"):
            return index
    return None


class LookAlike:
    def __init__(self, args: argparse.Namespace) -> None:
        self.captures = Path(args.captures)
        self.control = ControlFile(Path(args.control))
        self.log = Path(args.log)
        self.submissions = Path(args.submissions)
        self.bracketed = not args.no_bracketed_paste
        self.state = "idle"
        self.composer = ""
        self.pending = b""
        self.in_paste = False
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def write(self, text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    def capture(self) -> str:
        """The current state's capture, exactly as the file holds it (``\\r\\n`` kept)."""
        path = self.captures / CAPTURES.get(self.state, CAPTURES["idle"])
        return path.read_bytes().decode("utf-8")

    def show(self) -> None:
        """The capture of the current state, verbatim, after a clear."""
        self.write("\x1b[H\x1b[2J" + self.capture())

    def show_composer(self) -> None:
        row = composer_row(self.capture())
        if row is not None:
            self.write(f"\x1b[{row + 1};1H\x1b[2K❯ {self.composer}")

    def read_control(self) -> None:
        settings = self.control.changed()
        if settings is None:
            return
        state = str(settings.get("state", "idle"))
        if state != self.state:
            self.state = state
            self.show()

    # ------------------------------------------------------------ input

    def feed(self, data: bytes) -> None:
        with self.log.open("ab") as log:
            log.write(data)
        if not self.bracketed:
            self.keys(data)
            return
        self.pending += data
        while self.pending:
            marker = PASTE_END if self.in_paste else PASTE_START
            at = self.pending.find(marker)
            if at < 0:
                # What may be the start of a marker waits for the next read.
                keep = next(
                    (n for n in range(len(marker) - 1, 0, -1) if self.pending.endswith(marker[:n])),
                    0,
                )
                at = len(self.pending) - keep
                chunk, self.pending = self.pending[:at], self.pending[at:]
                self.handle(chunk)
                return
            chunk, self.pending = self.pending[:at], self.pending[at + len(marker) :]
            self.handle(chunk)
            self.in_paste = not self.in_paste

    def handle(self, data: bytes) -> None:
        if self.in_paste:
            self.text(data)
        else:
            self.keys(data)

    def text(self, data: bytes) -> None:
        """Pasted text goes into the composer as it is."""
        if data:
            self.composer += self.decoder.decode(data)
            self.show_composer()

    def keys(self, data: bytes) -> None:
        """Enter submits; printable bytes are typed; ESC and other controls are dropped."""
        typed = False
        for value in data:
            if value == 0x0D:
                self.submit()
                typed = False
            elif value >= 0x20 and value != 0x7F:
                self.composer += self.decoder.decode(bytes([value]))
                typed = True
        if typed:
            self.show_composer()

    def submit(self) -> None:
        with self.submissions.open("a", encoding="utf-8") as out:
            out.write(json.dumps({"prompt": self.composer, "state": self.state}) + "\n")
        self.composer = ""
        self.show()

    # ------------------------------------------------------------ main loop

    def run(self) -> None:
        fd = sys.stdin.fileno()
        saved = termios.tcgetattr(fd)
        tty.setraw(fd, termios.TCSANOW)
        try:
            if self.bracketed:
                self.write("\x1b[?2004h")
            self.read_control()
            self.show()
            while True:
                ready, _, _ = select.select([fd], [], [], 0.05)
                if ready:
                    data = os.read(fd, 65536)
                    if not data:
                        return
                    self.feed(data)
                self.read_control()
        finally:
            with contextlib.suppress(termios.error):
                termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="claude")
    parser.add_argument("--captures", required=True)
    parser.add_argument("--control", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--submissions", required=True)
    parser.add_argument("--no-bracketed-paste", action="store_true")
    LookAlike(parser.parse_args(argv)).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
