"""``mirror-host serve``: build the source, start the host, report clearly. Front door."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

import trio

from mirror_host.cli_admin import show_ticket
from mirror_host.commands.handler import CommandHandler
from mirror_host.config import Config
from mirror_host.errors import ConfigError, MirrorHostError
from mirror_host.host.admin import ticket_reply
from mirror_host.host.pairing_ticket import PairingTicket
from mirror_host.host.service import run_host
from mirror_host.logs import configure_logging
from mirror_host.panes.source import PaneSource
from mirror_host.system_service.units import refuse_packet_log_in_service
from mirror_host.tls.psk import check_psk_route

__all__ = ["build_source", "serve"]

logger = logging.getLogger("mirror_host.serve")


def build_source(config: Config) -> tuple[PaneSource, CommandHandler | None]:
    """The pane source ``config.source.kind`` names, and its command service if any.

    Raises:
        ConfigError: the source cannot be built from these settings.
    """
    kind = config.source.kind
    if kind == "local":
        from mirror_host.commands.local import LocalCommands
        from mirror_host.commands.service import CommandService
        from mirror_host.panes.local import LocalSource

        shell_send = config.commands.shell_send
        source = LocalSource(
            config.local.commands,
            columns=config.local.columns,
            rows=config.local.rows,
            respawn=config.local.respawn,
            shell_integration=shell_send,
            shell_dir=_shell_dir(config) if shell_send else None,
        )
        commands = LocalCommands(source, profiles=config.profiles, shell_send=shell_send)
        return source, CommandService(commands)
    if kind == "herdr":
        from mirror_host.commands.herdr import HerdrCommands
        from mirror_host.commands.service import CommandService
        from mirror_host.panes.herdr.observe import find_herdr_program
        from mirror_host.panes.herdr.protocol import resolve_socket_path
        from mirror_host.panes.herdr.source import HerdrSource

        socket_path = resolve_socket_path(
            config.herdr.socket, os.environ, session=config.herdr.session
        )
        herdr = HerdrSource(socket_path, herdr_bin=config.herdr.bin)
        wanted = config.herdr.bin
        if wanted and find_herdr_program(wanted) is None:
            logger.warning(
                "herdr.bin %s is not an executable program; panes will be polled", wanted
            )
        return herdr, CommandService(HerdrCommands(herdr, profiles=config.profiles))
    if kind == "tmux":
        from mirror_host.commands.service import CommandService
        from mirror_host.commands.tmux import TmuxCommands
        from mirror_host.panes.tmux import TmuxSource

        shell_send = config.commands.shell_send
        tmux = TmuxSource(
            socket_name=config.tmux.socket_name,
            socket_path=config.tmux.socket_path,
            sign_marks=shell_send,
            shell_dir=_shell_dir(config) if shell_send else None,
        )
        backend = TmuxCommands(tmux, profiles=config.profiles, shell_send=shell_send)
        return tmux, CommandService(backend)
    if kind == "agliteterm":
        from mirror_host.commands.agliteterm import AgliteCommands
        from mirror_host.commands.service import CommandService
        from mirror_host.panes.agliteterm.source import AgliteSource
        from mirror_host.panes.agliteterm.transport import agliteterm_transport

        aglite = AgliteSource(agliteterm_transport(config.agliteterm))
        return aglite, CommandService(AgliteCommands(aglite, profiles=config.profiles))
    raise ConfigError("source.kind", f"unknown source {kind!r}")


def _shell_dir(config: Config) -> Path:
    """Where phones' command lines reach shells (:mod:`mirror_host.shell.directory`)."""
    from mirror_host.shell.directory import default_shell_directory

    return default_shell_directory(Path(config.state.dir), os.environ)


#: The serve flags that only one source reads.
_SOURCE_FLAGS = {
    "local": ("local_command", "local_size", "local_respawn"),
    "herdr": ("herdr_socket", "herdr_session", "herdr_bin"),
    "tmux": ("tmux_socket", "tmux_socket_path"),
    "agliteterm": ("agliteterm_socket", "agliteterm_command"),
}


def _warn_about_ignored_flags(args: argparse.Namespace, kind: str) -> None:
    for other, names in _SOURCE_FLAGS.items():
        for name in names:
            if other != kind and getattr(args, name, None) is not None:
                flag = "--" + name.replace("_", "-")
                logger.warning("%s is ignored: it applies to --source %s", flag, other)


def serve(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    """Run the host until interrupted; return the exit status.

    Raises:
        ConfigError: this ``serve`` is the installed service and was asked to log
            packets (exit status 2: systemd does not restart it, launchd starts it
            again every 5 s, its ThrottleInterval, failing the same way).
    """
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
