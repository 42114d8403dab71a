"""What ``mirror-host service`` writes and runs: a systemd user unit or a launchd agent. Pure.

Everything here takes its inputs (the serve flags, the environment, the paths,
the platform) and returns text, bytes, a plan of steps or a parsed answer;
:mod:`mirror_host.system_service.manage` carries the plans out.

The service runs ``python -m mirror_host serve`` with the interpreter that ran
``service install`` and exactly the serve flags given to it (relative paths made
absolute), in an environment that carries the variables that decide what
``serve`` finds: ``PATH`` (for herdr, tmux and the agents), the shell and
locale, the XDG directories, Herdr's and tmux's socket variables and every
``MIRROR_HOST_*`` setting. So the service starts with the settings
``mirror-host check-config`` shows in the shell it was installed from.
"""

from __future__ import annotations

import plistlib
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Literal

from mirror_host.config import CONFIG_FLAG, CONFIG_VARIABLE, ENV_PREFIX, SETTINGS
from mirror_host.errors import ConfigError, ServiceError
from mirror_host.shell.environment import INJECTED_VARIABLES, SERVICE_MARKER

__all__ = [
    "CARRIED_ENVIRONMENT",
    "LAUNCHD_LABEL",
    "LOG_PACKETS_REFUSED",
    "SYSTEMD_UNIT",
    "MakeDirs",
    "Paths",
    "RemoveFile",
    "Run",
    "SERVICE_MARKER",
    "ServiceKind",
    "ServiceSpec",
    "Step",
    "WriteFile",
    "command_from_definition",
    "describe_command",
    "install_plan",
    "launchd_plist",
    "parse_launchctl_print",
    "parse_systemctl_show",
    "refuse_packet_log_in_service",
    "service_environment",
    "service_paths",
    "service_spec",
    "systemd_quote",
    "systemd_unit",
    "uninstall_plan",
]

ServiceKind = Literal["systemd", "launchd"]

SYSTEMD_UNIT = "mirror-host.service"
LAUNCHD_LABEL = "dev.mirror-host"

#: Variables copied from the installing shell into the service's environment.
CARRIED_ENVIRONMENT = (
    "PATH",
    "SHELL",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "XDG_CONFIG_HOME",
    "XDG_STATE_HOME",
    "HERDR_SOCKET_PATH",
    "HERDR_SESSION",
    "TMUX_TMPDIR",
)

#: serve flags (and variables) that hold a path, read off the settings' own
#: declarations: made absolute at install time, since the service does not start
#: in the installing shell's directory. A program is a path only with a slash (a
#: bare name is looked up on PATH).
_PATH_FLAGS = (
    CONFIG_FLAG,
    *(s.flag.name for s in SETTINGS.values() if s.flag and s.path == "path"),
)
_PROGRAM_FLAGS = tuple(s.flag.name for s in SETTINGS.values() if s.flag and s.path == "program")
_PATH_VARIABLES = (
    CONFIG_VARIABLE,
    *(s.env for s in SETTINGS.values() if s.path == "path"),
    "HERDR_SOCKET_PATH",
    "XDG_CONFIG_HOME",
    "XDG_STATE_HOME",
)
_PROGRAM_VARIABLES = tuple(s.env for s in SETTINGS.values() if s.path == "program")


@dataclass(frozen=True, slots=True)
class ServiceSpec:
    """What the service runs: its command line and environment."""

    command: tuple[str, ...]
    environment: tuple[tuple[str, str], ...]
    home: str


@dataclass(frozen=True, slots=True)
class Paths:
    """Where the service's files live for one user."""

    definition: str
    log: str | None = None

    @property
    def directory(self) -> str:
        return str(PurePosixPath(self.definition).parent)


@dataclass(frozen=True, slots=True)
class WriteFile:
    path: str
    content: bytes


@dataclass(frozen=True, slots=True)
class MakeDirs:
    path: str


@dataclass(frozen=True, slots=True)
class RemoveFile:
    path: str


@dataclass(frozen=True, slots=True)
class Run:
    """A command to run. ``may_fail``: a failure is reported but does not stop the plan."""

    argv: tuple[str, ...]
    may_fail: bool = False
    attempts: int = 1


Step = WriteFile | MakeDirs | RemoveFile | Run


#: Why a service never logs packets (docs/security.md: the log would keep every
#: screen and every key typed, and a service's log is kept).
LOG_PACKETS_REFUSED = (
    "--log-packets is not for a service: its kept log would hold every screen and every "
    "key typed; debug with `mirror-host serve --log-packets` in a terminal instead"
)

# SERVICE_MARKER (shell/environment.py) is set in the unit's and the agent's
# environment: ``serve`` started with it is a service, and refuses packet logging
# however it was asked for (the flag, the config file, ``MIRROR_HOST_LOG_PACKETS``),
# so an edit after ``service install`` cannot turn it on.


def refuse_packet_log_in_service(environ: Mapping[str, str], log_packets: bool) -> None:
    """Stop a ``serve`` that runs as the service and was asked to log packets.

    Raises:
        ConfigError: ``log.packets`` is on and ``environ`` carries :data:`SERVICE_MARKER`.
    """
    if log_packets and environ.get(SERVICE_MARKER):
        where = f"the {environ[SERVICE_MARKER]} service"
        raise ConfigError("log.packets", f"refused in {where}: {LOG_PACKETS_REFUSED}")


def _absolute(value: str, cwd: str, *, program: bool) -> str:
    if program and "/" not in value:
        return value
    if value.startswith("~") or PurePosixPath(value).is_absolute():
        return value
    return str(PurePosixPath(cwd) / value)


def _absolute_flags(serve_flags: Sequence[str], cwd: str) -> list[str]:
    out: list[str] = []
    pending: str | None = None
    for arg in serve_flags:
        if pending is not None:
            out.append(_absolute(arg, cwd, program=pending in _PROGRAM_FLAGS))
            pending = None
            continue
        flag, equals, value = arg.partition("=")
        if flag in _PATH_FLAGS or flag in _PROGRAM_FLAGS:
            if equals:
                out.append(f"{flag}={_absolute(value, cwd, program=flag in _PROGRAM_FLAGS)}")
            else:
                out.append(arg)
                pending = flag
            continue
        out.append(arg)
    return out


def service_environment(environ: Mapping[str, str], cwd: str) -> tuple[tuple[str, str], ...]:
    """The variables the service gets from ``environ``, sorted, paths made absolute."""
    chosen: dict[str, str] = {}
    for name, value in environ.items():
        if name == SERVICE_MARKER:  # the service's own, set by the unit or agent itself
            continue
        if name in INJECTED_VARIABLES:  # a shell's, from the integration: not the service's
            continue
        if name in CARRIED_ENVIRONMENT or name.startswith(ENV_PREFIX):
            if name in _PATH_VARIABLES and value:
                value = _absolute(value, cwd, program=False)
            elif name in _PROGRAM_VARIABLES and value:
                value = _absolute(value, cwd, program=True)
            chosen[name] = value
    return tuple(sorted(chosen.items()))


def service_spec(
    python: str,
    serve_flags: Sequence[str],
    *,
    environ: Mapping[str, str],
    cwd: str,
    home: str,
) -> ServiceSpec:
    """The service for ``mirror-host serve SERVE_FLAGS`` run by ``python``.

    Raises:
        ServiceError: ``--pair`` or ``--log-packets`` was given (the code, or
            every screen and key, would end up in the service's kept log), or
            ``python`` is not an absolute path.
    """
    if any(arg == "--pair" for arg in serve_flags):
        raise ServiceError(
            "--pair is not for a service: the pairing code would go to the service's log; "
            "install without it and run `mirror-host pair` in a terminal"
        )
    if any(arg == "--log-packets" for arg in serve_flags):
        raise ServiceError(LOG_PACKETS_REFUSED)
    if not PurePosixPath(python).is_absolute():
        raise ServiceError(f"cannot tell which Python runs mirror-host ({python!r})")
    command = (python, "-m", "mirror_host", "serve", *_absolute_flags(serve_flags, cwd))
    return ServiceSpec(command, service_environment(environ, cwd), home)


def service_paths(kind: ServiceKind, *, home: str, environ: Mapping[str, str]) -> Paths:
    """The unit or agent file (and, for launchd, the log file) for this user."""
    if kind == "launchd":
        return Paths(
            definition=f"{home}/Library/LaunchAgents/{LAUNCHD_LABEL}.plist",
            log=f"{home}/Library/Logs/mirror-host/mirror-host.log",
        )
    config_home = environ.get("XDG_CONFIG_HOME") or f"{home}/.config"
    return Paths(definition=f"{config_home}/systemd/user/{SYSTEMD_UNIT}")


# ---------------------------------------------------------------- systemd

_SYSTEMD_PLAIN = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def systemd_quote(word: str, *, expands_variables: bool) -> str:
    """One word for ``ExecStart=`` (``expands_variables``) or ``Environment=``.

    ``%`` starts a specifier in both and is doubled; ``$`` starts a variable
    only in ``ExecStart=``, where it is doubled too (systemd.service(5),
    systemd.exec(5)). Words with other than plain characters are double-quoted
    with C escapes.
    """
    escaped = word.replace("%", "%%")
    if expands_variables:
        escaped = escaped.replace("$", "$$")
    if word and _SYSTEMD_PLAIN.fullmatch(word):
        return escaped
    escaped = escaped.replace("\\", "\\\\").replace('"', '\\"')
    escaped = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", escaped)
    return f'"{escaped}"'


def systemd_unit(spec: ServiceSpec) -> str:
    """The user unit that runs ``spec``.

    ``KillMode=mixed`` sends SIGTERM to the host alone, which tells every logged-in device
    the host stopped and hangs up its local panes itself; exit status 2 (bad
    settings) is not restarted, since it would fail the same way again.
    """
    lines = [
        "# Written by `mirror-host service install`; `mirror-host service uninstall` removes it.",
        "[Unit]",
        "Description=mirror-host, a Prowl remote mirror host",
        "",
        "[Service]",
        "Type=exec",
        "ExecStart=" + " ".join(systemd_quote(w, expands_variables=True) for w in spec.command),
    ]
    lines += [
        f"Environment={systemd_quote(f'{k}={v}', expands_variables=False)}"
        for k, v in _marked(spec.environment, "systemd")
    ]
    lines += [
        "WorkingDirectory=~",
        "SyslogIdentifier=mirror-host",
        "Restart=on-failure",
        "RestartSec=5",
        "RestartPreventExitStatus=2",
        "KillMode=mixed",
        "TimeoutStopSec=20",
        "",
        "[Install]",
        "WantedBy=default.target",
        "",
    ]
    return "\n".join(lines)


def _marked(
    environment: tuple[tuple[str, str], ...], kind: ServiceKind
) -> tuple[tuple[str, str], ...]:
    """``environment`` with :data:`SERVICE_MARKER` set to ``kind``, sorted."""
    return tuple(sorted((*environment, (SERVICE_MARKER, kind))))


def parse_systemctl_show(text: str) -> dict[str, str]:
    """``systemctl show -p A,B`` output (``A=value`` lines) as a dictionary."""
    result: dict[str, str] = {}
    for line in text.splitlines():
        key, equals, value = line.partition("=")
        if equals:
            result[key.strip()] = value.strip()
    return result


# ---------------------------------------------------------------- launchd


def launchd_plist(spec: ServiceSpec, log_path: str) -> bytes:
    """The launch agent that runs ``spec`` at login and restarts it when it fails.

    launchd has no ``RestartPreventExitStatus``: any non-zero exit, a
    configuration error's 2 included, is started again, at most every
    ``ThrottleInterval`` seconds (docs/operations.md says so).
    """
    agent: dict[str, object] = {
        "Label": LAUNCHD_LABEL,
        "ProgramArguments": list(spec.command),
        "EnvironmentVariables": dict(_marked(spec.environment, "launchd")),
        "WorkingDirectory": spec.home,
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},
        "ThrottleInterval": 5,
        "ExitTimeOut": 20,
        "StandardOutPath": log_path,
        "StandardErrorPath": log_path,
    }
    return plistlib.dumps(agent, sort_keys=True)


_LAUNCHCTL_FIELD = re.compile(r"^\s*(state|pid|last exit code)\s*=\s*(.+?)\s*$")


def parse_launchctl_print(text: str) -> dict[str, str]:
    """The ``state``, ``pid`` and ``last exit code`` of ``launchctl print`` (top level)."""
    result: dict[str, str] = {}
    for line in text.splitlines():
        match = _LAUNCHCTL_FIELD.match(line)
        if match and match.group(1) not in result:
            result[match.group(1)] = match.group(2)
    return result


# ---------------------------------------------------------------- plans


def _launchd_target(uid: int) -> str:
    return f"gui/{uid}"


def install_plan(kind: ServiceKind, spec: ServiceSpec, paths: Paths, *, uid: int) -> list[Step]:
    """The steps that write the service definition and (re)start it."""
    if kind == "launchd":
        assert paths.log is not None
        domain = _launchd_target(uid)
        service = f"{domain}/{LAUNCHD_LABEL}"
        return [
            MakeDirs(paths.directory),
            MakeDirs(str(PurePosixPath(paths.log).parent)),
            WriteFile(paths.definition, launchd_plist(spec, paths.log)),
            # An agent installed before is unloaded first, so the new one loads.
            Run(("launchctl", "bootout", service), may_fail=True),
            Run(("launchctl", "enable", service)),
            Run(("launchctl", "bootstrap", domain, paths.definition), attempts=3),
        ]
    return [
        MakeDirs(paths.directory),
        WriteFile(paths.definition, systemd_unit(spec).encode("utf-8")),
        Run(("systemctl", "--user", "daemon-reload")),
        Run(("systemctl", "--user", "enable", SYSTEMD_UNIT)),
        # restart, not start: a running service takes the new settings.
        Run(("systemctl", "--user", "restart", SYSTEMD_UNIT)),
    ]


def uninstall_plan(kind: ServiceKind, paths: Paths, *, uid: int) -> list[Step]:
    """The steps that stop the service and remove its definition (logs stay)."""
    if kind == "launchd":
        service = f"{_launchd_target(uid)}/{LAUNCHD_LABEL}"
        return [
            Run(("launchctl", "bootout", service), may_fail=True),
            RemoveFile(paths.definition),
        ]
    return [
        Run(("systemctl", "--user", "disable", "--now", SYSTEMD_UNIT), may_fail=True),
        RemoveFile(paths.definition),
        Run(("systemctl", "--user", "daemon-reload"), may_fail=True),
    ]


def describe_command(spec: ServiceSpec) -> str:
    """The service's command as a shell would type it."""
    return shlex.join(spec.command)


def command_from_definition(kind: ServiceKind, content: bytes) -> str | None:
    """The command an installed unit or agent runs, for ``service status``."""
    if kind == "launchd":
        try:
            agent = plistlib.loads(content)
        except Exception:  # plistlib raises several types for a damaged file
            return None
        arguments = agent.get("ProgramArguments") if isinstance(agent, dict) else None
        if isinstance(arguments, list) and all(isinstance(a, str) for a in arguments):
            return shlex.join(arguments)
        return None
    for line in content.decode("utf-8", "replace").splitlines():
        if line.startswith("ExecStart="):
            return line.removeprefix("ExecStart=")
    return None
