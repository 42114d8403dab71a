"""``mirror-host serve``: wire the store, the host, the admin socket and signals. I/O.

Start-up order: take the state directory's lock (refusing if another host owns
it, :mod:`mirror_host.host.state_lock`), load (or create) the device store, bind
the admin socket, listen for Prowl clients, then write ``serve.json`` so tools
can find the host (the store's first write and ``serve.json`` in a worker
thread: an ``fsync`` never blocks the event loop). On SIGINT/SIGTERM a pairing
being saved finishes, every logged-in connection gets ``ended hostStopped``,
``serve.json``/``admin.sock`` are removed, and only then is the lock let go.
"""

from __future__ import annotations

import json
import logging
import os
import signal
from collections.abc import Callable
from pathlib import Path

import trio

from mirror_host.auth.window import WINDOW_SECONDS
from mirror_host.commands.handler import CommandHandler
from mirror_host.config import Config
from mirror_host.files import write_atomic
from mirror_host.host.admin import bind_admin_socket, check_socket_path, serve_admin
from mirror_host.host.admin_client import ADMIN_SOCKET, STATUS_FILE
from mirror_host.host.hub import Hub
from mirror_host.host.pairing_ticket import PairingTicket
from mirror_host.host.server import Host
from mirror_host.host.state_lock import StateLock
from mirror_host.host.store import DeviceStore, ensure_private_dir
from mirror_host.panes.source import PaneSource

__all__ = ["run_host"]

logger = logging.getLogger(__name__)


async def run_host(
    config: Config,
    source: PaneSource,
    *,
    commands: CommandHandler | None = None,
    open_pairing: bool = False,
    show_pairing: Callable[[PairingTicket], None] | None = None,
    pairing_window_seconds: float = WINDOW_SECONDS,
    task_status: trio.TaskStatus[Host] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run a host until SIGINT/SIGTERM (or cancellation).

    Raises:
        StateDirBusy: another host holds this state directory.
        StoreError: the state directory or the device store cannot be read or created.
        AdminSocketError: the admin socket cannot be created there.
        ListenError: the listen address cannot be bound.
    """
    state_dir = Path(config.state.dir)
    admin_path = state_dir / ADMIN_SOCKET
    check_socket_path(admin_path)  # before the directory and the store are created
    # Held until the files below are removed: a host starting after us must
    # find them gone, never have its own removed by our exit.
    with await trio.to_thread.run_sync(_claim_state_dir, state_dir):
        await _run_holding_state_dir(
            config,
            source,
            state_dir=state_dir,
            admin_path=admin_path,
            commands=commands,
            open_pairing=open_pairing,
            show_pairing=show_pairing,
            pairing_window_seconds=pairing_window_seconds,
            task_status=task_status,
        )


def _claim_state_dir(state_dir: Path) -> StateLock:
    """Create the state directory if need be and take its lock (blocking: file system)."""
    ensure_private_dir(state_dir)
    return StateLock(state_dir)


async def _run_holding_state_dir(
    config: Config,
    source: PaneSource,
    *,
    state_dir: Path,
    admin_path: Path,
    commands: CommandHandler | None,
    open_pairing: bool,
    show_pairing: Callable[[PairingTicket], None] | None,
    pairing_window_seconds: float,
    task_status: trio.TaskStatus[Host],
) -> None:
    store = DeviceStore(state_dir)
    # In a worker thread: creating the store fsyncs, and this runs on the event loop.
    registry = await trio.to_thread.run_sync(store.load_or_create)
    status_path = state_dir / STATUS_FILE
    # We hold the lock: an admin.sock nobody answers on is a crashed host's.
    admin_listener = await bind_admin_socket(admin_path)
    try:
        hub = Hub(source, commands=commands)
        host = Host(
            listen=config.server.listen,
            advertise_address=config.server.advertise_address,
            store=store,
            registry=registry,
            hub=hub,
            pairing_window_seconds=pairing_window_seconds,
            max_connections=config.server.max_connections,
            log_packets=config.log.packets,
        )
        async with trio.open_nursery() as nursery:
            bound = await nursery.start(host.serve)
            nursery.start_soon(serve_admin, host, admin_listener)
            # Handlers are in place before serve.json tells anyone we are up.
            await nursery.start(_stop_on_signal, host, nursery.cancel_scope)
            status = {
                "listen": str(bound),
                "pid": os.getpid(),
                "hostID": str(host.book.registry.host_id).upper(),
                "hostRunID": str(host.host_run_id).upper(),
            }
            data = (json.dumps(status) + "\n").encode()
            await trio.to_thread.run_sync(write_atomic, status_path, data)  # fsync: off the loop
            if open_pairing:
                ticket = await host.open_pairing_window()
                if show_pairing is not None:
                    show_pairing(ticket)
            task_status.started(host)
    finally:
        # Closed here too: when the TCP port cannot be bound, serve_admin never ran.
        # Shielded: a cancelled caller would otherwise skip removing the files.
        with trio.CancelScope(shield=True):
            await trio.aclose_forcefully(admin_listener)
        for path in (status_path, admin_path):
            try:
                path.unlink()
            except OSError:
                pass


async def _stop_on_signal(
    host: Host,
    scope: trio.CancelScope,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        task_status.started()
        async for signum in signals:
            logger.info("received %s, stopping", signal.Signals(signum).name)
            # Tell logged-in devices first (ended hostStopped), then tear everything down.
            await host.shutdown()
            scope.cancel()
            return
