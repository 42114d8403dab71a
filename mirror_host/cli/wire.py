"""``mirror-host wire decode``: Prowl mirror packets, from hex, as JSON lines."""

from __future__ import annotations

import argparse
import time
from typing import TextIO

from mirror_host.cli.command import Commands, add_command, add_command_group
from mirror_host.control.swiftjson import dump_json
from mirror_host.inspect import INPUT_KINDS, InvalidHex, describe, read_input

__all__ = ["add_parser"]

_DECODE_NOTES = (
    "input kinds (--as):\n"
    "  packets          complete packets in hex, 4-byte length prefix included (default)\n"
    "  payload          one payload in hex, without the prefix (same as --payload)\n"
    "  header           a 4-byte length prefix alone, in hex: is the length legal?\n"
    "  pane             a JSON panes[] entry, as text\n"
    "  command-request  a JSON commandRequest object, as text\n"
    "  pairing-code     a typed pairing code, as text\n"
    "  qr               a QR / pasted pairing payload (JSON text), judged at --now\n"
    "(the text kinds also take the hex of their text, as protocol vectors state them)\n"
    "\n"
    "capturing packets: TLS hides them from tcpdump. Run the host with --log-packets:\n"
    "each packet of a logged-in connection is then logged as one line ending in its hex\n"
    "(the log then holds every screen and key: security.md, below).\n"
)


def add_parser(commands: Commands) -> None:
    tools = add_command_group(
        commands,
        "wire",
        help="inspect Prowl mirror packets",
        description="Tools for looking at Prowl mirror protocol bytes.",
        dest="wire_command",
        metavar="COMMAND",
    )
    decode = add_command(
        tools,
        "decode",
        run_decode,
        help="decode hex packets from stdin into JSON lines",
        description=(
            "Read packets as hex from stdin (whitespace ignored) and print one JSON line per "
            'packet: {"kind":0,"message":{...}} for control messages, and the header fields '
            'plus "bytes" (base64) or "text" for VT and text frames. The first invalid '
            'packet prints {"error":"<reason>"} and the command exits 1.'
        ),
        notes=_DECODE_NOTES,
        examples=(
            "mirror-host serve --log-packets 2> host.log",
            "grep -o ' out [0-9a-f]*$' host.log | cut -c6- | mirror-host wire decode",
            "echo 0000000c007b226c697374223a7b7d7d | mirror-host wire decode",
            "echo 'ABCD-2345' | mirror-host wire decode --as pairing-code",
            'echo \'{"id":"3F2A9C1B-6E0D-4C1A-9B7E-2D5F8A6C4E10","title":"sh",'
            '"directory":"/","busy":false}\' | mirror-host wire decode --as pane',
        ),
        docs=(
            ("security.md", "what --log-packets logs"),
            ("protocol.md", "the wire format"),
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
    decode.set_defaults(input_kind="packets")


def run_decode(args: argparse.Namespace, stdin: TextIO, out: TextIO) -> int:
    now = args.now if args.now is not None else time.time()
    try:
        data = read_input(stdin.read(), args.input_kind)
    except InvalidHex as exc:
        out.write(dump_json({"error": str(exc)}).decode("utf-8") + "\n")
        return 1
    status = 0
    for line in describe(data, args.input_kind, now=now):
        out.write(line.decode("utf-8") + "\n")
        if line.startswith(b'{"error":'):
            status = 1
    return status
