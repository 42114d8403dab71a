"""When the other end of a Trio stream is gone: the one mapping. I/O.

Trio says it two ways. ``BrokenResourceError``: the stream broke under us (the
peer reset TCP, TLS failed, a send was cut off half-way). ``ClosedResourceError``:
the stream was closed on our side, usually by another task ending the
connection while this one was still reading or writing. Everywhere in
mirror-host both mean the same thing: the peer is gone, stop talking to it.

So they are named once, here (:data:`STREAM_GONE`), and the two things nearly
every caller wants are done once: a receive that reads a gone stream as end of
file (:func:`receive_or_eof`) and a send that says whether it got through
(:func:`send_or_gone`). A caller that must turn a gone stream into its own
error catches :data:`STREAM_GONE` (httpcore's ``map_exceptions`` is the model:
the code above sees only its own exceptions).
"""

from __future__ import annotations

import logging
from typing import Final

import trio

__all__ = ["STREAM_GONE", "receive_or_eof", "send_or_gone"]

logger = logging.getLogger(__name__)

#: Trio's two ways of saying the other end of a stream is gone.
STREAM_GONE: Final = (trio.BrokenResourceError, trio.ClosedResourceError)


async def receive_or_eof(stream: trio.abc.ReceiveStream, max_bytes: int) -> bytes:
    """The next bytes from ``stream``; ``b""`` at end of file or once it is gone."""
    try:
        return bytes(await stream.receive_some(max_bytes))
    except STREAM_GONE as exc:
        logger.debug("receive on a gone stream: %r", exc)
        return b""


async def send_or_gone(stream: trio.abc.SendStream, data: bytes) -> bool:
    """Send all of ``data``; ``False`` when the stream is gone (how much arrived is unknown)."""
    try:
        await stream.send_all(data)
    except STREAM_GONE as exc:
        logger.debug("send on a gone stream: %r", exc)
        return False
    return True
