"""Settings: one frozen dataclass per room, each setting declared once, and the merge
of layered sources. Pure.

Every setting is declared once, on its field (:func:`setting`): its type (how a
config file's value, a flag's and an environment variable's text are read, and
how it is written back), its default, its ``serve`` flag with the flag's help,
and whether it names a path. :data:`SETTINGS` is read off those declarations;
the config reader, the environment layer, the command line's flags,
``check-config`` (:func:`render_toml`) and ``service install`` all work from it.

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
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from mirror_host.auth.qr import address_problem
from mirror_host.errors import ConfigError

__all__ = [
    "CONFIG_FLAG",
    "CONFIG_VARIABLE",
    "ENV_PREFIX",
    "LOG_FORMATS",
    "LOG_LEVELS",
    "SETTINGS",
    "SOURCE_KINDS",
    "CommandSettings",
    "AgliteSettings",
    "Config",
    "Endpoint",
    "Flag",
    "HerdrSettings",
    "Layer",
    "LocalSettings",
    "OnProblem",
    "LogSettings",
    "Profile",
    "ServerSettings",
    "Setting",
    "SourceSettings",
    "StateSettings",
    "TmuxSettings",
    "ValueType",
    "build_config",
    "flatten_table",
    "parse_endpoint",
    "split_host_port",
    "parse_size",
    "render_toml",
]

SOURCE_KINDS = ("local", "herdr", "tmux", "agliteterm")
LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMATS = ("text", "json")

#: Every setting's environment variable is this and its key, ``MIRROR_HOST_SERVER_LISTEN``.
ENV_PREFIX = "MIRROR_HOST_"
#: The flag and the variable that name the config file (not settings: they say
#: where the settings are).
CONFIG_FLAG = "--config"
CONFIG_VARIABLE = ENV_PREFIX + "CONFIG"


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A numeric address and a TCP port (0 = pick a free port)."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


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
    # Only a TOML boolean: text ("yes") is the environment's, read by _boolean_text.
    if isinstance(value, bool):
        return value
    unquote = " (a TOML boolean: no quotes)" if isinstance(value, str) else ""
    raise ValueError(f"expected true or false, got {value!r}{unquote}")


def _connection_limit(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1024:
        unquote = " (a TOML integer: no quotes)" if isinstance(value, str) else ""
        raise ValueError(f"expected an integer 1 … 1024, got {value!r}{unquote}")
    return value


def _endpoint(value: object) -> Endpoint:
    return parse_endpoint(_text(value))


def _size(value: object) -> tuple[int, int]:
    return parse_size(_text(value))


# The environment has only text: a yes/no or a number is read from it here (a
# config file says them in TOML's own types, and text there is refused).

_TRUE_WORDS = ("true", "1", "yes", "on")
_FALSE_WORDS = ("false", "0", "no", "off")


def _as_given(text: str) -> object:
    return text


def _boolean_text(text: str) -> bool:
    word = text.strip().lower()
    if word in _TRUE_WORDS or word in _FALSE_WORDS:
        return word in _TRUE_WORDS
    raise ValueError(f"expected true or false (or yes/no, 1/0, on/off), got {text!r}")


def _connection_limit_text(text: str) -> int:
    word = text.strip()
    if word.isdigit():
        return int(word)
    raise ValueError(f"expected an integer 1 … 1024, got {text!r}")


def _commands_text(text: str) -> object:
    """A TOML array (``["htop", "bash -l"]``), or one command."""
    if not text.lstrip().startswith("["):
        return text
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"not a TOML array: {exc}") from exc


# ------------------------------------------------------------------ declarations


@dataclass(frozen=True, slots=True)
class ValueType:
    """What kind of value a setting holds, read from each place it can come from."""

    #: A config file's (TOML) value, or a flag's text, as the setting's value.
    parse: Callable[[object], Any]
    #: An environment variable's text as a value ``parse`` takes.
    from_text: Callable[[str], object] = _as_given
    #: The setting's value as its config file line writes it (``check-config``).
    show: Callable[[Any], object] = _as_given
    #: The only values it takes, for a flag's ``{a,b,c}``.
    choices: tuple[str, ...] = ()


def _one_of(options: tuple[str, ...]) -> ValueType:
    def parse(value: object) -> str:
        text = _text(value).lower()
        if text not in options:
            raise ValueError(f"expected one of {', '.join(options)}, got {text!r}")
        return text

    return ValueType(parse, choices=options)


_TEXT = ValueType(_text)
_OPTIONAL_TEXT = ValueType(_optional_text)
_ADDRESS = ValueType(_address)
_ENDPOINT = ValueType(_endpoint, show=str)
_SIZE = ValueType(_size, show=lambda size: f"{size[0]}x{size[1]}")
_COMMANDS = ValueType(_text_list, from_text=_commands_text)
_BOOLEAN = ValueType(_boolean, from_text=_boolean_text)
_CONNECTION_LIMIT = ValueType(_connection_limit, from_text=_connection_limit_text)

#: ``value``: ``--flag VALUE``; ``append``: repeatable, each one adds a value;
#: ``on`` and ``off``: a switch that sets the setting true, or false.
FlagKind = Literal["value", "append", "on", "off"]
#: A path is made absolute by ``service install`` and has ``~`` expanded; a
#: program is a path only when it has a slash (a bare name is looked up on PATH).
PathKind = Literal["path", "program"]


@dataclass(frozen=True, slots=True)
class Flag:
    """How ``serve`` (and, for a few, every command) takes a setting on its command line."""

    name: str
    #: Its ``--help`` line; ``{default}`` stands for the setting's default.
    help: str
    metavar: str | None = None
    kind: FlagKind = "value"
    #: Its value is parsed as the command line is read (a usage error), not at the merge.
    checked: bool = False

    @property
    def dest(self) -> str:
        """The attribute argparse keeps it in: ``--no-shell-send`` → ``shell_send``."""
        return self.name.removeprefix("--").removeprefix("no-").replace("-", "_")


@dataclass(frozen=True, slots=True)
class _Declared:
    type: ValueType
    flag: Flag | None
    path: PathKind | None
    key: str | None
    also: tuple[str, ...]


_DECLARED = "mirror_host.setting"
_T = TypeVar("_T")


def setting(
    default: _T,
    value_type: ValueType,
    *,
    flag: Flag | None = None,
    path: PathKind | None = None,
    key: str | None = None,
    also: tuple[str, ...] = (),
) -> _T:
    """Declare the field this is the default of a setting: ``room.field`` (or
    ``room.key``), read as ``value_type``, set by ``flag`` and by
    ``MIRROR_HOST_ROOM_FIELD``. ``also``: further fields of the room the one
    value sets (``local.size`` sets ``columns`` and ``rows``)."""
    declared = _Declared(value_type, flag, path, key, also)
    result: _T = field(default=default, metadata={_DECLARED: declared})
    return result


# ------------------------------------------------------------------ the rooms


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerSettings:
    """The TLS listener (host room)."""

    #: Prowl's own default port is 7880.
    listen: Endpoint = setting(
        Endpoint("0.0.0.0", 7880),
        _ENDPOINT,
        flag=Flag(
            "--listen",
            "address to accept clients on: a numeric address or localhost (default "
            "{default}, every interface; port 0 picks a free port)",
            metavar="HOST:PORT",
            checked=True,
        ),
    )
    #: ``None`` = the listen address when it names one, else the first
    #: non-loopback IPv4 (``host/addresses.py``).
    advertise_address: str | None = setting(
        None,
        _ADDRESS,
        flag=Flag(
            "--advertise-address",
            "address put in the pairing QR code (default: the --listen address when it names "
            "one, else the first non-loopback IPv4 of this machine)",
            metavar="IP",
        ),
    )
    #: Established connections at once (each holds at most one pane); Prowl's host allows 16.
    max_connections: int = setting(16, _CONNECTION_LIMIT)


@dataclass(frozen=True, slots=True, kw_only=True)
class StateSettings:
    """Where the device store, admin socket and status file live."""

    #: ``""`` here; the platform's directory is the default layer's (``config_file``).
    dir: str = setting(
        "",
        _TEXT,
        path="path",
        flag=Flag(
            "--state-dir",
            "device store, admin socket and status file (default: {default})",
            metavar="DIR",
        ),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class LogSettings:
    """Log verbosity and shape."""

    level: str = setting(
        "info", _one_of(LOG_LEVELS), flag=Flag("--log-level", "default: {default}")
    )
    format: str = setting(
        "text", _one_of(LOG_FORMATS), flag=Flag("--log-format", "default: {default}")
    )
    #: Log every packet of a logged-in connection as hex (it holds screens and keys).
    packets: bool = setting(
        False,
        _BOOLEAN,
        flag=Flag(
            "--log-packets",
            "log each packet of a logged-in connection as hex, for `wire decode`; the log "
            "then holds every screen and every key typed (security.md, below): debugging only",
            kind="on",
        ),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceSettings:
    """Which pane source the host mirrors."""

    kind: str = setting(
        "local",
        _one_of(SOURCE_KINDS),
        flag=Flag(
            "--source",
            "where panes come from: local (PTYs this host spawns, the default), herdr, tmux "
            "or agliteterm",
        ),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalSettings:
    """PTYs the host spawns itself."""

    #: Empty = the user's login shell.
    commands: tuple[str, ...] = setting(
        (),
        _COMMANDS,
        flag=Flag(
            "--local-command",
            "a command to run in its own pane (repeatable; default: your login shell)",
            metavar="CMD",
            kind="append",
        ),
    )
    #: Grid of each PTY, in cells: the one setting ``local.size`` sets both.
    columns: int = setting(
        120,
        _SIZE,
        key="size",
        also=("rows",),
        flag=Flag(
            "--local-size",
            "grid of each local pane (default {default})",
            metavar="COLSxROWS",
            checked=True,
        ),
    )
    rows: int = 40
    respawn: bool = setting(
        False,
        _BOOLEAN,
        flag=Flag(
            "--local-respawn",
            "start the commands again when the last pane exits (default: the host stays "
            "up with no panes, and says so)",
            kind="on",
        ),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class HerdrSettings:
    """How to reach Herdr."""

    #: ``None`` = ``HERDR_SOCKET_PATH`` or Herdr's default path.
    socket: str | None = setting(
        None,
        _OPTIONAL_TEXT,
        path="path",
        flag=Flag(
            "--herdr-socket",
            "Herdr's API socket (default: $HERDR_SOCKET_PATH, the --herdr-session socket, "
            "or ~/.config/herdr/herdr.sock)",
            metavar="PATH",
        ),
    )
    #: The ``herdr`` executable for ``terminal session observe``; ``None`` = PATH.
    bin: str | None = setting(
        None,
        _OPTIONAL_TEXT,
        path="program",
        flag=Flag(
            "--herdr-bin",
            "the herdr program used for `terminal session observe` (default: herdr on PATH; "
            "without it panes are polled every 200 ms)",
            metavar="PATH",
        ),
    )
    #: Used when no socket is given.
    session: str | None = setting(
        None,
        _OPTIONAL_TEXT,
        flag=Flag(
            "--herdr-session",
            "a named Herdr session, like herdr --session NAME (default: $HERDR_SESSION)",
            metavar="NAME",
        ),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class TmuxSettings:
    """Which tmux server to mirror."""

    socket_name: str | None = setting(
        None,
        _OPTIONAL_TEXT,
        flag=Flag(
            "--tmux-socket",
            "the tmux server's socket name, tmux -L NAME (default: your default server)",
            metavar="NAME",
        ),
    )
    #: Wins over ``socket_name``.
    socket_path: str | None = setting(
        None,
        _OPTIONAL_TEXT,
        path="path",
        flag=Flag(
            "--tmux-socket-path", "the tmux server's socket path (tmux -S PATH)", metavar="PATH"
        ),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandSettings:
    """What remote commands may do."""

    #: Phones may run a command line in a shell pane whose shell takes it into an
    #: empty command line (``shell-send``; local and tmux panes).
    shell_send: bool = setting(
        True,
        _BOOLEAN,
        flag=Flag(
            "--no-shell-send",
            "refuse phones' shell commands (send): shell-send is not advertised and no shell "
            "pane is listed idle (default: allowed where the pane's own shell, with the "
            "integration, waits at its prompt and takes the command into an empty line)",
            kind="off",
        ),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class AgliteSettings:
    """How to reach agliteterm's (or agwinterm's) control API; exactly one of the two."""

    #: A Unix socket that speaks the API (a socat + npiperelay relay, a fake).
    socket: str | None = setting(
        None,
        _OPTIONAL_TEXT,
        path="path",
        flag=Flag(
            "--agliteterm-socket",
            "a Unix socket that speaks agliteterm's control API (e.g. socat relaying "
            "its pipe through npiperelay; see operations.md below)",
            metavar="PATH",
        ),
    )
    #: A command whose stdin/stdout carry one connection (``npiperelay.exe …``).
    command: str | None = setting(
        None,
        _OPTIONAL_TEXT,
        flag=Flag(
            "--agliteterm-command",
            "a command whose stdin/stdout reach agliteterm's pipe, one per connection, "
            "e.g. 'npiperelay.exe -ep -s //./pipe/agliteterm'",
            metavar="CMD",
        ),
    )


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


# ------------------------------------------------------------------ the table


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting, as its field declares it."""

    #: ``server.listen``: the config file's ``[server] listen``.
    key: str
    #: The room of :class:`Config` it is in, and the fields of that room it sets.
    room: str
    fields: tuple[str, ...]
    #: ``MIRROR_HOST_SERVER_LISTEN``.
    env: str
    type: ValueType
    flag: Flag | None
    path: PathKind | None

    def assignments(self, value: Any) -> dict[str, Any]:
        """The room's fields that a parsed ``value`` sets."""
        if len(self.fields) == 1:
            return {self.fields[0]: value}
        return dict(zip(self.fields, value, strict=True))

    def value_in(self, config: Config) -> Any:
        """This setting's value in ``config`` (for ``local.size``, its ``(columns, rows)``)."""
        room = getattr(config, self.room)
        values = tuple(getattr(room, name) for name in self.fields)
        return values[0] if len(values) == 1 else values

    @property
    def default(self) -> Any:
        return self.value_in(Config())

    def shown(self, value: Any) -> object:
        """``value`` as a config file writes it (``None`` stays ``None``: unset)."""
        return None if value is None else self.type.show(value)


def _declared_settings() -> dict[str, Setting]:
    table: dict[str, Setting] = {}
    defaults = Config()
    for room in dataclasses.fields(Config):
        slice_ = getattr(defaults, room.name)
        if not dataclasses.is_dataclass(slice_):
            continue  # profiles: a table of tables, read on its own
        for item in dataclasses.fields(slice_):
            declared: _Declared | None = item.metadata.get(_DECLARED)
            if declared is None:
                continue  # set by another field's setting (``also``)
            key = f"{room.name}.{declared.key or item.name}"
            table[key] = Setting(
                key=key,
                room=room.name,
                fields=(item.name, *declared.also),
                env=ENV_PREFIX + key.replace(".", "_").upper(),
                type=declared.type,
                flag=declared.flag,
                path=declared.path,
            )
    return table


#: Every setting, by key, in the order a config file lists them.
SETTINGS: Mapping[str, Setting] = _declared_settings()


# ------------------------------------------------------------------ the merge

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
    if dotted not in SETTINGS:
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
        _drop_overridden_alternatives(rooms, layer)
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


#: Settings that name the same thing two ways: a layer that sets one overrides the
#: other as set by the layers under it (``--tmux-socket`` beats a config file's
#: ``tmux.socket_path``). One layer that sets both keeps both: serve's flags are
#: exclusive in its parser, the agliteterm source refuses the pair, and for tmux
#: the path wins.
ALTERNATIVES = (
    ("tmux.socket_name", "tmux.socket_path"),
    ("agliteterm.socket", "agliteterm.command"),
)


def _drop_overridden_alternatives(rooms: dict[str, dict[str, Any]], layer: Layer) -> None:
    for pair in ALTERNATIVES:
        for key, other in (pair, pair[::-1]):
            if key in layer.values and other not in layer.values:
                declared = SETTINGS[other]
                for name in declared.fields:
                    rooms.get(declared.room, {}).pop(name, None)


def _set_key(rooms: dict[str, dict[str, Any]], key: str, raw: object, origin: str) -> None:
    declared = SETTINGS.get(key)
    if declared is None:
        raise ConfigError(key, "unknown setting", origin=origin)
    try:
        value = declared.type.parse(raw)
    except ValueError as exc:
        raise ConfigError(key, str(exc), origin=origin) from exc
    rooms.setdefault(declared.room, {}).update(declared.assignments(value))


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
    for declared in SETTINGS.values():
        table, key = declared.key.split(".", 1)
        if table != section:
            lines.extend(["", f"[{table}]"] if lines else [f"[{table}]"])
            section = table
        value = declared.shown(declared.value_in(config))
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
