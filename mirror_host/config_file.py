"""Read settings from disk and the environment, and know the platform's paths. I/O.

The pure merge lives in :mod:`mirror_host.config`; this module only gathers the
layers: built-in defaults (with platform paths), the TOML file, ``MIRROR_HOST_*``
variables and command-line flags.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path

from mirror_host.config import (
    CONFIG_VARIABLE,
    ENV_PREFIX,
    SETTINGS,
    Config,
    Layer,
    OnProblem,
    build_config,
    flatten_table,
)
from mirror_host.errors import ConfigError
from mirror_host.shell.environment import INJECTED_VARIABLES, SERVICE_MARKER

__all__ = [
    "default_config_path",
    "default_state_dir",
    "env_layer",
    "home_problem",
    "load_config",
    "read_config_file",
]

#: Names under the prefix that are not settings: the config file's path, the
#: service's marker, and what the shell integration hands to shells.
_ENV_RESERVED = frozenset({CONFIG_VARIABLE, SERVICE_MARKER, *INJECTED_VARIABLES})


def _home() -> Path:
    return Path(os.environ.get("HOME") or Path.home())


def default_config_path() -> Path:
    """``$XDG_CONFIG_HOME/mirror-host/config.toml`` (Linux) or Application Support (macOS)."""
    if sys.platform == "darwin":
        return _home() / "Library" / "Application Support" / "mirror-host" / "config.toml"
    base = os.environ.get("XDG_CONFIG_HOME") or str(_home() / ".config")
    return Path(base) / "mirror-host" / "config.toml"


def default_state_dir() -> Path:
    """``$XDG_STATE_HOME/mirror-host`` (Linux) or Application Support (macOS)."""
    if sys.platform == "darwin":
        return _home() / "Library" / "Application Support" / "mirror-host"
    base = os.environ.get("XDG_STATE_HOME") or str(_home() / ".local" / "state")
    return Path(base) / "mirror-host"


def home_problem(env: Mapping[str, str]) -> str | None:
    """Why ``HOME`` cannot hold a default file of ours, or ``None``.

    An empty ``HOME`` would put it under ``/``, a relative one under the
    current directory, and a home that does not exist would be created by the
    first write. An unset ``HOME`` is no problem: ``Path.home()`` then asks the
    password database.
    """
    home = env.get("HOME")
    if home is None:
        return None
    if not home:
        return "HOME is empty"
    if not os.path.isabs(home):
        return f"HOME ({home}) is not an absolute path"
    if not os.path.isdir(home):
        return f"HOME ({home}) is not a directory that exists"
    return None


def _default_state_dir_problem(env: Mapping[str, str]) -> str | None:
    """Why the default state directory cannot be used here, or ``None``: it lies in
    the home directory, unless ``XDG_STATE_HOME`` names another place (Linux)."""
    if sys.platform != "darwin" and os.path.isabs(env.get("XDG_STATE_HOME") or ""):
        return None
    problem = home_problem(env)
    if problem is None:
        return None
    also = "" if sys.platform == "darwin" else " (or set XDG_STATE_HOME)"
    return f"{problem}, so there is no default state directory: give --state-dir DIR{also}"


def read_config_file(
    path: Path, *, required: bool, named_by: str = "--config", on_problem: OnProblem = None
) -> Layer | None:
    """Parse a TOML config file into a layer; errors name ``named_by``, where the path came from.

    Raises:
        ConfigError: the file is missing (when ``required``), unreadable, not
            TOML, or holds an unknown key; unless ``on_problem`` is given: it is
            told, and the file (or the key) is left out.
    """
    try:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            if required:
                raise ConfigError(named_by, "file not found", origin=str(path)) from None
            return None
        except OSError as exc:
            raise ConfigError(named_by, f"cannot read: {exc.strerror}", origin=str(path)) from exc
        try:
            table = tomllib.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(named_by, f"not valid TOML: {exc}", origin=str(path)) from exc
    except ConfigError as exc:
        if on_problem is None:
            raise
        on_problem(exc)
        return None
    return Layer(str(path), flatten_table(table, str(path), on_problem=on_problem))


def env_layer(environ: Mapping[str, str], *, on_problem: OnProblem = None) -> Layer:
    """``MIRROR_HOST_SECTION_KEY=value`` variables as a layer.

    ``MIRROR_HOST_LOCAL_COMMANDS`` takes a TOML array (``["htop", "bash"]``) or one
    command. Profiles cannot be set from the environment.

    Raises:
        ConfigError: a ``MIRROR_HOST_*`` variable that names no setting; unless
            ``on_problem`` is given: it is told, and the variable is left out.
    """
    by_env = {setting.env: setting for setting in SETTINGS.values()}
    values: dict[str, object] = {}
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX) or name in _ENV_RESERVED:
            continue
        try:
            setting = by_env.get(name)
            if setting is None:
                raise ConfigError(name, "unknown setting", origin="environment")
            try:
                values[setting.key] = setting.type.from_text(raw)
            except ValueError as exc:
                raise ConfigError(name, str(exc), origin="environment") from exc
        except ConfigError as exc:
            if on_problem is None:
                raise
            on_problem(exc)
    return Layer("environment", values)


def load_config(
    *,
    config_path: str | None,
    flags: Mapping[str, object],
    environ: Mapping[str, str] | None = None,
    on_problem: OnProblem = None,
) -> Config:
    """Merge defaults < TOML file < environment < flags.

    ``config_path`` (``--config``) must exist when given; otherwise
    ``MIRROR_HOST_CONFIG`` or the platform default is read if present.

    Raises:
        ConfigError: any unknown or invalid setting, naming its origin; unless
            ``on_problem`` is given: each problem is told to it and left out,
            and the rest of the settings still apply.
    """
    env = os.environ if environ is None else environ
    defaults = Layer("default", {"state.dir": str(default_state_dir())})
    explicit = config_path or env.get(CONFIG_VARIABLE)
    path = Path(explicit).expanduser() if explicit else default_config_path()
    named_by = "--config" if config_path else CONFIG_VARIABLE if explicit else "config file"
    file_layer = read_config_file(
        path, required=bool(explicit), named_by=named_by, on_problem=on_problem
    )
    layers = [defaults]
    if file_layer is not None:
        layers.append(file_layer)
    layers.append(env_layer(env, on_problem=on_problem))
    layers.append(Layer("command line", {k: v for k, v in flags.items() if v is not None}))
    config = build_config(layers, on_problem=on_problem)
    if not any("state.dir" in layer.values for layer in layers[1:]):
        # Not left to on_problem: every command, `revoke` too, needs the directory.
        problem = _default_state_dir_problem(env)
        if problem is not None:
            raise ConfigError("state.dir", problem)
    state_dir = Path(config.state.dir).expanduser()
    if not state_dir.is_absolute():
        state_dir = Path.cwd() / state_dir
    config = dataclasses.replace(
        config, state=dataclasses.replace(config.state, dir=str(state_dir))
    )
    return _paths_expanded(config)


def _paths_expanded(config: Config) -> Config:
    """``~`` in every path setting expanded once, here, so ``check-config`` shows
    each as it is used (as it shows ``state.dir``)."""
    for setting in SETTINGS.values():
        value = setting.value_in(config)
        if setting.path is not None and isinstance(value, str) and value.startswith("~"):
            room = getattr(config, setting.room)
            expanded = dataclasses.replace(room, **setting.assignments(os.path.expanduser(value)))
            config = dataclasses.replace(config, **{setting.room: expanded})
    return config
