"""``mirror-host devices``: the paired devices, from the running host or the store."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from mirror_host.cli.command import CommandFailed, Commands, add_command
from mirror_host.cli.settings import add_settings_group, admin_settings
from mirror_host.errors import NoHostRunning, StoreError

__all__ = ["add_parser", "offline_note"]


def add_parser(commands: Commands) -> None:
    devices = add_command(
        commands,
        "devices",
        run,
        help="list paired devices",
        description=(
            "List the paired devices: id, name, when paired, last seen or connected. "
            "Without a running host it reads the device store and says so."
        ),
        examples=(
            "mirror-host devices",
            "mirror-host devices --json",
            "mirror-host devices --state-dir /srv/mirror-host/state   the devices of another host",
        ),
        docs=(("operations.md", "the device store, and every setting"),),
        json_help='print a JSON array of {"id", "name", "pairedAt", "lastSeen", "connected"}, '
        "host running or not",
    )
    add_settings_group(devices)


def offline_note(exc: NoHostRunning) -> str:
    """What a command that goes to the device store itself says first: why."""
    return f"note: {exc}; using the device store directly"


def run(args: argparse.Namespace, stdin: TextIO, out: TextIO) -> int:
    """List paired devices."""
    from mirror_host.host.admin_client import admin_request

    state_dir = Path(admin_settings(args).state.dir)
    running = True
    try:
        devices = admin_request(state_dir, {"op": "devices"})["devices"]
    except NoHostRunning as exc:
        running = False
        print(offline_note(exc), file=sys.stderr)
        devices = _stored_devices(state_dir)
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


def _stored_devices(state_dir: Path) -> list[dict[str, Any]]:
    """The devices in the store, as the host would list them (none connected)."""
    from mirror_host.host.admin import device_entry
    from mirror_host.host.store import DeviceStore

    try:
        registry = DeviceStore(state_dir).load()
    except StoreError as error:
        raise CommandFailed(str(error)) from error
    return [device_entry(d, connected=False) for d in (registry.devices if registry else ())]


def _when(timestamp: float | None) -> str:
    if timestamp is None:
        return "never"
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M UTC")
