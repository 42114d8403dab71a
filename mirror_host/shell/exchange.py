"""Handing a phone's command line to a shell's own line editor: the host's side. Pure.

A phone's ``send`` is never typed. The host and the pane's own shell talk
through files in a private directory (:mod:`mirror_host.shell.directory`), and
the host sends the shell one key sequence, :data:`TRIGGER`, which
mirror-host's integration (:mod:`mirror_host.shell.integration`) binds in
every keymap of its line editor:

1. The host writes ``<pid>.request`` (``pid``: the pane's own shell, which it
   just saw lead the terminal's foreground group): a fresh random request id,
   when it expires (Unix seconds; the shell ignores it after that, so a request
   left behind by a host that died mid-send can never run later, on some
   terminal's focus report) and the exact command text (:func:`encode_request`).
2. It sends :data:`TRIGGER`. Inside its line editor, the shell reads its
   request and decides with ONE exclusive creation of
   ``<pid>.<id>.answer``: ``refused line`` when its command line holds text
   (typed, recalled, perhaps hidden by output), ``refused prompt`` when it is
   not at its main prompt (a continuation line, ``read -e``, ``vared``),
   ``refused abbr`` (fish before 3.6, which cannot keep an abbreviation from
   being expanded), else ``loaded`` with the text it then puts on its command line, exactly,
   and accepts. If that creation fails, the host has cancelled: it does
   nothing.
3. The host waits for the answer (:data:`ANSWER_SECONDS`). Then it cancels
   by creating the same answer file itself, exclusively: if that succeeds,
   the shell can no longer act and nothing ran; if it fails, the shell
   decided first, and its answer is read.

:class:`Exchange` is that third step as a state machine: it takes ``now`` and
what the answer file holds, and says what to do next (:class:`Wait`,
:class:`Cancel`) until it is :class:`Done` with an :class:`Outcome`. The
driver (:mod:`mirror_host.commands.shell_input`) does the file I/O.
"""

from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass

__all__ = [
    "ANSWER_SECONDS",
    "CANCELLED",
    "POLL_SECONDS",
    "REQUEST_SECONDS",
    "SETTLE_SECONDS",
    "TRIGGER",
    "Cancel",
    "Done",
    "Exchange",
    "Outcome",
    "Step",
    "Wait",
    "answer_name",
    "encode_request",
    "request_expiry",
    "is_request_id",
    "registration_name",
    "request_name",
]

#: The key sequence the host sends: ``CSI I``, a terminal's "focus in" report.
#: mirror-host's integration binds it; every other program tried takes it as a
#: focus event or an unknown key and does nothing (docs/security.md, "The trigger").
TRIGGER = b"\x1b[I"
#: How long the shell has to answer before the host cancels.
ANSWER_SECONDS = 2.0
#: Between looks at the answer file.
POLL_SECONDS = 0.02
#: The shell created its answer before the host could cancel, but had not
#: finished writing it: how much longer it may take.
SETTLE_SECONDS = 0.5
#: A request is ignored by the shell this long after it was written: longer than
#: any exchange (the host cancels after ANSWER_SECONDS), with room for a shell
#: reading the clock in whole seconds.
REQUEST_SECONDS = 5.0
#: What the host writes into the answer file when it cancels.
CANCELLED = b"cancelled\n"

_REQUEST_ID = re.compile(r"[0-9a-f]{32}")


def is_request_id(text: str) -> bool:
    """Whether ``text`` is a request id (32 lower-case hex digits: it names a file)."""
    return _REQUEST_ID.fullmatch(text) is not None


def request_name(pid: int) -> str:
    """The request file of the shell with process id ``pid``."""
    return f"{pid}.request"


def answer_name(pid: int, request_id: str) -> str:
    """The answer file of one request."""
    return f"{pid}.{request_id}.answer"


def registration_name(pid: int) -> str:
    """The file a shell touches at every prompt: it has the integration and waits."""
    return f"{pid}.prompt"


def encode_request(request_id: str, text: str, expires: int) -> bytes:
    """The request file's contents, a line each: the id, when it expires (whole Unix
    seconds, :func:`request_expiry`), the text.

    Raises:
        ValueError: ``request_id`` is no request id, or ``text`` holds a line break (a
            command line is validated before this:
            :func:`~mirror_host.shell.verdict.command_problem`).
    """
    if not is_request_id(request_id):
        raise ValueError("not a request id")
    if "\n" in text or "\r" in text or "\0" in text:
        raise ValueError("a command line is one line")
    return f"{request_id}\n{expires}\n{text}\n".encode()


def request_expiry(now: float) -> int:
    """When a request written at wall-clock ``now`` expires: past the whole exchange
    (the answer time and the settle time), rounded up to whole seconds, as shells
    read the clock."""
    return math.ceil(now + REQUEST_SECONDS)


class Outcome(enum.Enum):
    """How an exchange ended."""

    #: The shell put exactly the text on its command line and accepted it.
    RAN = "ran"
    #: The shell refused: its command line held text. Nothing changed.
    LINE_HAS_TEXT = "line-has-text"
    #: The shell refused: it was not at its main prompt. Nothing changed.
    NOT_AT_PROMPT = "not-at-prompt"
    #: The shell refused: a fish older than 3.6 would expand an abbreviation in it.
    ABBREVIATIONS = "abbreviations"
    #: The host cancelled before the shell decided: nothing ran, nothing will.
    NOT_TAKEN = "not-taken"
    #: The shell decided, but what it answered cannot be read: it may have run.
    UNCERTAIN = "uncertain"


@dataclass(frozen=True, slots=True)
class Wait:
    """Look at the answer file again at ``until`` (or sooner)."""

    until: float


@dataclass(frozen=True, slots=True)
class Cancel:
    """Create the answer file exclusively with ``data``; report whether that worked."""

    data: bytes = CANCELLED


@dataclass(frozen=True, slots=True)
class Done:
    """The exchange is over; ``detail`` says more for a phone (may be empty)."""

    outcome: Outcome
    detail: str = ""


Step = Wait | Cancel | Done


class _Phase(enum.Enum):
    WAITING = "waiting"  # for the shell's answer
    SETTLING = "settling"  # the shell created its answer first; waiting for its contents
    DONE = "done"


class Exchange:
    """The host's side of one request, after the request file and the trigger went out."""

    def __init__(
        self,
        text: str,
        now: float,
        *,
        answer_seconds: float = ANSWER_SECONDS,
        poll_seconds: float = POLL_SECONDS,
        settle_seconds: float = SETTLE_SECONDS,
    ) -> None:
        self.text = text
        self._deadline = now + answer_seconds
        self._poll = poll_seconds
        self._settle = settle_seconds
        self._phase = _Phase.WAITING

    @property
    def done(self) -> bool:
        return self._phase is _Phase.DONE

    def observe(self, now: float, answer: bytes | None) -> Step:
        """What the answer file holds now (``None``: it does not exist); the next step."""
        if self._phase is _Phase.DONE:
            raise RuntimeError("the exchange is over")
        if answer is not None:
            decided = self._decided(answer)
            if decided is not None:
                return self._finish(decided)
        if now < self._deadline:
            return Wait(min(self._deadline, now + self._poll))
        if self._phase is _Phase.SETTLING:
            # The shell created its answer and never finished it: it may have acted.
            return self._finish(Done(Outcome.UNCERTAIN, "the shell's answer is incomplete"))
        if answer is not None:
            # Created just as the time ran out, still being written: the shell decided,
            # so it gets the settle time to finish, as after a cancel it won.
            self._phase = _Phase.SETTLING
            self._deadline = now + self._settle
            return Wait(min(self._deadline, now + self._poll))
        return Cancel()

    def cancel_result(self, now: float, created: bool, answer: bytes | None) -> Step:
        """The :class:`Cancel` was tried: ``created`` if the host's answer is the file's;
        else ``answer`` is what the shell's holds."""
        if self._phase is not _Phase.WAITING:
            raise RuntimeError("no cancel was asked for")
        if created:
            return self._finish(Done(Outcome.NOT_TAKEN))
        self._phase = _Phase.SETTLING
        self._deadline = now + self._settle
        return self.observe(now, b"" if answer is None else answer)

    def _finish(self, done: Done) -> Done:
        self._phase = _Phase.DONE
        return done

    def _decided(self, answer: bytes) -> Done | None:
        """The outcome an answer file's contents say, or ``None`` while incomplete."""
        if not answer.endswith(b"\n"):
            return None  # being written (the shell creates the file, then writes it)
        if answer == b"refused line\n":
            return Done(Outcome.LINE_HAS_TEXT)
        if answer == b"refused prompt\n":
            return Done(Outcome.NOT_AT_PROMPT)
        if answer == b"refused abbr\n":
            return Done(Outcome.ABBREVIATIONS)
        if answer == CANCELLED:
            return Done(Outcome.NOT_TAKEN)  # ours, from an earlier look that raced
        head, _, loaded = answer.partition(b"\n")
        if head != b"loaded":
            return Done(Outcome.UNCERTAIN, "the shell answered something Host does not know")
        try:
            text = loaded[:-1].decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text != self.text:
            return Done(Outcome.UNCERTAIN, "the shell loaded other text than was sent")
        return Done(Outcome.RAN)
