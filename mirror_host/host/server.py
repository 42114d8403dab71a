"""The host: TLS listener, login and pairing, devices, and the pane hub. I/O.

Accepting a connection (docs/security.md):

1. an address with 12 failures in the last 60 s is dropped before TLS;
2. at most 8 handshakes are pending; the oldest is dropped to make room, so a
   pile of silent sockets cannot lock a real client out;
3. TLS must finish within 5 s (a timeout is not counted as a failure);
4. at most 16 connections are established at once;
5. a :class:`~mirror_host.session.connection.Session` then runs the protocol and
   this class decides what it asks: proofs, pairing, and (through the
   :class:`~mirror_host.host.hub.Hub`) everything about panes.

Pairing persists the new device before anything is sent, then swaps the PSK
table (no listener restart is needed: the callback reads the table per
handshake), then sends ``paired``.
"""

from __future__ import annotations

import errno
import itertools
import logging
import math
import os
import secrets
import socket
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any
from uuid import UUID

import trio

from mirror_host import __version__
from mirror_host.auth.devices import DeviceRegistry
from mirror_host.auth.failures import FailureLog
from mirror_host.auth.login import check_device_login, check_pairing, create_device
from mirror_host.auth.pairing import PAIR_IDENTITY
from mirror_host.auth.qr import (
    InvalidPairingPayload,
    PairingPayload,
    build_pairing_payload,
)
from mirror_host.auth.window import WINDOW_SECONDS, PairingWindow, WindowFates, open_window
from mirror_host.config import Endpoint
from mirror_host.errors import ListenError, StoreError
from mirror_host.host.addresses import advertised_address, unreachable_advertisement
from mirror_host.host.connection import Connection, close_tls
from mirror_host.host.hub import Hub
from mirror_host.host.store import DeviceStore
from mirror_host.host.tls import (
    PskTable,
    attempted_identity,
    build_server_context,
    negotiated_identity,
    reset_negotiated_identity,
)
from mirror_host.session.connection import Session
from mirror_host.session.events import (
    AuthenticateRequested,
    ConnectionClosed,
    Event,
    PairRequested,
)

__all__ = ["Host", "PairingTicket"]

logger = logging.getLogger(__name__)

MAX_PENDING_HANDSHAKES = 8
MAX_CONNECTIONS = 16
HANDSHAKE_SECONDS = 5.0
NONCE_BYTES = 32
#: lastSeen is written at most this often (a login must not wait for fsync).
LAST_SEEN_FLUSH_SECONDS = 1.0
#: How long stopping may take (ending connections, saving the last lastSeen).
STOP_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class PairingTicket:
    """What ``mirror-host pair`` shows: the code and, if possible, the QR payload."""

    code: str
    expires_at: int
    payload: PairingPayload | None
    payload_error: str | None
    #: The TCP port clients dial, for typing the code by hand.
    port: int | None = None
    #: The window's number, to ask later what became of it (``Host.window_state``).
    number: int = 0


class Host:
    """One running mirror host."""

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
        self.store = store
        self.registry = registry
        self.hub = hub
        #: One id per run, minted by the hub that puts it in ``panes``/``subscribed``.
        self.host_run_id = hub.host_run_id
        self.tls = build_server_context()
        self.failures = FailureLog()
        self.window: PairingWindow | None = None
        #: The open window's number, and how the earlier ones ended.
        self.window_number: int | None = None
        self.window_fates = WindowFates()
        self.connections: set[Connection] = set()
        #: The address actually bound (after ``serve`` started).
        self.bound: Endpoint | None = None
        self.last_paired: str | None = None
        #: Prowl's windows last 60 s; tests shorten it to watch one expire.
        self.pairing_window_seconds = pairing_window_seconds
        self.max_connections = max_connections
        #: ``--log-packets``: hex of every packet after login (docs/security.md).
        self.log_packets = log_packets
        self._token_bytes = token_bytes
        self._wall_clock = wall_clock
        self._pending: deque[trio.CancelScope] = deque()
        self._numbers = itertools.count(1)
        self._window_changed = trio.Event()
        self._last_seen_dirty = trio.Event()
        self._connections_changed = trio.Event()
        self._started = trio.current_time()
        self._apply_psk_table()

    # ------------------------------------------------------------ serving

    async def serve(
        self, *, task_status: trio.TaskStatus[Endpoint] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Listen and serve until cancelled; then end every lease with ``hostStopped``."""
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
            logger.info(
                "listening on %s%s (host %s)", self.bound, everywhere, self.registry.host_id
            )
            warning = unreachable_advertisement(self.listen.host, self.advertise_address)
            if warning is not None:
                logger.warning("%s", warning)
            async with trio.open_nursery() as nursery:
                await nursery.start(self.hub.run)  # before any connection can send it events
                nursery.start_soon(trio.serve_listeners, self._handle_tcp, listeners)
                nursery.start_soon(self._expire_windows)
                nursery.start_soon(self._flush_last_seen)
                task_status.started(self.bound)
        finally:
            # Ctrl-C and SIGTERM arrive here as a cancellation, so every checkpoint
            # below would raise Cancelled at once: the whole cleanup runs shielded,
            # under a deadline of its own, or the last lastSeen and "stopped" are lost.
            with trio.CancelScope(shield=True) as cleanup:
                cleanup.deadline = trio.current_time() + STOP_SECONDS
                # serve_listeners closes them too; this covers a failure before it ran.
                for listener in listeners:
                    await trio.aclose_forcefully(listener)
                await self._stop()

    async def shutdown(self, *, grace_seconds: float = 2.0) -> None:
        """Stop gracefully: subscribers get ``ended hostStopped`` and a moment to read it.

        Call this before cancelling :meth:`serve`; cancellation alone closes
        connections at once, without the last message.
        """
        self._end_connections()
        with trio.move_on_after(grace_seconds):
            while self.connections:
                await self._connections_changed.wait()
                self._connections_changed = trio.Event()

    def _end_connections(self) -> None:
        """Subscribers get ``ended hostStopped``; every other connection just closes."""
        self.hub.stop_all()
        for connection in list(self.connections):
            if not connection.session.is_closed:
                connection.session.close("host stopped")

    async def _stop(self) -> None:
        self._end_connections()  # again: nothing left to do after a graceful shutdown
        for scope in self._pending:
            scope.cancel()
        self.failures.clear()
        if self._last_seen_dirty.is_set():
            try:
                await self.store.save(self.registry)
            except StoreError as exc:
                logger.error("could not save lastSeen on stop: %s", exc)
        logger.info("stopped")

    async def _handle_tcp(self, stream: trio.SocketStream) -> None:
        number = next(self._numbers)
        try:
            peer_host, peer_port = stream.socket.getpeername()[:2]
        except OSError:
            return
        peer = str(Endpoint(peer_host, peer_port))
        now = trio.current_time()
        if self.failures.is_locked(peer_host, now):
            logger.warning("#%d %s refused: too many failures from this address", number, peer)
            return
        _tune_keepalive(stream)
        ssl_stream = trio.SSLStream(stream, self.tls.context, server_side=True)
        with trio.CancelScope() as pending_scope:
            self._pending.append(pending_scope)
            while len(self._pending) > MAX_PENDING_HANDSHAKES:
                oldest = self._pending.popleft()
                oldest.cancel()
            try:
                reset_negotiated_identity()
                with trio.move_on_after(HANDSHAKE_SECONDS) as deadline:
                    await ssl_stream.do_handshake()
                if deadline.cancelled_caught:
                    logger.info(
                        "#%d %s closed: TLS not finished within %gs",
                        number,
                        peer,
                        HANDSHAKE_SECONDS,
                    )
                    return
            except trio.BrokenResourceError as exc:
                self.failures.record(peer_host, trio.current_time())
                reason = _tls_reason(exc, attempted_identity())
                logger.info("#%d %s TLS handshake failed: %s", number, peer, reason)
                await _send_alert(ssl_stream, stream)
                return
            finally:
                if pending_scope in self._pending:
                    self._pending.remove(pending_scope)
        if pending_scope.cancelled_caught:
            logger.info("#%d %s closed: pending handshake evicted by a newer one", number, peer)
            return
        identity = negotiated_identity()
        if identity is None:
            return
        if len(self.connections) >= self.max_connections:
            logger.warning(
                "#%d %s refused: %d connections already", number, peer, self.max_connections
            )
            await close_tls(ssl_stream)
            return
        session = Session(
            host_id=self.registry.host_id,
            identity=identity,
            nonce=self._token_bytes(NONCE_BYTES),
            now=trio.current_time(),
        )
        connection = Connection(
            number=number,
            peer=peer,
            peer_host=peer_host,
            stream=ssl_stream,
            session=session,
            owner=self,
            log_packets=self.log_packets,
        )
        if identity == PAIR_IDENTITY:
            connection.device_label = "pairing"
        self.connections.add(connection)
        logger.info(
            "%s connected (TLS identity %s)",
            connection.label,
            "pair" if identity == PAIR_IDENTITY else "device",
        )
        try:
            await connection.run()
        except Exception:
            # A bug while serving one connection ends that connection, never the host.
            logger.exception("%s failed", connection.label)

    # ------------------------------------------------------------ session events

    async def handle_event(self, connection: Connection, event: Event) -> None:
        """Act on what a session asks (see :mod:`mirror_host.session.events`)."""
        if isinstance(event, AuthenticateRequested):
            self._authenticate(connection, event)
        elif isinstance(event, PairRequested):
            await self._pair(connection, event)
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

    def _authenticate(self, connection: Connection, event: AuthenticateRequested) -> None:
        session = connection.session
        device, reason = check_device_login(
            self.registry, nonce=session.nonce, device_id=event.device_id, proof=event.proof
        )
        if device is None:
            session.reject(reason)
            return
        connection.device_label = f"{device.name} {device.identity}"
        self.registry = self.registry.touched(device.id, self._wall_clock())
        self._last_seen_dirty.set()
        session.accept_authentication(device.id, trio.current_time())
        logger.info("%s authenticated", connection.label)

    async def _pair(self, connection: Connection, event: PairRequested) -> None:
        session = connection.session
        problem = check_pairing(
            self.registry,
            self.window,
            now=trio.current_time(),
            nonce=session.nonce,
            name=event.name,
            proof=event.proof,
        )
        if problem:
            session.reject(problem)
            return
        # Single use: the window closes before we await anything, so a second
        # pairing racing this one finds it gone.
        number = self.window_number
        self._close_window("pairing")
        device = create_device(
            event.name, now_unix=self._wall_clock(), token_bytes=self._token_bytes
        )
        self.registry = self.registry.with_device(device)
        try:
            await self.store.save(self.registry)
        except StoreError as exc:
            logger.error("%s pairing failed: %s", connection.label, exc)
            if number is not None:
                self.window_fates.ended(number, "failed")
            self.registry = self.registry.without(device.id)
            session.close("the device store could not be written")
            return
        self._apply_psk_table()
        self.last_paired = device.name
        if number is not None:
            self.window_fates.ended(number, "paired", device.name)
        connection.device_label = f"{device.name} {device.identity}"
        session.send_paired(device.id, device.key)
        logger.info("%s paired a new device", connection.label)

    # ------------------------------------------------------------ pairing windows

    def open_pairing_window(self) -> PairingTicket:
        """Open a new 60 s window (replacing any open one) and describe it."""
        window = open_window(
            now=trio.current_time(),
            now_unix=self._wall_clock(),
            token_bytes=self._token_bytes,
            seconds=self.pairing_window_seconds,
        )
        if self.window is not None and self.window_number is not None:
            self.window_fates.ended(self.window_number, "replaced")
        self.window = window
        self.window_number = number = self.window_fates.opened()
        self._apply_psk_table()
        self._window_changed.set()
        payload: PairingPayload | None = None
        address, reason = advertised_address(self.listen.host, self.advertise_address)
        error = reason or None
        if address is not None and self.bound is not None:
            try:
                payload = build_pairing_payload(
                    address=address,
                    port=self.bound.port,
                    code=window.code,
                    window_start=window.opened_at_unix,
                    window_seconds=self.pairing_window_seconds,
                )
            except InvalidPairingPayload as exc:
                error = str(exc)
        expires_at = math.ceil(window.opened_at_unix + self.pairing_window_seconds)
        logger.info("pairing window opened for %g s", self.pairing_window_seconds)
        port = self.bound.port if self.bound else None
        return PairingTicket(window.code, expires_at, payload, error, port, number)

    def pairing_state(self) -> dict[str, Any]:
        """Whether a window is open, and for how long still."""
        window = self.window
        if window is None or not window.is_open(trio.current_time()):
            return {"open": False, "lastPaired": self.last_paired}
        return {
            "open": True,
            "secondsLeft": max(0, int(window.deadline - trio.current_time())),
            "window": self.window_number,
            "lastPaired": self.last_paired,
        }

    def window_state(self, number: int) -> dict[str, Any]:
        """What became of window ``number``: ``open`` (with ``secondsLeft``), or how it
        ended (``pairing`` while the device is saved, ``paired`` with the ``device``
        name, ``expired``, ``closed``, ``replaced``, ``failed``), or ``unknown``."""
        window = self.window
        if number == self.window_number and window is not None:
            if window.is_open(trio.current_time()):
                left = max(0, int(window.deadline - trio.current_time()))
                return {"state": "open", "secondsLeft": left}
            return {"state": "expired"}
        fate = self.window_fates.fate(number)
        if fate is None:
            return {"state": "unknown"}
        state, device = fate
        return {"state": state, "device": device} if device else {"state": state}

    def close_pairing_window(self, number: int | None = None) -> bool:
        """Close the open window (only if it is ``number``, when given); whether one closed."""
        if self.window is None or (number is not None and number != self.window_number):
            return False
        self._close_window("closed")
        logger.info("pairing window closed")
        return True

    def _close_window(self, fate: str) -> None:
        if self.window is not None:
            if self.window_number is not None:
                self.window_fates.ended(self.window_number, fate)
            self.window = None
            self.window_number = None
            self._apply_psk_table()
            self._window_changed.set()

    async def _expire_windows(self) -> None:
        while True:
            window = self.window
            if window is None:
                await self._window_changed.wait()
            else:
                with trio.move_on_at(window.deadline):
                    await self._window_changed.wait()
                if self.window is window and not window.is_open(trio.current_time()):
                    self._close_window("expired")
                    logger.info("pairing window expired")
            self._window_changed = trio.Event()

    def _apply_psk_table(self) -> None:
        keys = self.registry.psk_keys()
        if self.window is not None:
            keys[PAIR_IDENTITY] = self.window.code.encode()
        self.tls.set_table(PskTable(MappingProxyType(keys)))

    # ------------------------------------------------------------ devices

    async def revoke(self, device_id: UUID | None) -> list[str]:
        """Remove one device (or all with ``None``), persist, and cut its connections.

        Returns the ids removed.

        Raises:
            StoreError: the store could not be written (nothing was changed).
        """
        after, removed = self.registry.revoked(device_id)
        if device_id is not None and not removed:
            return []
        await self.store.save(after)
        self.registry = after
        if device_id is None:
            self._close_window("closed")
            for scope in list(self._pending):
                scope.cancel()
        self._apply_psk_table()
        for connection in list(self.connections):
            session = connection.session
            if device_id is None or session.device_id == device_id:
                session.revoke()
        logger.info("revoked %d device(s)", len(removed))
        return removed

    async def _flush_last_seen(self) -> None:
        while True:
            await self._last_seen_dirty.wait()
            await trio.sleep(LAST_SEEN_FLUSH_SECONDS)
            self._last_seen_dirty = trio.Event()
            try:
                await self.store.save(self.registry)
            except StoreError as exc:
                logger.error("could not save lastSeen: %s", exc)

    async def status(self) -> dict[str, Any]:
        """A summary for ``mirror-host status``."""
        return {
            "version": __version__,
            "pid": os.getpid(),
            "uptimeSeconds": int(trio.current_time() - self._started),
            "stateDir": str(self.store.state_dir),
            "listen": str(self.bound) if self.bound else None,
            "hostID": str(self.registry.host_id).upper(),
            "hostRunID": str(self.host_run_id).upper(),
            "devices": len(self.registry.devices),
            "connections": len(self.connections),
            "pendingHandshakes": len(self._pending),
            "pairing": self.pairing_state(),
            "panes": await self.hub.status(),
        }


def _tune_keepalive(stream: trio.SocketStream) -> None:
    # Prowl's peers use TCP keep-alive with a 15 s idle time.
    try:
        stream.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        if hasattr(socket, "TCP_KEEPIDLE"):
            stream.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 15)
    except OSError:
        pass


def _tls_reason(exc: BaseException, attempted: str | None) -> str:
    """Why a handshake failed, in words (not OpenSSL's reason names).

    ``attempted``: the kind of identity the client offered (``pair``, ``device``,
    ``unknown``), which tells a wrong pairing code from a revoked device.
    """
    cause = exc.__cause__
    if cause is None:
        return "the client closed the connection during the handshake"
    reason = str(getattr(cause, "reason", None) or cause).upper().replace(" ", "_")
    if "PSK_IDENTITY_NOT_FOUND" in reason:
        if attempted == "pair":
            return "a pairing code, but no pairing window is open (it expired, or was used)"
        return "unknown or revoked device"
    if "BAD_RECORD_MAC" in reason or "DECRYPT" in reason:
        if attempted == "pair":
            return "wrong or expired pairing code"
        return "wrong key for a paired device (its credential does not match this host's)"
    for name, words in _TLS_REASONS.items():
        if name in reason:
            return words
    return f"TLS error ({reason})"


#: OpenSSL's reasons a client that is no Prowl client (or a broken one) gets.
_TLS_REASONS = {
    "UNSUPPORTED_PROTOCOL": "the client does not offer TLS 1.2, the only version Prowl uses",
    "WRONG_VERSION_NUMBER": "the client does not offer TLS 1.2, the only version Prowl uses",
    "NO_SHARED_CIPHER": "the client does not offer ECDHE-PSK-CHACHA20-POLY1305",
    "HTTP_REQUEST": "an HTTP request, not a Prowl client",
    "UNEXPECTED_EOF": "the client closed the connection during the handshake",
}


#: What to do about the usual reasons a listen address cannot be bound.
_LISTEN_HINTS = {
    errno.EADDRINUSE: " (is another host running? choose another port with --listen)",
    errno.EADDRNOTAVAIL: " (no interface of this machine has that address)",
    errno.EACCES: " (ports below 1024 need privileges; choose another with --listen)",
}


async def _send_alert(
    ssl_stream: trio.SSLStream[trio.SocketStream], transport: trio.SocketStream
) -> None:
    """Send the alert OpenSSL queued (e.g. ``unknown_psk_identity``).

    Trio marks the stream broken without writing it, which would leave the peer
    with a bare EOF instead of the reason Prowl's clients show to the user.
    """
    outgoing = getattr(ssl_stream, "_outgoing", None)
    if outgoing is None:
        return
    pending = outgoing.read()
    if not pending:
        return
    with trio.move_on_after(1):
        try:
            await transport.send_all(pending)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
