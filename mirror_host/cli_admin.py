"""``pair``, ``devices``, ``revoke`` and ``status``: talking to a running host. Front door.

Each talks to ``<state-dir>/admin.sock``. ``devices`` and ``revoke`` also work
when no host runs, by reading (or atomically rewriting) the device store, and
say so. An offline ``revoke`` holds the state directory's lock while it reads
and rewrites the store (:mod:`mirror_host.host.state_lock`); a host that holds
it is starting, and the revocation waits for it to answer and goes through it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from mirror_host.auth.pairing import display_code
from mirror_host.config import Config
from mirror_host.control.swiftjson import dump_json
from mirror_host.errors import StoreError
from mirror_host.host.admin import device_entry
from mirror_host.host.admin_client import ADMIN_SOCKET, NoHostRunning, admin_request
from mirror_host.host.state_lock import StateDirBusy, StateLock
from mirror_host.host.store import DeviceStore
from mirror_host.qr_display import terminal_qr, write_png

__all__ = [
    "format_status",
    "match_device_id",
    "run_devices",
    "run_pair",
    "run_revoke",
    "run_status",
    "show_ticket",
]


def _when(timestamp: float | None) -> str:
    if timestamp is None:
        return "never"
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M UTC")


def show_ticket(reply: dict[str, Any], out: TextIO, *, png: Path | None = None) -> None:
    """Print the QR code (or why there is none) and the code; ``png`` is where it was saved.

    The QR code is drawn as ``out`` can show it: half blocks, ASCII where its
    encoding has no half blocks, or one line saying why not where it does not
    fit the terminal (:func:`~mirror_host.qr_display.terminal_qr`); the code
    itself is ASCII, so it is always shown.
    """
    payload = reply.get("payload")
    if payload is not None:
        drawn = terminal_qr(
            _qr_text(payload), encoding=getattr(out, "encoding", None), columns=_columns(out)
        )
        if drawn.art is not None:
            out.write(drawn.art + "\n\n")
        else:
            out.write(f"No QR code here: {drawn.problem}.\n")
        if png is not None:
            out.write(f"QR code written to {png}\n")
        where = f"(host {payload.get('address')}, port {payload.get('port')})"
        if drawn.art is not None:
            out.write(f"Scan this with Prowl (Add a Device), or enter the code by hand {where}:\n")
        else:
            out.write(f"Enter this code in Prowl (Add a Device) by hand {where}:\n")
    else:
        out.write(f"No QR code: {reply.get('payloadError')}\n")
        port = reply.get("port")
        attach = reply.get("attach")
        here = f"`mirror-host attach {attach} --code {display_code(reply['code'])}`"
        if reply.get("loopback") and attach:
            # Prowl on a phone cannot reach it; attach, on this machine, can.
            out.write(f"Only a client on this machine reaches it: {here}, with this code:\n")
        else:
            where = f", with this machine's address and port {port}" if port else ""
            also = f" (on this machine: {here})" if attach else ""
            out.write(f"Enter this code in Prowl by hand{where}{also}:\n")
    out.write(f"\n    {display_code(reply['code'])}\n\n")


def _columns(out: TextIO) -> int | None:
    """How wide the terminal ``out`` writes to is (``None``: it is no terminal)."""
    try:
        return os.get_terminal_size(out.fileno()).columns if out.isatty() else None
    except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation is an OSError
        return None


def _qr_text(payload: dict[str, Any]) -> bytes:
    """The bytes a QR code carries: the payload as the protocol's own encoder writes it."""
    return dump_json(payload)


def run_pair(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    """Open a pairing window on the running host and show it (or close it: ``--close``)."""
    state_dir = Path(config.state.dir)
    if args.close:
        if args.json or args.qr_png is not None or args.no_wait:
            args.parser.error("--close takes none of --json, --qr-png, --no-wait")
        return _close_pairing(state_dir, out)
    if args.qr_png is not None:
        # Checked before the window opens: a typo must not burn a pairing code.
        problem = _unwritable(args.qr_png)
        if problem is not None:
            print(f"mirror-host pair: cannot write {args.qr_png}: {problem}", file=sys.stderr)
            return 1
    if args.wait_for_host and sys.stderr.isatty() and not (state_dir / ADMIN_SOCKET).exists():
        print(
            f"mirror-host pair: waiting up to {args.wait_for_host:g} s for a host to start "
            f"in {state_dir} …",
            file=sys.stderr,
            flush=True,
        )
    try:
        reply = admin_request(state_dir, {"op": "pair"}, wait_for_host=args.wait_for_host)
    except NoHostRunning as exc:
        print(f"mirror-host pair: {exc}", file=sys.stderr)
        return 1
    if not reply.get("ok"):
        print(f"mirror-host pair: {reply.get('error')}", file=sys.stderr)
        return 1
    window = int(reply["window"])
    try:
        return _show_window(args, reply, state_dir, window, out)
    except KeyboardInterrupt:
        # Nobody is left to watch the code: it must not stay usable.
        out.write(f"\nInterrupted: {_end_window(state_dir, window)}.\n")
        return 130
    except (OSError, ValueError) as exc:  # a closed pipe, a terminal gone, an encoding
        # The code may never have reached anyone: it must not stay usable either.
        print(
            f"mirror-host pair: cannot show the code ({type(exc).__name__}: {exc}): "
            f"{_end_window(state_dir, window)}",
            file=sys.stderr,
        )
        return 1


def _show_window(
    args: argparse.Namespace, reply: dict[str, Any], state_dir: Path, window: int, out: TextIO
) -> int:
    """Write the PNG, show the code and follow the window; an error while writing
    any of it is the caller's, who closes the window."""
    png = args.qr_png if reply.get("payload") is not None else None
    if args.qr_png is not None and png is None:
        # Why there is none is said once, with the code (or as "payloadError").
        print(f"mirror-host pair: no QR code, so {args.qr_png} was not written", file=sys.stderr)
    if png is not None:
        try:
            write_png(_qr_text(reply["payload"]), png)
        except OSError as exc:
            print(
                f"mirror-host pair: cannot write {png}: {exc.strerror}: "
                f"{_end_window(state_dir, window)}",
                file=sys.stderr,
            )
            return 1
    if args.json:
        document = {k: reply.get(k) for k in ("code", "expiresAt", "payload")}
        if reply.get("payloadError"):
            document["payloadError"] = reply["payloadError"]
        out.write(json.dumps(document) + "\n")
        out.flush()  # a failed write surfaces here, while the window can still be closed
        return 0
    show_ticket(reply, out, png=png)
    out.flush()  # here too: a code nobody was shown is not waited on for 60 s
    if args.no_wait:
        return 0
    return _count_down(state_dir, window, int(reply["expiresAt"]), out)


def _end_window(state_dir: Path, window: int) -> str:
    """Close pairing window ``window`` if it is still the open one; what became of it."""
    try:
        closed = admin_request(state_dir, {"op": "closePairing", "window": window})
    except NoHostRunning:
        closed = {}
    return "closed the pairing window" if closed.get("closed") else "the window had ended"


def _close_pairing(state_dir: Path, out: TextIO) -> int:
    try:
        reply = admin_request(state_dir, {"op": "closePairing"})
    except NoHostRunning as exc:
        print(f"mirror-host pair: {exc}", file=sys.stderr)
        return 1
    if reply.get("closed"):
        out.write("Closed the pairing window: its code no longer works.\n")
    else:
        out.write("No pairing window was open.\n")
    return 0


def _unwritable(path: Path) -> str | None:
    """Why ``path`` cannot be written as a new file, or ``None``."""
    if path.is_dir():
        return "it is a directory"
    if path.exists():  # written in place, so only the file itself matters
        return None if os.access(path, os.W_OK) else "permission denied"
    folder = path.parent
    if not folder.is_dir():
        return f"no directory {folder}"
    return None if os.access(folder, os.W_OK) else "permission denied"


#: What ``pair`` says when its window ended without pairing, by how it ended.
_WINDOW_ENDINGS = {
    "expired": "The code expired. Run `mirror-host pair` again.",
    "unknown": "The code expired. Run `mirror-host pair` again.",
    "replaced": (
        "A newer pairing window replaced this code (another `mirror-host pair` ran): "
        "it no longer works; use the newer code."
    ),
    "closed": "The pairing window was closed (`pair --close` or `revoke --all`): the code "
    "no longer works.",
    "failed": "A device used the code but the host could not pair it: its log says why.",
}


def _count_down(state_dir: Path, window: int, expires_at: int, out: TextIO) -> int:
    """Follow window ``window`` until it pairs a device or ends."""
    is_tty = out.isatty()
    start = "\r" if is_tty else ""
    try:
        while True:
            state = admin_request(state_dir, {"op": "pairing", "window": window})
            outcome = state.get("state")
            if outcome == "paired":
                out.write(f"{start}Paired {state.get('device') or 'a device'}.            \n")
                return 0
            if outcome in _WINDOW_ENDINGS:
                out.write(f"{start}{_WINDOW_ENDINGS[outcome]}\n")
                return 1
            if is_tty:
                left = state.get("secondsLeft", max(0, expires_at - int(time.time())))
                out.write(f"\rExpires in {left:2d} s ")
                out.flush()
            time.sleep(0.5)
    except NoHostRunning as exc:
        out.write(f"\nThe host stopped: {exc}\n")
        return 1


def _offline_note(exc: NoHostRunning) -> str:
    return f"note: {exc}; using the device store directly"


def run_devices(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    """List paired devices."""
    state_dir = Path(config.state.dir)
    running = True
    try:
        reply = admin_request(state_dir, {"op": "devices"})
        devices = reply["devices"]
    except NoHostRunning as exc:
        running = False
        print(_offline_note(exc), file=sys.stderr)
        try:
            registry = DeviceStore(state_dir).load()
        except StoreError as error:
            print(f"mirror-host devices: {error}", file=sys.stderr)
            return 1
        devices = [device_entry(d, connected=False) for d in (registry.devices if registry else ())]
    if args.json:
        out.write(json.dumps(devices) + "\n")
        return 0
    if not devices:
        # `pair` needs a running host: without one, the way to pair is to start it.
        how = (
            "`mirror-host pair`"
            if running
            else "`mirror-host serve --pair` (or `pair` once serve runs)"
        )
        out.write(f"No paired devices. Pair one with {how}.\n")
        return 0
    for device in devices:
        state = "connected" if device["connected"] else f"last seen {_when(device['lastSeen'])}"
        out.write(
            f"{device['id']}  {device['name']}  paired {_when(device['pairedAt'])}, {state}\n"
        )
    return 0


#: A device id as typed: the whole UUID, or at least its first 4 hex digits.
_ID_PREFIX = re.compile(r"[0-9A-Fa-f][0-9A-Fa-f-]{3,35}")


def match_device_id(text: str, known: list[str]) -> tuple[str | None, str]:
    """The one id in ``known`` that ``text`` names (whole, or a prefix of at least 4
    characters, any case), or ``None`` and why not."""
    wanted = text.strip().upper()
    matches = [device_id for device_id in known if device_id.upper().startswith(wanted)]
    if len(matches) == 1:
        return matches[0], ""
    if not matches:
        return None, f"no paired device {wanted} (`mirror-host devices` lists them)"
    return None, f"{wanted} matches {len(matches)} devices: give more of the id"


def run_revoke(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    """Remove one device (or all) and cut its connections."""
    state_dir = Path(config.state.dir)
    if args.all == bool(args.device_id):
        print("mirror-host revoke: give a DEVICE_ID or --all (not both)", file=sys.stderr)
        return 2
    if args.device_id and not _ID_PREFIX.fullmatch(args.device_id.strip()):
        print(
            f"mirror-host revoke: {args.device_id!r} is not a device id "
            "(or the first 4 or more characters of one)",
            file=sys.stderr,
        )
        return 2
    deadline = time.monotonic() + HOST_START_SECONDS
    while True:
        try:
            reply = admin_request(state_dir, {"op": "devices"})
            break
        except NoHostRunning as exc:
            offline = exc
        try:
            lock = _lock_offline(state_dir)
        except StateDirBusy:
            # A host holds the directory but does not answer yet: it is starting,
            # and has loaded (or is loading) the store. A rewrite now would be
            # undone by its next save: go through it once it answers.
            if time.monotonic() >= deadline:
                print(
                    "mirror-host revoke: another mirror-host holds this state directory but "
                    f"did not answer on its admin socket within {HOST_START_SECONDS:g} s; "
                    "nothing was revoked: try again",
                    file=sys.stderr,
                )
                return 1
            time.sleep(0.1)
            continue
        except StoreError as exc:
            print(f"mirror-host revoke: {exc}; nothing was revoked", file=sys.stderr)
            return 1
        with lock:
            print(_offline_note(offline), file=sys.stderr)
            return _revoke_offline(state_dir, args.device_id, out)
    request: dict[str, Any] = {"op": "revoke", "all": True}
    if args.device_id:
        target, problem = match_device_id(args.device_id, [d["id"] for d in reply["devices"]])
        if target is None:
            print(f"mirror-host revoke: {problem}", file=sys.stderr)
            return 1
        request = {"op": "revoke", "deviceID": target}
    try:
        reply = admin_request(state_dir, request)
    except NoHostRunning as exc:
        print(f"mirror-host revoke: {exc}", file=sys.stderr)
        return 1
    if not reply.get("ok"):
        print(f"mirror-host revoke: {reply.get('error')}", file=sys.stderr)
        return 1
    for device_id in reply["revoked"]:
        out.write(f"revoked {device_id}\n")
    if not reply["revoked"]:
        out.write("no paired devices\n")
    return 0


#: How long an offline ``revoke`` waits for a host that holds the state
#: directory (it is starting) to answer on its admin socket.
HOST_START_SECONDS = 10.0


def _lock_offline(state_dir: Path) -> contextlib.AbstractContextManager[object]:
    """The state directory's lock, for rewriting the store with no host running
    (nothing to hold when there is no directory, hence no store, at all).

    Raises:
        StateDirBusy: a host holds it.
        StoreError: the lock cannot be taken.
    """
    if not state_dir.is_dir():
        return contextlib.nullcontext()
    return StateLock(state_dir)


def _revoke_offline(state_dir: Path, device_id: str | None, out: TextIO) -> int:
    """Rewrite the store without the device(s); the caller holds the state directory."""
    store = DeviceStore(state_dir)
    try:
        registry = store.load()
        if registry is None:
            if device_id is not None:
                print(f"mirror-host revoke: no paired device {device_id}", file=sys.stderr)
                return 1
            out.write("no paired devices\n")
            return 0
        target: uuid.UUID | None = None
        if device_id is not None:
            matched, problem = match_device_id(device_id, [d.identity for d in registry.devices])
            if matched is None:
                print(f"mirror-host revoke: {problem}", file=sys.stderr)
                return 1
            target = uuid.UUID(matched)
        after, removed = registry.revoked(target)
        store.save_sync(after)
    except StoreError as exc:
        print(f"mirror-host revoke: {exc}; nothing was revoked", file=sys.stderr)
        return 1
    for removed_id in removed:
        out.write(f"revoked {removed_id}\n")
    if not removed:
        out.write("no paired devices\n")
    return 0


def run_status(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    """Show what the running host is doing."""
    try:
        reply = admin_request(Path(config.state.dir), {"op": "status"})
    except NoHostRunning as exc:
        print(f"mirror-host status: {exc}", file=sys.stderr)
        return 1
    reply.pop("ok", None)
    if args.json:
        out.write(json.dumps(reply) + "\n")
        return 0
    out.write(format_status(reply))
    return 0


def format_status(reply: dict[str, Any]) -> str:
    """``mirror-host status`` as text, from the admin socket's ``status`` reply."""
    pairing = reply["pairing"]
    window = f"open, {pairing['secondsLeft']} s left" if pairing["open"] else "closed"
    panes = reply["panes"]
    lines = [
        f"mirror-host  {reply.get('version')}, up {_duration(reply.get('uptimeSeconds', 0))} "
        f"(pid {reply.get('pid')})",
        f"state dir    {reply.get('stateDir')}",
        f"listening on {reply['listen']}",
        f"host id      {reply['hostID']}",
        f"devices      {reply['devices']} paired, {reply['connections']} connected",
        f"pairing      {window}",
    ]
    health = panes.get("health")
    if health:
        lines.append(f"source       {health['kind']}, {health['state']}: {health['detail']}")
    counters = panes.get("source")  # Herdr's and agliteterm's own figures (requests …)
    if counters:
        lines.append(f"counters     {_counters(counters)}")
    lines.append(f"panes        {panes['listed']} listed, {panes['subscribed']} subscribed")
    for pane in panes.get("items", ()):
        mirrored = "  [mirrored]" if pane["subscribed"] else ""
        lines.append(f"  {pane['id']}  {pane['title']}  ({pane['directory']}){mirrored}")
    return "\n".join(lines) + "\n"


def _counters(values: dict[str, Any]) -> str:
    """``requests (tree 3, session.read 40), connections 4``: a source's figures on one line."""
    parts = []
    for name, value in values.items():
        if isinstance(value, dict):
            inner = ", ".join(f"{key} {count}" for key, count in value.items())
            parts.append(f"{name} ({inner or 'none'})")
        elif value is not None:
            parts.append(f"{name} {value}")
    return ", ".join(parts)


def _duration(seconds: int) -> str:
    """``42 s``, ``5 min``, ``3 h 12 min``, ``2 d 4 h``."""
    if seconds < 60:
        return f"{seconds} s"
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if hours == 0:
        return f"{minutes} min"
    if days == 0:
        return f"{hours} h {minutes % 60} min"
    return f"{days} d {hours % 24} h"
