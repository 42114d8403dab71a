"""Fixtures for integration tests: a real host on 127.0.0.1, real TLS, real PTYs."""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from mirror_host.client.client import Credential, pair_device
from mirror_host.commands.handler import CommandHandler
from mirror_host.config import (
    Config,
    Endpoint,
    LocalSettings,
    LogSettings,
    ServerSettings,
    StateSettings,
)
from mirror_host.host.server import Host
from mirror_host.host.service import run_host
from mirror_host.panes.local import LocalSource
from mirror_host.panes.source import PaneSource


@pytest.fixture
def host_log(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """``caplog`` with mirror-host's INFO records, also after a test that configured
    logging the way `serve` does (which stops them propagating to pytest)."""
    logger = logging.getLogger("mirror_host")
    propagate = logger.propagate
    caplog.set_level(logging.INFO, logger="mirror_host")
    logger.propagate = True
    try:
        yield caplog
    finally:
        logger.propagate = propagate


@pytest.fixture
def state_dir() -> Iterator[Path]:
    """A short private directory (Unix socket paths must stay under ~100 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="mh-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def host_config(
    state_dir: Path, *, advertise: str | None = "192.0.2.10", log_packets: bool = False
) -> Config:
    return Config(
        server=ServerSettings(listen=Endpoint("127.0.0.1", 0), advertise_address=advertise),
        state=StateSettings(dir=str(state_dir)),
        local=LocalSettings(columns=80, rows=24),
        log=LogSettings(packets=log_packets),
    )


@asynccontextmanager
async def running_host(
    state_dir: Path,
    source: PaneSource | None = None,
    *,
    window_seconds: float = 60.0,
    log_packets: bool = False,
    commands: CommandHandler | None = None,
) -> AsyncIterator[Host]:
    """Run a host in this test's task tree; stop it (and its PTYs) on exit."""
    source = source or LocalSource(["cat"], columns=80, rows=24)
    try:
        async with trio.open_nursery() as nursery:
            host: Host = await nursery.start(
                lambda task_status: run_host(
                    host_config(state_dir, log_packets=log_packets),
                    source,
                    commands=commands,
                    pairing_window_seconds=window_seconds,
                    task_status=task_status,
                )
            )
            try:
                yield host
            finally:
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:  # the test body's own failure, unwrapped
            raise group.exceptions[0] from None
        raise


def port_of(host: Host) -> int:
    assert host.bound is not None
    return host.bound.port


async def paired(host: Host, name: str = "Test Phone") -> Credential:
    """Pair a new device through the real protocol."""
    ticket = await host.open_pairing_window()
    return await pair_device("127.0.0.1", port_of(host), ticket.code, name)
