"""``mirror-host service install|status|uninstall``: carry out the plans. I/O.

The plans, the unit and the agent come from :mod:`mirror_host.system_service.units`.
What this module touches of the machine is one :class:`System` (the platform,
the environment, the home directory, the command runner), so tests run every
step with a recording runner and a temporary home.
"""

from __future__ import annotations

import os
import pwd
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from mirror_host.errors import ServiceError
from mirror_host.files import write_atomic
from mirror_host.system_service.units import (
    LAUNCHD_LABEL,
    SYSTEMD_UNIT,
    MakeDirs,
    Paths,
    RemoveFile,
    Run,
    ServiceKind,
    Step,
    WriteFile,
    command_from_definition,
    install_plan,
    parse_launchctl_print,
    parse_systemctl_show,
    service_paths,
    service_spec,
    uninstall_plan,
)

__all__ = ["CommandResult", "System", "install", "run_command", "status", "uninstall"]

#: How long one systemctl/launchctl/loginctl call may take.
COMMAND_SECONDS = 60


@dataclass(frozen=True, slots=True)
class CommandResult:
    returncode: int
    stdout: str
    stderr: str


Runner = Callable[[Sequence[str]], CommandResult]


def run_command(argv: Sequence[str]) -> CommandResult:
    """Run ``argv`` to completion (at most a minute); 127 when the program is missing."""
    try:
        done = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            timeout=COMMAND_SECONDS,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError:
        return CommandResult(127, "", f"{argv[0]}: command not found")
    except subprocess.TimeoutExpired:
        return CommandResult(124, "", f"no answer within {COMMAND_SECONDS} s")
    return CommandResult(done.returncode, done.stdout, done.stderr)


def _user_name() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())


@dataclass(frozen=True)
class System:
    """The machine the service is installed on, and how commands run there."""

    platform: str = sys.platform
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    home: str = field(default_factory=lambda: os.environ.get("HOME") or str(Path.home()))
    cwd: str = field(default_factory=os.getcwd)
    uid: int = field(default_factory=os.getuid)
    user: str = field(default_factory=_user_name)
    python: str = sys.executable
    runner: Runner = run_command
    sleep: Callable[[float], None] = time.sleep

    def kind(self) -> ServiceKind:
        """systemd on Linux, launchd on macOS.

        Raises:
            ServiceError: any other system.
        """
        if self.platform == "darwin":
            return "launchd"
        if self.platform.startswith("linux"):
            return "systemd"
        raise ServiceError(
            f"no service manager mirror-host knows on {self.platform} (it writes systemd user "
            "units on Linux and launchd agents on macOS); run `mirror-host serve` under your own"
        )

    def paths(self) -> Paths:
        return service_paths(self.kind(), home=self.home, environ=self.environ)


def _first_line(result: CommandResult) -> str:
    text = (result.stderr.strip() or result.stdout.strip()).splitlines()
    return text[0] if text else f"exit status {result.returncode}"


def _hint(kind: ServiceKind, result: CommandResult, user: str) -> str:
    if result.returncode == 127:
        manager = "systemd" if kind == "systemd" else "launchd"
        return f" (no {manager} here: run `mirror-host serve` under your own supervisor)"
    if kind == "systemd" and "bus" in result.stderr.lower():
        return (
            " (systemctl --user needs your user's systemd: log in as that user rather than "
            f"su/sudo, or run `loginctl enable-linger {user}` as root)"
        )
    return ""


def _execute(steps: Sequence[Step], system: System, kind: ServiceKind, out: TextIO) -> bool:
    """Carry out ``steps`` in order; False after the first required one that failed."""
    for step in steps:
        if isinstance(step, MakeDirs):
            Path(step.path).mkdir(parents=True, exist_ok=True)
        elif isinstance(step, WriteFile):
            write_atomic(Path(step.path), step.content, mode=0o644)
            out.write(f"wrote {step.path}\n")
        elif isinstance(step, RemoveFile):
            try:
                Path(step.path).unlink()
                out.write(f"removed {step.path}\n")
            except FileNotFoundError:
                out.write(f"{step.path} was not there\n")
        else:
            if not _run(step, system, kind, out):
                return False
    return True


def _run(step: Run, system: System, kind: ServiceKind, out: TextIO) -> bool:
    shown = shlex.join(step.argv)
    result = CommandResult(1, "", "")
    for attempt in range(step.attempts):
        if attempt:
            system.sleep(0.5)
        result = system.runner(step.argv)
        if result.returncode == 0:
            out.write(f"ran {shown}\n")
            return True
    if step.may_fail:
        out.write(f"note: `{shown}` failed: {_first_line(result)}\n")
        return True
    out.write(
        f"mirror-host: `{shown}` failed: {_first_line(result)}{_hint(kind, result, system.user)}\n"
    )
    return False


def _show_plan(steps: Sequence[Step], out: TextIO) -> None:
    for step in steps:
        if isinstance(step, WriteFile):
            out.write(f"would write {step.path}:\n")
            out.write(step.content.decode("utf-8"))
            out.write("\n" if not step.content.endswith(b"\n") else "")
        elif isinstance(step, MakeDirs):
            out.write(f"would create {step.path}/ (if missing)\n")
        elif isinstance(step, RemoveFile):
            out.write(f"would remove {step.path}\n")
        else:
            out.write(f"would run {shlex.join(step.argv)}\n")


def _lingering(system: System) -> bool | None:
    """Whether the user's systemd runs without a login (``loginctl``); None if unknown."""
    result = system.runner(("loginctl", "show-user", system.user, "--property=Linger", "--value"))
    if result.returncode != 0:
        return None
    return result.stdout.strip() == "yes"


def _linger_note(system: System) -> str:
    lingering = _lingering(system)
    if lingering is None:
        return ""
    if lingering:
        return "  runs:    from boot, logged in or not (lingering is on)\n"
    return (
        "  runs:    while you are logged in; to start it at boot and keep it running after "
        f"you log out: loginctl enable-linger {system.user}\n"
    )


def install(serve_flags: Sequence[str], *, dry_run: bool, out: TextIO, system: System) -> int:
    """Write the unit/agent for ``mirror-host serve SERVE_FLAGS``, enable and (re)start it.

    Returns 0, or 1 when a step failed (said on ``out``).

    Raises:
        ServiceError: an unsupported platform or ``--pair`` among the flags.
    """
    kind = system.kind()
    paths = system.paths()
    spec = service_spec(
        system.python, serve_flags, environ=system.environ, cwd=system.cwd, home=system.home
    )
    steps = install_plan(kind, spec, paths, uid=system.uid)
    if dry_run:
        _show_plan(steps, out)
        return 0
    if not _execute(steps, system, kind, out):
        out.write(f"The definition stays at {paths.definition}; `mirror-host service uninstall` "
                  "removes it.\n")  # fmt: skip
        return 1
    if kind == "systemd":
        out.write(
            f"mirror-host runs as the systemd user service {SYSTEMD_UNIT}.\n"
            "  status:  mirror-host service status\n"
            f"  logs:    journalctl --user -u {SYSTEMD_UNIT}\n"
            "  pair:    mirror-host pair\n"
        )
        out.write(_linger_note(system))
    else:
        out.write(
            f"mirror-host runs as the launchd agent {LAUNCHD_LABEL}, started at each login.\n"
            "  status:  mirror-host service status\n"
            f"  logs:    {paths.log}\n"
            "  pair:    mirror-host pair\n"
        )
    return 0


def uninstall(*, dry_run: bool, out: TextIO, system: System) -> int:
    """Stop the service and remove its unit/agent; the devices and logs stay.

    Returns 0 (also when nothing was installed).

    Raises:
        ServiceError: an unsupported platform.
    """
    kind = system.kind()
    paths = system.paths()
    steps = uninstall_plan(kind, paths, uid=system.uid)
    if dry_run:
        _show_plan(steps, out)
        return 0
    _execute(steps, system, kind, out)
    kept = "the journal" if kind == "systemd" else paths.log
    out.write(f"The service is removed; paired devices stay, and the logs in {kept}.\n")
    return 0


def status(*, out: TextIO, system: System) -> int:
    """Report whether the service is installed, enabled and running.

    Returns 0 when it runs, 1 otherwise.

    Raises:
        ServiceError: an unsupported platform.
    """
    kind = system.kind()
    paths = system.paths()
    definition = Path(paths.definition)
    name = f"{SYSTEMD_UNIT} (systemd user unit)" if kind == "systemd" else (
        f"{LAUNCHD_LABEL} (launchd agent)"
    )  # fmt: skip
    try:
        content = definition.read_bytes()
    except FileNotFoundError:
        out.write(f"{name}: not installed ({paths.definition} does not exist)\n")
        out.write("  install: mirror-host service install [serve flags]\n")
        return 1
    out.write(f"{name}: installed at {paths.definition}\n")
    out.write(f"  command: {command_from_definition(kind, content) or '(unreadable)'}\n")
    running = _systemd_state(system, out) if kind == "systemd" else _launchd_state(system, out)
    if kind == "systemd":
        out.write(f"  logs:    journalctl --user -u {SYSTEMD_UNIT}\n")
        out.write(_linger_note(system))
    else:
        out.write(f"  logs:    {paths.log}\n")
    return 0 if running else 1


def _systemd_state(system: System, out: TextIO) -> bool:
    properties = "LoadState,ActiveState,SubState,UnitFileState,MainPID,ExecMainStatus"
    result = system.runner(
        ("systemctl", "--user", "show", SYSTEMD_UNIT, f"--property={properties}")
    )
    if result.returncode != 0:
        out.write(
            f"  state:   unknown: systemctl --user failed: {_first_line(result)}"
            f"{_hint('systemd', result, system.user)}\n"
        )
        return False
    shown = parse_systemctl_show(result.stdout)
    active, sub = shown.get("ActiveState", "?"), shown.get("SubState", "?")
    state = f"{active} ({sub})"
    if active == "active" and shown.get("MainPID", "0") != "0":
        state += f", pid {shown['MainPID']}"
    elif shown.get("ExecMainStatus", "0") != "0":
        state += f", last exit status {shown['ExecMainStatus']}"
    out.write(f"  state:   {state}; {shown.get('UnitFileState', '?')}\n")
    return active == "active"


def _launchd_state(system: System, out: TextIO) -> bool:
    result = system.runner(("launchctl", "print", f"gui/{system.uid}/{LAUNCHD_LABEL}"))
    if result.returncode != 0:
        out.write(f"  state:   not loaded ({_first_line(result)})\n")
        return False
    shown = parse_launchctl_print(result.stdout)
    state = shown.get("state", "?")
    if "pid" in shown:
        state += f", pid {shown['pid']}"
    elif "last exit code" in shown:
        state += f", last exit code {shown['last exit code']}"
    out.write(f"  state:   {state}\n")
    return shown.get("state") == "running"
