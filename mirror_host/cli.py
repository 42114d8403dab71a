"""The front door: ``mirror-host`` sub-commands. Parses, loads config, hands over.

No logic a test would want to reach another way lives here; each sub-command
calls into the room that owns the work. Exit codes: 0 success, 1 the command
failed (an invalid packet, no running host …), 2 bad usage or configuration.
"""

from __future__ import annotations

import argparse
import codecs
import dataclasses
import io
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from mirror_host import __version__
from mirror_host.cli_admin import run_devices, run_pair, run_revoke, run_status
from mirror_host.cli_client import add_client_commands
from mirror_host.cli_help import HelpFormatter
from mirror_host.cli_service import add_service_commands
from mirror_host.config import (
    LOG_FORMATS,
    LOG_LEVELS,
    SETTINGS,
    SOURCE_KINDS,
    Config,
    OnProblem,
    parse_endpoint,
    parse_size,
    render_toml,
)
from mirror_host.config_file import default_config_path, default_state_dir, load_config
from mirror_host.control.swiftjson import dump_json
from mirror_host.errors import ConfigError
from mirror_host.inspect import INPUT_KINDS, InvalidHex, describe, read_input
from mirror_host.logs import configure_logging
from mirror_host.shell.integration import SHELL_NAMES, snippet

__all__ = ["build_parser", "main"]

_DESCRIPTION = """\
mirror-host lets Prowl's iPhone, iPad, Android and Mac clients watch and drive
terminal panes on this machine: panes it spawns itself in local PTYs, every pane
of a tmux server, the panes of a Herdr session, or the sessions of an
agliteterm (or agwinterm) window on Windows.
"""

_EPILOG = """\
examples:
  mirror-host serve --source local --pair    mirror your shell; show a QR code to pair
  mirror-host pair                            pair another phone with a running host
  mirror-host devices                         list paired devices
  mirror-host revoke DEVICE_ID                unpair one device
  mirror-host wire decode < capture.hex       decode packets captured as hex
  eval "$(mirror-host shell-init bash)"       (in ~/.bashrc) let phones run commands there
  mirror-host attach 192.168.1.20:7880        watch and drive a host's pane here
  mirror-host conformance HOST:PORT --code C  check any Prowl mirror host
"""


def documentation_dir() -> Path:
    """Where this installation's documentation is: inside the package for a wheel
    (pyproject.toml ships ``docs/`` there), ``docs/`` of the clone otherwise."""
    package = Path(__file__).resolve().parent
    shipped = package / "docs"
    return shipped if shipped.is_dir() else package.parent / "docs"


def _epilog() -> str:
    docs = documentation_dir()
    return (
        f"{_EPILOG}\ndocumentation (Markdown files of this installation):\n"
        f"  {docs / 'operations.md'}   running it\n"
        f"  {docs / 'tools.md'}   attach and conformance\n"
        f"  {docs / 'protocol.md'}   the wire format\n"
    )


_SERVE_EXAMPLES = """\
The default --listen, 0.0.0.0:7880, accepts phones on every network interface of
this machine (allow TCP port 7880 through its firewall; docs/operations.md, "My
phone cannot connect"). Stop it with Ctrl-C.

examples:
  mirror-host serve --pair                              mirror your login shell; show a QR code
  mirror-host serve --source tmux                       every pane of your tmux server
  mirror-host serve --source herdr --herdr-session work the panes of a Herdr session
  mirror-host serve --local-command htop --local-command 'bash -l'   two panes of your own
  mirror-host serve --listen 192.168.1.20:7880          one interface only
  mirror-host serve --listen 127.0.0.1:7880             this machine only (for attach)
"""

_PAIR_EXAMPLES = """\
examples:
  mirror-host pair                       show a QR code and code; wait for a device
  mirror-host pair --qr-png qr.png       the same, and save the QR code as a PNG
  mirror-host pair --json                {"code", "expiresAt", "payload"} for a script
  mirror-host pair --close               close the open window
"""

_DEVICES_EXAMPLES = """\
examples:
  mirror-host devices
  mirror-host devices --json
  mirror-host devices --state-dir /srv/mirror-host/state   the devices of another host
"""

_REVOKE_EXAMPLES = """\
examples:
  mirror-host revoke 3F2A9C1B-6E0D-4C1A-9B7E-2D5F8A6C4E10   one device
  mirror-host revoke 3F2A                                     the same, by a unique prefix
  mirror-host revoke --all                                    every device
"""

_STATUS_EXAMPLES = """\
examples:
  mirror-host status
  mirror-host status --json
"""

_CHECK_CONFIG_EXAMPLES = """\
examples:
  mirror-host check-config                          the effective settings, as TOML
  mirror-host check-config > ~/.config/mirror-host/config.toml   start a config file
      (on macOS: > ~/Library/Application\\ Support/mirror-host/config.toml)
  MIRROR_HOST_SERVER_LISTEN=127.0.0.1:7880 mirror-host check-config --json
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
            "Read packets as hex from stdin (whitespace ignored) and print one JSON line per "
            'packet: {"kind":0,"message":{...}} for control messages, and the header fields '
            'plus "bytes" (base64) or "text" for VT and text frames. The first invalid '
            'packet prints {"error":"<reason>"} and the command exits 1.'
        ),
        formatter_class=HelpFormatter,
        epilog=(
            "input kinds (--as):\n"
            "  packets          complete packets in hex, 4-byte length prefix included "
            "(default)\n"
            "  payload          one payload in hex, without the prefix (same as --payload)\n"
            "  header           a 4-byte length prefix alone, in hex: is the length legal?\n"
            "  pane             a JSON panes[] entry, as text\n"
            "  command-request  a JSON commandRequest object, as text\n"
            "  pairing-code     a typed pairing code, as text\n"
            "  qr               a QR / pasted pairing payload (JSON text), judged at --now\n"
            "(the text kinds also take the hex of their text, as protocol vectors state "
            "them)\n"
            "\n"
            "capturing packets: TLS hides them from tcpdump. Run the host with "
            "--log-packets:\n"
            "each packet of a logged-in connection is then logged as one line ending in "
            "its hex\n"
            "(the log then holds every screen and key: docs/security.md).\n"
            "\n"
            "examples:\n"
            "  mirror-host serve --log-packets 2> host.log\n"
            "  grep -o ' out [0-9a-f]*$' host.log | cut -c6- | mirror-host wire decode\n"
            "  echo 0000000c007b226c697374223a7b7d7d | mirror-host wire decode\n"
            "  echo 'ABCD-2345' | mirror-host wire decode --as pairing-code\n"
            '  echo \'{"id":"3F2A9C1B-6E0D-4C1A-9B7E-2D5F8A6C4E10","title":"sh",'
            '"directory":"/","busy":false}\' | mirror-host wire decode --as pane\n'
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
    decode.set_defaults(parser=decode, handler=_run_wire_decode, input_kind="packets")


def _common(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("settings (see docs/operations.md)")
    group.add_argument(
        "--config",
        metavar="PATH",
        help="TOML settings file (default: $MIRROR_HOST_CONFIG, else "
        f"{default_config_path()} if present)",
    )
    group.add_argument(
        "--state-dir",
        metavar="DIR",
        # Resolved, as --config's is: the directory on this machine, macOS's included.
        help=f"device store, admin socket and status file (default: {default_state_dir()})",
    )
    group.add_argument("--log-level", choices=LOG_LEVELS, help="default: info")
    group.add_argument("--log-format", choices=LOG_FORMATS, help="default: text")


def _endpoint_arg(text: str) -> str:
    try:
        parse_endpoint(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    return text


def _wait_arg(text: str) -> float:
    try:
        value = float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from exc
    if not 0 <= value <= 600:
        raise argparse.ArgumentTypeError("expected 0 … 600 seconds")
    return value


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
            "the chosen source. Stops cleanly on Ctrl-C or SIGTERM (every logged-in device "
            "is told the host stopped)."
        ),
        epilog=_SERVE_EXAMPLES,
        formatter_class=HelpFormatter,
    )
    serve.add_argument(
        "--source",
        choices=SOURCE_KINDS,
        help="where panes come from: local (PTYs this host spawns, the default), herdr, tmux "
        "or agliteterm",
    )
    serve.add_argument(
        "--listen",
        type=_endpoint_arg,
        metavar="HOST:PORT",
        help="address to accept clients on: a numeric address or localhost (default "
        "0.0.0.0:7880, every interface; port 0 picks a free port)",
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
        "--local-respawn",
        action="store_const",
        const=True,
        help="start the commands again when the last pane exits (default: the host stays "
        "up with no panes, and says so)",
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
    serve.add_argument(
        "--log-packets",
        action="store_const",
        const=True,
        help="log each packet of a logged-in connection as hex, for `wire decode`; the log "
        "then holds every screen and every key typed (docs/security.md): debugging only",
    )
    serve.add_argument(
        "--no-shell-send",
        dest="shell_send",
        action="store_const",
        const=False,
        help="refuse phones' shell commands (send): shell-send is not advertised and no shell "
        "pane is listed idle (default: allowed where the pane's own shell, with the "
        "integration, waits at its prompt and takes the command into an empty line)",
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
    aglite = serve.add_argument_group("--source agliteterm").add_mutually_exclusive_group()
    aglite.add_argument(
        "--agliteterm-socket",
        metavar="PATH",
        help="a Unix socket that speaks agliteterm's control API (e.g. socat relaying "
        "its pipe through npiperelay; see docs/operations.md)",
    )
    aglite.add_argument(
        "--agliteterm-command",
        metavar="CMD",
        help="a command whose stdin/stdout reach agliteterm's pipe, one per connection, "
        "e.g. 'npiperelay.exe -ep -s //./pipe/agliteterm'",
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
            "the code expires; Ctrl-C closes the window. A newer window replaces the code."
        ),
        epilog=_PAIR_EXAMPLES,
        formatter_class=HelpFormatter,
    )
    pair.add_argument(
        "--json",
        action="store_true",
        help='print {"code", "expiresAt", "payload"} (and "payloadError") and exit',
    )
    pair.add_argument("--qr-png", type=Path, metavar="PATH", help="also write the QR code as a PNG")
    pair.add_argument(
        "--no-wait",
        action="store_true",
        help="show the code and exit (the window stays open for its 60 s)",
    )
    pair.add_argument(
        "--close",
        action="store_true",
        help="close the open pairing window instead (its code stops working)",
    )
    pair.add_argument(
        "--wait-for-host",
        type=_wait_arg,
        default=5.0,
        metavar="SECONDS",
        help="how long to wait for a host that is still starting (default 5)",
    )
    _common(pair)
    pair.set_defaults(parser=pair, handler=_run_admin, action=run_pair)

    devices = commands.add_parser(
        "devices",
        help="list paired devices",
        description=(
            "List the paired devices: id, name, when paired, last seen or connected. "
            "Without a running host it reads the device store and says so."
        ),
        epilog=_DEVICES_EXAMPLES,
        formatter_class=HelpFormatter,
    )
    devices.add_argument(
        "--json",
        action="store_true",
        help='print a JSON array of {"id", "name", "pairedAt", "lastSeen", "connected"}, '
        "host running or not",
    )
    _common(devices)
    devices.set_defaults(parser=devices, handler=_run_admin, action=run_devices)

    revoke = commands.add_parser(
        "revoke",
        help="unpair a device (or all)",
        description=(
            "Remove a device: it is deleted from the store, its live connections are closed and "
            "its key no longer opens TLS. Pair it again to reconnect. Works without a running "
            "host too (it rewrites the device store)."
        ),
        epilog=_REVOKE_EXAMPLES,
        formatter_class=HelpFormatter,
    )
    revoke.add_argument(
        "device_id",
        nargs="?",
        metavar="DEVICE_ID",
        help="the device's id as `mirror-host devices` lists it, or a unique prefix of it "
        "(at least 4 characters)",
    )
    revoke.add_argument("--all", action="store_true", help="remove every paired device")
    _common(revoke)
    revoke.set_defaults(parser=revoke, handler=_run_admin, action=run_revoke)

    status = commands.add_parser(
        "status",
        help="show the running host",
        description=(
            "Show what the running host is doing: version, uptime, state directory, listen "
            "address, devices, the pairing window, the pane source's state and its panes "
            "(with their ids, for `attach --pane`)."
        ),
        epilog=_STATUS_EXAMPLES,
        formatter_class=HelpFormatter,
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
            "file that --config reads back. An unknown or invalid setting is an error "
            "naming it and where it came from (exit status 2)."
        ),
        epilog=_CHECK_CONFIG_EXAMPLES,
        formatter_class=HelpFormatter,
    )
    check.add_argument("--json", action="store_true", help="print JSON instead of TOML")
    _common(check)
    check.set_defaults(parser=check, handler=_run_check_config)


def _add_shell_init(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    shell_init = commands.add_parser(
        "shell-init",
        help="print the integration that lets phones run commands in a shell",
        description=(
            "Print the integration that lets a phone's Send run a command line in SHELL "
            "(mirrored through tmux): SHELL marks its prompt (OSC 133), tells the host when "
            "it waits there, and takes the phone's command into its own line editor, only "
            "while its command line is empty. Load it at the end of the shell's start-up "
            "file, then open a new pane (or `exec SHELL` in one started before the host); "
            "panes the host starts itself (--source local) get it without this."
        ),
        formatter_class=HelpFormatter,
        epilog=(
            "set-up:\n"
            '  bash  ~/.bashrc:                   eval "$(mirror-host shell-init bash)"\n'
            '  zsh   ~/.zshrc:                    eval "$(mirror-host shell-init zsh)"\n'
            "  fish  ~/.config/fish/config.fish:  mirror-host shell-init fish | source\n"
        ),
    )
    shell_init.add_argument("shell", choices=SHELL_NAMES, metavar="SHELL", help="bash, zsh or fish")
    shell_init.set_defaults(parser=shell_init, handler=_run_shell_init)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every sub-command."""
    parser = argparse.ArgumentParser(
        prog="mirror-host",
        description=_DESCRIPTION,
        epilog=_epilog(),
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"mirror-host {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_serve(commands)
    _add_admin(commands)
    _add_wire(commands)
    _add_shell_init(commands)
    add_client_commands(commands)
    add_service_commands(commands)
    return parser


def load_settings(args: argparse.Namespace, *, on_problem: OnProblem = None) -> Config:
    """The effective settings for ``args`` (defaults < file < environment < flags).

    Raises:
        ConfigError: an unknown or invalid setting (unless ``on_problem`` takes it).
    """
    flags = {
        key: getattr(args, setting.flag.dest, None)
        for key, setting in SETTINGS.items()
        if setting.flag is not None
    }
    return load_config(
        config_path=getattr(args, "config", None), flags=flags, on_problem=on_problem
    )


def _warn_and_go_on(problem: ConfigError) -> None:
    # The admin commands need only the state directory: an unrelated typo must not
    # stop `revoke` of a lost phone. `serve` and `check-config` still refuse it.
    print(
        f"mirror-host: warning: ignoring a configuration error ({problem}); "
        "`serve` refuses it: fix it, `mirror-host check-config` shows it",
        file=sys.stderr,
    )


def _run_serve(args: argparse.Namespace, stdin: TextIO, stdout: TextIO) -> int:
    from mirror_host.cli_serve import serve

    return serve(args, load_settings(args), stdout)


def _run_admin(args: argparse.Namespace, stdin: TextIO, stdout: TextIO) -> int:
    config = load_settings(args, on_problem=_warn_and_go_on)
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


def _run_shell_init(args: argparse.Namespace, stdin: TextIO, stdout: TextIO) -> int:
    stdout.write(snippet(args.shell))
    return 0


def _run_wire_decode(args: argparse.Namespace, stdin: TextIO, stdout: TextIO) -> int:
    now = args.now if args.now is not None else time.time()
    try:
        data = read_input(stdin.read(), args.input_kind)
    except InvalidHex as exc:
        stdout.write(dump_json({"error": str(exc)}).decode("utf-8") + "\n")
        return 1
    status = 0
    for line in describe(data, args.input_kind, now=now):
        stdout.write(line.decode("utf-8") + "\n")
        if line.startswith(b'{"error":'):
            status = 1
    return status


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


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``mirror-host`` with ``argv`` (default ``sys.argv[1:]``); return the exit code."""
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
    handler = args.handler
    try:
        result: int = handler(args, sys.stdin, sys.stdout)
    except ConfigError as exc:
        print(f"mirror-host: configuration error: {exc}", file=sys.stderr)
        return 2
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


def _discard_output() -> None:
    """Point standard output at /dev/null, so the flush at exit cannot fail again
    (Python would print ``Exception ignored … BrokenPipeError``)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
