"""The pane source the settings name, and its command backend. Front door.

Only the front door imports concrete sources: the host runs against any
:class:`~mirror_host.panes.source.PaneSource`, and each command backend types
against a Protocol of what it uses of its source (mypy checks here that they fit).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

from mirror_host.commands.handler import CommandHandler
from mirror_host.commands.service import CommandBackend, CommandService
from mirror_host.config import Config
from mirror_host.errors import ConfigError
from mirror_host.panes.source import PaneSource

__all__ = ["build_source"]

logger = logging.getLogger("mirror_host.serve")


def build_source(config: Config) -> tuple[PaneSource, CommandHandler | None]:
    """The pane source ``config.source.kind`` names, and its command service.

    Raises:
        ConfigError: the source cannot be built from these settings.
    """
    build = _BUILDERS.get(config.source.kind)
    if build is None:
        raise ConfigError("source.kind", f"unknown source {config.source.kind!r}")
    source, backend = build(config)
    return source, CommandService(backend)


def _shell_dir(config: Config) -> Path | None:
    """Where phones' command lines reach shells (:mod:`mirror_host.shell.directory`),
    or ``None`` when they may not (``--no-shell-send``)."""
    from mirror_host.shell.directory import default_shell_directory

    if not config.commands.shell_send:
        return None
    return default_shell_directory(Path(config.state.dir), os.environ)


def _local(config: Config) -> tuple[PaneSource, CommandBackend]:
    from mirror_host.commands.local import LocalCommands
    from mirror_host.panes.local import LocalSource

    shell_send = config.commands.shell_send
    source = LocalSource(
        config.local.commands,
        columns=config.local.columns,
        rows=config.local.rows,
        respawn=config.local.respawn,
        shell_integration=shell_send,
        shell_dir=_shell_dir(config),
    )
    return source, LocalCommands(source, profiles=config.profiles, shell_send=shell_send)


def _herdr(config: Config) -> tuple[PaneSource, CommandBackend]:
    from mirror_host.commands.herdr import HerdrCommands
    from mirror_host.panes.herdr.observe import find_herdr_program
    from mirror_host.panes.herdr.protocol import resolve_socket_path
    from mirror_host.panes.herdr.source import HerdrSource

    socket_path = resolve_socket_path(config.herdr.socket, os.environ, session=config.herdr.session)
    source = HerdrSource(socket_path, herdr_bin=config.herdr.bin)
    wanted = config.herdr.bin
    if wanted and find_herdr_program(wanted) is None:
        logger.warning("herdr.bin %s is not an executable program; panes will be polled", wanted)
    return source, HerdrCommands(source, profiles=config.profiles)


def _tmux(config: Config) -> tuple[PaneSource, CommandBackend]:
    from mirror_host.commands.tmux import TmuxCommands
    from mirror_host.panes.tmux import TmuxSource

    shell_send = config.commands.shell_send
    source = TmuxSource(
        socket_name=config.tmux.socket_name,
        socket_path=config.tmux.socket_path,
        sign_marks=shell_send,
        shell_dir=_shell_dir(config),
    )
    return source, TmuxCommands(source, profiles=config.profiles, shell_send=shell_send)


def _agliteterm(config: Config) -> tuple[PaneSource, CommandBackend]:
    from mirror_host.commands.agliteterm import AgliteCommands
    from mirror_host.panes.agliteterm.source import AgliteSource
    from mirror_host.panes.agliteterm.transport import agliteterm_transport

    source = AgliteSource(agliteterm_transport(config.agliteterm))
    return source, AgliteCommands(source, profiles=config.profiles)


#: One builder per ``source.kind``: the source and the backend its commands go to.
_BUILDERS: dict[str, Callable[[Config], tuple[PaneSource, CommandBackend]]] = {
    "local": _local,
    "herdr": _herdr,
    "tmux": _tmux,
    "agliteterm": _agliteterm,
}
