"""A Trio client for Herdr's socket API. I/O.

One request per connection (Herdr closes after one reply), string ids, and a
line limit large enough for a 1000-row ANSI read. ``subscribe`` keeps its
connection open and yields pushed events until Herdr closes it.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from mirror_host.errors import PaneSourceError, PaneSourceUnavailable
from mirror_host.panes.backends import connect_unix
from mirror_host.panes.herdr.protocol import decode_reply, encode_request
from mirror_host.panes.lines import LineSplitter, LineTooLong
from mirror_host.streams import STREAM_GONE

__all__ = ["MAX_LINE_BYTES", "READ_SECONDS", "HerdrClient", "LineReader"]

logger = logging.getLogger(__name__)

#: A 1000-row ANSI read of a wide pane can reach several MiB.
MAX_LINE_BYTES = 32 * 1024 * 1024
_TIMEOUT_SECONDS = 15.0
#: An ANSI ``pane.read``: Herdr holds it while another client's text harvest of
#: the pane runs, up to 15 s and 5 more to scroll back (MAX_DURATION and
#: MAX_RESTORE_DURATION, src/server/alt_screen_read.rs; AltScreenReadConflict::Defer
#: in src/server/headless.rs, 0.8.2). Slow, not failed: wait for it with room to spare.
READ_SECONDS = 30.0


class HerdrClient:
    """Calls on one Herdr socket; counts requests for the benchmarks."""

    def __init__(self, socket_path: Path, *, timeout: float = _TIMEOUT_SECONDS) -> None:
        self.socket_path = socket_path
        self.timeout = timeout
        self.requests = 0
        self._ids = itertools.count(1)

    def _next_id(self) -> str:
        return f"mh-{next(self._ids)}"

    async def _connect(self) -> trio.SocketStream:
        return await connect_unix(
            self.socket_path,
            what="Herdr",
            nobody_listens=f"Herdr is not running: nothing listens on {self.socket_path} "
            "(start Herdr, or point --herdr-socket / HERDR_SOCKET_PATH at its socket)",
        )

    async def call(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """One request, one reply, within ``timeout`` (the client's own by default).

        Raises:
            PaneSourceUnavailable: Herdr is not running (or went away mid-call).
            HerdrError: Herdr answered with an error (typed by code).
            PaneSourceError: the reply was malformed or too slow.
        """
        self.requests += 1
        seconds = self.timeout if timeout is None else timeout
        with trio.move_on_after(seconds) as deadline:
            stream = await self._connect()
            async with stream:
                try:
                    await stream.send_all(encode_request(self._next_id(), method, params))
                    line = await LineReader(stream).next()
                except STREAM_GONE as exc:
                    raise PaneSourceUnavailable(
                        f"Herdr closed the connection during {method}"
                    ) from exc
        if deadline.cancelled_caught:
            raise PaneSourceError(f"Herdr did not answer {method} within {seconds:g} s")
        if line is None:
            raise PaneSourceUnavailable(f"Herdr closed the connection without answering {method}")
        return decode_reply(line, method=method)

    @asynccontextmanager
    async def subscribe(
        self, subscriptions: list[dict[str, Any]]
    ) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
        """Open ``events.subscribe``; yield an iterator of pushed event objects.

        Raises:
            PaneSourceUnavailable / HerdrError: as :meth:`call`, for the ack.
        """
        self.requests += 1
        stream = await self._connect()
        async with stream:
            try:
                await stream.send_all(
                    encode_request(
                        self._next_id(), "events.subscribe", {"subscriptions": subscriptions}
                    )
                )
                reader = LineReader(stream)
                with trio.fail_after(self.timeout):
                    line = await reader.next()
            except (*STREAM_GONE, trio.TooSlowError) as exc:
                raise PaneSourceUnavailable("Herdr closed the event subscription") from exc
            if line is None:
                raise PaneSourceUnavailable("Herdr closed the event subscription before its ack")
            decode_reply(line, method="events.subscribe")
            events = _events(reader)
            try:
                yield events
            finally:
                await events.aclose()


async def _events(reader: LineReader) -> AsyncGenerator[dict[str, Any], None]:
    while True:
        try:
            line = await reader.next()
        except STREAM_GONE:
            return
        if line is None:
            return
        try:
            event = json.loads(line)
        except (UnicodeDecodeError, json.JSONDecodeError):
            logger.debug("ignoring an undecodable Herdr event line")
            continue
        if isinstance(event, dict):
            yield event


class LineReader:
    """Newline-delimited lines from one stream, bounded by :data:`MAX_LINE_BYTES`.

    Used for Herdr's API socket, its observe program's standard output and
    agliteterm's control API alike; ``peer`` names the sender in errors.
    """

    def __init__(self, stream: trio.abc.ReceiveStream, *, peer: str = "Herdr") -> None:
        self._stream = stream
        self._peer = peer
        self._splitter = LineSplitter(MAX_LINE_BYTES)
        self._lines: deque[bytes] = deque()

    @property
    def pending(self) -> bool:
        """Whether bytes already read are waiting: a whole line not yet taken, or
        the start of one."""
        return bool(self._lines) or self._splitter.pending > 0

    async def next(self) -> bytes | None:
        """The next line without its newline; ``None`` at end of stream.

        Raises:
            PaneSourceError: a line longer than the limit.
        """
        while not self._lines:
            chunk = await self._stream.receive_some(1 << 20)
            if not chunk:
                return self._splitter.finish()
            try:
                self._lines.extend(self._splitter.feed(chunk))
            except LineTooLong as exc:
                raise PaneSourceError(f"{self._peer} sent {exc}") from exc
        return self._lines.popleft()
