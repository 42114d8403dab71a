"""``mirror-host serve``: build the source, start the host, report clearly."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from mirror_host.cli.command import Commands, add_command
from mirror_host.cli.settings import add_setting_flags, add_settings_group, load_settings
from mirror_host.config import SETTINGS, SOURCE_KINDS, Config

if TYPE_CHECKING:
    from mirror_host.commands.handler import CommandHandler
    from mirror_host.host.pairing_ticket import PairingTicket
    from mirror_host.panes.source import PaneSource

__all__ = ["add_parser", "serve"]

logger = logging.getLogger("mirror_host.serve")

_NOTES = """\
The default --listen, 0.0.0.0:7880, accepts phones on every network interface of
this machine (allow TCP port 7880 through its firewall; "My phone cannot connect"
in operations.md, below). Stop it with Ctrl-C.
"""


def add_parser(commands: Commands) -> None:
    serve = add_command(
        commands,
        "serve",
        run,
        help="run the host",
        description=(
            "Run the mirror host: accept Prowl clients over TLS-PSK and mirror the panes of "
            "the chosen source. Stops cleanly on Ctrl-C or SIGTERM (every logged-in device "
            "is told the host stopped)."
        ),
        notes=_NOTES,
        examples=(
            "mirror-host serve --pair                              mirror your login shell; "
            "show a QR code",
            "mirror-host serve --source tmux                       every pane of your tmux server",
            "mirror-host serve --source herdr --herdr-session work the panes of a Herdr session",
            "mirror-host serve --local-command htop --local-command 'bash -l'   "
            "two panes of your own",
            "mirror-host serve --listen 192.168.1.20:7880          one interface only",
            "mirror-host serve --listen 127.0.0.1:7880             this machine only (for attach)",
        ),
        docs=(
            ("operations.md", 'every flag and setting, "My phone cannot connect"'),
            ("security.md", "what --log-packets logs"),
        ),
    )
    add_setting_flags(serve, "source.kind", "server.listen", "server.advertise_address")
    serve.add_argument(
        "--pair", action="store_true", help="open a 60 s pairing window at start-up and show it"
    )
    local = serve.add_argument_group("--source local")
    add_setting_flags(local, "local.commands", "local.respawn", "local.size")
    herdr = serve.add_argument_group("--source herdr")
    add_setting_flags(herdr, "herdr.socket", "herdr.session", "herdr.bin")
    add_setting_flags(serve, "log.packets", "commands.shell_send")
    # One way to reach each of these, never two.
    tmux = serve.add_argument_group("--source tmux").add_mutually_exclusive_group()
    add_setting_flags(tmux, "tmux.socket_name", "tmux.socket_path")
    aglite = serve.add_argument_group("--source agliteterm").add_mutually_exclusive_group()
    add_setting_flags(aglite, "agliteterm.socket", "agliteterm.command")
    add_settings_group(serve)


def run(args: argparse.Namespace, stdin: TextIO, out: TextIO) -> int:
    return serve(args, load_settings(args), out)


def _warn_about_ignored_flags(args: argparse.Namespace, kind: str) -> None:
    """Name each flag given for another source than ``kind`` (its room is that source's)."""
    for setting in SETTINGS.values():
        flag = setting.flag
        if flag is None or setting.room not in SOURCE_KINDS or setting.room == kind:
            continue
        if getattr(args, flag.dest, None) is not None:
            logger.warning("%s is ignored: it applies to --source %s", flag.name, setting.room)


def serve(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    """Run the host until interrupted; return the exit status.

    Raises:
        ConfigError: this ``serve`` is the installed service and was asked to log
            packets (exit status 2: systemd does not restart it, launchd starts it
            again every 5 s, its ThrottleInterval, failing the same way).
    """
    import trio

    from mirror_host.cli.sources import build_source
    from mirror_host.cli.ticket import show_ticket
    from mirror_host.errors import MirrorHostError
    from mirror_host.host.admin import ticket_reply
    from mirror_host.logs import configure_logging
    from mirror_host.system_service.units import refuse_packet_log_in_service
    from mirror_host.tls.psk import check_psk_route

    # Checked here, not only at `service install`: the config file or the
    # environment may have changed since.
    refuse_packet_log_in_service(os.environ, config.log.packets)
    configure_logging(config.log.level, config.log.format)
    _warn_about_ignored_flags(args, config.source.kind)
    source, commands = build_source(config)

    def show(ticket: PairingTicket) -> None:
        # Asked for with --pair: the code goes to standard output for the person
        # at the terminal, never through the log.
        show_ticket(ticket_reply(ticket), out)
        out.write(
            "The code works once, for 60 seconds. `mirror-host pair` makes a new one. "
            "Ctrl-C stops the host.\n\n"
        )
        out.flush()

    try:
        # Before anything is created: a Python that cannot speak Prowl's TLS
        # stops here, with no state directory or device store written.
        check_psk_route()
        trio.run(_main, config, source, commands, args.pair, show)
    except MirrorHostError as exc:  # the store, the admin socket, the port, TLS, the source
        print(f"mirror-host: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


async def _main(
    config: Config,
    source: PaneSource,
    commands: CommandHandler | None,
    pair: bool,
    show: Callable[[PairingTicket], None],
) -> None:
    from mirror_host.errors import MirrorHostError
    from mirror_host.host.service import run_host

    try:
        await run_host(config, source, commands=commands, open_pairing=pair, show_pairing=show)
    except BaseExceptionGroup as group:
        # A start-up failure inside the host's nurseries arrives wrapped (once per
        # nursery); hand the one error back bare so serve() can report it in a line.
        error = _only_error(group)
        if isinstance(error, MirrorHostError):
            raise error from None
        raise


def _only_error(error: BaseException) -> BaseException:
    """The single error inside nested one-member groups (or ``error`` itself)."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error
