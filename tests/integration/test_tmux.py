"""The tmux source against a real tmux server on a private socket, over real TLS."""

from __future__ import annotations

import errno
import logging
import os
import shutil
import signal
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from mirror_host import control as c
from mirror_host.client.client import MirrorClient, login
from mirror_host.errors import PaneSourceError, PaneSourceUnavailable
from mirror_host.host.server import Host
from mirror_host.panes.tmux import TmuxSource
from mirror_host.shell.environment import SHELL_DIR_VARIABLE
from mirror_host.shell.nonce import NONCE_VARIABLE, is_nonce, started_with_nonce
from mirror_host.terminal import Screen
from mirror_host.wire import TextFramePacket, VTFramePacket
from tests.integration.conftest import paired, port_of, running_host
from tests.integration.mirror_helpers import (
    coloured_lines,
    frame_containing,
    frame_text,
    list_panes,
    messages_within,
    next_frame,
    row_styles,
    scrolled_back_in_colour,
    settle,
    styled_view,
    subscribe,
)

pytestmark = [
    pytest.mark.timeout(90),
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


class TmuxServer:
    """A tmux server on its own socket, started and killed by the test."""

    def __init__(self, workdir: Path) -> None:
        self.name = f"mh-{uuid.uuid4().hex[:10]}"
        self.workdir = workdir
        self.env = {**os.environ, "TERM": "xterm-256color"}
        self.pid: int | None = None

    def tmux(self, *args: str) -> str:
        result = subprocess.run(
            ["tmux", "-L", self.name, *args],
            capture_output=True,
            text=True,
            timeout=10,
            env=self.env,
            cwd=self.workdir,
            check=True,
        )
        return result.stdout

    def start(self) -> None:
        self.tmux("-f", "/dev/null", "new-session", "-d", "-s", "work", "-x", "80", "-y", "24",
                  "-n", "main", "bash --norc --noprofile")  # fmt: skip
        self.tmux("set-option", "-g", "history-limit", "5000")
        self.pid = int(self.tmux("display-message", "-p", "#{pid}").strip())

    def stop(self) -> None:
        try:
            self.tmux("kill-server")
        except subprocess.CalledProcessError:
            pass
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def pane_ids(self) -> list[str]:
        return self.tmux("list-panes", "-a", "-F", "#{pane_id}").split()


@pytest.fixture
def tmux_server(state_dir: Path) -> Iterator[TmuxServer]:
    server = TmuxServer(state_dir)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@asynccontextmanager
async def tmux_host(
    state_dir: Path, server: TmuxServer
) -> AsyncIterator[tuple[Host, MirrorClient, TmuxSource]]:
    source = TmuxSource(socket_name=server.name)
    async with running_host(state_dir, source) as host:
        await source.wait_listed()
        credential = await paired(host)
        async with login("127.0.0.1", port_of(host), credential) as client:
            yield host, client, source


async def pane_titled(client: MirrorClient, prefix: str, *, timeout: float = 5) -> c.PaneDescriptor:
    """List until a pane whose title starts with ``prefix`` shows up."""
    with trio.fail_after(timeout):
        while True:
            for pane in (await list_panes(client)).panes:
                if pane.title.startswith(prefix):
                    return pane
            await trio.sleep(0.05)


async def test_list_and_titles(state_dir: Path, tmux_server: TmuxServer) -> None:
    tmux_server.tmux("split-window", "-d", "-t", "work:main", "sleep 60")
    async with tmux_host(state_dir, tmux_server) as (_, client, source):
        assert source.health()["state"] == "following"
        panes = (await list_panes(client)).panes
        titles = sorted(p.title for p in panes)
        assert titles == ["work · main · bash · Pane 1", "work · main · sleep · Pane 2"]
        assert all(p.directory == str(state_dir) for p in panes)
        assert panes[0].project_name == state_dir.name
        capabilities = (await list_panes(client)).capabilities
        assert "history" in capabilities and "remote-scroll" in capabilities


@pytest.mark.slow
async def test_vt_and_text_subscriptions_with_input_echo(
    state_dir: Path, tmux_server: TmuxServer
) -> None:
    async with tmux_host(state_dir, tmux_server) as (host, client, _source):
        pane = (await list_panes(client)).panes[0]
        sub = await subscribe(client, pane.id)
        first = await next_frame(client, sub)
        assert isinstance(first, VTFramePacket) and (first.columns, first.rows) == (80, 24)
        await client.send(c.Input(data=b"echo through-$((40+2))\r", subscription_id=sub))
        await frame_containing(client, sub, "through-42")
        async with login("127.0.0.1", port_of(host), await paired(host, "Phone")) as phone:
            text_sub = await subscribe(phone, pane.id, c.Representation.TEXT, c.Intent.TAKEOVER)
            frame = await frame_containing(phone, text_sub, "through-42")
            assert isinstance(frame, TextFramePacket) and (frame.columns, frame.rows) == (80, 24)
            assert c.Ended(reason=c.EndReason.TAKEN_OVER) in await client.expect_closed()


def tmux_truth(server: TmuxServer, target: str) -> tuple[list[str], tuple[int, int], bool]:
    rows = server.tmux("capture-pane", "-p", "-t", target).split("\n")[:24]
    x, y, alt = server.tmux(
        "display-message", "-p", "-t", target, "#{cursor_x} #{cursor_y} #{alternate_on}"
    ).split()
    return [r.rstrip() for r in rows], (int(x), int(y)), alt == "1"


async def check_replica(
    client: MirrorClient, sub: uuid.UUID, server: TmuxServer, target: str
) -> None:
    await settle(client, sub, quiet=0.6)
    await client.send(c.Refresh(subscription_id=sub))
    frame = await next_frame(client, sub)
    assert isinstance(frame, VTFramePacket)
    replica = Screen(frame.columns, frame.rows)
    replica.feed(b"\x1bc" + frame.data)
    rows, cursor, alternate = tmux_truth(server, target)
    got = [r.rstrip() for r in replica.active_text().split("\n")]
    got += [""] * (len(rows) - len(got))
    assert got[: len(rows)] == rows
    assert replica.cursor == cursor
    assert replica.on_alternate_screen == alternate


@pytest.mark.skipif(shutil.which("vim") is None, reason="vim is not installed")
@pytest.mark.slow
async def test_full_screen_program_streamed_and_seeded(
    state_dir: Path, tmux_server: TmuxServer
) -> None:
    sample = state_dir / "sample.txt"
    sample.write_text("".join(f"line {i} of the sample\n" for i in range(60)))
    target = tmux_server.pane_ids()[0]
    async with tmux_host(state_dir, tmux_server) as (host, client, _source):
        pane = (await list_panes(client)).panes[0]
        sub = await subscribe(client, pane.id)
        await next_frame(client, sub)
        # Streamed: vim starts while we watch, every byte arrives by %output.
        tmux_server.tmux(
            "send-keys", "-t", target, f"vim -u NONE -N -i NONE -c 'set number' {sample}", "Enter"
        )
        await frame_containing(client, sub, "line 10")
        await check_replica(client, sub, tmux_server, target)
        await client.aclose()
        # Seeded: a new subscriber starts from capture-pane + cursor + modes.
        async with login("127.0.0.1", port_of(host), await paired(host, "Later")) as later:
            sub2 = await subscribe(later, pane.id, intent=c.Intent.TAKEOVER)
            await check_replica(later, sub2, tmux_server, target)
        tmux_server.tmux("send-keys", "-t", target, ":qa!", "Enter")


@pytest.mark.slow
async def test_a_seeded_screen_keeps_colours_that_run_across_rows(
    state_dir: Path, tmux_server: TmuxServer
) -> None:
    # capture-pane -e states an attribute where it changes, so "red2" carries
    # no colour of its own: the seed must not reset the pen between rows.
    target = tmux_server.pane_ids()[0]
    tmux_server.tmux(
        "send-keys", "-t", target, "clear; printf '\\033[31mred1\\nred2\\033[0m plain\\n'", "Enter"
    )
    async with tmux_host(state_dir, tmux_server) as (_host, client, _source):
        pane = (await list_panes(client)).panes[0]
        sub = await subscribe(client, pane.id)
        frame = await frame_containing(client, sub, "plain")
        assert isinstance(frame, VTFramePacket)
        replica = Screen(frame.columns, frame.rows)
        replica.feed(b"\x1bc" + frame.data)
        rows = replica.active_text().split("\n")
        y = next(i for i, row in enumerate(rows) if row.startswith("red2"))
        assert dict(replica.cell(0, y)[1])["fg"] == ("palette", 1)
        assert dict(replica.cell(5, y)[1])["fg"] is None  # "plain"


async def test_pane_closing_and_new_window_without_polling(
    state_dir: Path, tmux_server: TmuxServer
) -> None:
    async with tmux_host(state_dir, tmux_server) as (host, client, _source):
        tmux_server.tmux("new-window", "-d", "-t", "work", "-n", "extra", "sleep 120")
        extra = await pane_titled(client, "work · extra")
        assert extra.title == "work · extra · sleep"
        async with login("127.0.0.1", port_of(host), await paired(host, "Other")) as other:
            sub = await subscribe(other, extra.id)
            await next_frame(other, sub)
            tmux_server.tmux("kill-window", "-t", "work:extra")
            assert c.Ended(reason=c.EndReason.PANE_CLOSED) in await other.expect_closed()
        assert all(p.id != extra.id for p in (await list_panes(client)).panes)


async def test_history_and_scroll(state_dir: Path, tmux_server: TmuxServer) -> None:
    target = tmux_server.pane_ids()[0]
    tmux_server.tmux("send-keys", "-t", target, "clear; seq 1 500", "Enter")
    async with tmux_host(state_dir, tmux_server) as (_host, client, _source):
        pane = (await list_panes(client)).panes[0]
        sub = await subscribe(
            client, pane.id, include_viewport_text=True, include_scroll_state=True
        )
        await frame_containing(client, sub, "500")
        await client.send(c.History(subscription_id=sub))
        page = await client.expect(c.HistoryPage)
        assert isinstance(page, c.HistoryPage)
        lines = list(page.lines)
        while page.offset > 0:
            await client.send(
                c.History(history_id=page.history_id, offset=page.offset, subscription_id=sub)
            )
            page = await client.expect(c.HistoryPage)  # type: ignore[assignment]
            lines = list(page.lines) + lines
        assert [line for line in lines if line.isdigit()] == [str(i) for i in range(1, 501)]

        await settle(client, sub)
        request = uuid.uuid4()
        await client.send(
            c.Scroll(request_id=request, direction=c.ScrollDirection.UP, subscription_id=sub)
        )
        seen: list[object] = []
        with trio.fail_after(10):
            while not any(isinstance(x, c.ScrollResult) for x in seen):
                item = await client.receive()
                seen.append(item)
                if isinstance(item, VTFramePacket):
                    await client.send(c.Acknowledge(sequence=item.sequence, subscription_id=sub))
        viewport = next(x for x in reversed(seen) if isinstance(x, c.Viewport))
        state = next(x for x in reversed(seen) if isinstance(x, c.ScrollState))
        assert viewport.text is not None and "480" in viewport.text and "500" not in viewport.text
        assert state.at_bottom is False and state.at_top is False
        # Typing leaves copy mode first, so the bytes reach the shell, not copy mode.
        await client.send(c.Input(data=b"echo back-at-the-prompt\r", subscription_id=sub))
        frame = await frame_containing(client, sub, "back-at-the-prompt")
        assert "back-at-the-prompt" in frame_text(frame)


COLOURED = "clear; " + coloured_lines(500)


@pytest.mark.slow
async def test_a_mac_client_scrolled_back_in_tmux_sees_the_colours(
    state_dir: Path, tmux_server: TmuxServer
) -> None:
    target = tmux_server.pane_ids()[0]
    tmux_server.tmux("send-keys", "-t", target, COLOURED, "Enter")
    async with tmux_host(state_dir, tmux_server) as (_host, client, _source):
        pane = (await list_panes(client)).panes[0]
        assert "styled-scrollback-v1" in (await list_panes(client)).capabilities
        sub = await subscribe(
            client,
            pane.id,
            include_viewport_text=True,
            include_styled_scrollback=True,
            include_scroll_state=True,
        )
        await frame_containing(client, sub, "red500")
        await settle(client, sub)
        viewport, _frame, styles = await scrolled_back_in_colour(client, sub, newest=500, shown=480)

        # Output while scrolled back: tmux keeps the copy-mode view, the history
        # grows under it, and the archive still presents that same view.
        tty = tmux_server.tmux("display-message", "-p", "-t", target, "#{pane_tty}").strip()
        await trio.sleep(0.6)  # past the archive's 500 ms: the next frame exports it again
        with open(tty, "wb") as terminal:
            terminal.write(b"".join(b"\x1b[33mlate%d\x1b[0m\r\n" % i for i in range(30)))
        later = [
            m
            for m in await messages_within(client, sub, 1.5)
            if isinstance(m, c.Viewport) and m.styled_scrollback is not None
        ]
        assert later and later[-1].text == viewport.text
        # Rows below the view changed (the prompt row took the output) …
        assert later[-1].styled_scrollback != viewport.styled_scrollback
        # … while the view presents as before.
        await client.send(c.Refresh(subscription_id=sub))
        last_viewport, last_frame = await viewport_and_frame(client, sub)
        assert last_viewport.text == viewport.text
        assert row_styles(styled_view(last_viewport, last_frame), "red480") == styles


async def viewport_and_frame(
    client: MirrorClient, sub: uuid.UUID
) -> tuple[c.Viewport, VTFramePacket]:
    """The next viewport and the frame it goes with (acknowledged)."""
    viewport: c.Viewport | None = None
    with trio.fail_after(10):
        while True:
            item = await client.receive()
            if isinstance(item, c.Viewport):
                viewport = item
            elif isinstance(item, VTFramePacket):
                await client.send(c.Acknowledge(sequence=item.sequence, subscription_id=sub))
                assert viewport is not None and viewport.sequence == item.sequence
                return viewport, item


async def test_control_replies_belong_to_their_command_lines(tmux_server: TmuxServer) -> None:
    # tmux drops the rest of a line after a failing command, and prints command
    # output unescaped: neither may hand one line's reply to the next line.
    source = TmuxSource(socket_name=tmux_server.name)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(source.run)
        with trio.fail_after(10):
            await source.wait_listed()
            (client,) = source._clients.values()
            with pytest.raises(PaneSourceError, match="can't find pane"):
                await client.command("display -p a ; kill-pane -t %999 ; display -p b", blocks=3)
            # display-message expands strftime escapes, so '%%' prints one '%'.
            replies = await client.command("display -p '%%end 1 2 1' ; display -p after", blocks=2)
        assert replies == ((b"%end 1 2 1",), (b"after",))
        nursery.cancel_scope.cancel()


async def test_a_command_cancelled_before_its_write_leaves_the_client_in_step(
    tmux_server: TmuxServer,
) -> None:
    # Found in review: the reply slot was taken before the write, so a cancel at
    # the write's checkpoint left a slot for a line tmux never read, and every
    # later command on the session got the reply of the command before it.
    source = TmuxSource(socket_name=tmux_server.name)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(source.run)
        with trio.fail_after(10):
            await source.wait_listed()
            (client,) = source._clients.values()
            scope = trio.CancelScope()
            cancelled = trio.Event()

            async def cancelled_command() -> None:
                with scope:
                    await client.command("display -p first")
                cancelled.set()

            # The command waits for the send lock; it is handed the lock and its
            # scope is cancelled before it runs again, so the cancel arrives at
            # the first checkpoint of the write, with nothing written yet.
            await client._send_lock.acquire()
            nursery.start_soon(cancelled_command)
            await trio.testing.wait_all_tasks_blocked()
            client._send_lock.release()
            scope.cancel()
            await cancelled.wait()
            assert scope.cancelled_caught
            assert await client.command("display -p second") == ((b"second",),)
            assert await client.command("display -p third") == ((b"third",),)
            assert source._clients.get(client.session_id) is client
        nursery.cancel_scope.cancel()


async def test_a_command_line_tmux_does_not_read_ends_its_client(
    tmux_server: TmuxServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A line written part-way would be joined to the next one: the client is
    # ended instead, and the source attaches a new one that answers in step.
    monkeypatch.setattr("mirror_host.panes.tmux._SEND_SECONDS", 0.5)
    source = TmuxSource(socket_name=tmux_server.name)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(source.run)
        with trio.fail_after(20):
            await source.wait_listed()
            (client,) = source._clients.values()
            # The control client hands its input to the server, which reads it.
            assert tmux_server.pid is not None
            pid = tmux_server.pid
            os.kill(pid, signal.SIGSTOP)
            try:
                with pytest.raises(PaneSourceUnavailable, match="did not read"):
                    await client.command("display -p '" + "x" * 300_000 + "'")
                with pytest.raises(PaneSourceUnavailable):
                    await client.command("display -p refused")
            finally:
                os.kill(pid, signal.SIGCONT)
            await client.done.wait()
            while source._clients.get(client.session_id) in (None, client):
                await trio.sleep(0.02)
            fresh = source._clients[client.session_id]
            assert await fresh.command("display -p fresh") == ((b"fresh",),)
        nursery.cancel_scope.cancel()


async def test_no_server_or_no_tmux_is_reported_and_retried(
    state_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mirror_host")
    logging.getLogger("mirror_host").propagate = True
    try:
        await _absent_servers(state_dir, caplog)
    finally:
        logging.getLogger("mirror_host").propagate = False


async def _absent_servers(state_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    for source, expected in (
        (TmuxSource(socket_name=f"mh-absent-{uuid.uuid4().hex[:6]}"), "no tmux server is running"),
        (TmuxSource(tmux="/nonexistent/tmux"), "tmux is not installed"),
    ):
        async with running_host(state_dir, source) as host:
            await source.wait_listed()
            credential = await paired(host)
            async with login("127.0.0.1", port_of(host), credential) as client:
                assert (await list_panes(client)).panes == ()
            # `mirror-host status` says why there are no panes.
            health = (await host.status())["panes"]["health"]
            assert (health["kind"], health["state"]) == ("tmux", "unreachable")
            assert expected in health["detail"] and "retrying" in health["detail"]
        assert expected in caplog.text


@pytest.mark.parametrize("start", ["run_process", "open_process"])
async def test_a_process_that_cannot_be_started_is_an_outage_not_the_hosts_end(
    tmux_server: TmuxServer, monkeypatch: pytest.MonkeyPatch, start: str
) -> None:
    # Found in review: only FileNotFoundError was mapped, so EMFILE or EAGAIN
    # from starting tmux (or its control client) ended the task, and with it
    # the host's nursery.
    failing = trio.Event()
    real = getattr(trio, start) if start == "run_process" else trio.lowlevel.open_process

    async def start_process(*args: Any, **kwargs: Any) -> Any:
        if not failing.is_set():
            return await real(*args, **kwargs)
        raise OSError(errno.EMFILE if start == "run_process" else errno.EAGAIN, "no room")

    failing.set()
    if start == "run_process":
        monkeypatch.setattr(trio, "run_process", start_process)
    else:
        monkeypatch.setattr(trio.lowlevel, "open_process", start_process)
    source = TmuxSource(socket_name=tmux_server.name)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(source.run)
        with trio.fail_after(20):
            await source.wait_listed()
            health = source.health()
            assert health["state"] == "unreachable", health
            assert "no room" in health["detail"] and "retrying" in health["detail"]
            assert source._clients == {}
            failing = trio.Event()  # processes start again: the next retry follows tmux
            while source.health()["state"] != "following" or not source._clients:
                await trio.sleep(0.05)
            (client,) = source._clients.values()
            assert await client.command("display -p back") == ((b"back",),)
        nursery.cancel_scope.cancel()


def _global_nonce(server: TmuxServer) -> str | None:
    """``MIRROR_HOST_MARK_NONCE`` in the server's global environment, if set."""
    try:
        shown = server.tmux("show-environment", "-g", NONCE_VARIABLE).strip()
    except subprocess.CalledProcessError:
        return None  # tmux: unknown variable
    name, _, value = shown.partition("=")
    return value if name == NONCE_VARIABLE else None


async def _listed_once(source: TmuxSource) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(source.run)
        with trio.fail_after(10):
            await source.wait_listed()
        nursery.cancel_scope.cancel()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("before", "kept"),
    [(None, False), ("0123456789abcdef" * 2, True), ("not-a-nonce", False)],
    ids=["unset", "valid", "invalid"],
)
async def test_the_source_hands_tmux_one_nonce_and_keeps_a_valid_one(
    tmux_server: TmuxServer, before: str | None, kept: bool
) -> None:
    """New shells get a nonce from the server's global environment (docs/security.md)."""
    if before is not None:
        tmux_server.tmux("set-environment", "-g", NONCE_VARIABLE, before)
    await _listed_once(TmuxSource(socket_name=tmux_server.name))
    handed = _global_nonce(tmux_server)  # read after that source has stopped: it stays
    assert handed is not None and is_nonce(handed)
    assert (handed == before) is kept
    # A second host on the same server keeps it: shells started with it still count.
    await _listed_once(TmuxSource(socket_name=tmux_server.name))
    assert _global_nonce(tmux_server) == handed
    if not os.path.exists("/proc/self/environ"):
        return  # where the OS keeps no initial environment, the first signed mark tells
    # And a shell tmux starts from now on is started with it.
    tmux_server.tmux("new-window", "-d", "-t", "work:", "-n", "after", "sleep 60")
    pid = int(tmux_server.tmux("display-message", "-p", "-t", "work:after", "#{pane_pid}"))
    with trio.fail_after(10):
        while started_with_nonce(pid) != handed:  # until tmux's child has exec'd
            await trio.sleep(0.02)


@pytest.mark.slow
async def test_without_signed_marks_tmux_gets_no_nonce(tmux_server: TmuxServer) -> None:
    await _listed_once(TmuxSource(socket_name=tmux_server.name, sign_marks=False))
    assert _global_nonce(tmux_server) is None


def _global_shell_dir(server: TmuxServer) -> str | None:
    """``MIRROR_HOST_SHELL_DIR`` in the server's global environment, if set."""
    try:
        shown = server.tmux("show-environment", "-g", SHELL_DIR_VARIABLE).strip()
    except subprocess.CalledProcessError:
        return None
    name, _, value = shown.partition("=")
    return value if name == SHELL_DIR_VARIABLE else None


@pytest.mark.slow
async def test_the_source_names_its_shell_directory_and_keeps_a_usable_one(
    tmux_server: TmuxServer, tmp_path: Path
) -> None:
    """New shells learn where phones' commands come from; a usable directory already
    named is kept (and used), one that is not private is replaced."""
    ours = tmp_path / "ours"
    source = TmuxSource(socket_name=tmux_server.name, shell_dir=ours)
    await _listed_once(source)
    assert _global_shell_dir(tmux_server) == str(ours)
    assert source.shell_directory is not None and source.shell_directory.path == ours
    assert ours.stat().st_mode & 0o777 == 0o700
    # Another host (another state directory) on the same server uses the one named.
    other = TmuxSource(socket_name=tmux_server.name, shell_dir=tmp_path / "other")
    await _listed_once(other)
    assert other.shell_directory is not None and other.shell_directory.path == ours
    assert not (tmp_path / "other").exists()
    # One others could write to is not used, nor kept.
    os.chmod(ours, 0o777)
    third = TmuxSource(socket_name=tmux_server.name, shell_dir=tmp_path / "third")
    await _listed_once(third)
    assert _global_shell_dir(tmux_server) == str(tmp_path / "third")
    os.chmod(ours, 0o700)


@pytest.mark.slow
async def test_without_shell_send_tmux_gets_no_shell_directory(
    tmux_server: TmuxServer, tmp_path: Path
) -> None:
    source = TmuxSource(socket_name=tmux_server.name, sign_marks=False, shell_dir=tmp_path / "d")
    await _listed_once(source)
    assert _global_shell_dir(tmux_server) is None and source.shell_directory is None
