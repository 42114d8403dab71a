"""Accepting connections through a shortage of descriptors or memory. I/O.

``accept(2)`` fails with ``EMFILE``/``ENFILE`` (no descriptor left for the new
socket), ``ENOBUFS`` or ``ENOMEM`` when the process or the system runs short;
the connection stays in the kernel's queue and ``accept`` can only be tried
again later. Trio's ``serve_listeners`` retries every 0.1 s but logs a full
traceback for each try (hundreds in a minute). :func:`serve` retries the same
way and says it in one line when a shortage begins, at most one line every
:data:`REPORT_SECONDS` while it lasts, and one line when it is over
(:class:`AcceptShortage`). Any other accept error ends the listener, as in
Trio.

Connections that waited in the queue meanwhile are no one's fault: one whose
peer gave up and left is closed during its TLS handshake, which the listener
does not count toward the address's lock-out (docs/security.md).
"""

from __future__ import annotations

import errno
import logging
import math
import os
import resource
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import trio

__all__ = [
    "QUIET_SECONDS",
    "REPORT_SECONDS",
    "RETRY_SECONDS",
    "SHORTAGE_ERRNOS",
    "AcceptShortage",
    "serve",
]

logger = logging.getLogger(__name__)

#: What ``accept`` fails with when the process or the system runs short.
SHORTAGE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
#: How often ``accept`` is tried again while short (as Trio does).
RETRY_SECONDS = 0.1
#: At most one line this often while a shortage lasts.
REPORT_SECONDS = 10.0
#: A shortage is over once accepting has worked this long without a refusal.
QUIET_SECONDS = 1.0


class AcceptShortage:
    """Whether accepting is held up by a shortage, and the few lines that say so. Pure.

    A shortage begins with the first refused ``accept`` and ends once accepting
    has worked for :data:`QUIET_SECONDS` without a refusal: a host serving a
    queue one freed descriptor at a time refuses and accepts in turn, and that
    is one shortage, not hundreds. Its lines: one when it begins, at most one
    every ``report_seconds`` while it lasts, one when it ends. :meth:`failed`,
    :meth:`accepted` and :meth:`settle` return the line to log, or ``None``.
    """

    def __init__(
        self,
        what: str,
        *,
        report_seconds: float = REPORT_SECONDS,
        quiet_seconds: float = QUIET_SECONDS,
    ) -> None:
        self.what = what
        self.report_seconds = report_seconds
        self.quiet_seconds = quiet_seconds
        #: When the shortage began (``None``: there is none).
        self.since: float | None = None
        #: Accepts refused during the shortage.
        self.refused = 0
        self._reported_at = 0.0
        self._refused_unreported = 0
        self._accepted_unreported = 0
        self._last_refusal = 0.0

    @property
    def settle_at(self) -> float | None:
        """When the shortage ends if nothing is refused before (``None``: no shortage)."""
        return None if self.since is None else self._last_refusal + self.quiet_seconds

    def failed(self, code: int, now: float, *, limit: int | None = None) -> str | None:
        """``accept`` was refused with ``code`` (one of :data:`SHORTAGE_ERRNOS`) at ``now``."""
        self.refused += 1
        self._refused_unreported += 1
        self._last_refusal = now
        reason = _reason(code, limit)
        if self.since is None:
            self.since = self._reported_at = now
            self._refused_unreported = self._accepted_unreported = 0
            return (
                f"cannot accept {self.what}: {reason}; retrying every {RETRY_SECONDS:g} s "
                f"(waiting connections stay queued)"
            )
        if now - self._reported_at < self.report_seconds:
            return None
        refused, accepted = self._refused_unreported, self._accepted_unreported
        self._refused_unreported = self._accepted_unreported = 0
        self._reported_at = now
        if accepted:
            return (
                f"accepting {self.what} only as descriptors free up: {accepted} accepted, "
                f"{refused} tries refused in the last {self.report_seconds:g} s ({reason})"
            )
        return (
            f"still cannot accept {self.what} after {now - self.since:.0f} s: {reason} "
            f"({refused} tries in the last {self.report_seconds:g} s)"
        )

    def accepted(self) -> None:
        """``accept`` worked (the shortage, if any, ends at :attr:`settle_at`)."""
        if self.since is not None:
            self._accepted_unreported += 1

    def settle(self, now: float) -> str | None:
        """The shortage ends if nothing was refused for ``quiet_seconds`` before ``now``."""
        settle_at = self.settle_at
        if self.since is None or settle_at is None or now < settle_at:
            return None
        line = (
            f"accepting {self.what} again after {self._last_refusal - self.since:.1f} s "
            f"({self.refused} tries refused)"
        )
        self.since, self.refused = None, 0
        return line


def _reason(code: int, limit: int | None) -> str:
    name = errno.errorcode.get(code, str(code))
    words = os.strerror(code).lower()
    if code == errno.EMFILE and limit is not None:
        return f"{words} ({name}: this process may open {limit}; raise it with `ulimit -n`)"
    return f"{words} ({name})"


def _descriptor_limit() -> int | None:
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return None
    return None if soft == resource.RLIM_INFINITY else soft


async def serve(
    listeners: Sequence[trio.SocketListener],
    handler: Callable[[trio.SocketStream], Awaitable[Any]],
    *,
    what: str = "connections",
) -> None:
    """Accept on every listener until cancelled; each stream goes to its own
    ``handler`` task and is closed when that returns. A shortage pauses accepting
    (:class:`AcceptShortage`); any other accept error propagates."""
    async with trio.open_nursery() as nursery:
        for listener in listeners:
            nursery.start_soon(_accept_loop, listener, handler, nursery, what)


async def _accept_loop(
    listener: trio.SocketListener,
    handler: Callable[[trio.SocketStream], Awaitable[Any]],
    nursery: trio.Nursery,
    what: str,
) -> None:
    shortage = AcceptShortage(what)
    async with listener:
        while True:
            stream = None
            # During a shortage, wake when it would end, to say so.
            with trio.move_on_at(shortage.settle_at or math.inf):
                try:
                    stream = await listener.accept()
                except OSError as exc:
                    if exc.errno not in SHORTAGE_ERRNOS:
                        raise
                    limit = _descriptor_limit()
                    _log(shortage.failed(exc.errno, trio.current_time(), limit=limit))
                    await trio.sleep(RETRY_SECONDS)
                    continue
            _log(shortage.settle(trio.current_time()))
            if stream is not None:
                shortage.accepted()
                nursery.start_soon(_run, handler, stream)


def _log(line: str | None) -> None:
    if line is not None:
        logger.warning("%s", line)


async def _run(
    handler: Callable[[trio.SocketStream], Awaitable[Any]], stream: trio.SocketStream
) -> None:
    try:
        await handler(stream)
    finally:
        await trio.aclose_forcefully(stream)
