"""The admin socket: ``<state-dir>/admin.sock``, newline-delimited JSON. I/O.

Only the user who runs the host can reach it (the socket is 0600 inside a 0700
directory). Requests are one JSON object per line, ``{"op": …}``; each gets one
JSON line back, ``{"ok": true, …}`` or ``{"ok": false, "error": …}``:

* ``{"op":"pair"}`` opens a 60 s pairing window: ``code``, ``expiresAt``,
  ``payload`` (the QR object, or null with ``payloadError``);
* ``{"op":"devices"}``: ``devices`` [{id, name, pairedAt, lastSeen, connected}];
* ``{"op":"revoke","deviceID":"…"}`` or ``{"op":"revoke","all":true}``: ``revoked``;
* ``{"op":"status"}``: listen address, ids, counts, pairing window state;
* ``{"op":"pairing","window":N}``: what became of window N (``pair`` replies
  with its number): ``state`` ``open`` (``secondsLeft``), ``pairing``, ``paired``
  (``device``), ``expired``, ``closed``, ``replaced``, ``failed`` or ``unknown``;
* ``{"op":"closePairing"}`` (``"window":N``: only if N is the open one): ``closed``.

A refusal says what kind it is in ``kind``: ``invalid-request`` (not a JSON
object, nested too deeply, an unknown op, a field of the wrong type),
``not-found`` (no such device), ``failed`` (the host could not do it: the store
could not be written …) or ``internal`` (a fault in the host, logged by its
exception type and place alone). Nothing a client sends, and no client that
goes away mid-answer, ends the host: at worst its connection is closed. A
``pair`` reply that cannot be delivered closes the window it opened (nobody
has its code).

The reply to ``pair`` carries the code: it is written to the requesting socket
only, never logged.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import socket as stdlib_socket
import traceback
import uuid
from pathlib import Path
from typing import Any

import trio

from mirror_host.auth.devices import Device
from mirror_host.control.fields import encode_struct
from mirror_host.errors import MirrorHostError
from mirror_host.host import accepting
from mirror_host.host.pairing_ticket import PairingTicket
from mirror_host.host.server import Host
from mirror_host.streams import receive_or_eof, send_or_gone

__all__ = [
    "MAX_REQUEST_BYTES",
    "MAX_SOCKET_PATH_BYTES",
    "AdminSocketBusy",
    "AdminSocketError",
    "bind_admin_socket",
    "check_socket_path",
    "device_entry",
    "serve_admin",
    "ticket_reply",
]

logger = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 4096
_IDLE_SECONDS = 30.0


class AdminSocketError(MirrorHostError):
    """The admin socket cannot be created; the message says why and what to do."""


class AdminSocketBusy(AdminSocketError):
    """Another host is already serving this state directory."""


#: Unix socket paths must fit ``sun_path`` (108 bytes on Linux, 104 on macOS).
MAX_SOCKET_PATH_BYTES = 103


def check_socket_path(path: Path) -> None:
    """Refuse a socket path longer than Unix sockets allow (checked before anything is
    created in the state directory).

    Raises:
        AdminSocketError: it is too long.
    """
    size = len(os.fsencode(path))
    if size > MAX_SOCKET_PATH_BYTES:
        raise AdminSocketError(
            f"the state directory's path is too long for its admin socket ({path}: "
            f"{size} bytes, Unix sockets allow {MAX_SOCKET_PATH_BYTES}); "
            "choose a shorter --state-dir"
        )


def _socket_problem(path: Path, exc: OSError) -> AdminSocketError:
    hints = {
        errno.EROFS: "the state directory is on a read-only file system",
        errno.EACCES: "permission denied",
        errno.EPERM: "permission denied",
        errno.EISDIR: "a directory of that name is in the way",
        errno.ENOSPC: "the disk is full",
    }
    reason = hints.get(exc.errno or 0) or exc.strerror or str(exc)
    return AdminSocketError(
        f"cannot create the admin socket {path}: {reason}; choose another --state-dir"
    )


def _clear_stale_socket(path: Path) -> None:
    """Remove a socket nobody answers on; refuse one somebody does.

    Only the holder of the state directory's lock gets here
    (:mod:`mirror_host.host.state_lock`), so a socket that does not answer is a
    crashed host's, never that of a host still starting (which holds the lock
    and would have refused us first). One that answers is left alone whatever
    the lock says.
    """
    if not path.exists():
        return
    probe = stdlib_socket.socket(stdlib_socket.AF_UNIX, stdlib_socket.SOCK_STREAM)
    try:
        probe.connect(str(path))
    except OSError:
        try:
            path.unlink()  # nobody listens: a crashed host left it behind
        except OSError as exc:
            raise _socket_problem(path, exc) from exc
    else:
        raise AdminSocketBusy(f"another mirror-host is running with this state directory ({path})")
    finally:
        probe.close()


async def bind_admin_socket(path: Path) -> trio.SocketListener:
    """Bind ``path`` (0600), replacing a stale socket but never a live one.

    The caller holds the state directory's lock: that, not this socket, decides
    which host owns the directory.

    Raises:
        AdminSocketBusy: a running host answers on ``path``.
        AdminSocketError: the socket cannot be created there (too long a path, a
            read-only file system …).
    """
    check_socket_path(path)
    _clear_stale_socket(path)
    sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
    try:
        old_umask = os.umask(0o177)
        try:
            await sock.bind(str(path))
        finally:
            os.umask(old_umask)
        os.chmod(path, 0o600)
        sock.listen(16)
    except OSError as exc:
        sock.close()
        raise _socket_problem(path, exc) from exc
    except BaseException:
        sock.close()
        raise
    return trio.SocketListener(sock)


def ticket_reply(ticket: PairingTicket) -> dict[str, Any]:
    """A pairing window as ``pair`` shows it: code, expiry, port, QR payload or why not."""
    reply: dict[str, Any] = {
        "code": ticket.code,
        "expiresAt": ticket.expires_at,
        "port": ticket.port,
        "window": ticket.number,
        "payload": None if ticket.payload is None else encode_struct(ticket.payload),
        "attach": ticket.local_endpoint,
        "loopback": ticket.loopback,
    }
    if ticket.payload_error:
        reply["payloadError"] = ticket.payload_error
    return reply


async def serve_admin(host: Host, listener: trio.SocketListener) -> None:
    """Answer admin requests until cancelled."""

    async def handler(stream: trio.SocketStream) -> None:
        # The stream is closed after us. Whatever goes wrong with one client
        # closes its connection, never the host (the accept loop would pass an
        # exception up to the host's nursery).
        try:
            await _serve_client(host, stream)
        except Exception as exc:
            _log_fault(None, exc)

    await accepting.serve([listener], handler, what="admin requests")


async def _serve_client(host: Host, stream: trio.abc.Stream) -> None:
    buffer = b""
    while True:
        chunk = b""
        with trio.move_on_after(_IDLE_SECONDS):
            chunk = await receive_or_eof(stream, MAX_REQUEST_BYTES)
        if not chunk:
            return
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            reply = await _answer(host, line)
            sent = False
            # A client that stops reading is dropped, like one that stops writing.
            with trio.move_on_after(_IDLE_SECONDS):
                sent = await send_or_gone(stream, _encode(reply))
            if not sent:
                await _undelivered(host, reply)
                return
        if len(buffer) > MAX_REQUEST_BYTES:
            return


def _encode(reply: dict[str, Any]) -> bytes:
    try:
        return json.dumps(reply).encode() + b"\n"
    except (TypeError, ValueError) as exc:  # a reply the host built wrong
        _log_fault(reply.get("op"), exc)
        failed = _refused("internal", f"the host could not answer: {type(exc).__name__}")
        return json.dumps(failed).encode() + b"\n"


def _log_fault(op: object, exc: BaseException) -> None:
    """Log a fault by the op, the exception's type and its place alone: its message
    could quote a code or a key."""
    frames = traceback.extract_tb(exc.__traceback__)
    place = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"
    named = op if isinstance(op, str) and op in _OPS else "(unknown op)"
    logger.error("admin request %s failed: %s at %s", named, type(exc).__name__, place)


async def _undelivered(host: Host, reply: dict[str, Any]) -> None:
    """A reply the client never got: a pairing code nobody saw must not stay valid."""
    window = reply.get("window") if reply.get("ok") and "code" in reply else None
    if isinstance(window, int) and await host.book.close_window(window):
        logger.info("closed pairing window %d: its admin client left before the reply", window)


def _refused(kind: str, error: str) -> dict[str, Any]:
    return {"ok": False, "kind": kind, "error": error}


def device_entry(device: Device, *, connected: bool) -> dict[str, Any]:
    """One device as ``devices`` reports it (never with its key)."""
    return {
        "id": device.identity,
        "name": device.name,
        "pairedAt": device.paired_at,
        "lastSeen": device.last_seen,
        "connected": connected,
    }


#: The ops this socket knows (an unknown one is named back only if it is short text).
_OPS = ("pair", "pairing", "closePairing", "devices", "revoke", "status")


async def _answer(host: Host, line: bytes) -> dict[str, Any]:
    """The reply to one request line; never raises (but for cancellation)."""
    try:
        request = json.loads(line)
        if not isinstance(request, dict):
            raise ValueError("a request is a JSON object")
    except RecursionError:  # json's decoder recurses once per nesting level
        return _refused("invalid-request", "invalid request: nested too deeply")
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError included
        return _refused("invalid-request", f"invalid request: {exc}")
    try:
        return await _dispatch(host, request)
    except MirrorHostError as exc:  # the host's own, worded for people
        return _refused("failed", str(exc))
    except Exception as exc:  # a fault here must not end the host with it
        _log_fault(request.get("op"), exc)
        return _refused("internal", f"the host could not answer: {type(exc).__name__}")


async def _dispatch(host: Host, request: dict[str, Any]) -> dict[str, Any]:
    op = request.get("op")
    if op == "pair":
        return {"ok": True, **ticket_reply(await host.open_pairing_window())}
    if op == "devices":
        connected = {c.session.device_id for c in host.connections}
        return {
            "ok": True,
            "devices": [
                device_entry(d, connected=d.id in connected) for d in host.book.registry.devices
            ],
        }
    if op == "revoke":
        try:
            target = None if request.get("all") is True else uuid.UUID(str(request.get("deviceID")))
        except ValueError:
            return _refused("invalid-request", "deviceID is not a UUID")
        removed = await host.book.revoke(target)  # a StoreError is answered by _answer
        if target is not None and not removed:
            return _refused("not-found", f"no paired device {str(target).upper()}")
        return {"ok": True, "revoked": removed}
    if op == "status":
        return {"ok": True, **(await host.status())}
    if op in ("pairing", "closePairing"):
        number = request.get("window")
        if number is not None and (isinstance(number, bool) or not isinstance(number, int)):
            return _refused("invalid-request", "window is not a number")
        if op == "closePairing":
            return {"ok": True, "closed": await host.book.close_window(number)}
        if number is None:
            return _refused("invalid-request", "pairing needs a window number")
        return {"ok": True, **host.book.window_state(number)}
    ops = ", ".join(_OPS)
    if op is None:
        return _refused("invalid-request", f"a request needs an op ({ops})")
    named = repr(op) if isinstance(op, str) and len(op) <= 40 else f"({type(op).__name__})"
    return _refused("invalid-request", f"unknown op {named} ({ops})")
