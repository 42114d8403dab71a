"""A gone stream, said once: end of file for a receive, ``False`` for a send."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from mirror_host.streams import STREAM_GONE, receive_or_eof, send_or_gone

pytestmark = pytest.mark.timeout(10)


async def test_a_receive_reads_data_then_eof() -> None:
    ours, theirs = trio.testing.memory_stream_pair()
    await theirs.send_all(b"hello")
    assert await receive_or_eof(ours, 100) == b"hello"
    await theirs.aclose()
    assert await receive_or_eof(ours, 100) == b""


async def test_a_receive_on_a_stream_closed_here_is_eof() -> None:
    ours, _theirs = trio.testing.memory_stream_pair()
    await ours.aclose()
    assert await receive_or_eof(ours, 100) == b""


async def _reset() -> None:
    raise trio.BrokenResourceError("connection reset by peer")


async def test_a_receive_on_a_broken_stream_is_eof() -> None:
    broken = trio.testing.MemoryReceiveStream(receive_some_hook=_reset)
    broken.put_data(b"never read")
    assert await receive_or_eof(broken, 100) == b""


async def test_a_send_on_a_broken_stream_did_not_get_through() -> None:
    broken = trio.testing.MemorySendStream(send_all_hook=_reset)
    assert await send_or_gone(broken, b"x") is False


async def test_a_send_says_whether_it_got_through() -> None:
    ours, theirs = trio.testing.memory_stream_pair()
    assert await send_or_gone(ours, b"x") is True
    assert await theirs.receive_some(10) == b"x"
    await ours.aclose()
    assert await send_or_gone(ours, b"y") is False


def test_both_of_trios_ways_of_saying_gone_are_named() -> None:
    assert set(STREAM_GONE) == {trio.BrokenResourceError, trio.ClosedResourceError}
