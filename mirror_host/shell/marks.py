"""OSC 133 prompt marks in a terminal's output, and what the latest ones say. Pure.

Shells with prompt integration (fish 4, and the integrations of Ghostty, kitty,
WezTerm, iTerm2, VS Code and mirror-host's own ``shell-init``) mark their
prompt in the byte stream they write:

* ``ESC ] 133 ; A`` the prompt starts,
* ``ESC ] 133 ; B`` the prompt ends and the command line starts,
* ``ESC ] 133 ; C`` the command line was accepted and runs,
* ``ESC ] 133 ; D [; status]`` the command is done,

each ended by BEL or ST (``ESC \\``), optionally with more ``;``-separated
parameters (``133;A;cl=m;aid=12``). :class:`MarkScanner` finds each mark in
output fed in arbitrary pieces (a mark may be split across reads).
:class:`PromptMarks` keeps what the latest ones say: after a ``B`` and no
other mark since, the shell waits at its prompt; after a ``C``, a command runs.
What its command line holds only the shell knows (it is asked:
:mod:`mirror_host.shell.exchange`).

Marks are plain bytes that any program can print (``cat`` a file that holds
them), so mirror-host's own integration signs its marks with a secret the
host gave the shell when it started it (``133;B;mh=NONCE``, as VS Code does
with its ``633`` marks; :mod:`mirror_host.shell.nonce`). A pane whose shell is
known to hold the nonce takes only signed marks (:meth:`PromptMarks.expect`).
libghostty ignores the extra parameter (tests/unit/test_shell_marks.py).
"""

from __future__ import annotations

import enum
import hmac
import re
from dataclasses import dataclass

__all__ = ["NONCE_KEY", "Mark", "MarkKind", "MarkScanner", "PromptMarks"]

#: The mark parameter that carries the nonce: ``133;B;mh=NONCE``.
NONCE_KEY = "mh"


class MarkKind(enum.Enum):
    """The four marks of a prompt's life."""

    PROMPT = "A"
    INPUT = "B"
    COMMAND = "C"
    DONE = "D"


@dataclass(frozen=True, slots=True)
class Mark:
    """One OSC 133 mark and its parameters after the letter (``("0",)`` for ``D;0``)."""

    kind: MarkKind
    params: tuple[str, ...] = ()

    @property
    def nonce(self) -> str | None:
        """The ``mh=`` parameter: the nonce mirror-host's integration signs its marks with."""
        prefix = NONCE_KEY + "="
        for param in self.params:
            if param.startswith(prefix):
                return param[len(prefix) :]
        return None


_KINDS = {kind.value: kind for kind in MarkKind}
#: What ends (or aborts) an OSC string: BEL, ESC (ST is ESC \), CAN, SUB.
_OSC_END = re.compile(rb"[\x07\x1b\x18\x1a]")
#: An OSC body longer than this is not a mark we need to read (its parameters are dropped).
_KEEP = 256


class _State(enum.Enum):
    GROUND = 0
    ESCAPE = 1  # saw ESC outside an OSC
    OSC = 2  # inside ESC ] …
    OSC_ESCAPE = 3  # saw ESC inside an OSC: ST if a backslash follows


class MarkScanner:
    """Finds OSC 133 marks in a byte stream fed in pieces of any size.

    It follows only what matters for OSC strings (where one starts, what ends
    it), the way a VT parser does: an ``ESC`` inside one ends it and starts a
    new escape sequence, CAN and SUB abort it.
    """

    def __init__(self) -> None:
        self._state = _State.GROUND
        self._body = bytearray()
        self._overflow = False

    def feed(self, data: bytes) -> list[tuple[int, Mark]]:
        """The marks completed in ``data``, each with the offset just past its terminator."""
        found: list[tuple[int, Mark]] = []
        i, size = 0, len(data)
        while i < size:
            state = self._state
            if state is _State.GROUND:
                # Straight to the next OSC: other escape sequences (SGR, cursor
                # moves …) are skipped at C speed, not one by one.
                start = data.find(b"\x1b]", i)
                if start < 0:
                    if data[-1] == 0x1B:
                        self._state = _State.ESCAPE  # an OSC may start in the next piece
                    break
                self._begin()
                i = start + 2
            elif state is _State.ESCAPE:
                if data[i] == 0x5D:  # ]
                    self._begin()
                    i += 1
                else:
                    self._state = _State.GROUND  # some other escape: not ours
            elif state is _State.OSC:
                end = _OSC_END.search(data, i)
                stop = size if end is None else end.start()
                self._keep(data[i:stop])
                if end is None:
                    break
                byte = data[stop]
                i = stop + 1
                if byte == 0x07:
                    self._finish(found, i)
                elif byte == 0x1B:
                    self._state = _State.OSC_ESCAPE
                else:
                    self._state = _State.GROUND  # CAN / SUB abort the string
            else:  # OSC_ESCAPE
                if data[i] == 0x5C:  # backslash: ST
                    i += 1
                    self._finish(found, i)
                else:
                    # The ESC aborted the OSC and starts a new sequence here.
                    self._state = _State.ESCAPE
        return found

    def _begin(self) -> None:
        self._state = _State.OSC
        self._body.clear()
        self._overflow = False

    def _keep(self, chunk: bytes) -> None:
        if self._overflow or not chunk:
            return
        if len(self._body) + len(chunk) > _KEEP:
            self._overflow = True
            return
        self._body += chunk

    def _finish(self, found: list[tuple[int, Mark]], offset: int) -> None:
        self._state = _State.GROUND
        if self._overflow:
            return
        mark = parse_mark(bytes(self._body))
        if mark is not None:
            found.append((offset, mark))


def parse_mark(body: bytes) -> Mark | None:
    """The mark an OSC body (between ``ESC ]`` and its terminator) holds, if any."""
    if not body.startswith(b"133;"):
        return None
    parts = body[4:].decode("utf-8", "replace").split(";")
    kind = _KINDS.get(parts[0])
    return Mark(kind, tuple(parts[1:])) if kind is not None else None


class PromptMarks:
    """What the marks seen so far say about the shell."""

    def __init__(self) -> None:
        self.last: Mark | None = None
        self._nonce: str | None = None
        self._signed_only = False

    def expect(self, nonce: str, *, known: bool) -> None:
        """The pane's shell signs its marks with ``nonce`` (``known``) or may do so.

        Once the shell is known to sign (``known``, or a mark signed with
        ``nonce`` was seen), every mark without that signature is ignored:
        output cannot forge a prompt. Until then unsigned marks count, as they
        do on a screen with no nonce at all.
        """
        self._nonce = nonce
        self._signed_only = known

    @property
    def signed_only(self) -> bool:
        """Whether only marks signed with the pane's nonce count."""
        return self._signed_only

    def note(self, mark: Mark) -> None:
        """A mark was read in the pane's output."""
        if self._nonce is not None:
            nonce = mark.nonce
            if nonce is not None and hmac.compare_digest(nonce.encode(), self._nonce.encode()):
                self._signed_only = True
            elif self._signed_only:
                return  # printed by a program, or another integration's: not the shell's own
        self.last = mark

    def forget(self) -> None:
        """The screen was replaced or reset: nothing earlier is known any more."""
        self.last = None

    @property
    def signed(self) -> Mark | None:
        """The latest mark, if the shell signs its marks (so it is the shell's own)."""
        return self.last if self._signed_only else None

    @property
    def waiting(self) -> bool:
        """The latest mark is ``B``: the shell's prompt waits for a command line."""
        return self.last is not None and self.last.kind is MarkKind.INPUT

    @property
    def running(self) -> bool:
        """A command line was accepted (``C``) and no later mark came."""
        return self.last is not None and self.last.kind is MarkKind.COMMAND
