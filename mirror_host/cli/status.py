"""``mirror-host status``: what the running host is doing."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, TextIO

from mirror_host.cli.command import Commands, add_command, ask_host
from mirror_host.cli.settings import add_settings_group, admin_settings

__all__ = ["add_parser", "format_status"]


def add_parser(commands: Commands) -> None:
    status = add_command(
        commands,
        "status",
        run,
        help="show the running host",
        description=(
            "Show what the running host is doing: version, uptime, state directory, listen "
            "address, devices, the pairing window, the pane source's state and its panes "
            "(with their ids, for `attach --pane`)."
        ),
        examples=("mirror-host status", "mirror-host status --json"),
        docs=(("operations.md", "what status shows, and every setting"),),
        json_help="print JSON",
    )
    add_settings_group(status)


def run(args: argparse.Namespace, stdin: TextIO, out: TextIO) -> int:
    """Show what the running host is doing."""
    reply = ask_host(Path(admin_settings(args).state.dir), {"op": "status"})
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
