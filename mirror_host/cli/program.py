"""``mirror-host`` itself: the top-level parser, and running the sub-command asked for."""

from __future__ import annotations

import argparse
import codecs
import io
import os
import sys
from collections.abc import Sequence
from typing import TextIO

from mirror_host import __version__
from mirror_host.cli import (
    attach,
    check_config,
    conformance,
    devices,
    pair,
    revoke,
    serve,
    service,
    shell_init,
    status,
    wire,
)
from mirror_host.cli.command import CommandFailed
from mirror_host.cli.help import HelpFormatter, closing_text
from mirror_host.errors import ConfigError, MirrorHostError

__all__ = ["build_parser", "main"]

_DESCRIPTION = """\
mirror-host lets Prowl's iPhone, iPad, Android and Mac clients watch and drive
terminal panes on this machine: panes it spawns itself in local PTYs, every pane
of a tmux server, the panes of a Herdr session, or the sessions of an
agliteterm (or agwinterm) window on Windows.
"""

_EXAMPLES = (
    "mirror-host serve --source local --pair    mirror your shell; show a QR code to pair",
    "mirror-host pair                            pair another phone with a running host",
    "mirror-host devices                         list paired devices",
    "mirror-host revoke DEVICE_ID                unpair one device",
    "mirror-host wire decode < capture.hex       decode packets captured as hex",
    'eval "$(mirror-host shell-init bash)"       (in ~/.bashrc) let phones run commands there',
    "mirror-host attach 192.168.1.20:7880        watch and drive a host's pane here",
    "mirror-host conformance HOST:PORT --code C  check any Prowl mirror host",
)

#: The sub-commands, in the order ``mirror-host --help`` lists them.
_COMMANDS = (
    serve,
    pair,
    devices,
    revoke,
    status,
    check_config,
    wire,
    shell_init,
    attach,
    conformance,
    service,
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every sub-command."""
    parser = argparse.ArgumentParser(
        prog="mirror-host",
        description=_DESCRIPTION,
        epilog=closing_text(
            examples=_EXAMPLES,
            docs=(
                ("operations.md", "running it"),
                ("tools.md", "attach and conformance"),
                ("protocol.md", "the wire format"),
            ),
        ),
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"mirror-host {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in _COMMANDS:
        command.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``mirror-host`` with ``argv`` (default ``sys.argv[1:]``); return the exit code.

    A command's typed failures are said here, in one line on standard error: a
    bad setting (exit status 2), a :class:`CommandFailed` after the command's
    name, any other of mirror-host's own errors (1).
    """
    _tolerant_output(sys.stdout)
    parser = build_parser()
    arguments = sys.argv[1:] if argv is None else list(argv)
    if not arguments:  # a bare `mirror-host`: what it does and how to start
        parser.print_help()
        return 0
    args, unknown = parser.parse_known_args(arguments)
    if getattr(args, "takes_serve_flags", False):  # service install: the flags for serve
        args.serve_flags, unknown = unknown, []
    if unknown:
        # Said by the sub-command's own parser, so the usage shown is the right one.
        args.parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        result: int = args.handler(args, sys.stdin, sys.stdout)
    except ConfigError as exc:
        print(f"mirror-host: configuration error: {exc}", file=sys.stderr)
        return 2
    except CommandFailed as exc:
        print(f"{args.parser.prog}: {exc}", file=sys.stderr)
        return 1
    except MirrorHostError as exc:
        print(f"mirror-host: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
    except BrokenPipeError:
        # Its reader stopped early (`| head -5`): nothing to report, and the status a
        # program stopped by SIGPIPE has (128 + 13), as `seq 1 1000 | head -5` gives.
        _discard_output()
        return 141
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _discard_output()  # the command had ended; its own status stands
    return result


def _tolerant_output(stream: TextIO) -> None:
    """Let ``stream`` write text its encoding lacks escaped, as Python's standard
    error does, instead of failing the command: a device's name or a pane's title
    must not stop ``devices`` or ``status`` where the locale is ``C`` or Latin-1."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        unicode = codecs.lookup(encoding).name.startswith("utf")
    except LookupError:
        unicode = False
    if not unicode and isinstance(stream, io.TextIOWrapper):
        stream.reconfigure(errors="backslashreplace")


def _discard_output() -> None:
    """Point standard output at /dev/null, so the flush at exit cannot fail again
    (Python would print ``Exception ignored … BrokenPipeError``)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
