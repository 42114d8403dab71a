"""The agliteterm client over real Unix sockets: deadlines, stale replies, dead connections, backoff."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from mirror_host.errors import PaneSourceError, PaneSourceUnavailable
from mirror_host.panes.agliteterm.client import AgliteClient
from mirror_host.panes.agliteterm.protocol import InputIncomplete
from mirror_host.panes.agliteterm.transport import UnixSocketTransport
from mirror_host.panes.lines import LineSplitter
from tests.fakes.agliteterm_fake import FakeAgliteterm

pytestmark = pytest.mark.timeout(30)

#: Answers one request line: a reply; ``None`` to close the connection instead;
#: ``(reply, CLOSE)`` to reply and then close it.
Reply = bytes | tuple[bytes, str] | None
Answer = Callable[[dict[str, object], int], Awaitable[Reply]]
CLOSE = "close"


@asynccontextmanager
async def server(
    path: Path, answer: Answer, on_close: Callable[[int], None] = lambda _connection: None
) -> AsyncIterator[list[dict[str, object]]]:
    """A Unix socket that answers each request line with ``answer(request, connection)``;
    ``on_close(connection)`` once it has closed that connection."""
    seen: list[dict[str, object]] = []
    connections = 0

    async def handle(stream: trio.SocketStream) -> None:
        nonlocal connections
        connections += 1
        number = connections
        splitter = LineSplitter(1 << 20)
        try:
            async with stream:
                while chunk := await stream.receive_some(65536):
                    for line in splitter.feed(chunk):
                        request = json.loads(line)
                        request["connection"] = number
                        seen.append(request)
                        reply = await answer(request, number)
                        if reply is None:
                            return
                        if isinstance(reply, tuple):
                            await stream.send_all(reply[0] + b"\n")
                            return
                        await stream.send_all(reply + b"\n")
        finally:
            on_close(number)

    sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
    await sock.bind(str(path))
    sock.listen(8)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, handle, [trio.SocketListener(sock)])
        try:
            yield seen
        finally:
            nursery.cancel_scope.cancel()


def ok(result: object) -> bytes:
    return json.dumps({"ok": True, "result": result}).encode()


async def test_a_late_reply_is_never_read_as_the_next_answer(state_dir: Path) -> None:
    path = state_dir / "api.sock"

    async def answer(request: dict[str, object], _connection: int) -> Reply:
        if request["cmd"] == "tree":
            await trio.sleep(1.0)  # answers, but after the caller's deadline
            return ok("late tree")
        return ok(f"answer to {request['cmd']}")

    async with server(path, answer) as seen:
        client = AgliteClient(UnixSocketTransport(path))
        with pytest.raises(PaneSourceError, match="did not answer tree within 0.2 s"):
            await client.call("tree", timeout=0.2)
        # Same lane: a new connection, so the late "late tree" is not this answer.
        assert await client.call("ping") == "answer to ping"
        assert [r["connection"] for r in seen] == [1, 2]
        await client.aclose()


async def test_a_connection_the_peer_closed_is_replaced_before_use(state_dir: Path) -> None:
    path = state_dir / "api.sock"

    async def answer(request: dict[str, object], connection: int) -> Reply:
        if connection == 1:
            return ok("first"), CLOSE  # then agliteterm goes away under the kept connection
        return ok(request["cmd"])

    first_closed = trio.Event()

    def on_close(connection: int) -> None:
        if connection == 1:
            first_closed.set()

    async with server(path, answer, on_close) as seen:
        client = AgliteClient(UnixSocketTransport(path))
        assert await client.call("ping") == "first"
        await first_closed.wait()  # agliteterm has gone from under the kept connection
        # Input is neither lost nor sent twice: one type, on a new connection.
        assert await client.call("session.type", target="a", args={"text": "x"}) == "session.type"
        assert [(r["cmd"], r["connection"]) for r in seen] == [("ping", 1), ("session.type", 2)]
        await client.aclose()


async def test_input_cut_off_after_it_was_sent_is_not_sent_again(state_dir: Path) -> None:
    path = state_dir / "api.sock"

    async def answer(request: dict[str, object], connection: int) -> Reply:
        if request["cmd"] == "session.type":
            return None  # took the text, then vanished without a word
        return ok(request["cmd"])

    async with server(path, answer) as seen:
        client = AgliteClient(UnixSocketTransport(path))
        await client.call("ping")
        with pytest.raises(PaneSourceUnavailable):
            await client.call("session.type", target="a", args={"text": "rm -rf x\r"})
        assert [r["cmd"] for r in seen] == ["ping", "session.type"]
        # A read in the same spot is simply asked again on a new connection.
        assert await client.call("tree") == "tree"
        await client.aclose()


async def test_a_partial_write_is_typed(state_dir: Path) -> None:
    path = state_dir / "api.sock"
    message = (
        "session type: 3 of 9 bytes written; the 6-byte chunk at offset 3 was cancelled at "
        "the 15 s input deadline and may have been partly delivered; the remaining 0 bytes "
        "were not written"
    )

    async def answer(request: dict[str, object], _connection: int) -> Reply:
        return json.dumps({"ok": False, "error": message}).encode()

    async with server(path, answer):
        client = AgliteClient(UnixSocketTransport(path))
        with pytest.raises(InputIncomplete) as caught:
            await client.call("session.type", target="a", args={"text": "123456789"})
        assert (caught.value.written, caught.value.total) == (3, 9)
        await client.aclose()


async def test_nothing_listening_backs_off(state_dir: Path) -> None:
    client = AgliteClient(UnixSocketTransport(state_dir / "nobody.sock"))
    with pytest.raises(PaneSourceUnavailable, match="nothing listens"):
        await client.call("ping")
    # Within the backoff the next call fails at once, without trying to connect.
    with pytest.raises(PaneSourceUnavailable, match="trying again in"):
        await client.call("ping")
    assert client.requests["ping"] == 2


async def test_lanes_do_not_wait_for_each_other(state_dir: Path) -> None:
    path = state_dir / "api.sock"
    release = trio.Event()

    async def answer(request: dict[str, object], _connection: int) -> Reply:
        if request["cmd"] == "session.type":
            await release.wait()
        return ok(request["cmd"])

    async with server(path, answer):
        client = AgliteClient(UnixSocketTransport(path))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                lambda: client.call("session.type", target="a", args={"text": "x"}, lane="input")
            )
            with trio.fail_after(5):
                assert await client.call("tree", lane="discovery") == "tree"
            release.set()
        await client.aclose()


async def test_a_mutation_cut_off_after_it_was_sent_is_not_sent_again(state_dir: Path) -> None:
    # `create`'s session.new on a kept connection that agliteterm (or its relay)
    # cut after carrying it out: sent again, it would make a second session.
    fake = FakeAgliteterm(state_dir / "aglite.sock")
    async with trio.open_nursery() as nursery:
        await nursery.start(fake.serve)
        fake.add_workspace("w")
        client = AgliteClient(UnixSocketTransport(Path(fake.socket_path)))
        assert await client.call("ping", lane="commands") == fake.version  # the kept connection
        fake.drop_reply("session.new")
        with pytest.raises(PaneSourceUnavailable, match="session.new"):
            await client.call(
                "session.new", args={"workspace": "0", "command": "exec sleep 60"}, lane="commands"
            )
        assert len(fake.requests_for("session.new")) == 1
        assert len(fake.sessions) == 1
        # A read cut off the same way on a kept connection is simply asked again.
        assert await client.call("ping", lane="commands") == fake.version
        fake.drop_reply("tree")
        tree = await client.call("tree", lane="commands")
        assert len(tree["workspaces"][0]["sessions"]) == 1
        assert len(fake.requests_for("tree")) == 2
        await client.aclose()
        await fake.stop()
        nursery.cancel_scope.cancel()


async def test_stray_lines_after_a_reply_are_never_read_as_the_next_answer(
    state_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # agliteterm (or a relay) sends more than the reply: a second line, or the
    # start of one, arrives in the same read. The kept connection is dropped.
    path = state_dir / "api.sock"
    extra = {1: b"\n" + ok("stray answer"), 2: b'\n{"ok":true,"res'}

    async def answer(request: dict[str, object], connection: int) -> Reply:
        return ok(f"answer to {request['cmd']}") + extra.get(connection, b"")

    async with server(path, answer) as seen:
        client = AgliteClient(UnixSocketTransport(path))
        with trio.fail_after(5):
            assert await client.call("ping") == "answer to ping"
            assert await client.call("tree") == "answer to tree"
            assert await client.call("window.list") == "answer to window.list"
            assert await client.call("ping") == "answer to ping"
        assert [(r["cmd"], r["connection"]) for r in seen] == [
            ("ping", 1), ("tree", 2), ("window.list", 3), ("ping", 3),
        ]  # fmt: skip
        await client.aclose()
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert (
        warnings == ["agliteterm sent more than the reply on lane main; using a new connection"] * 2
    )
    assert "stray answer" not in caplog.text


async def test_a_kept_connection_past_descriptor_1024_is_kept(state_dir: Path) -> None:
    # select() cannot watch a descriptor of 1024 or more; poll() can. A host
    # with many panes gets there, and its lanes must still keep their connections.
    import os
    import resource

    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1200:
        pytest.skip(f"the descriptor limit ({soft}) is below 1200")
    path = state_dir / "api.sock"

    async def answer(request: dict[str, object], _connection: int) -> Reply:
        return ok(request["cmd"])

    filler: list[int] = []
    try:
        while not filler or filler[-1] < 1100:
            filler.append(os.open(os.devnull, os.O_RDONLY))
        async with server(path, answer) as seen:
            client = AgliteClient(UnixSocketTransport(path))
            try:
                with trio.fail_after(5):
                    assert await client.call("ping") == "ping"
                    stream = client._lanes["main"].stream
                    assert isinstance(stream, trio.SocketStream)
                    assert stream.socket.fileno() > 1024
                    assert await client.call("tree") == "tree"
                assert [r["connection"] for r in seen] == [1, 1]
            finally:
                await client.aclose()
    finally:
        for fd in filler:
            os.close(fd)
