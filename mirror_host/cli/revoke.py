"""``mirror-host revoke``: unpair a device (or all), with or without a running host."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from mirror_host.cli.command import CommandFailed, Commands, add_command
from mirror_host.cli.settings import add_settings_group, admin_settings

__all__ = ["add_parser"]


def add_parser(commands: Commands) -> None:
    revoke = add_command(
        commands,
        "revoke",
        run,
        help="unpair a device (or all)",
        description=(
            "Remove a device: it is deleted from the store, its live connections are closed and "
            "its key no longer opens TLS. Pair it again to reconnect. Works without a running "
            "host too (it rewrites the device store)."
        ),
        examples=(
            "mirror-host revoke 3F2A9C1B-6E0D-4C1A-9B7E-2D5F8A6C4E10   one device",
            "mirror-host revoke 3F2A                                     "
            "the same, by a unique prefix",
            "mirror-host revoke --all                                    every device",
        ),
        docs=(("operations.md", "the device store, and every setting"),),
    )
    revoke.add_argument(
        "device_id",
        nargs="?",
        metavar="DEVICE_ID",
        help="the device's id as `mirror-host devices` lists it, or a unique prefix of it "
        "(at least 4 characters)",
    )
    revoke.add_argument("--all", action="store_true", help="remove every paired device")
    add_settings_group(revoke)


def run(args: argparse.Namespace, stdin: TextIO, out: TextIO) -> int:
    """Remove one device (or all) and cut its connections."""
    from mirror_host.cli.devices import offline_note
    from mirror_host.host.revocation import RevocationFailed, device_id_problem, revoke

    config = admin_settings(args)
    if args.all == bool(args.device_id):
        print("mirror-host revoke: give a DEVICE_ID or --all (not both)", file=sys.stderr)
        return 2
    problem = device_id_problem(args.device_id) if args.device_id else None
    if problem is not None:
        print(f"mirror-host revoke: {problem}", file=sys.stderr)
        return 2
    try:
        removed = revoke(
            Path(config.state.dir),
            args.device_id or None,
            offline=lambda absent: print(offline_note(absent), file=sys.stderr),
        )
    except RevocationFailed as exc:
        raise CommandFailed(str(exc)) from exc
    for device_id in removed:
        out.write(f"revoked {device_id}\n")
    if not removed:
        out.write("no paired devices\n")
    return 0
