"""The front door: ``mirror-host`` sub-commands. Parses, loads config, hands over.

No logic a test would want to reach another way lives here; each sub-command
calls into the room that owns the work. Exit codes: 0 success, 1 the command
failed (an invalid packet, no running host …), 2 bad usage or configuration.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from mirror_host import __version__
from mirror_host.cli_admin import run_devices, run_pair, run_revoke, run_status
from mirror_host.cli_client import add_client_commands
from mirror_host.cli_service import add_service_commands
from mirror_host.config import (
    LOG_FORMATS,
    LOG_LEVELS,
    SOURCE_KINDS,
    Config,
    parse_endpoint,
    parse_size,
    render_toml,
)
from mirror_host.config_file import load_config
from mirror_host.control.swiftjson import dump_json
from mirror_host.errors import ConfigError
from mirror_host.inspect import INPUT_KINDS, InvalidHex, decode_hex, describe
from mirror_host.logs import configure_logging

__all__ = ["build_parser", "main"]

_DESCRIPTION = """\
mirror-host lets Prowl's iPhone, iPad, Android and Mac clients watch and drive
terminal panes on this machine: panes it spawns itself in local PTYs, every pane
of a tmux server, or the agent panes of a Herdr session.
"""

_EPILOG = """\
examples:
  mirror-host serve --source local --pair    mirror your shell; show a QR code to pair
  mirror-host pair                            pair another phone with a running host
  mirror-host devices                         list paired devices
  mirror-host revoke DEVICE_ID                unpair one device
  mirror-host wire decode < capture.hex       decode packets captured as hex
  mirror-host attach 192.168.1.20:7880        watch and drive a host's pane here
  mirror-host conformance HOST:PORT --code C  check any Prowl mirror host

Documentation: docs/operations.md (running), docs/protocol.md (the wire format).
"""


def _add_wire(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    wire = commands.add_parser(
        "wire",
        help="inspect Prowl mirror packets",
        description="Tools for looking at Prowl mirror protocol bytes.",
    )
    wire_commands = wire.add_subparsers(dest="wire_command", required=True, metavar="COMMAND")
    decode = wire_commands.add_parser(
        "decode",
        help="decode hex packets from stdin into JSON lines",
        description=(
            "Read hex from stdin (whitespace ignored; every --as kind is given in hex) and "
            "print one JSON line per packet: "
            '{"kind":0,"message":{...}} for control messages, and the header fields plus '
            '"bytes" (base64) or "text" for VT and text frames. The first invalid packet '
            'prints {"error":"<reason>"} and the command exits 1.'
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "input kinds (--as):\n"
            "  packets          complete packets, 4-byte length prefix included (default)\n"
            "  payload          one payload without the prefix (same as --payload)\n"
            "  header           a 4-byte length prefix alone: is the length legal?\n"
            "  pane             a JSON panes[] entry\n"
            "  command-request  a JSON commandRequest object\n"
            "  pairing-code     a typed pairing code (its UTF-8 bytes, in hex)\n"
            "  qr               a QR / pasted pairing payload, judged at --now\n"
        ),
    )
    decode.add_argument(
        "--payload",
        action="store_const",
        const="payload",
        dest="input_kind",
        help="the hex is one payload (kind byte and body) without the length prefix",
    )
    decode.add_argument(
        "--as",
        choices=INPUT_KINDS,
        dest="input_kind",
        metavar="KIND",
        help="what the hex holds (see below); default: packets",
    )
    decode.add_argument(
        "--now",
        type=float,
        default=None,
        metavar="UNIX_SECONDS",
        help="the clock used to judge a QR payload's expiry (default: the current time)",
    )
    decode.set_defaults(parser=decode, handler=_run_wire_decode, input_kind=None)


def _common(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("settings (see docs/operations.md)")
    group.add_argument(
        "--config",
        metavar="PATH",
        help="TOML settings file (default: $MIRROR_HOST_CONFIG, else "
        "$XDG_CONFIG_HOME/mirror-host/config.toml if present)",
    )
    group.add_argument(
        "--state-dir",
        metavar="DIR",
        help="device store, admin socket and status file (default: $XDG_STATE_HOME/mirror-host)",
    )
    group.add_argument("--log-level", choices=LOG_LEVELS, help="default: info")
    group.add_argument("--log-format", choices=LOG_FORMATS, help="default: text")


def _endpoint_arg(text: str) -> str:
    try:
        parse_endpoint(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    return text


def _size_arg(text: str) -> str:
    try:
        parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    return text


def _add_serve(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = commands.add_parser(
        "serve",
        help="run the host",
        description=(
            "Run the mirror host: accept Prowl clients over TLS-PSK and mirror the panes of "
            "the chosen source. Stops cleanly on Ctrl-C or SIGTERM (subscribers are told the "
            "host stopped)."
        ),
    )
    serve.add_argument(
        "--source",
        choices=SOURCE_KINDS,
        help="where panes come from: local (PTYs this host spawns, the default), herdr or tmux",
    )
    serve.add_argument(
        "--listen",
        type=_endpoint_arg,
        metavar="HOST:PORT",
        help="address to accept clients on (default 0.0.0.0:7880; port 0 picks a free port)",
    )
    serve.add_argument(
        "--advertise-address",
        metavar="IP",
        help="address put in the pairing QR code (default: the --listen address when it names "
        "one, else the first non-loopback IPv4 of this machine)",
    )
    serve.add_argument(
        "--pair", action="store_true", help="open a 60 s pairing window at start-up and show it"
    )
    local = serve.add_argument_group("--source local")
    local.add_argument(
        "--local-command",
        action="append",
        metavar="CMD",
        help="a command to run in its own pane (repeatable; default: your login shell)",
    )
    local.add_argument(
        "--local-size",
        type=_size_arg,
        metavar="COLSxROWS",
        help="grid of each local pane (default 120x40)",
    )
    herdr = serve.add_argument_group("--source herdr")
    herdr.add_argument(
        "--herdr-socket",
        metavar="PATH",
        help="Herdr's API socket (default: $HERDR_SOCKET_PATH, the --herdr-session socket, "
        "or ~/.config/herdr/herdr.sock)",
    )
    herdr.add_argument(
        "--herdr-session",
        metavar="NAME",
        help="a named Herdr session, like herdr --session NAME (default: $HERDR_SESSION)",
    )
    herdr.add_argument(
        "--herdr-bin",
        metavar="PATH",
        help="the herdr program used for `terminal session observe` (default: herdr on PATH; "
        "without it panes are polled every 200 ms)",
    )
    tmux = serve.add_argument_group("--source tmux").add_mutually_exclusive_group()
    tmux.add_argument(
        "--tmux-socket",
        metavar="NAME",
        help="the tmux server's socket name, tmux -L NAME (default: your default server)",
    )
    tmux.add_argument(
        "--tmux-socket-path", metavar="PATH", help="the tmux server's socket path (tmux -S PATH)"
    )
    _common(serve)
    serve.set_defaults(parser=serve, handler=_run_serve)


def _add_admin(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    pair = commands.add_parser(
        "pair",
        help="open a pairing window on the running host",
        description=(
            "Open a 60-second, single-use pairing window on the running host and show its QR "
            "code and code. Scan it with Prowl's Add a Device. Waits until a device pairs or "
            "the code expires."
        ),
    )
    pair.add_argument(
        "--json",
        action="store_true",
        help='print {"code", "expiresAt", "payload"} (and "payloadError") and exit',
    )
    pair.add_argument("--qr-png", type=Path, metavar="PATH", help="also write the QR code as a PNG")
    pair.add_argument("--no-wait", action="store_true", help="do not wait for the pairing")
    _common(pair)
    pair.set_defaults(parser=pair, handler=_run_admin, action=run_pair)

    devices = commands.add_parser(
        "devices", help="list paired devices", description="List the paired devices."
    )
    devices.add_argument("--json", action="store_true", help="print a JSON array")
    _common(devices)
    devices.set_defaults(parser=devices, handler=_run_admin, action=run_devices)

    revoke = commands.add_parser(
        "revoke",
        help="unpair a device (or all)",
        description=(
            "Remove a device: it is deleted from the store, its live connections are closed and "
            "its key no longer opens TLS. Pair it again to reconnect."
        ),
    )
    revoke.add_argument("device_id", nargs="?", metavar="DEVICE_ID")
    revoke.add_argument("--all", action="store_true", help="remove every paired device")
    _common(revoke)
    revoke.set_defaults(parser=revoke, handler=_run_admin, action=run_revoke)

    status = commands.add_parser(
        "status", help="show the running host", description="Show what the running host is doing."
    )
    status.add_argument("--json", action="store_true", help="print JSON")
    _common(status)
    status.set_defaults(parser=status, handler=_run_admin, action=run_status)

    check = commands.add_parser(
        "check-config",
        help="print the effective settings",
        description=(
            "Merge the defaults, the config file and MIRROR_HOST_* variables; print the "
            "settings serve would start with (its flags then override them), as a TOML "
            "file that --config reads back."
        ),
    )
    check.add_argument("--json", action="store_true", help="print JSON instead of TOML")
    _common(check)
    check.set_defaults(parser=check, handler=_run_check_config)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every sub-command."""
    parser = argparse.ArgumentParser(
        prog="mirror-host",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"mirror-host {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_serve(commands)
    _add_admin(commands)
    _add_wire(commands)
    add_client_commands(commands)
    add_service_commands(commands)
    return parser


_FLAG_KEYS = {
    "state_dir": "state.dir",
    "log_level": "log.level",
    "log_format": "log.format",
    "source": "source.kind",
    "listen": "server.listen",
    "advertise_address": "server.advertise_address",
    "local_command": "local.commands",
    "local_size": "local.size",
    "herdr_socket": "herdr.socket",
    "herdr_session": "herdr.session",
    "herdr_bin": "herdr.bin",
    "tmux_socket": "tmux.socket_name",
    "tmux_socket_path": "tmux.socket_path",
}


def load_settings(args: argparse.Namespace) -> Config:
    """The effective settings for ``args`` (defaults < file < environment < flags).

    Raises:
        ConfigError: an unknown or invalid setting.
    """
    flags = {key: getattr(args, attr, None) for attr, key in _FLAG_KEYS.items()}
    return load_config(config_path=getattr(args, "config", None), flags=flags)


def _run_serve(args: argparse.Namespace, stdin: TextIO, stdout: TextIO) -> int:
    from mirror_host.cli_serve import serve

    return serve(args, load_settings(args), stdout)


def _run_admin(args: argparse.Namespace, stdin: TextIO, stdout: TextIO) -> int:
    config = load_settings(args)
    configure_logging(config.log.level, config.log.format)
    result: int = args.action(args, config, stdout)
    return result


def _run_check_config(args: argparse.Namespace, stdin: TextIO, stdout: TextIO) -> int:
    config = load_settings(args)
    if args.json:
        stdout.write(json.dumps(dataclasses.asdict(config), indent=2, default=str) + "\n")
    else:
        stdout.write(render_toml(config))
    return 0


def _run_wire_decode(args: argparse.Namespace, stdin: TextIO, stdout: TextIO) -> int:
    now = args.now if args.now is not None else time.time()
    try:
        data = decode_hex(stdin.read())
    except InvalidHex as exc:
        stdout.write(dump_json({"error": str(exc)}).decode("utf-8") + "\n")
        return 1
    status = 0
    for line in describe(data, args.input_kind or "packets", now=now):
        stdout.write(line.decode("utf-8") + "\n")
        if line.startswith(b'{"error":'):
            status = 1
    return status


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``mirror-host`` with ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if getattr(args, "takes_serve_flags", False):  # service install: the flags for serve
        args.serve_flags, unknown = unknown, []
    if unknown:
        # Said by the sub-command's own parser, so the usage shown is the right one.
        args.parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    handler = args.handler
    try:
        result: int = handler(args, sys.stdin, sys.stdout)
    except ConfigError as exc:
        print(f"mirror-host: configuration error: {exc}", file=sys.stderr)
        return 2
    return result
