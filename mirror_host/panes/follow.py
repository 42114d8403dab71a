"""Following a backend that may go away: reconnects with capped backoff, each outage
said once. I/O (Trio).

The tmux server, Herdr and agliteterm each stop and start again on their own.
Their sources follow them with one :class:`Follower`: it runs an attempt (connect
and follow, until it fails with a ``PaneSourceError`` or an ``OSError``), says the first failure
of an outage as a warning and keeps quiet about the retries, waits 1 s, 2 s, 4 s
… up to 30 s between attempts (less when its ``wake`` event is set: something
changed), and starts again from 1 s once an attempt says the backend answered
(:meth:`Follower.reached`). What the source keeps or forgets in an outage is its
own business (``on_failure``). :func:`follow_health` says, one way for all three,
where following stands for ``mirror-host status``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import NoReturn

import trio

from mirror_host.errors import PaneSourceError
from mirror_host.panes.source import Health

__all__ = ["FIRST_BACKOFF_SECONDS", "MAX_BACKOFF_SECONDS", "Follower", "follow_health"]

logger = logging.getLogger(__name__)

FIRST_BACKOFF_SECONDS = 1.0
MAX_BACKOFF_SECONDS = 30.0


class Follower:
    """Retries one backend with capped backoff; an outage is said once.

    Args:
        name: put before the failure in the warning (``"agliteterm at unix:…"``),
            for failures that do not say where themselves.
    """

    def __init__(self, name: str | None = None) -> None:
        self._name = name
        #: Why the backend cannot be followed now (``None`` while it can, or before
        #: the first attempt ended).
        self.problem: str | None = None
        #: ``None`` before the backend first answered or failed; then whether it answers.
        self._answering: bool | None = None
        self._backoff = FIRST_BACKOFF_SECONDS

    @property
    def in_outage(self) -> bool:
        """Whether the last attempt failed (and the backend has not answered since)."""
        return self._answering is False

    def reached(self) -> bool:
        """The backend answered whole: the outage, if any, is over and the next one
        starts its backoff afresh. Whether that is news (the first time, or after
        an outage), for the source to say how it is followed now."""
        news = self._answering is not True
        self._answering = True
        self.problem = None
        self._backoff = FIRST_BACKOFF_SECONDS
        return news

    async def run(
        self,
        attempt: Callable[[], Awaitable[object]],
        *,
        on_failure: Callable[[], None] | None = None,
        wake: Callable[[], trio.Event] | None = None,
    ) -> NoReturn:
        """Run ``attempt`` again and again until cancelled.

        Args:
            attempt: connects and follows; ends by raising ``PaneSourceError`` (or
                an ``OSError``, taken the same way).
            on_failure: called after each failed attempt, before the wait.
            wake: the event that cuts a wait short (read when the wait begins).
        """
        while True:
            try:
                await attempt()
                continue  # ended without a failure: follow again at once
            except (PaneSourceError, OSError) as exc:
                # An OSError the attempt did not map (a socket or process it could
                # not open: EMFILE, EAGAIN) is an outage too, not the host's end.
                self.problem = str(exc)
                if self._answering is not False:
                    where = f"{self._name}: " if self._name else ""
                    logger.warning(
                        "%s%s; retrying (up to every %g s)", where, exc, MAX_BACKOFF_SECONDS
                    )
                    self._answering = False
            if on_failure is not None:
                on_failure()
            with trio.move_on_after(self._backoff):
                if wake is None:
                    await trio.sleep_forever()
                else:
                    await wake().wait()
            self._backoff = min(self._backoff * 2, MAX_BACKOFF_SECONDS)


def follow_health(
    kind: str,
    problem: str | None,
    *,
    waiting: str | None,
    following: Callable[[], str],
    retrying: str = "retrying",
) -> Health:
    """A followed backend's state for ``mirror-host status``.

    ``unreachable`` while ``problem`` (a :class:`Follower`'s) says why it cannot
    be followed (``"<problem>; <retrying>"``); else ``starting`` while
    ``waiting`` says what the first answer is awaited from; else ``following``,
    with ``following()``'s words (asked only then: it may look at the system).
    """
    if problem is not None:
        return {"kind": kind, "state": "unreachable", "detail": f"{problem}; {retrying}"}
    if waiting is not None:
        return {"kind": kind, "state": "starting", "detail": waiting}
    return {"kind": kind, "state": "following", "detail": following()}
