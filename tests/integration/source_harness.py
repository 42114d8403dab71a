"""Each pane source with its backend, driven the same way for the contract tests.

A :class:`SourceUnderTest` runs one source (its ``run`` in a scope the test can
cancel) against a real backend or a faithful fake: the in-memory source, local
PTYs, a private tmux server, the fake Herdr (observe stream or polling) and the
fake agliteterm (the newer lite and full code, and the lite 0.17.7 and agwinterm
0.17.5 releases). It opens panes running ``cat`` (so what is written comes back),
closes them in the backend, stops the backend, and, where the backend reads a
pane's screen, holds the first read so that a test can arrive while it is slow.
"""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from uuid import UUID

import trio

from mirror_host.panes.agliteterm.protocol import pane_uuid as aglite_uuid
from mirror_host.panes.agliteterm.source import AgliteSource
from mirror_host.panes.agliteterm.transport import UnixSocketTransport
from mirror_host.panes.herdr.protocol import pane_uuid as herdr_uuid
from mirror_host.panes.herdr.source import HerdrSource
from mirror_host.panes.local import LocalSource
from mirror_host.panes.tmux import TmuxSource
from tests.fakes.agliteterm_fake import FakeAgliteterm
from tests.fakes.herdr_fake import FakeHerdr
from tests.fakes.memory_source import MemorySource
from tests.integration.test_tmux import TmuxServer
from tests.pane_process import wait_program_in_place

__all__ = ["SOURCES", "SourceUnderTest", "running_source", "wait_until"]

HERDR_CLI = str(Path(__file__).resolve().parent.parent / "fakes" / "herdr")

#: Every source the contract runs against (a pytest id each).
SOURCES = (
    "memory",
    "local",
    "tmux",
    "herdr-observe",
    "herdr-polling",
    "agliteterm-lite",
    "agliteterm-full",
    "agliteterm-0.17.7",
    "agwinterm-0.17.5",
)


async def wait_until(check: Callable[[], bool], *, timeout: float = 10) -> None:
    """Poll ``check`` every 20 ms until it holds (bounded by ``timeout``)."""
    with trio.fail_after(timeout):
        while not check():
            await trio.sleep(0.02)


class SourceUnderTest:
    """One source, its backend, and what the contract tests do to them."""

    #: The health state while the backend answers.
    healthy = "following"
    #: Whether the backend reads a pane's screen when a mirror starts, so the
    #: test can hold that read (``hold_first_read``).
    reads_first_screen = True
    #: What ends a line typed into ``cat`` (a PTY turns CR into a newline).
    line_end = b"\r"
    #: Whether a scroll up from the bottom pages back through history.
    pages_history = True
    #: Whether the backend can be stopped under a running source.
    has_backend = True

    def __init__(self, source: Any) -> None:
        self.source = source
        #: Cancels the source's ``run`` (a source that stops).
        self.run_scope = trio.CancelScope()
        #: Set when ``run`` returned.
        self.run_ended = trio.Event()

    async def add_pane(self) -> UUID:
        """A new listed pane running ``cat``."""
        raise NotImplementedError

    async def close_pane(self, pane_id: UUID) -> None:
        """The pane goes away in its backend."""
        raise NotImplementedError

    async def stop_backend(self) -> None:
        """The backend goes away (the source keeps running)."""
        raise NotImplementedError

    def hold_first_read(self) -> None:
        """From now on, hold every screen read of a mirror's start until released."""

    def release_first_read(self) -> None:
        """Let held reads through."""

    def reads_started(self, pane_id: UUID) -> int | None:
        """How many first reads of the pane reached the backend while held (``None``:
        the backend cannot tell)."""
        return None

    async def wait_listed(self, pane_id: UUID) -> None:
        await wait_until(lambda: self.source.is_listed(pane_id))


class MemoryUnderTest(SourceUnderTest):
    healthy = "running"
    line_end = b"\r\n"
    has_backend = False

    source: MemorySource

    async def add_pane(self) -> UUID:
        return self.source.add_pane("cat", columns=80, rows=24)

    async def close_pane(self, pane_id: UUID) -> None:
        self.source.close_pane(pane_id)

    def hold_first_read(self) -> None:
        self.source.delays["watch"] = 1.0

    def release_first_read(self) -> None:
        self.source.delays.pop("watch", None)

    def reads_started(self, pane_id: UUID) -> int | None:
        return self.source.calls.count(("watch", pane_id))


class LocalUnderTest(SourceUnderTest):
    healthy = "running"
    reads_first_screen = False  # a PTY is read whether watched or not

    source: LocalSource

    async def add_pane(self) -> UUID:
        pane_id = self.source.spawn(["cat"], label="cat")
        # A SIGHUP (close_pane, stop_backend) sent before the exec helper has reset
        # the signals would be lost where the tests run with SIGHUP ignored (nohup).
        await wait_program_in_place(self.source.pane(pane_id).pid)
        return pane_id

    async def close_pane(self, pane_id: UUID) -> None:
        pid = self.source.pane(pane_id).pid
        await wait_program_in_place(pid)
        os.killpg(pid, signal.SIGHUP)

    async def stop_backend(self) -> None:
        for pane in self.source.live_panes():  # the source's own first pane too
            await wait_program_in_place(pane.pid)
            os.killpg(pane.pid, signal.SIGHUP)


class TmuxUnderTest(SourceUnderTest):
    source: TmuxSource

    def __init__(self, source: TmuxSource, server: TmuxServer) -> None:
        super().__init__(source)
        self.server = server
        self._stopped = False

    async def add_pane(self) -> UUID:
        tmux_id = self.server.tmux("new-window", "-d", "-P", "-F", "#{pane_id}", "cat").strip()

        def listed() -> bool:
            return any(row.pane_id == tmux_id for _, row in self.source.pane_rows())

        await wait_until(listed)
        return next(key for key, row in self.source.pane_rows() if row.pane_id == tmux_id)

    async def close_pane(self, pane_id: UUID) -> None:
        self.server.tmux("kill-pane", "-t", self.source.pane_row(pane_id).pane_id)

    async def stop_backend(self) -> None:
        self.server.stop()

    def hold_first_read(self) -> None:
        # The seed is a control-mode command list: a stopped server answers nothing.
        assert self.server.pid is not None
        os.kill(self.server.pid, signal.SIGSTOP)
        self._stopped = True

    def release_first_read(self) -> None:
        if self._stopped and self.server.pid is not None:
            os.kill(self.server.pid, signal.SIGCONT)
            self._stopped = False


class HerdrUnderTest(SourceUnderTest):
    source: HerdrSource

    def __init__(self, source: HerdrSource, fake: FakeHerdr, tab: str) -> None:
        super().__init__(source)
        self.fake = fake
        self.tab = tab
        self._herdr_ids: dict[UUID, str] = {}

    async def add_pane(self) -> UUID:
        herdr_id = await self.fake.add_pane(self.tab, "exec cat")
        key = herdr_uuid(self.fake.socket_path, herdr_id)
        self._herdr_ids[key] = herdr_id
        with trio.fail_after(10):
            while not self.source.is_listed(key):
                await self.source.poll()
        return key

    async def close_pane(self, pane_id: UUID) -> None:
        await self.fake.close_pane(self._herdr_ids[pane_id])

    async def stop_backend(self) -> None:
        await self.fake.stop()

    def hold_first_read(self) -> None:
        self.fake.delay_method(
            "pane.read", 30.0, when=lambda params: params.get("source") == "visible"
        )

    def release_first_read(self) -> None:
        self.fake.clear_delay("pane.read")

    def reads_started(self, pane_id: UUID) -> int | None:
        return self.fake.holding("pane.read")


class AgliteUnderTest(SourceUnderTest):
    source: AgliteSource

    def __init__(self, source: AgliteSource, fake: FakeAgliteterm, workspace: str) -> None:
        super().__init__(source)
        self.fake = fake
        self.workspace = workspace
        self._sessions: dict[UUID, str] = {}
        # agwinterm 0.17.5 answers the screen alone: there is no history to page to.
        self.pages_history = not (fake.dialect == "full" and fake.old)

    async def add_pane(self) -> UUID:
        session = await self.fake.add_session(self.workspace, "exec cat", name="cat")
        key = aglite_uuid(f"unix:{self.fake.socket_path}", session)
        self._sessions[key] = session
        with trio.fail_after(10):
            while not self.source.is_listed(key):
                await self.source.discovery.poll()
                await trio.sleep(0.05)  # the full app lists a new session a moment later
        return key

    async def close_pane(self, pane_id: UUID) -> None:
        await self.fake.close_session(self._sessions[pane_id])

    async def stop_backend(self) -> None:
        await self.fake.stop()

    def hold_first_read(self) -> None:
        self.fake.delay("session.text", 30.0)

    def release_first_read(self) -> None:
        self.fake.clear_delay("session.text")

    def reads_started(self, pane_id: UUID) -> int | None:
        return len(self.fake.requests_for("session.text", target=self._sessions[pane_id]))


@asynccontextmanager
async def _running(under_test: SourceUnderTest) -> AsyncIterator[SourceUnderTest]:
    """Run the source's ``run`` in the test's task tree, in a scope the test can cancel."""

    async def run() -> None:
        try:
            with under_test.run_scope:
                await under_test.source.run()
        finally:
            under_test.run_ended.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        wait_listed = getattr(under_test.source, "wait_listed", None)
        if wait_listed is not None:
            with trio.fail_after(10):
                await wait_listed()
        try:
            yield under_test
        finally:
            under_test.release_first_read()
            nursery.cancel_scope.cancel()


@asynccontextmanager
async def running_source(name: str, state_dir: Path) -> AsyncIterator[SourceUnderTest]:
    """The source ``name`` (one of :data:`SOURCES`) running against its backend."""
    if name == "memory":
        async with _running(MemoryUnderTest(MemorySource())) as under_test:
            yield under_test
    elif name == "local":
        source = LocalSource(["cat"], columns=80, rows=24, shell_integration=False)
        async with _running(LocalUnderTest(source)) as under_test:
            await wait_until(lambda: bool(source.live_panes()))
            yield under_test
    elif name == "tmux":
        if shutil.which("tmux") is None:
            import pytest

            pytest.skip("tmux is not installed")
        server = TmuxServer(state_dir)
        server.start()
        try:
            source = TmuxSource(socket_name=server.name, sign_marks=False)
            async with _running(TmuxUnderTest(source, server)) as under_test:
                yield under_test
        finally:
            if server.pid is not None:
                try:
                    os.kill(server.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
            server.stop()
    elif name.startswith("herdr-"):
        fake = FakeHerdr(state_dir / "herdr.sock", protocol=22)
        async with trio.open_nursery() as nursery:
            await nursery.start(fake.serve)
            tab = fake.add_tab(fake.add_workspace("api", cwd=str(state_dir)), "panes")
            program = HERDR_CLI if name == "herdr-observe" else "/nonexistent/herdr"
            source = HerdrSource(state_dir / "herdr.sock", herdr_bin=program)
            try:
                async with _running(HerdrUnderTest(source, fake, tab)) as under_test:
                    yield under_test
            finally:
                await fake.stop()
                nursery.cancel_scope.cancel()
    else:
        kinds = {
            "agliteterm-lite": {"dialect": "lite"},
            "agliteterm-full": {"dialect": "full"},
            "agliteterm-0.17.7": {"dialect": "lite", "release": "0.17.7"},
            "agwinterm-0.17.5": {"dialect": "full", "release": "0.17.5"},
        }
        aglite = FakeAgliteterm(state_dir / "aglite.sock", **kinds[name])
        async with trio.open_nursery() as nursery:
            await nursery.start(aglite.serve)
            workspace = aglite.add_workspace("w")
            source = AgliteSource(UnixSocketTransport(Path(aglite.socket_path)))
            try:
                async with _running(AgliteUnderTest(source, aglite, workspace)) as under_test:
                    yield under_test
            finally:
                await aglite.stop()
                nursery.cancel_scope.cancel()
