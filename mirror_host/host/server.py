"""The host's listener: accept, lock out, handshake, hand over. I/O.

Accepting a connection (docs/security.md):

1. an address with 12 failures in the last 60 s is dropped before TLS;
2. at most 8 handshakes are pending; the oldest is dropped to make room, so a
   pile of silent sockets cannot lock a real client out;
3. TLS must finish within 5 s (:mod:`mirror_host.host.handshake` runs it and
   says why one failed). Only what the peer got wrong counts toward its
   address's lock-out (a wrong key or code, an unknown identity, no TLS 1.2,
   garbage); never what the host could not serve: a handshake past its
   deadline, one evicted by a newer one, one whose peer left (it may have given
   up while its connection waited for an ``accept`` the host could not make:
   :mod:`mirror_host.host.accepting`);
4. at most 16 connections are established at once;
5. a :class:`~mirror_host.session.connection.Session` then runs the protocol
   over a :class:`~mirror_host.host.connection.Connection`, and :class:`Host`
   hands what it asks on: logins and pairings to the
   :class:`~mirror_host.host.device_book.DeviceBook` (the one owner of the
   devices, the PSK table and the pairing window), everything about panes to
   the :class:`~mirror_host.host.hub.Hub`.
"""

from __future__ import annotations

import errno
import itertools
import logging
import os
import secrets
import time
from collections import deque
from collections.abc import Callable
from typing import Any
from uuid import UUID

import trio

from mirror_host import __version__
from mirror_host.auth.devices import DeviceRegistry
from mirror_host.auth.failures import FailureLog
from mirror_host.auth.pairing import PAIR_IDENTITY
from mirror_host.auth.window import WINDOW_SECONDS
from mirror_host.config import Endpoint
from mirror_host.errors import ListenError
from mirror_host.host import accepting
from mirror_host.host.addresses import unreachable_advertisement
from mirror_host.host.connection import Connection, close_tls
from mirror_host.host.device_book import DeviceBook
from mirror_host.host.handshake import tls_handshake, tune_keepalive
from mirror_host.host.hub import Hub
from mirror_host.host.pairing_ticket import PairingTicket, pairing_ticket
from mirror_host.host.store import DeviceStore
from mirror_host.host.tls import build_server_context
from mirror_host.session.connection import Session
from mirror_host.session.events import (
    AuthenticateRequested,
    ConnectionClosed,
    Event,
    PairRequested,
)

__all__ = ["Host"]

logger = logging.getLogger(__name__)

MAX_PENDING_HANDSHAKES = 8
MAX_CONNECTIONS = 16
HANDSHAKE_SECONDS = 5.0
NONCE_BYTES = 32
#: How long stopping may take (ending connections, saving the last lastSeen).
STOP_SECONDS = 5.0


class Host:
    """One running mirror host: the listener, and the hand-off to the device book and the hub."""

    def __init__(
        self,
        *,
        listen: Endpoint,
        advertise_address: str | None,
        store: DeviceStore,
        registry: DeviceRegistry,
        hub: Hub,
        token_bytes: Callable[[int], bytes] = secrets.token_bytes,
        wall_clock: Callable[[], float] = time.time,
        pairing_window_seconds: float = WINDOW_SECONDS,
        max_connections: int = MAX_CONNECTIONS,
        log_packets: bool = False,
    ) -> None:
        self.listen = listen
        self.advertise_address = advertise_address
        self.hub = hub
        #: One id per run, minted by the hub that puts it in ``panes``/``subscribed``.
        self.host_run_id = hub.host_run_id
        self.tls = build_server_context()
        self.book = DeviceBook(
            store=store,
            registry=registry,
            publish=self.tls.set_table,
            cut=self._cut,
            window_seconds=pairing_window_seconds,
            token_bytes=token_bytes,
            wall_clock=wall_clock,
        )
        self.failures = FailureLog()
        self.connections: set[Connection] = set()
        #: The address actually bound (after ``serve`` started).
        self.bound: Endpoint | None = None
        self.max_connections = max_connections
        #: ``--log-packets``: hex of every packet after login (docs/security.md).
        self.log_packets = log_packets
        self._token_bytes = token_bytes
        self._pending: deque[trio.CancelScope] = deque()
        self._numbers = itertools.count(1)
        self._connections_changed = trio.Event()
        self._started = trio.current_time()

    # ------------------------------------------------------------ serving

    async def serve(
        self, *, task_status: trio.TaskStatus[Endpoint] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Listen and serve until cancelled; then end every logged-in session with
        ``ended hostStopped``."""
        try:
            listeners = await trio.open_tcp_listeners(self.listen.port, host=self.listen.host)
        except OSError as exc:
            hint = _LISTEN_HINTS.get(exc.errno or 0, "")
            raise ListenError(
                f"cannot listen on {self.listen}: {exc.strerror or exc}{hint}"
            ) from exc
        try:
            sockname = listeners[0].socket.getsockname()
            self.bound = Endpoint(str(sockname[0]), int(sockname[1]))
            everywhere = ""
            if self.bound.host in ("0.0.0.0", "::"):
                everywhere = (
                    f", every network interface (the firewall must let TCP {self.bound.port} in)"
                )
            host_id = self.book.registry.host_id
            logger.info("listening on %s%s (host %s)", self.bound, everywhere, host_id)
            warning = unreachable_advertisement(self.listen.host, self.advertise_address)
            if warning is not None:
                logger.warning("%s", warning)
            async with trio.open_nursery() as nursery:
                await nursery.start(self.hub.run)  # before any connection can send it events
                nursery.start_soon(accepting.serve, listeners, self._handle_tcp)
                nursery.start_soon(self.book.run)
                task_status.started(self.bound)
        finally:
            # Ctrl-C and SIGTERM arrive here as a cancellation, so every checkpoint
            # below would raise Cancelled at once: the whole cleanup runs shielded,
            # under a deadline of its own, or the last lastSeen and "stopped" are lost.
            with trio.CancelScope(shield=True) as cleanup:
                cleanup.deadline = trio.current_time() + STOP_SECONDS
                # The accept loops close them too; this covers a failure before they ran.
                for listener in listeners:
                    await trio.aclose_forcefully(listener)
                await self._stop()

    async def shutdown(self, *, grace_seconds: float = 2.0) -> None:
        """Stop gracefully: logged-in connections get ``ended hostStopped`` and a moment
        to read it.

        A pairing whose device is being saved finishes first, so its phone gets
        ``paired``. Call this before cancelling :meth:`serve`; cancellation alone
        closes connections at once, without the last message.
        """
        deadline = trio.current_time() + grace_seconds
        with trio.move_on_at(deadline):
            await self.book.settle()
        self._end_connections()
        with trio.move_on_at(deadline):
            while self.connections:
                await self._connections_changed.wait()
                self._connections_changed = trio.Event()

    def _end_connections(self) -> None:
        """Every logged-in connection gets ``ended hostStopped`` (Prowl's host tells
        every established peer, and Android does not reconnect after ``ended``);
        one that has not logged in just closes."""
        self.hub.stop_all()  # the commands, and the leases with their samplers
        for connection in list(self.connections):
            connection.session.host_stopped()

    async def _stop(self) -> None:
        self._end_connections()  # again: nothing left to do after a graceful shutdown
        for scope in self._pending:
            scope.cancel()
        self.failures.clear()
        await self.book.flush()
        logger.info("stopped")

    def _cut(self, device_id: UUID | None) -> None:
        """A device was revoked (``None``: every device): end its sessions, and with
        every device, the handshakes under way. The book calls this under its lock."""
        if device_id is None:
            for scope in list(self._pending):
                scope.cancel()
        for connection in list(self.connections):
            session = connection.session
            if device_id is None or session.device_id == device_id:
                session.revoke()

    async def _handle_tcp(self, stream: trio.SocketStream) -> None:
        number = next(self._numbers)
        try:
            peer_host, peer_port = stream.socket.getpeername()[:2]
        except OSError:
            return
        peer = str(Endpoint(peer_host, peer_port))
        if self.failures.is_locked(peer_host, trio.current_time()):
            logger.warning("#%d %s refused: too many failures from this address", number, peer)
            return
        tune_keepalive(stream)
        with trio.CancelScope() as pending_scope:
            self._pending.append(pending_scope)
            while len(self._pending) > MAX_PENDING_HANDSHAKES:
                oldest = self._pending.popleft()
                oldest.cancel()
            try:
                handshake = await tls_handshake(stream, self.tls, seconds=HANDSHAKE_SECONDS)
                if handshake.failure is not None:
                    # Only what the peer got wrong counts toward its lock-out; a peer
                    # that left (it gave up while the host could not accept) did not.
                    counted = "" if handshake.peer_at_fault else " (not counted: the peer left)"
                    if handshake.peer_at_fault:
                        self.failures.record(peer_host, trio.current_time())
                    logger.info(
                        "#%d %s TLS handshake failed: %s%s",
                        number,
                        peer,
                        handshake.failure,
                        counted,
                    )
                    await handshake.send_alert()
                    return
            finally:
                if pending_scope in self._pending:
                    self._pending.remove(pending_scope)
        if pending_scope.cancelled_caught:
            logger.info("#%d %s closed: pending handshake evicted by a newer one", number, peer)
            return
        if handshake.timed_out:
            logger.info(
                "#%d %s closed: TLS not finished within %gs", number, peer, HANDSHAKE_SECONDS
            )
            return
        if handshake.identity is None:
            # Finished, yet no identity came through the PSK callback (only PSK ciphers
            # are offered, so this should not happen): nobody to serve, a graceful end.
            logger.warning("#%d %s closed: TLS finished without a PSK identity", number, peer)
            await close_tls(handshake.stream)
            return
        if len(self.connections) >= self.max_connections:
            logger.warning(
                "#%d %s refused: %d connections already", number, peer, self.max_connections
            )
            await close_tls(handshake.stream)
            return
        session = Session(
            host_id=self.book.registry.host_id,
            identity=handshake.identity,
            nonce=self._token_bytes(NONCE_BYTES),
            now=trio.current_time(),
        )
        connection = Connection(
            number=number,
            peer=peer,
            peer_host=peer_host,
            stream=handshake.stream,
            session=session,
            owner=self,
            log_packets=self.log_packets,
        )
        pairing = handshake.identity == PAIR_IDENTITY
        if pairing:
            connection.device_label = "pairing"
        self.connections.add(connection)
        logger.info(
            "%s connected (TLS identity %s)", connection.label, "pair" if pairing else "device"
        )
        try:
            await connection.run()
        except Exception:
            # A bug while serving one connection ends that connection, never the host.
            logger.exception("%s failed", connection.label)

    # ------------------------------------------------------------ session events

    async def handle_event(self, connection: Connection, event: Event) -> None:
        """Act on what a session asks (see :mod:`mirror_host.session.events`)."""
        session = connection.session
        if isinstance(event, AuthenticateRequested):
            device = await self.book.log_in(session, event.device_id, event.proof)
            if device is not None:
                connection.device_label = f"{device.name} {device.identity}"
                logger.info("%s authenticated", connection.label)
        elif isinstance(event, PairRequested):
            device = await self.book.pair(session, event.name, event.proof, label=connection.label)
            if device is not None:
                connection.device_label = f"{device.name} {device.identity}"
                logger.info("%s paired a new device", connection.label)
        else:
            self.hub.handle_event(connection, event)

    def connection_closed(self, connection: Connection, event: ConnectionClosed) -> None:
        """Release the connection's lease and count a failure if it was one."""
        self.connections.discard(connection)
        self._connections_changed.set()
        self.hub.release(connection)
        if event.is_failure:
            self.failures.record(connection.peer_host, trio.current_time())
            logger.info("%s closed (failure): %s", connection.label, event.reason)
        else:
            logger.info("%s closed: %s", connection.label, event.reason)

    # ------------------------------------------------------------ admin

    async def open_pairing_window(self) -> PairingTicket:
        """Open a new pairing window (replacing any open one) and describe it."""
        window, number = await self.book.open_window()
        return pairing_ticket(
            window,
            number,
            seconds=self.book.window_seconds,
            listen_host=self.listen.host,
            advertise=self.advertise_address,
            port=self.bound.port if self.bound else None,
        )

    async def status(self) -> dict[str, Any]:
        """A summary for ``mirror-host status``."""
        registry = self.book.registry
        return {
            "version": __version__,
            "pid": os.getpid(),
            "uptimeSeconds": int(trio.current_time() - self._started),
            "stateDir": str(self.book.store.state_dir),
            "listen": str(self.bound) if self.bound else None,
            "hostID": str(registry.host_id).upper(),
            "hostRunID": str(self.host_run_id).upper(),
            "devices": len(registry.devices),
            "connections": len(self.connections),
            "pendingHandshakes": len(self._pending),
            "pairing": self.book.pairing_state(),
            "panes": await self.hub.status(),
        }


#: What to do about the usual reasons a listen address cannot be bound.
_LISTEN_HINTS = {
    errno.EADDRINUSE: " (is another host running? choose another port with --listen)",
    errno.EADDRNOTAVAIL: " (no interface of this machine has that address)",
    errno.EACCES: " (ports below 1024 need privileges; choose another with --listen)",
}
