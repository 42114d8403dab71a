"""``mirror-host attach``: watch and drive a host's pane from this terminal.

Parses, then hands over to :mod:`mirror_host.client.attach`. Exit codes: 0
detached with Ctrl-] (or --detach-key), 1 failure, 2 bad usage, 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TextIO

from mirror_host.cli.command import (
    Commands,
    add_command,
    argument_type,
    check_pairing_code,
    options_from,
)
from mirror_host.client.address import parse_address
from mirror_host.client.chooser import DETACH_KEY, parse_detach_key
from mirror_host.config_file import home_problem
from mirror_host.errors import ConfigError

__all__ = ["add_parser"]

_NOTES = """\
keys: everything you type goes to the pane; Ctrl-] (or --detach-key) detaches
(exit status 0), and quits the pane prompt.

The credential from pairing is kept in $XDG_CONFIG_HOME/mirror-host/credentials.json
(~/.config/mirror-host/, mode 0600), one per host address; later runs reuse it.
A lost connection is retried (1, 2, 4, 8, 15 s apart) until Ctrl-]. Another device
taking the pane over, the host stopping and the pane closing end the session
(exit status 1), each said in one line.
"""


def add_parser(commands: Commands) -> None:
    attach = add_command(
        commands,
        "attach",
        run,
        help="watch and drive a host's pane from this terminal",
        description=(
            "Attach this terminal to a pane of a Prowl mirror host (mirror-host or Prowl's "
            "own): its screen is drawn here, in the alternate screen, and your keys go to it."
        ),
        notes=_NOTES,
        examples=(
            "mirror-host attach 192.168.1.20:7880 --code ABCD-2345   pair, then attach",
            "mirror-host attach 192.168.1.20:7880 --pane 2           attach to the second pane",
            "mirror-host attach 192.168.1.20:7880 --text             read-only text view",
            'mirror-host attach 192.168.1.20:7880 --code ABCD-2345 --name "lab laptop" '
            "--detach-key ctrl-q",
        ),
        docs=(("tools.md", "attach and conformance"),),
    )
    attach.add_argument("address", type=argument_type(parse_address), metavar="ADDRESS:PORT")
    attach.add_argument(
        "--code", metavar="CODE", help="pair first with this pairing code (then it is kept)"
    )
    attach.add_argument(
        "--pane",
        metavar="INDEX|ID",
        help="the pane: its number in the list (1 = first) or its id (default: ask, "
        "unless there is only one)",
    )
    attach.add_argument(
        "--text",
        action="store_true",
        help="a read-only text view (text-v1; keys are not sent; Ctrl-C detaches too)",
    )
    attach.add_argument(
        "--take-over",
        action="store_true",
        help="take the pane even if another device mirrors it (that device is told)",
    )
    attach.add_argument(
        "--forget",
        action="store_true",
        help="first forget the credential saved for this address (with --code: pair anew)",
    )
    attach.add_argument(
        "--name",
        metavar="NAME",
        help="the device name to pair under, as the host's device list shows it "
        "(default: this machine's host name)",
    )
    attach.add_argument(
        "--detach-key",
        type=argument_type(parse_detach_key),
        default=DETACH_KEY,
        metavar="KEY",
        help="the key that detaches, and quits the pane prompt: a control key such as "
        "ctrl-q or ^a (default ctrl-])",
    )


def run(args: argparse.Namespace, stdin: TextIO, out: TextIO) -> int:
    import trio

    from mirror_host.auth.devices import name_problem
    from mirror_host.client.attach import AttachOptions, attach
    from mirror_host.tls.psk import check_psk_route

    check_pairing_code(args)
    if args.name is not None and (problem := name_problem(args.name)):
        args.parser.error(f"--name: {problem}")
    options = options_from(args, AttachOptions)
    _check_credentials_home()

    def say(message: str) -> None:
        print(f"mirror-host: {message}", file=sys.stderr, flush=True)

    def show(line: str) -> None:
        out.write(line + "\n")
        out.flush()

    def read_line() -> str:
        if stdin.isatty():
            # One read is one line as the terminal delivers it, also one ended by the
            # detach key without a newline (readline would wait for the newline).
            return os.read(stdin.fileno(), 4096).decode("utf-8", "replace")
        return stdin.readline()

    async def ask(prompt: str) -> str | None:
        out.write(prompt)
        out.flush()
        line = await trio.to_thread.run_sync(read_line, abandon_on_cancel=True)
        if line and not line.endswith("\n"):
            out.write("\n")  # the detach key ended it: leave the prompt's line
        return line if line else None

    check_psk_route()  # TLSUnsupported, AttachError, ClientError: said in one line by main
    try:
        return trio.run(lambda: attach(options, say=say, show=show, ask=ask))
    except KeyboardInterrupt:
        return 130


def _check_credentials_home() -> None:
    """The credential file's default place (``client.credentials.default_path``) is
    in the home directory unless ``XDG_CONFIG_HOME`` names one: refused, as the
    state directory's is, where that home is empty or missing.

    Raises:
        ConfigError: exit status 2, said in one line by ``main``.
    """
    if os.environ.get("XDG_CONFIG_HOME"):
        return
    problem = home_problem(os.environ)
    if problem is not None:
        raise ConfigError(
            "credentials",
            f"{problem}, so there is no default credential file: set XDG_CONFIG_HOME",
        )
