"""A Trio client for agliteterm's control API: lanes of connections, a deadline per call. I/O.

The API answers requests on one connection strictly in turn and carries no
request ids, so a reply that comes late would be taken for the answer to the
next request. Hence:

* each **lane** (discovery, one per watched pane, one per pane's input, …) is
  one connection used by one request at a time, so a slow 15 s ``session.type``
  never holds up the screen polls of its pane or the pane list;
* every call has a **deadline**; a call that misses it, is cancelled, or
  breaks mid-exchange **discards its connection** (the next call opens a new
  one), so no stale reply is ever read;
* a connection that cannot be opened, or closes before its first answer
  (nothing listening, the relay command dying at once), makes the lane wait
  before the next attempt, doubling up to 10 s; calls in that time fail at
  once with :class:`PaneSourceUnavailable`;
* a kept connection is used again only if it is quiet: nothing left in its
  reader from the last call (a stray line after a reply, or half of one) and
  nothing to read on it (the API never speaks first, so that is a stray reply
  or its peer having closed: agliteterm or its relay restarted). Otherwise it
  is replaced before use. Readability is asked with ``poll``, which takes any
  descriptor (``select`` stops at 1024). One that breaks in use is tried
  once more on a new connection when that cannot repeat anything: a request
  that never left, or one of the pure reads (:data:`READ_VERBS`). Anything
  else (input, ``session.new``, ``session.close``, …) may have been carried
  out before the connection broke, so it fails rather than risk doing it
  twice.

Requests are counted per verb (``mirror-host status``, the benchmarks).
"""

from __future__ import annotations

import logging
import select
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import trio

from mirror_host.errors import PaneSourceError, PaneSourceUnavailable
from mirror_host.panes.agliteterm.protocol import decode_reply, encode_request
from mirror_host.panes.agliteterm.transport import Transport
from mirror_host.panes.herdr.client import LineReader
from mirror_host.streams import STREAM_GONE

__all__ = ["DEFAULT_TIMEOUT", "READ_VERBS", "AgliteClient"]

logger = logging.getLogger(__name__)

#: A call's deadline unless it names its own.
DEFAULT_TIMEOUT = 5.0
_FIRST_BACKOFF = 0.25
#: The verbs that only read (the control API's read-only probes and reads):
#: the only ones sent again after a connection broke once they had left.
#: Every other verb changes something and is never sent twice unless
#: certainly not sent once.
READ_VERBS = frozenset(
    {"ping", "tree", "events", "window.list", "session.text", "session.metrics", "surface.cursor"}
)
_MAX_BACKOFF = 10.0


@dataclass(eq=False)
class _Lane:
    name: str
    stream: trio.abc.Stream | None = None
    reader: LineReader | None = None
    lock: trio.Lock = field(default_factory=trio.Lock)
    failures: int = 0
    retry_at: float = float("-inf")
    #: Closed while a call was using it: the connection goes when that call ends.
    closing: bool = False

    async def discard(self) -> None:
        stream, self.stream, self.reader = self.stream, None, None
        if stream is not None:
            with trio.CancelScope(shield=True):
                try:
                    await stream.aclose()
                except (*STREAM_GONE, OSError):
                    pass

    def failed(self) -> None:
        self.failures += 1
        delay = min(_FIRST_BACKOFF * 2 ** (self.failures - 1), _MAX_BACKOFF)
        self.retry_at = trio.current_time() + delay


class AgliteClient:
    """Calls on one agliteterm instance, over lanes of persistent connections."""

    def __init__(self, transport: Transport, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.transport = transport
        self.timeout = timeout
        #: Requests sent, by verb.
        self.requests: Counter[str] = Counter()
        self._lanes: dict[str, _Lane] = {}

    @property
    def endpoint(self) -> str:
        return self.transport.endpoint

    def _lane(self, name: str) -> _Lane:
        lane = self._lanes.get(name)
        if lane is None:
            lane = self._lanes[name] = _Lane(name)
        return lane

    async def call(
        self,
        cmd: str,
        *,
        target: str | None = None,
        args: Mapping[str, Any] | None = None,
        lane: str = "main",
        timeout: float | None = None,
    ) -> Any:
        """Send one request on ``lane`` and return its ``result``.

        Raises:
            PaneSourceUnavailable: agliteterm cannot be reached, or went away mid-call.
            AgliteError (and its kinds): agliteterm refused (``ok:false``).
            PaneSourceError: no answer within the deadline, or not a reply.
            InvalidArgument: a request this client never sends (an empty paste …).
        """
        line = encode_request(cmd, target=target, args=args)
        deadline = self.timeout if timeout is None else timeout
        channel = self._lane(lane)
        async with channel.lock:
            self.requests[cmd] += 1
            try:
                reply = await self._exchange(channel, cmd, line, deadline)
            finally:
                if channel.closing:
                    await channel.discard()
        return decode_reply(reply, cmd=cmd)

    async def _exchange(self, lane: _Lane, cmd: str, line: bytes, deadline: float) -> bytes:
        finished = False
        try:
            with trio.move_on_after(deadline) as scope:
                reply = await self._attempt(lane, cmd, line)
                finished = True
        finally:
            if not finished:
                # Cancelled, timed out or broken: a reply may still come and
                # must never be read as the answer to another request.
                await lane.discard()
        if scope.cancelled_caught:
            raise PaneSourceError(f"agliteterm did not answer {cmd} within {deadline:g} s")
        lane.failures = 0
        return reply

    async def _attempt(self, lane: _Lane, cmd: str, line: bytes) -> bytes:
        """One exchange; once more on a new connection if a kept one turns out dead.

        A kept connection that is not quiet (a stray line left from the last
        call, or its peer has closed) is replaced before use. If it breaks in
        use anyway, the request is sent again on a new connection when that
        cannot repeat anything: a read, or a request that was never written to
        the connection.
        """
        if lane.stream is not None and not _quiet(lane):
            await lane.discard()
        reused = lane.stream is not None
        while True:
            fresh = lane.stream is None
            if fresh:
                await self._open(lane)
            assert lane.stream is not None and lane.reader is not None
            sent = False
            try:
                await lane.stream.send_all(line)
                sent = True
                reply = await lane.reader.next()
            except (*STREAM_GONE, OSError) as exc:
                broken: BaseException | None = exc
                reply = None
            else:
                broken = None
            if reply is not None:
                return reply
            await lane.discard()
            if reused and (not sent or cmd in READ_VERBS):
                reused = False
                continue
            if fresh:
                lane.failed()  # a new connection that never answered: back off
            if broken is not None:
                raise PaneSourceUnavailable(f"agliteterm went away during {cmd}") from broken
            raise PaneSourceUnavailable(f"agliteterm closed the connection without answering {cmd}")

    async def _open(self, lane: _Lane) -> None:
        now = trio.current_time()
        if now < lane.retry_at:
            raise PaneSourceUnavailable(
                f"agliteterm was unreachable at {self.endpoint}; "
                f"trying again in {lane.retry_at - now:.1f} s"
            )
        try:
            stream = await self.transport.connect()
        except PaneSourceUnavailable:
            lane.failed()
            raise
        lane.stream = stream
        lane.reader = LineReader(stream, peer="agliteterm")

    async def close_lane(self, name: str) -> None:
        """Close one lane's connection (a pane nobody watches any more)."""
        lane = self._lanes.pop(name, None)
        if lane is None:
            return
        lane.closing = True
        if not lane.lock.locked():
            await lane.discard()

    async def aclose(self) -> None:
        """Close every connection."""
        for name in list(self._lanes):
            await self.close_lane(name)

    def lane_names(self) -> list[str]:
        """Every lane not closed with :meth:`close_lane` (its connection open or not)."""
        return list(self._lanes)

    def lanes_open(self) -> int:
        """Connections open now (for status and tests)."""
        return sum(1 for lane in self._lanes.values() if lane.stream is not None)


def _quiet(lane: _Lane) -> bool:
    """Whether ``lane``'s kept connection can carry the next request: nothing
    read and not taken (lines after the last reply), nothing to read before we
    asked anything (a stray reply, or end of stream), no error or hang-up."""
    if lane.reader is not None and lane.reader.pending:
        # Not shown: it could be pane text. Its presence alone is the fault.
        logger.warning(
            "agliteterm sent more than the reply on lane %s; using a new connection", lane.name
        )
        return False
    if lane.stream is None:
        return True
    return not _readable_now(lane.stream)


def _readable_now(stream: trio.abc.Stream) -> bool:
    """Whether ``stream``'s descriptor has input, an error or a hang-up right now
    (``poll``, not ``select``: a host with many panes has descriptors past 1024)."""
    fileno = getattr(stream, "fileno", None)
    if isinstance(stream, trio.SocketStream):
        fd = stream.socket.fileno()
    elif callable(fileno):
        fd = fileno()
    else:
        return False
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLPRI)
        # POLLERR, POLLHUP and POLLNVAL are reported whether asked for or not.
        return bool(poller.poll(0))
    except (OSError, ValueError):  # a descriptor that is no longer one
        return True
