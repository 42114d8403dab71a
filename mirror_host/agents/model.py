"""What agent detection talks about: agents, states, composers, processes. Pure values.

Detection answers three questions about a pane, in Herdr's vocabulary where it
has one:

* **which agent** runs there (from the foreground process, never from the
  screen alone: a shell that prints a captured Claude screen is still a shell);
* **its state**: ``idle`` (its turn is over and it waits for a prompt),
  ``working``, ``blocked`` (a dialog holds the keyboard: a permission prompt, a
  menu, a question) or ``unknown`` (a layout we cannot read);
* **its composer**: ``empty`` (the input box is on screen and holds nothing but
  a placeholder), ``draft`` (somebody's unsent text is in it) or ``absent`` (no
  input box we recognise).

A phone's prompt is delivered only to ``idle`` with an ``empty`` composer.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

__all__ = [
    "Agent",
    "AgentState",
    "Composer",
    "Detection",
    "ForegroundProcess",
    "Reading",
    "ScreenView",
    "TextView",
]


class Agent(StrEnum):
    """Coding agents whose screens we can read (values are Herdr's agent labels)."""

    CLAUDE = "claude"
    CODEX = "codex"
    GEMINI = "gemini"
    OPENCODE = "opencode"
    AIDER = "aider"
    OMP = "omp"

    @property
    def display_name(self) -> str:
        """The name people know it by."""
        return _DISPLAY_NAMES[self]


_DISPLAY_NAMES = {
    Agent.CLAUDE: "Claude Code",
    Agent.CODEX: "Codex",
    Agent.GEMINI: "Gemini CLI",
    Agent.OPENCODE: "OpenCode",
    Agent.AIDER: "Aider",
    Agent.OMP: "omp",
}


class AgentState(StrEnum):
    """Herdr's agent states, minus ``done`` (an ``idle`` nobody has looked at yet)."""

    IDLE = "idle"
    WORKING = "working"
    BLOCKED = "blocked"
    UNKNOWN = "unknown"


class Composer(StrEnum):
    """What the agent's input box holds."""

    EMPTY = "empty"
    DRAFT = "draft"
    ABSENT = "absent"

    @classmethod
    def holding(cls, draft: str) -> Composer:
        """An input box on screen that holds ``draft`` (placeholders left out)."""
        return cls.DRAFT if draft else cls.EMPTY


@dataclass(frozen=True, slots=True)
class ForegroundProcess:
    """One process of a terminal's foreground process group.

    ``name`` is the kernel's short name (``comm``); ``argv`` the command line as
    the process sees it (empty when it cannot be read).
    """

    pid: int
    name: str
    argv: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Reading:
    """What one agent's screen reader made of the screen."""

    state: AgentState
    composer: Composer
    #: The composer's text (placeholders left out), rows joined by ``\\n``.
    draft: str = ""
    #: Why, in a few words (for refusal messages and logs).
    reason: str = ""

    @classmethod
    def without_composer(cls, blocker: str | None, missing: str) -> Reading:
        """No input box to read: ``blocked`` by what ``blocker`` names (a dialog,
        a focused option), else ``unknown``, ``missing`` saying what was not found."""
        if blocker is not None:
            return cls(AgentState.BLOCKED, Composer.ABSENT, reason=blocker)
        return cls(AgentState.UNKNOWN, Composer.ABSENT, reason=missing)


@dataclass(frozen=True, slots=True)
class Detection:
    """The verdict on one pane: which agent, and what its screen says."""

    agent: Agent | None
    state: AgentState
    composer: Composer
    draft: str = ""
    reason: str = ""
    #: The foreground process the agent was recognised in (its pid changes if it restarts).
    pid: int | None = None

    @property
    def ready(self) -> bool:
        """Whether a prompt may be typed: a known agent, idle, with an empty composer."""
        return (
            self.agent is not None
            and self.state is AgentState.IDLE
            and self.composer is Composer.EMPTY
        )


class ScreenView(Protocol):
    """A terminal screen as detection reads it.

    ``rows`` are the active screen's rows as plain text (one string per row,
    trailing blanks trimmed). ``solid_text(row)`` is the same row with faint (dim,
    SGR 2) characters blanked out: agents paint placeholders and suggestions
    faint, which is the only thing that tells them from a real draft. ``cursor``
    is ``(column, row)`` of the visible cursor, or ``None``. ``continues(row)``
    says whether the row is a soft-wrap continuation of the row above (text
    that ran past the right edge and was wrapped by the terminal, so it starts
    at column 0 whatever the program's layout).
    """

    @property
    def rows(self) -> Sequence[str]: ...

    @property
    def cursor(self) -> tuple[int, int] | None: ...

    def solid_text(self, row: int) -> str: ...

    def continues(self, row: int) -> bool: ...


@dataclass(frozen=True, slots=True)
class TextView:
    """A :class:`ScreenView` made of plain strings.

    ``faint`` marks dim columns per row; ``wrapped`` holds the rows that are
    soft-wrap continuations of the row above.
    """

    rows: tuple[str, ...]
    faint: tuple[tuple[int, frozenset[int]], ...] = ()
    cursor: tuple[int, int] | None = None
    wrapped: frozenset[int] = frozenset()

    @classmethod
    def of(
        cls,
        text: str,
        faint: dict[int, Sequence[int]] | None = None,
        cursor: tuple[int, int] | None = None,
        *,
        wrapped: Iterable[int] = (),
    ) -> TextView:
        """Rows split on ``\\n``; ``faint`` maps a row to the character indices that are dim."""
        marks = tuple((row, frozenset(columns)) for row, columns in (faint or {}).items())
        lines = tuple(line.rstrip() for line in text.split("\n"))
        return cls(lines, marks, cursor, frozenset(wrapped))

    def solid_text(self, row: int) -> str:
        line = self.rows[row]
        dim = next((columns for index, columns in self.faint if index == row), frozenset())
        return "".join(" " if i in dim else ch for i, ch in enumerate(line))

    def continues(self, row: int) -> bool:
        return row in self.wrapped
