"""``pair``, ``devices``, ``revoke`` and ``status``: talking to a running host. Front door.

Each talks to ``<state-dir>/admin.sock``. ``devices`` and ``revoke`` also work
when no host runs, by reading (or atomically rewriting) the device store, and
say so.
"""

from __future__ import annotations

import argparse
import json
import os
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
from mirror_host.host.admin_client import NoHostRunning, admin_request
from mirror_host.host.store import DeviceStore
from mirror_host.qr_display import render_terminal, write_png

__all__ = ["run_devices", "run_pair", "run_revoke", "run_status", "show_ticket"]


def _when(timestamp: float | None) -> str:
    if timestamp is None:
        return "never"
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M UTC")


def show_ticket(reply: dict[str, Any], out: TextIO, *, png: Path | None = None) -> None:
    """Print the QR code (or why there is none) and the code; ``png`` is where it was saved."""
    payload = reply.get("payload")
    if payload is not None:
        out.write(render_terminal(_qr_text(payload)) + "\n\n")
        if png is not None:
            out.write(f"QR code written to {png}\n")
        out.write(
            "Scan this with Prowl (Add a Device), or enter the code by hand "
            f"(host {payload.get('address')}, port {payload.get('port')}):\n"
        )
    else:
        out.write(f"No QR code: {reply.get('payloadError')}\n")
        port = reply.get("port")
        where = f", with this machine's address and port {port}" if port else ""
        out.write(f"Enter this code in Prowl by hand{where}:\n")
    out.write(f"\n    {display_code(reply['code'])}\n\n")


def _qr_text(payload: dict[str, Any]) -> bytes:
    """The bytes a QR code carries: the payload as the protocol's own encoder writes it."""
    return dump_json(payload)


def run_pair(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    """Open a pairing window on the running host and show it."""
    state_dir = Path(config.state.dir)
    if args.qr_png is not None:
        # Checked before the window opens: a typo must not burn a pairing code.
        problem = _unwritable(args.qr_png)
        if problem is not None:
            print(f"mirror-host pair: cannot write {args.qr_png}: {problem}", file=sys.stderr)
            return 1
    try:
        reply = admin_request(state_dir, {"op": "pair"})
    except NoHostRunning as exc:
        print(f"mirror-host pair: {exc}", file=sys.stderr)
        return 1
    if not reply.get("ok"):
        print(f"mirror-host pair: {reply.get('error')}", file=sys.stderr)
        return 1
    png = args.qr_png if reply.get("payload") is not None else None
    if png is not None:
        try:
            write_png(_qr_text(reply["payload"]), png)
        except OSError as exc:
            print(f"mirror-host pair: cannot write {png}: {exc.strerror}", file=sys.stderr)
            return 1
    if args.json:
        document = {k: reply.get(k) for k in ("code", "expiresAt", "payload")}
        if reply.get("payloadError"):
            document["payloadError"] = reply["payloadError"]
        out.write(json.dumps(document) + "\n")
        return 0
    show_ticket(reply, out, png=png)
    if args.no_wait:
        return 0
    return _count_down(state_dir, int(reply["expiresAt"]), out)


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


def _count_down(state_dir: Path, expires_at: int, out: TextIO) -> int:
    before = admin_request(state_dir, {"op": "status"}).get("devices", 0)
    is_tty = out.isatty()
    try:
        while True:
            left = expires_at - int(time.time())
            status = admin_request(state_dir, {"op": "status"})
            if status.get("devices", 0) > before:
                paired = status.get("pairing", {}).get("lastPaired") or "a device"
                out.write(("\r" if is_tty else "") + f"Paired {paired}.            \n")
                return 0
            if left <= 0 or not status.get("pairing", {}).get("open"):
                out.write(
                    ("\r" if is_tty else "") + "The code expired. Run `mirror-host pair` again.\n"
                )
                return 1
            if is_tty:
                out.write(f"\rExpires in {left:2d} s ")
                out.flush()
            time.sleep(1)
    except NoHostRunning as exc:
        out.write(f"\nThe host stopped: {exc}\n")
        return 1
    except KeyboardInterrupt:
        out.write("\n")
        return 130


def _offline_note(exc: NoHostRunning) -> str:
    return f"note: {exc}; using the device store directly"


def run_devices(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    """List paired devices."""
    state_dir = Path(config.state.dir)
    try:
        reply = admin_request(state_dir, {"op": "devices"})
        devices = reply["devices"]
    except NoHostRunning as exc:
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
        out.write("No paired devices. Pair one with `mirror-host pair`.\n")
        return 0
    for device in devices:
        state = "connected" if device["connected"] else f"last seen {_when(device['lastSeen'])}"
        out.write(
            f"{device['id']}  {device['name']}  paired {_when(device['pairedAt'])}, {state}\n"
        )
    return 0


def run_revoke(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    """Remove one device (or all) and cut its connections."""
    state_dir = Path(config.state.dir)
    if args.all == bool(args.device_id):
        print("mirror-host revoke: give a DEVICE_ID or --all (not both)", file=sys.stderr)
        return 2
    target: uuid.UUID | None = None
    if args.device_id:
        try:
            target = uuid.UUID(args.device_id)
        except ValueError:
            print(f"mirror-host revoke: {args.device_id!r} is not a device id", file=sys.stderr)
            return 2
    request: dict[str, Any] = (
        {"op": "revoke", "all": True}
        if target is None
        else {
            "op": "revoke",
            "deviceID": str(target).upper(),
        }
    )
    try:
        reply = admin_request(state_dir, request)
    except NoHostRunning as exc:
        print(_offline_note(exc), file=sys.stderr)
        return _revoke_offline(state_dir, target, out)
    if not reply.get("ok"):
        print(f"mirror-host revoke: {reply.get('error')}", file=sys.stderr)
        return 1
    for device_id in reply["revoked"]:
        out.write(f"revoked {device_id}\n")
    if not reply["revoked"]:
        out.write("no paired devices\n")
    return 0


def _revoke_offline(state_dir: Path, target: uuid.UUID | None, out: TextIO) -> int:
    store = DeviceStore(state_dir)
    try:
        registry = store.load()
        if registry is None:
            out.write("no paired devices\n")
            return 0 if target is None else 1
        after, removed = registry.revoked(target)
        if target is not None and not removed:
            print(f"mirror-host revoke: no paired device {str(target).upper()}", file=sys.stderr)
            return 1
        store.save_sync(after)
    except StoreError as exc:
        print(f"mirror-host revoke: {exc}", file=sys.stderr)
        return 1
    for device_id in removed:
        out.write(f"revoked {device_id}\n")
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
    pairing = reply["pairing"]
    window = f"open, {pairing['secondsLeft']} s left" if pairing["open"] else "closed"
    out.write(
        f"listening on {reply['listen']}\n"
        f"host id      {reply['hostID']}\n"
        f"devices      {reply['devices']} paired, {reply['connections']} connected\n"
        f"pairing      {window}\n"
        f"panes        {reply['panes']['listed']} listed, "
        f"{reply['panes']['subscribed']} subscribed\n"
    )
    return 0
