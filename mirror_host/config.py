"""Settings: one frozen dataclass per room, and the merge of layered sources. Pure.

Values arrive in *layers*, each a flat mapping of dotted keys (``server.listen``)
with the name of where they came from. :func:`build_config` applies them in
order (defaults < TOML file < ``MIRROR_HOST_*`` environment < command-line
flags), parses and validates every value, and refuses unknown keys with an
error naming the key and its origin. Reading files and the environment happens in
``mirror_host.config_file``; this module only sees plain values.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mirror_host.auth.qr import address_problem
from mirror_host.errors import ConfigError

__all__ = [
    "KEYS",
    "LOG_FORMATS",
    "LOG_LEVELS",
    "SOURCE_KINDS",
    "CommandSettings",
    "AgliteSettings",
    "Config",
    "Endpoint",
    "HerdrSettings",
    "Layer",
    "LocalSettings",
    "OnProblem",
    "LogSettings",
    "Profile",
    "ServerSettings",
    "SourceSettings",
    "StateSettings",
    "TmuxSettings",
    "build_config",
    "flatten_table",
    "from_environment",
    "parse_endpoint",
    "split_host_port",
    "parse_size",
    "render_toml",
]

SOURCE_KINDS = ("local", "herdr", "tmux", "agliteterm")
LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMATS = ("text", "json")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A numeric address and a TCP port (0 = pick a free port)."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerSettings:
    """The TLS listener (host room)."""

    #: Where to accept Prowl clients. Prowl's own default port is 7880.
    listen: Endpoint = Endpoint("0.0.0.0", 7880)
    #: The address put in the QR payload; ``None`` = the listen address when it
    #: names one, else the first non-loopback IPv4 (``host/addresses.py``).
    advertise_address: str | None = None
    #: Established connections at once (each holds at most one pane); Prowl's host allows 16.
    max_connections: int = 16


@dataclass(frozen=True, slots=True, kw_only=True)
class StateSettings:
    """Where the device store, admin socket and status file live."""

    dir: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class LogSettings:
    """Log verbosity and shape."""

    level: str = "info"
    format: str = "text"
    #: Log every packet of a logged-in connection as hex (it holds screens and keys).
    packets: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceSettings:
    """Which pane source the host mirrors."""

    kind: str = "local"


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalSettings:
    """PTYs the host spawns itself."""

    #: Commands to run, one pane each; empty = the user's login shell.
    commands: tuple[str, ...] = ()
    #: Grid of each PTY, in cells.
    columns: int = 120
    rows: int = 40
    #: Start the commands again when the last pane exits.
    respawn: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class HerdrSettings:
    """How to reach Herdr."""

    #: The API socket; ``None`` = ``HERDR_SOCKET_PATH`` or Herdr's default path.
    socket: str | None = None
    #: The ``herdr`` executable for ``terminal session observe``; ``None`` = PATH.
    bin: str | None = None
    #: Named Herdr session (``HERDR_SESSION``), used when no socket is given.
    session: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TmuxSettings:
    """Which tmux server to mirror."""

    #: ``tmux -L NAME``.
    socket_name: str | None = None
    #: ``tmux -S PATH``; wins over ``socket_name``.
    socket_path: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandSettings:
    """What remote commands may do."""

    #: Phones may run a command line in a shell pane whose shell takes it into an
    #: empty command line (``shell-send``; local and tmux panes). ``--no-shell-send``
    #: turns it off.
    shell_send: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class AgliteSettings:
    """How to reach agliteterm's (or agwinterm's) control API; exactly one of the two."""

    #: A Unix socket that speaks the API (a socat + npiperelay relay, a fake).
    socket: str | None = None
    #: A command whose stdin/stdout carry one connection (``npiperelay.exe …``).
    command: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Profile:
    """A launchable agent profile for the ``create`` command."""

    id: str
    name: str
    agent: str
    args: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    """Every setting, one slice per room."""

    server: ServerSettings = field(default_factory=ServerSettings)
    state: StateSettings = field(default_factory=StateSettings)
    log: LogSettings = field(default_factory=LogSettings)
    source: SourceSettings = field(default_factory=SourceSettings)
    local: LocalSettings = field(default_factory=LocalSettings)
    herdr: HerdrSettings = field(default_factory=HerdrSettings)
    tmux: TmuxSettings = field(default_factory=TmuxSettings)
    commands: CommandSettings = field(default_factory=CommandSettings)
    agliteterm: AgliteSettings = field(default_factory=AgliteSettings)
    #: ``None`` = the built-in default catalogue; an empty tuple = no profiles.
    profiles: tuple[Profile, ...] | None = None


@dataclass(frozen=True, slots=True)
class Layer:
    """One source of settings: dotted keys to raw values, and where they came from."""

    origin: str
    values: Mapping[str, object]


# ------------------------------------------------------------------ value parsers


def split_host_port(text: str) -> tuple[str, int]:
    """``(host, port)`` of ``HOST:PORT`` or ``[IPv6]:PORT`` (the host not yet checked).

    Raises:
        ValueError: not of that form.
    """
    match = re.fullmatch(r"\[([^\]]+)\]:(\d+)|([^:\[\]]+):(\d+)", text.strip())
    if not match:
        raise ValueError(f"expected HOST:PORT or [IPv6]:PORT, got {text!r}")
    return match.group(1) or match.group(3), int(match.group(2) or match.group(4))


def parse_endpoint(text: str) -> Endpoint:
    """``HOST:PORT`` or ``[IPv6]:PORT`` with a numeric host, or ``localhost``
    (read as ``127.0.0.1``).

    A listener binds one address, and the QR code carries it: a host name could
    mean several, or one a phone resolves differently, so only ``localhost``
    (which ``attach localhost:PORT`` reaches too) is taken, as the address it means.

    Raises:
        ValueError: not of that form.
    """
    host, port = split_host_port(text)
    if host.lower() == "localhost":
        host = "127.0.0.1"
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(
            f"{host!r} is not a numeric address: give one of this machine's addresses "
            "(0.0.0.0 for every interface, 192.168.1.20, [::]) or localhost"
        ) from None
    if not 0 <= port <= 65535:
        raise ValueError(f"port {port} is outside 0 … 65535")
    return Endpoint(host, port)


def parse_size(text: str) -> tuple[int, int]:
    """``COLSxROWS`` with each side in 1 … 1000 (the VT grid limit).

    Raises:
        ValueError: not of that form, or out of range.
    """
    match = re.fullmatch(r"(\d+)[xX](\d+)", text.strip())
    if not match:
        raise ValueError(f"expected COLSxROWS such as 120x40, got {text!r}")
    columns, rows = int(match.group(1)), int(match.group(2))
    if not (1 <= columns <= 1000 and 1 <= rows <= 1000):
        raise ValueError("columns and rows must each be 1 … 1000")
    return columns, rows


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {type(value).__name__}")
    return value


def _optional_text(value: object) -> str | None:
    text = _text(value)
    return text or None


def _choice(options: tuple[str, ...]) -> Callable[[object], str]:
    def parse(value: object) -> str:
        text = _text(value).lower()
        if text not in options:
            raise ValueError(f"expected one of {', '.join(options)}, got {text!r}")
        return text

    return parse


def _text_list(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        return tuple(value)
    raise ValueError("expected a string or an array of strings")


def _address(value: object) -> str | None:
    text = _optional_text(value)
    if text is not None:
        text = text.strip()
        # Refused here, not at the first `pair`: no phone could use such an address.
        problem = address_problem(text)
        if problem:
            raise ValueError(
                f"{problem}: give the address phones dial, such as this machine's LAN address"
            )
    return text


def _boolean(value: object) -> bool:
    # Only a TOML boolean: text ("yes") is the environment's, read by from_environment.
    if isinstance(value, bool):
        return value
    unquote = " (a TOML boolean: no quotes)" if isinstance(value, str) else ""
    raise ValueError(f"expected true or false, got {value!r}{unquote}")


def _connection_limit(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1024:
        unquote = " (a TOML integer: no quotes)" if isinstance(value, str) else ""
        raise ValueError(f"expected an integer 1 … 1024, got {value!r}{unquote}")
    return value


_TRUE_WORDS = ("true", "1", "yes", "on")
_FALSE_WORDS = ("false", "0", "no", "off")


def from_environment(key: str, text: str) -> object:
    """A ``MIRROR_HOST_*`` variable's text as the value its setting takes: the
    environment has only text, so a yes/no or a number is read from it here (a
    config file says them in TOML's own types, and text there is refused).

    Raises:
        ValueError: the text is no value of that kind.
    """
    parser = KEYS[key][2]
    word = text.strip().lower()
    if parser is _boolean:
        if word in _TRUE_WORDS or word in _FALSE_WORDS:
            return word in _TRUE_WORDS
        raise ValueError(f"expected true or false (or yes/no, 1/0, on/off), got {text!r}")
    if parser is _connection_limit:
        if word.isdigit():
            return int(word)
        raise ValueError(f"expected an integer 1 … 1024, got {text!r}")
    return text


def _endpoint(value: object) -> Endpoint:
    return parse_endpoint(_text(value))


def _size(value: object) -> tuple[int, int]:
    return parse_size(_text(value))


#: Every settable key: (room attribute, field, parser). ``local.size`` is special:
#: it sets two fields.
KEYS: dict[str, tuple[str, str, Callable[[object], Any]]] = {
    "server.listen": ("server", "listen", _endpoint),
    "server.advertise_address": ("server", "advertise_address", _address),
    "server.max_connections": ("server", "max_connections", _connection_limit),
    "state.dir": ("state", "dir", _text),
    "log.level": ("log", "level", _choice(LOG_LEVELS)),
    "log.format": ("log", "format", _choice(LOG_FORMATS)),
    "log.packets": ("log", "packets", _boolean),
    "source.kind": ("source", "kind", _choice(SOURCE_KINDS)),
    "local.commands": ("local", "commands", _text_list),
    "local.size": ("local", "size", _size),
    "local.respawn": ("local", "respawn", _boolean),
    "herdr.socket": ("herdr", "socket", _optional_text),
    "herdr.bin": ("herdr", "bin", _optional_text),
    "herdr.session": ("herdr", "session", _optional_text),
    "tmux.socket_name": ("tmux", "socket_name", _optional_text),
    "tmux.socket_path": ("tmux", "socket_path", _optional_text),
    "commands.shell_send": ("commands", "shell_send", _boolean),
    "agliteterm.socket": ("agliteterm", "socket", _optional_text),
    "agliteterm.command": ("agliteterm", "command", _optional_text),
}

_PROFILE_KEYS = {"name", "agent", "args"}
_PROFILE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")


#: Where a lenient load reports each problem it skips (the admin commands warn and
#: go on: they need only the state directory). ``None`` = raise the first one.
OnProblem = Callable[[ConfigError], None] | None


def flatten_table(
    table: Mapping[str, object], origin: str, *, on_problem: OnProblem = None
) -> dict[str, object]:
    """Turn a parsed TOML document into dotted keys, refusing unknown ones.

    ``[profiles.<id>]`` tables become ``profiles.<id>.<key>``.

    Raises:
        ConfigError: an unknown section or key (named with ``origin``), unless
            ``on_problem`` is given: it is told, and the key is left out.
    """
    flat: dict[str, object] = {}
    for section, body in table.items():
        try:
            if not isinstance(body, Mapping):
                raise ConfigError(section, "expected a [table]", origin=origin)
            for key, value in body.items():
                try:
                    _flatten_key(flat, section, key, value, origin)
                except ConfigError as exc:
                    if on_problem is None:
                        raise
                    on_problem(exc)
        except ConfigError as exc:
            if on_problem is None:
                raise
            on_problem(exc)
    return flat


def _flatten_key(
    flat: dict[str, object], section: str, key: str, value: object, origin: str
) -> None:
    dotted = f"{section}.{key}"
    if section == "profiles":
        if not isinstance(value, Mapping):
            raise ConfigError(dotted, "expected a [profiles.<id>] table", origin=origin)
        if not value:
            raise ConfigError(dotted, "a profile needs an agent", origin=origin)
        for item, item_value in value.items():
            flat[f"{dotted}.{item}"] = item_value
        return
    if dotted not in KEYS:
        raise ConfigError(dotted, "unknown setting", origin=origin)
    flat[dotted] = value


def build_config(layers: Iterable[Layer], *, on_problem: OnProblem = None) -> Config:
    """Apply ``layers`` in order over the defaults and validate the result.

    Raises:
        ConfigError: an unknown key or an invalid value, naming both the key and
            the layer's origin; unless ``on_problem`` is given: it is told, and
            the key (or the profile) is left out.
    """
    rooms: dict[str, dict[str, Any]] = {}
    profiles: dict[str, dict[str, Any]] | None = None
    for layer in layers:
        for key, raw in layer.values.items():
            try:
                if key.startswith("profiles."):
                    profiles = profiles if profiles is not None else {}
                    _set_profile_key(profiles, key, raw, layer.origin)
                    continue
                _set_key(rooms, key, raw, layer.origin)
            except ConfigError as exc:
                if on_problem is None:
                    raise
                on_problem(exc)
    config = Config()
    replacements: dict[str, Any] = {
        room: dataclasses.replace(getattr(config, room), **values) for room, values in rooms.items()
    }
    if profiles is not None:
        for pid, profile_spec in list(profiles.items()):
            if not profile_spec.get("agent"):
                problem = ConfigError(
                    f"profiles.{pid}.agent",
                    "a profile needs an agent",
                    origin=profile_spec["origin"],
                )
                if on_problem is None:
                    raise problem
                on_problem(problem)
                del profiles[pid]
        replacements["profiles"] = tuple(
            Profile(
                id=pid,
                name=profile_spec.get("name") or pid,
                agent=profile_spec["agent"],
                args=tuple(profile_spec.get("args", ())),
            )
            for pid, profile_spec in sorted(profiles.items())
        )
    return dataclasses.replace(config, **replacements)


def _set_key(rooms: dict[str, dict[str, Any]], key: str, raw: object, origin: str) -> None:
    spec = KEYS.get(key)
    if spec is None:
        raise ConfigError(key, "unknown setting", origin=origin)
    room, attr, parse = spec
    try:
        value = parse(raw)
    except ValueError as exc:
        raise ConfigError(key, str(exc), origin=origin) from exc
    if key == "local.size":
        rooms.setdefault(room, {}).update(columns=value[0], rows=value[1])
    else:
        rooms.setdefault(room, {})[attr] = value


def _set_profile_key(
    profiles: dict[str, dict[str, Any]], key: str, raw: object, origin: str
) -> None:
    parts = key.split(".")
    if len(parts) != 3 or parts[2] not in _PROFILE_KEYS:
        raise ConfigError(key, "unknown setting (a profile takes name, agent, args)", origin=origin)
    pid, item = parts[1], parts[2]
    if not _PROFILE_ID.match(pid):
        raise ConfigError(
            key, "a profile id is 1-64 letters, digits, '.', '_' or '-'", origin=origin
        )
    spec = profiles.setdefault(pid, {"origin": origin})
    try:
        if item == "args":
            spec["args"] = _text_list(raw)
        elif not isinstance(raw, str) or not raw:
            raise ValueError("expected a non-empty string")
        else:
            spec[item] = raw
    except ValueError as exc:
        raise ConfigError(key, str(exc), origin=origin) from exc


def render_toml(config: Config) -> str:
    """``config`` as a TOML settings file that ``--config`` reads back unchanged.

    Unset optional settings are written as comments (TOML has no null).
    """
    lines: list[str] = []
    section = ""
    for dotted, (room, name, _) in KEYS.items():
        table, key = dotted.split(".", 1)
        if table != section:
            lines.extend(["", f"[{table}]"] if lines else [f"[{table}]"])
            section = table
        settings = getattr(config, room)
        if dotted == "local.size":
            value: object = f"{settings.columns}x{settings.rows}"
        else:
            value = getattr(settings, name)
        if value is None:
            lines.append(f"# {key} is not set")
        else:
            lines.append(f"{key} = {_toml_value(value)}")
    if config.profiles is None:
        lines.extend(["", "# [profiles]: the built-in catalogue"])
    for profile in config.profiles or ():
        lines.extend(["", f"[profiles.{profile.id}]"])
        lines.append(f"name = {_toml_value(profile.name)}")
        lines.append(f"agent = {_toml_value(profile.agent)}")
        lines.append(f"args = {_toml_value(profile.args)}")
    return "\n".join(lines) + "\n"


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, tuple | list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    return _toml_string(str(value))


def _toml_string(text: str) -> str:
    """A TOML basic string: quote, backslash and control characters escaped."""
    out = ['"']
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)
