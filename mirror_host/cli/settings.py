"""Settings on the command line: the flags the settings declare, the settings group
every host command shares, and loading them (defaults < file < environment < flags)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from mirror_host.cli.command import argument_type
from mirror_host.config import CONFIG_FLAG, CONFIG_VARIABLE, SETTINGS, Config, OnProblem, Setting
from mirror_host.config_file import default_config_path, default_state_dir, load_config
from mirror_host.errors import ConfigError
from mirror_host.logs import configure_logging

__all__ = [
    "add_setting_flags",
    "add_settings_group",
    "admin_settings",
    "load_settings",
]

#: Where a group of flags goes: a parser, an argument group, a mutually exclusive one.
Container = argparse._ActionsContainer


def add_setting_flags(container: Container, *keys: str) -> None:
    """Add the flags of the settings ``keys``, in that order, as their fields declare them."""
    for key in keys:
        _add_flag(container, SETTINGS[key])


def _add_flag(container: Container, setting: Setting) -> None:
    flag = setting.flag
    assert flag is not None, setting.key
    # state.dir's default is the platform's, known here rather than in the declaration.
    default = default_state_dir() if setting.key == "state.dir" else setting.shown(setting.default)
    options: dict[str, Any] = {
        "dest": flag.dest,
        "help": flag.help.replace("{default}", str(default)),
    }
    if flag.metavar is not None:
        options["metavar"] = flag.metavar
    if setting.type.choices:
        options["choices"] = setting.type.choices
        # As the config file and the environment read them: --log-level DEBUG too.
        options["type"] = str.lower
    if flag.kind == "append":
        options["action"] = "append"
    elif flag.kind in ("on", "off"):
        options.update(action="store_const", const=flag.kind == "on")
    if flag.checked:
        options["type"] = argument_type(_checked_by(setting))
    container.add_argument(flag.name, **options)


def _checked_by(setting: Setting) -> Callable[[str], str]:
    def check(text: str) -> str:
        setting.type.parse(text)  # ValueError: a usage error naming the flag
        return text

    return check


def add_settings_group(parser: argparse.ArgumentParser) -> None:
    """The settings every host command takes: the config file, the state directory, logs."""
    group = parser.add_argument_group("settings (see operations.md below)")
    group.add_argument(
        CONFIG_FLAG,
        metavar="PATH",
        help=f"TOML settings file (default: ${CONFIG_VARIABLE}, else "
        f"{default_config_path()} if present)",
    )
    add_setting_flags(group, "state.dir", "log.level", "log.format")


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


def admin_settings(args: argparse.Namespace) -> Config:
    """The settings of a command that talks to the host (``pair``, ``devices`` …), its
    logging configured. It needs only the state directory: an unrelated typo must
    not stop ``revoke`` of a lost phone, so a bad setting is warned about and left
    out (``serve`` and ``check-config`` still refuse it)."""
    config = load_settings(args, on_problem=_warn_and_go_on)
    configure_logging(config.log.level, config.log.format)
    return config


def _warn_and_go_on(problem: ConfigError) -> None:
    print(
        f"mirror-host: warning: ignoring a configuration error ({problem}); "
        "`serve` refuses it: fix it, `mirror-host check-config` shows it",
        file=sys.stderr,
    )
