"""``mirror-host check-config``: the settings ``serve`` would start with."""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import TextIO

from mirror_host.cli.command import Commands, add_command
from mirror_host.cli.settings import add_settings_group, load_settings
from mirror_host.config import render_toml

__all__ = ["add_parser"]


def add_parser(commands: Commands) -> None:
    check = add_command(
        commands,
        "check-config",
        run,
        help="print the effective settings",
        description=(
            "Merge the defaults, the config file and MIRROR_HOST_* variables; print the "
            "settings serve would start with (its flags then override them), as a TOML "
            "file that --config reads back. An unknown or invalid setting is an error "
            "naming it and where it came from (exit status 2)."
        ),
        examples=(
            "mirror-host check-config                          the effective settings, as TOML",
            "mirror-host check-config > ~/.config/mirror-host/config.toml   start a config file",
            "    (on macOS: > ~/Library/Application\\ Support/mirror-host/config.toml)",
            "MIRROR_HOST_SERVER_LISTEN=127.0.0.1:7880 mirror-host check-config --json",
        ),
        docs=(("operations.md", "every setting, and where each is read from"),),
        json_help="print JSON instead of TOML",
    )
    add_settings_group(check)


def run(args: argparse.Namespace, stdin: TextIO, out: TextIO) -> int:
    config = load_settings(args)
    if args.json:
        out.write(json.dumps(dataclasses.asdict(config), indent=2, default=str) + "\n")
    else:
        out.write(render_toml(config))
    return 0
