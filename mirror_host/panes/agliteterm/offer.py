"""What the connected agliteterm (or agwinterm) offers a mirror, learned from its answers. Pure.

The releases users have are older than the control API page
(``../shared/spec/agliteterm.md``, "As released"):

* agliteterm 0.17.7 answers ``ping`` with ``agliteterm 0.1``; its
  ``session.text`` ignores every argument and returns the **whole buffer** as
  plain text (no styles, no ``lines``); its ``tree`` has no ``cols``/``rows``
  and no ``statusChangedAt``;
* agwinterm 0.17.5's ``session.text`` ignores its arguments too and returns
  the **screen** as plain text (so no scrollback at all); no
  ``session.metrics`` and no ``statusChangedAt``;
* newer builds answer ``session.text {styles:true, lines:0}`` with styled
  rows of the screen alone, put the grid in the tree (lite) or in
  ``session.metrics`` (the full app), and stamp each status.

:class:`Offer` keeps what was learned, each point ``None`` until an answer
shows it: the tree (its session nodes), a screen read (styled rows or a
string, and for lite whether rows of scrollback came back). ``ping`` names the
two releases (``agliteterm 0.1`` is 0.17.7's, and every older lite's;
``agwinterm 0.17.5`` and older), so what they lack is known, and said, at
once; an answer that shows otherwise wins. :meth:`Offer.missing` says what an
upgrade would add, in words, for ``mirror-host status`` and the log.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from mirror_host.panes.agliteterm.protocol import Dialect, release_of

__all__ = ["WHOLE_IDLE_SECONDS", "WHOLE_READ_FACTOR", "Offer", "whole_read_interval"]


def _nodes(tree: object) -> list[Mapping[str, Any]]:
    """Every session node of a ``tree`` result."""
    nodes: list[Mapping[str, Any]] = []
    workspaces = tree.get("workspaces") if isinstance(tree, Mapping) else None
    for workspace in workspaces if isinstance(workspaces, list) else []:
        sessions = workspace.get("sessions") if isinstance(workspace, Mapping) else None
        listed = sessions if isinstance(sessions, list) else []
        nodes.extend(node for node in listed if isinstance(node, Mapping))
    return nodes


@dataclass(frozen=True, slots=True)
class Offer:
    """What one agliteterm instance answers; ``None``: not seen yet."""

    dialect: Dialect | None = None
    version: str | None = None
    #: ``session.text {styles:true}`` answers styled rows (else plain text).
    styles: bool | None = None
    #: A screen read answers the screen alone (else the whole buffer, every time).
    screen_read: bool | None = None
    #: The grid is told: ``cols``/``rows`` in the tree (lite), ``session.metrics`` (full).
    grid: bool | None = None
    #: The tree stamps each status (``statusChangedAt``).
    status_age: bool | None = None
    #: ``session.text`` can return rows above the screen (history, the scroll copy).
    scrollback: bool | None = None

    def connected(self, dialect: Dialect, version: str | None) -> Offer:
        """A (re)connection: the product and its ``ping``; what it offers is asked again."""
        if dialect is self.dialect and version == self.version:
            return self
        release = release_of(version)
        if dialect is Dialect.LITE and release == (0, 1, 0):
            # agliteterm 0.17.7 (main.cpp ctlDispatch): ping "agliteterm 0.1".
            return Offer(dialect, version, styles=False, screen_read=False, grid=False,
                         status_age=False, scrollback=True)  # fmt: skip
        if dialect is Dialect.FULL and release is not None and release <= (0, 17, 5):
            # agwinterm 0.17.5 (ControlServer.cs): HandleText, no metrics, no stamps.
            return Offer(dialect, version, styles=False, screen_read=True, grid=False,
                         status_age=False, scrollback=False)  # fmt: skip
        return Offer(dialect=dialect, version=version)

    def with_tree(self, tree: object) -> Offer:
        """What a ``tree`` answer shows (nothing, while it lists no session)."""
        nodes = _nodes(tree)
        if not nodes:
            return self
        stamped = any("statusChangedAt" in node for node in nodes)
        changes: dict[str, Any] = {"status_age": stamped}
        if self.dialect is Dialect.LITE:
            changes["grid"] = any("cols" in node and "rows" in node for node in nodes)
        return replace(self, **changes)

    def with_metrics(self, answered: bool) -> Offer:
        """The full app answered ``session.metrics`` (or refused it as unknown)."""
        return replace(self, grid=answered)

    def with_screen_read(self, *, styled: bool, history_rows: int) -> Offer:
        """What a screen read (``lines:0``, or the bare form) answered: styled rows (and
        how many above the screen), or plain text."""
        if self.dialect is Dialect.FULL:
            # Every full build's screen read is the screen; a build without styles
            # (0.17.5) has nothing else: its session.text ignores ``all``.
            return replace(self, styles=styled, screen_read=True, scrollback=styled)
        # Lite: styled rows above the screen mean the build ignored ``lines:0``;
        # plain text is 0.17.7's dump of the whole buffer, history included.
        return replace(
            self, styles=styled, screen_read=styled and history_rows == 0, scrollback=True
        )

    @property
    def whole_buffer_reads(self) -> bool:
        """Every read of the screen brings the whole buffer (0.17.7)."""
        return self.screen_read is False

    def missing(self) -> tuple[str, ...]:
        """What a newer build would add, one phrase each (only what is known to lack)."""
        gaps: list[str] = []
        if self.styles is False:
            gaps.append("colours and text styles (session.text --styles)")
        if self.screen_read is False:
            gaps.append(
                "reading the screen alone (session.text --lines 0): this build sends its "
                "whole scrollback on every read, so a quiet pane is read less often"
            )
        if self.scrollback is False:
            gaps.append("scrollback (session.text --all): history and scrolling show the screen")
        if self.grid is False:
            source = "session metrics" if self.dialect is Dialect.FULL else "cols/rows in tree"
            gaps.append(f"the pane's size ({source}): it is estimated from the text")
        if self.status_age is False:
            gaps.append(
                "the time of each agent status (statusChangedAt): the pane list shows no age, "
                "and a phone's prompt is checked against the status alone"
            )
        return tuple(gaps)

    def describe(self) -> str:
        """One line for the log and ``status``: the build, and what an upgrade adds."""
        name = self.version or ("agwinterm" if self.dialect is Dialect.FULL else "agliteterm")
        gaps = self.missing()
        if not gaps:
            return name
        return f"{name}; a newer build would add: " + "; ".join(gaps)


#: A build that sends its whole buffer on every read is read no more often than
#: this many times the last read took (so it spends at most a fifth of its
#: time answering) …
WHOLE_READ_FACTOR = 4.0
#: … and, while the pane shows nothing new, backs off to once this often.
WHOLE_IDLE_SECONDS = 1.0


def whole_read_interval(base: float, read_seconds: float, unchanged: int, *, fast: bool) -> float:
    """The wait before the next read of a pane whose reads bring the whole buffer.

    ``base`` is the usual interval (fast after input), ``read_seconds`` what
    the last read took, ``unchanged`` how many reads in a row showed nothing
    new. Right after input it stays fast (the echo is wanted); a quiet pane's
    wait doubles with each unchanged read up to :data:`WHOLE_IDLE_SECONDS`.
    """
    interval = base
    if not fast and unchanged > 0:
        grown = max(base, WHOLE_IDLE_SECONDS / 8) * 2 ** min(unchanged, 8)
        interval = max(min(grown, WHOLE_IDLE_SECONDS), base)
    return max(interval, WHOLE_READ_FACTOR * read_seconds)
