"""``mirror-host service``: real files in a temporary home, the service manager recorded.

systemd and launchd cannot run here (no systemd as PID 1, no macOS), so the
commands they would get are recorded by a stand-in that answers as they do;
everything else is real: the unit and agent files, their validation by
``systemd-analyze`` (and ``plutil`` where present), the CLI in a subprocess,
and the unit's own command line started as systemd would start it, pairing a
device over loopback.
"""

from __future__ import annotations

import io
import json
import os
import plistlib
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import trio

from mirror_host.client.client import login, pair_device
from mirror_host.host.admin_client import STATUS_FILE, admin_request
from mirror_host.system_service.manage import CommandResult, System, install, status, uninstall
from mirror_host.system_service.units import LAUNCHD_LABEL, SYSTEMD_UNIT
from tests.unit.test_system_service import systemd_words

pytestmark = pytest.mark.timeout(60)


@dataclass
class ServiceManager:
    """Records commands; answers as systemctl/launchctl/loginctl do on a working machine."""

    calls: list[tuple[str, ...]] = field(default_factory=list)
    failing: dict[tuple[str, ...], CommandResult] = field(default_factory=dict)
    active: bool = False

    def __call__(self, argv: Sequence[str]) -> CommandResult:
        command = tuple(argv)
        self.calls.append(command)
        if command in self.failing:
            return self.failing[command]
        if command[:3] == ("systemctl", "--user", "restart"):
            self.active = True
        if command[:4] == ("systemctl", "--user", "disable", "--now"):
            self.active = False
        if command[:3] == ("systemctl", "--user", "show"):
            state = "ActiveState=active\nSubState=running\nMainPID=4242\n" if self.active else (
                "ActiveState=inactive\nSubState=dead\nMainPID=0\nExecMainStatus=0\n"
            )  # fmt: skip
            return CommandResult(0, state + "LoadState=loaded\nUnitFileState=enabled\n", "")
        if command[:2] == ("loginctl", "show-user"):
            return CommandResult(0, "no\n", "")
        if command[:2] == ("launchctl", "bootstrap"):
            self.active = True
        if command[:2] == ("launchctl", "bootout"):
            was, self.active = self.active, False
            if not was:
                return CommandResult(3, "", "Boot-out failed: 3: No such process")
        if command[:2] == ("launchctl", "print"):
            if not self.active:
                return CommandResult(113, "", "Could not find service in domain")
            return CommandResult(
                0, f"gui/501/{LAUNCHD_LABEL} = {{\n\tstate = running\n\tpid = 812\n}}\n", ""
            )
        return CommandResult(0, "", "")


@pytest.fixture
def home() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="mh-home-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def system(
    home: Path, manager: ServiceManager, *, platform: str = "linux", **environ: str
) -> System:
    return System(
        platform=platform,
        environ={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **environ},
        home=str(home),
        cwd=str(home),
        uid=501,
        user="ada",
        python=sys.executable,
        runner=manager,
        sleep=lambda _: None,
    )


def test_install_status_uninstall_on_systemd(home: Path) -> None:
    manager = ServiceManager()
    machine = system(home, manager, MIRROR_HOST_LOG_LEVEL="debug")
    out = io.StringIO()
    assert (
        install(
            ["--source", "tmux", "--tmux-socket", "agents"], dry_run=False, out=out, system=machine
        )
        == 0
    )
    unit = home / ".config" / "systemd" / "user" / SYSTEMD_UNIT
    assert unit.is_file() and oct(unit.stat().st_mode & 0o777) == "0o644"
    assert manager.calls[:3] == [
        ("systemctl", "--user", "daemon-reload"),
        ("systemctl", "--user", "enable", SYSTEMD_UNIT),
        ("systemctl", "--user", "restart", SYSTEMD_UNIT),
    ]
    said = out.getvalue()
    assert f"wrote {unit}" in said and "journalctl --user -u mirror-host.service" in said
    assert "loginctl enable-linger ada" in said

    out = io.StringIO()
    assert status(out=out, system=machine) == 0
    said = out.getvalue()
    assert f"installed at {unit}" in said
    assert "--source tmux --tmux-socket agents" in said
    assert "active (running), pid 4242; enabled" in said

    manager.calls.clear()
    out = io.StringIO()
    assert uninstall(dry_run=False, out=out, system=machine) == 0
    assert not unit.exists()
    assert manager.calls == [
        ("systemctl", "--user", "disable", "--now", SYSTEMD_UNIT),
        ("systemctl", "--user", "daemon-reload"),
    ]
    assert f"removed {unit}" in out.getvalue()
    out = io.StringIO()
    assert status(out=out, system=machine) == 1
    assert "not installed" in out.getvalue()


def test_install_status_uninstall_on_launchd(home: Path) -> None:
    manager = ServiceManager()
    machine = system(home, manager, platform="darwin")
    out = io.StringIO()
    assert install(["--source", "local"], dry_run=False, out=out, system=machine) == 0
    agent_path = home / "Library" / "LaunchAgents" / f"{LAUNCHD_LABEL}.plist"
    log_dir = home / "Library" / "Logs" / "mirror-host"
    agent = plistlib.loads(agent_path.read_bytes())
    assert agent["ProgramArguments"] == [
        sys.executable,
        "-m",
        "mirror_host",
        "serve",
        "--source",
        "local",
    ]
    assert log_dir.is_dir(), "launchd does not create the log directory itself"
    assert agent["StandardErrorPath"] == str(log_dir / "mirror-host.log")
    assert manager.calls == [
        ("launchctl", "bootout", f"gui/501/{LAUNCHD_LABEL}"),
        ("launchctl", "enable", f"gui/501/{LAUNCHD_LABEL}"),
        ("launchctl", "bootstrap", "gui/501", str(agent_path)),
    ]
    # Nothing to boot out on a first install: said, and not a failure.
    assert (
        f"note: `launchctl bootout gui/501/{LAUNCHD_LABEL}` failed: Boot-out failed"
        in out.getvalue()
    )
    if shutil.which("plutil"):
        lint = subprocess.run(
            ["plutil", "-lint", str(agent_path)], capture_output=True, text=True, check=False
        )
        assert lint.returncode == 0, lint.stdout + lint.stderr

    out = io.StringIO()
    assert status(out=out, system=machine) == 0
    assert "state:   running, pid 812" in out.getvalue()
    assert uninstall(dry_run=False, out=io.StringIO(), system=machine) == 0
    assert not agent_path.exists()
    out = io.StringIO()
    assert status(out=out, system=machine) == 1


def test_a_bootstrap_that_fails_at_first_is_retried(home: Path) -> None:
    manager = ServiceManager()
    machine = system(home, manager, platform="darwin")
    agent_path = home / "Library" / "LaunchAgents" / f"{LAUNCHD_LABEL}.plist"
    busy = ("launchctl", "bootstrap", "gui/501", str(agent_path))
    manager.failing[busy] = CommandResult(5, "", "Bootstrap failed: 5: Input/output error")
    out = io.StringIO()
    assert install([], dry_run=False, out=out, system=machine) == 1
    assert manager.calls.count(busy) == 3
    assert "Bootstrap failed: 5" in out.getvalue()


def test_systemd_unreachable_or_missing_is_said_with_what_to_do(home: Path) -> None:
    manager = ServiceManager()
    machine = system(home, manager)
    reload = ("systemctl", "--user", "daemon-reload")
    manager.failing[reload] = CommandResult(1, "", "Failed to connect to bus: No medium found\n")
    out = io.StringIO()
    assert install([], dry_run=False, out=out, system=machine) == 1
    said = out.getvalue()
    assert "`systemctl --user daemon-reload` failed: Failed to connect to bus" in said
    assert "loginctl enable-linger ada" in said
    assert (home / ".config/systemd/user" / SYSTEMD_UNIT).exists()
    assert "`mirror-host service uninstall` removes it" in said
    assert ("systemctl", "--user", "enable", SYSTEMD_UNIT) not in manager.calls

    manager.failing[reload] = CommandResult(127, "", "systemctl: command not found")
    out = io.StringIO()
    assert install([], dry_run=False, out=out, system=machine) == 1
    assert "no systemd here" in out.getvalue()


def test_status_says_whether_the_service_outlives_a_logout(home: Path) -> None:
    manager = ServiceManager()
    machine = system(home, manager)
    assert install([], dry_run=False, out=io.StringIO(), system=machine) == 0
    linger = ("loginctl", "show-user", "ada", "--property=Linger", "--value")
    manager.failing[linger] = CommandResult(0, "yes\n", "")
    out = io.StringIO()
    assert status(out=out, system=machine) == 0
    assert "runs:    from boot, logged in or not (lingering is on)" in out.getvalue()
    manager.failing[linger] = CommandResult(1, "", "Could not get properties: No such user")
    out = io.StringIO()
    assert status(out=out, system=machine) == 0
    assert "runs:" not in out.getvalue()


def test_dry_run_prints_everything_and_changes_nothing(home: Path) -> None:
    manager = ServiceManager()
    out = io.StringIO()
    assert install(["--source", "herdr"], dry_run=True, out=out, system=system(home, manager)) == 0
    said = out.getvalue()
    assert f"would write {home}/.config/systemd/user/{SYSTEMD_UNIT}:" in said
    assert "ExecStart=" in said and "--source herdr" in said
    assert "would run systemctl --user enable mirror-host.service" in said
    assert manager.calls == []
    assert list(home.iterdir()) == []
    assert uninstall(dry_run=True, out=io.StringIO(), system=system(home, manager)) == 0
    assert manager.calls == []


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_the_unit_passes_systemd_analyze_verify(home: Path) -> None:
    machine = system(
        home, ServiceManager(), MIRROR_HOST_LOCAL_COMMANDS='["htop", "echo $HOME 100%"]',
        LANG="C.UTF-8",
    )  # fmt: skip
    flags = ["--source", "local", "--local-command", 'say "hi" \\ 50% $USER', "--state-dir", "st"]
    assert install(flags, dry_run=False, out=io.StringIO(), system=machine) == 0
    unit = home / ".config" / "systemd" / "user" / SYSTEMD_UNIT
    runtime = home / "runtime"
    runtime.mkdir(mode=0o700)
    result = subprocess.run(
        ["systemd-analyze", "--user", "verify", "--man=no", str(unit)],
        capture_output=True, text=True, timeout=30, check=False,
        env={**os.environ, "XDG_RUNTIME_DIR": str(runtime), "HOME": str(home)},
    )  # fmt: skip
    # verify exits 0 on some warnings (an unknown key), so any output is a failure too.
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


@pytest.mark.slow
def test_the_cli_checks_serve_flags_before_installing(home: Path) -> None:
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / "cfg")}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "mirror_host", "service", *args],
            capture_output=True, text=True, timeout=30, check=False, env=env, cwd=home,
        )  # fmt: skip

    shown = cli("install", "--user", "--dry-run", "--source", "local", "--local-command", "htop")
    assert shown.returncode == 0, shown.stderr
    assert "ExecStart=" in shown.stdout and "--local-command htop" in shown.stdout
    assert not (home / "cfg").exists()
    after_dashes = cli("install", "--dry-run", "--", "--source", "tmux")
    assert after_dashes.returncode == 0 and "serve --source tmux\n" in after_dashes.stdout
    bad = cli("install", "--dry-run", "--source", "nowhere")
    assert bad.returncode == 2 and "invalid choice: 'nowhere'" in bad.stderr
    paired = cli("install", "--dry-run", "--pair")
    assert paired.returncode == 2 and "--pair is not for a service" in paired.stderr
    packets = cli("install", "--dry-run", "--log-packets")
    assert packets.returncode == 2 and "--log-packets is not for a service" in packets.stderr
    env["MIRROR_HOST_LOG_PACKETS"] = "true"
    from_env = cli("install", "--dry-run")
    assert from_env.returncode == 2 and "--log-packets is not for a service" in from_env.stderr
    del env["MIRROR_HOST_LOG_PACKETS"]
    env["MIRROR_HOST_SERVER_NOPE"] = "1"
    unknown = cli("install", "--dry-run")
    assert unknown.returncode == 2 and "MIRROR_HOST_SERVER_NOPE" in unknown.stderr
    del env["MIRROR_HOST_SERVER_NOPE"]
    missing = cli("status")
    assert missing.returncode == 1 and "not installed" in missing.stdout


def installed_unit(home: Path) -> tuple[list[str], dict[str, str]]:
    """The installed unit's ExecStart words and its Environment, as systemd reads them."""
    lines = (home / ".config" / "systemd" / "user" / SYSTEMD_UNIT).read_text().splitlines()
    (exec_line,) = [
        line.removeprefix("ExecStart=") for line in lines if line.startswith("ExecStart=")
    ]
    argv = systemd_words(exec_line, expands_variables=True)
    environment = dict(
        systemd_words(line.removeprefix("Environment="), expands_variables=False)[0].split("=", 1)
        for line in lines
        if line.startswith("Environment=")
    )
    return argv, environment


@pytest.mark.slow
def test_the_service_refuses_packet_logging_turned_on_after_install(home: Path) -> None:
    # Installed without --log-packets; then the environment, the config file or
    # the command line asks for it. The service's serve stops before anything
    # is created, exit status 2 (RestartPreventExitStatus=2: no restart loop).
    state = home / "state"
    machine = system(home, ServiceManager())
    flags = ["--source", "local", "--local-command", "cat", "--listen", "127.0.0.1:0",
             "--state-dir", "state"]  # fmt: skip
    assert install(flags, dry_run=False, out=io.StringIO(), system=machine) == 0
    argv, environment = installed_unit(home)
    assert environment["MIRROR_HOST_SERVICE"] == "systemd"
    config = home / "edited.toml"
    config.write_text("[log]\npackets = true\n")
    for extra_argv, extra_env in (
        ([], {"MIRROR_HOST_LOG_PACKETS": "true"}),
        ([], {"MIRROR_HOST_CONFIG": str(config)}),
        (["--log-packets"], {}),
    ):
        result = subprocess.run(
            [*argv, *extra_argv], env={**environment, "HOME": str(home), **extra_env},
            cwd=home, capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        assert result.returncode == 2, (extra_argv, extra_env, result.stderr)
        assert result.stderr.splitlines() == [
            "mirror-host: configuration error: log.packets: refused in the systemd service: "
            "--log-packets is not for a service: its kept log would hold every screen and "
            "every key typed; debug with `mirror-host serve --log-packets` in a terminal instead"
        ]
        assert not state.exists()
    # The marker is no setting: under it the settings still read as they were
    # given (check-config does not call it an unknown MIRROR_HOST_ variable).
    shown = subprocess.run(
        [*argv[:3], "check-config", "--json"], capture_output=True, text=True, timeout=30,
        env={**environment, "HOME": str(home), "MIRROR_HOST_LOG_PACKETS": "true"}, check=False,
    )  # fmt: skip
    assert shown.returncode == 0 and json.loads(shown.stdout)["log"]["packets"] is True


@pytest.mark.slow
async def test_the_units_command_runs_a_host_that_pairs(home: Path) -> None:
    # Start the unit's ExecStart with only the unit's Environment (plus HOME, as
    # systemd gives it), pair a device over loopback, then stop it with SIGTERM
    # as `systemctl stop` does (KillMode=mixed: the main process alone).
    state = home / "state"
    machine = system(home, ServiceManager(), LANG="C.UTF-8")
    flags = ["--source", "local", "--local-command", "cat", "--listen", "127.0.0.1:0",
             "--state-dir", "state", "--log-level", "debug"]  # fmt: skip
    assert install(flags, dry_run=False, out=io.StringIO(), system=machine) == 0
    argv, environment = installed_unit(home)
    log_path = home / "serve.log"
    with log_path.open("wb") as log_file:
        process = await trio.lowlevel.open_process(
            argv, env={**environment, "HOME": str(home)}, cwd=home,
            stdout=subprocess.DEVNULL, stderr=log_file,
        )  # fmt: skip
    try:
        with trio.fail_after(30):
            while not (state / STATUS_FILE).exists():
                assert process.poll() is None, log_path.read_text()
                await trio.sleep(0.05)
        port = int(json.loads((state / STATUS_FILE).read_text())["listen"].rsplit(":", 1)[1])
        reply = await trio.to_thread.run_sync(admin_request, state, {"op": "pair"})
        code = reply["code"]
        credential = await pair_device("127.0.0.1", port, code, "Service Phone")
        async with login("127.0.0.1", port, credential):
            pass
    finally:
        process.send_signal(signal.SIGTERM)
        with trio.fail_after(20):
            await process.wait()
    log = log_path.read_text()
    assert process.returncode == 0, log
    assert "TLS-PSK ready: ECDHE-PSK-CHACHA20-POLY1305 over TLS 1.2" in log
    assert code not in log and credential.key.hex() not in log
