"""The front door: ``mirror-host`` sub-commands. Parses, loads config, hands over.

No logic a test would want to reach another way lives here; each sub-command
calls into the room that owns the work. Exit codes: 0 success, 1 the command
failed (an invalid packet, no running host …), 2 bad usage or configuration.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import TextIO

from mirror_host import __version__
from mirror_host.control.swiftjson import dump_json
from mirror_host.inspect import INPUT_KINDS, InvalidHex, decode_hex, describe

__all__ = ["build_parser", "main"]

_DESCRIPTION = """\
mirror-host lets Prowl's iPhone, iPad, Android and Mac clients watch and drive
terminal panes on this machine: panes it spawns itself in local PTYs, every pane
of a tmux server, or the agent panes of a Herdr session.
"""

_EPILOG = """\
examples:
  mirror-host wire decode < capture.hex      decode packets captured as hex
  echo 0000000c007b226c697374223a7b7d7d | mirror-host wire decode

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
            "Read hex from stdin (whitespace ignored) and print one JSON line per packet: "
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
            "  pairing-code     a typed pairing code, as UTF-8 text\n"
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
    decode.set_defaults(handler=_run_wire_decode, input_kind=None)


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
    _add_wire(commands)
    return parser


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
    args = parser.parse_args(argv)
    handler = args.handler
    result: int = handler(args, sys.stdin, sys.stdout)
    return result
