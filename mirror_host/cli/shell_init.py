"""``mirror-host shell-init SHELL``: the integration that lets phones run commands there."""

from __future__ import annotations

import argparse
from typing import TextIO

from mirror_host.cli.command import Commands, add_command
from mirror_host.shell.integration import SHELL_NAMES, snippet

__all__ = ["add_parser"]

_SET_UP = """\
set-up:
  bash  ~/.bashrc:                   eval "$(mirror-host shell-init bash)"
  zsh   ~/.zshrc:                    eval "$(mirror-host shell-init zsh)"
  fish  ~/.config/fish/config.fish:  mirror-host shell-init fish | source
"""


def add_parser(commands: Commands) -> None:
    shell_init = add_command(
        commands,
        "shell-init",
        run,
        help="print the integration that lets phones run commands in a shell",
        description=(
            "Print the integration that lets a phone's Send run a command line in SHELL "
            "(mirrored through tmux): SHELL marks its prompt (OSC 133), tells the host when "
            "it waits there, and takes the phone's command into its own line editor, only "
            "while its command line is empty. Load it at the end of the shell's start-up "
            "file, then open a new pane (or `exec SHELL` in one started before the host); "
            "panes the host starts itself (--source local) get it without this."
        ),
        notes=_SET_UP,
        docs=(("operations.md", "shell commands from phones"),),
    )
    shell_init.add_argument("shell", choices=SHELL_NAMES, metavar="SHELL", help="bash, zsh or fish")


def run(args: argparse.Namespace, stdin: TextIO, out: TextIO) -> int:
    out.write(snippet(args.shell))
    return 0
