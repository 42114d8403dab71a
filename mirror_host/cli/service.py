"""``mirror-host service``: run the host as a per-user service.

``install`` checks the serve flags with ``serve``'s own parser and settings, then
each action hands over to :mod:`mirror_host.system_service.manage`. Exit codes:
0 success (``status``: the service runs), 1 failure (``status``: not installed
or not running), 2 bad usage or settings.
"""

from __future__ import annotations

import argparse
from typing import TextIO

from mirror_host.cli.command import Commands, add_command, add_command_group

__all__ = ["add_parser"]

_INSTALL_NOTES = """\
Every flag that `mirror-host serve` takes can follow, except `--pair` and
`--log-packets` (a service's log is kept), with `--` before them if one could be
mistaken for an option of install itself. The service runs `serve` with
those flags, with the Python that runs this command, and with this shell's PATH,
SHELL, locale, XDG directories, HERDR_SOCKET_PATH, HERDR_SESSION, TMUX_TMPDIR and
MIRROR_HOST_* settings, so it finds the same programs, config file and state
directory as `mirror-host serve` run here. Run install again to change them.

Linux: a systemd user unit, ~/.config/systemd/user/mirror-host.service, enabled and
(re)started; logs in the journal (journalctl --user -u mirror-host).

macOS: a launchd agent, ~/Library/LaunchAgents/dev.mirror-host.plist, loaded now
and at each login; logs in ~/Library/Logs/mirror-host/mirror-host.log.
"""


def add_parser(commands: Commands) -> None:
    actions = add_command_group(
        commands,
        "service",
        help="run the host as a service (systemd user unit, launchd agent)",
        description=(
            "Install mirror-host as a per-user service that starts by itself and restarts "
            "when it fails: a systemd user unit on Linux, a launchd agent on macOS."
        ),
        dest="service_command",
        metavar="ACTION",
    )
    install = add_command(
        actions,
        "install",
        run_install,
        help="write, enable and start the service for `serve` with the flags that follow",
        description="Write the service for `mirror-host serve [flags]`, enable and (re)start it.",
        notes=_INSTALL_NOTES,
        examples=(
            "mirror-host service install --source herdr",
            "mirror-host service install --dry-run --source tmux --tmux-socket agents",
            "mirror-host service install -- --source local --local-command htop",
        ),
        docs=(("operations.md", "running it as a service"),),
    )
    install.add_argument(
        "--user",
        action="store_true",
        help="a service of your own user (the default and the only kind: the host must run "
        "as the user whose panes, Herdr and tmux it mirrors)",
    )
    install.add_argument(
        "--dry-run",
        action="store_true",
        help="print the unit or agent and the commands, and change nothing",
    )
    install.set_defaults(takes_serve_flags=True)
    add_command(
        actions,
        "status",
        run_status,
        help="is the service installed, enabled, running",
        description="Show whether the service is installed, enabled and running, its command "
        "and where its logs are. Exit status 0 only while it runs.",
    )
    uninstall = add_command(
        actions,
        "uninstall",
        run_uninstall,
        help="stop the service and remove it",
        description="Stop the service and remove its unit or agent. Paired devices and logs stay.",
    )
    uninstall.add_argument("--dry-run", action="store_true", help="print what would be done")


def _checked_serve_flags(install: argparse.ArgumentParser, flags: list[str]) -> list[str]:
    """The serve flags, after ``serve``'s parser and settings accept them (else exit 2)."""
    from mirror_host.cli.program import build_parser
    from mirror_host.cli.settings import load_settings
    from mirror_host.system_service.units import LOG_PACKETS_REFUSED

    if flags[:1] == ["--"]:
        flags = flags[1:]
    serve_args, unknown = build_parser().parse_known_args(["serve", *flags])
    if unknown:  # said here, so the usage shown is `service install`'s
        install.error(
            f"unrecognized arguments: {' '.join(unknown)} (not flags of `mirror-host serve`)"
        )
    if serve_args.pair:
        install.error(
            "--pair is not for a service: the pairing code would go to the service's log; "
            "run `mirror-host pair` in a terminal once the service runs"
        )
    settings = load_settings(serve_args)  # ConfigError: exit 2, said by main()
    if settings.log.packets:  # the flag, the config file or MIRROR_HOST_LOG_PACKETS
        install.error(LOG_PACKETS_REFUSED)
    return flags


# ServiceError from any of these is said in one line by main() (exit status 1).


def run_install(args: argparse.Namespace, stdin: TextIO, out: TextIO) -> int:
    from mirror_host.system_service.manage import System, install

    flags = _checked_serve_flags(args.parser, list(getattr(args, "serve_flags", [])))
    return install(flags, dry_run=args.dry_run, out=out, system=System())


def run_status(args: argparse.Namespace, stdin: TextIO, out: TextIO) -> int:
    from mirror_host.system_service.manage import System, status

    return status(out=out, system=System())


def run_uninstall(args: argparse.Namespace, stdin: TextIO, out: TextIO) -> int:
    from mirror_host.system_service.manage import System, uninstall

    return uninstall(dry_run=args.dry_run, out=out, system=System())
