"""The service definitions and plans of ``mirror-host service``, without touching the machine."""

from __future__ import annotations

import plistlib
import re

import pytest

from mirror_host.cli import serve as cli_serve
from mirror_host.errors import ConfigError, ServiceError
from mirror_host.panes import local
from mirror_host.system_service.units import (
    LAUNCHD_LABEL,
    LOG_PACKETS_REFUSED,
    SERVICE_MARKER,
    SYSTEMD_UNIT,
    MakeDirs,
    RemoveFile,
    Run,
    ServiceSpec,
    WriteFile,
    command_from_definition,
    install_plan,
    launchd_plist,
    parse_launchctl_print,
    parse_systemctl_show,
    refuse_packet_log_in_service,
    service_environment,
    service_paths,
    service_spec,
    systemd_quote,
    systemd_unit,
    uninstall_plan,
)
from tests.conftest import REPO

PYTHON = "/home/ada/venv/bin/python3"
HOME = "/home/ada"


def systemd_words(line: str, *, expands_variables: bool) -> list[str]:
    """Split a directive's value as systemd does (quotes, C escapes, %% and $$)."""
    words: list[str] = []
    for match in re.finditer(r'"((?:[^"\\]|\\.)*)"|(\S+)', line):
        quoted, plain = match.groups()
        if quoted is None:
            word = plain
        else:
            word = re.sub(
                r"\\(x[0-9a-f]{2}|.)",
                lambda m: chr(int(m.group(1)[1:], 16)) if len(m.group(1)) == 3 else m.group(1),
                quoted,
            )
        word = word.replace("%%", "%")
        if expands_variables:
            word = word.replace("$$", "$")
        words.append(word)
    return words


def spec(*flags: str, environ: dict[str, str] | None = None) -> ServiceSpec:
    return service_spec(
        PYTHON, flags, environ=environ or {"PATH": "/usr/bin:/bin"}, cwd="/work", home=HOME
    )


@pytest.mark.parametrize(
    "word",
    ["plain", "two words", 'say "hi"', "back\\slash", "100%", "$HOME", "${X}", "tab\there", "a\nb",
     "", "%h", "semi;colon", "'single'"],
)  # fmt: skip
@pytest.mark.parametrize("expands", [True, False])
def test_systemd_quoting_round_trips_every_word(word: str, expands: bool) -> None:
    quoted = systemd_quote(word, expands_variables=expands)
    assert systemd_words(quoted, expands_variables=expands) == [word]
    assert "\n" not in quoted and "\t" not in quoted
    # No lone % (a specifier) survives, nor a lone $ where variables expand.
    assert re.search(r"(?<!%)%(?!%)", quoted.replace("%%", "")) is None
    if expands:
        assert "$" not in quoted.replace("$$", "")


def test_the_unit_runs_serve_with_the_given_flags_and_environment() -> None:
    service = spec(
        "--source", "local", "--local-command", "htop -d 5",
        environ={"PATH": "/opt/bin:/usr/bin", "MIRROR_HOST_LOG_LEVEL": "debug", "SECRET": "x",
                 "HERDR_SESSION": "work 1"},
    )  # fmt: skip
    unit = systemd_unit(service)
    exec_lines = [line for line in unit.splitlines() if line.startswith("ExecStart=")]
    assert len(exec_lines) == 1
    assert systemd_words(exec_lines[0].removeprefix("ExecStart="), expands_variables=True) == [
        PYTHON, "-m", "mirror_host", "serve", "--source", "local", "--local-command", "htop -d 5",
    ]  # fmt: skip
    environment = [
        systemd_words(line.removeprefix("Environment="), expands_variables=False)[0]
        for line in unit.splitlines()
        if line.startswith("Environment=")
    ]
    assert environment == [
        "HERDR_SESSION=work 1",
        "MIRROR_HOST_LOG_LEVEL=debug",
        "MIRROR_HOST_SERVICE=systemd",  # the marker: serve refuses --log-packets under it
        "PATH=/opt/bin:/usr/bin",
    ]
    for line in ("Restart=on-failure", "RestartPreventExitStatus=2", "KillMode=mixed",
                 "WantedBy=default.target", "SyslogIdentifier=mirror-host"):  # fmt: skip
        assert line in unit.splitlines()


def test_relative_paths_are_made_absolute_and_program_names_left_to_path() -> None:
    service = spec(
        "--state-dir", "state", "--config=conf/m.toml", "--herdr-bin", "herdr",
        "--tmux-socket-path", "~/t.sock", "--herdr-socket=/abs/h.sock",
        environ={"MIRROR_HOST_STATE_DIR": "s2", "MIRROR_HOST_HERDR_BIN": "./bin/herdr",
                 "XDG_CONFIG_HOME": "cfg"},
    )  # fmt: skip
    assert service.command[4:] == (
        "--state-dir", "/work/state", "--config=/work/conf/m.toml", "--herdr-bin", "herdr",
        "--tmux-socket-path", "~/t.sock", "--herdr-socket=/abs/h.sock",
    )  # fmt: skip
    assert dict(service.environment) == {
        "MIRROR_HOST_STATE_DIR": "/work/s2",
        "MIRROR_HOST_HERDR_BIN": "/work/bin/herdr",
        "XDG_CONFIG_HOME": "/work/cfg",
    }


def test_only_the_variables_that_shape_serve_are_carried() -> None:
    environ = {"PATH": "/bin", "SHELL": "/bin/zsh", "LANG": "C.UTF-8", "TMUX_TMPDIR": "/t",
               "MIRROR_HOST_SERVER_LISTEN": "0.0.0.0:7880", "HOME": "/h", "SSH_AUTH_SOCK": "/s",
               "AWS_SECRET_ACCESS_KEY": "k", "TERM": "xterm"}  # fmt: skip
    assert [name for name, _ in service_environment(environ, "/")] == [
        "LANG", "MIRROR_HOST_SERVER_LISTEN", "PATH", "SHELL", "TMUX_TMPDIR",
    ]  # fmt: skip


def test_the_shell_integrations_variables_are_not_carried() -> None:
    # install run from a pane the host started (or a tmux pane after a host ran).
    environ = {"PATH": "/bin", "MIRROR_HOST_SERVER_LISTEN": "0.0.0.0:7880",
               "MIRROR_HOST_SERVICE": "systemd", "MIRROR_HOST_MARK_NONCE": "ab" * 16,
               "MIRROR_HOST_BASH_INJECT": "1", "MIRROR_HOST_BASH_ENV": "/e",
               "MIRROR_HOST_BASH_HISTFILE": "1", "MIRROR_HOST_ZDOTDIR": "/z"}  # fmt: skip
    assert [name for name, _ in service_environment(environ, "/")] == [
        "MIRROR_HOST_SERVER_LISTEN", "PATH",
    ]  # fmt: skip


def test_the_local_source_strips_the_same_marker_the_unit_sets() -> None:
    # Both take it from shell/environment.py (panes/local.py may not import this room).
    assert local.SERVICE_MARKER == SERVICE_MARKER


def test_pair_is_refused_and_python_must_be_a_path() -> None:
    with pytest.raises(ServiceError, match="--pair"):
        spec("--source", "local", "--pair")
    with pytest.raises(ServiceError, match="--log-packets is not for a service"):
        spec("--source", "local", "--log-packets")
    with pytest.raises(ServiceError, match="which Python"):
        service_spec("python3", [], environ={}, cwd="/", home=HOME)


def test_the_service_marker_is_the_units_own_and_refuses_packet_logging() -> None:
    # An installing shell's own marker (a host installed from inside the
    # service) is not carried: the unit and the agent each set their own.
    service = spec("--source", "local", environ={"PATH": "/bin", SERVICE_MARKER: "launchd"})
    assert dict(service.environment) == {"PATH": "/bin"}
    assert f"Environment={SERVICE_MARKER}=systemd" in systemd_unit(service).splitlines()
    agent = plistlib.loads(launchd_plist(service, "/log"))
    assert agent["EnvironmentVariables"][SERVICE_MARKER] == "launchd"
    refuse_packet_log_in_service({SERVICE_MARKER: "systemd"}, False)
    refuse_packet_log_in_service({}, True)  # serve --log-packets in a terminal
    refuse_packet_log_in_service({SERVICE_MARKER: ""}, True)
    with pytest.raises(ConfigError) as refused:
        refuse_packet_log_in_service({SERVICE_MARKER: "systemd"}, True)
    assert refused.value.key == "log.packets"
    assert str(refused.value) == (
        f"log.packets: refused in the systemd service: {LOG_PACKETS_REFUSED}"
    )


def test_the_launchd_agent_runs_the_same_command_and_logs_under_library_logs() -> None:
    service = spec("--source", "tmux", environ={"PATH": "/opt/homebrew/bin:/usr/bin"})
    paths = service_paths("launchd", home=HOME, environ={})
    assert paths.definition == f"{HOME}/Library/LaunchAgents/{LAUNCHD_LABEL}.plist"
    assert paths.log == f"{HOME}/Library/Logs/mirror-host/mirror-host.log"
    agent = plistlib.loads(launchd_plist(service, paths.log))
    assert agent["Label"] == LAUNCHD_LABEL
    assert agent["ProgramArguments"] == [PYTHON, "-m", "mirror_host", "serve", "--source", "tmux"]
    assert agent["EnvironmentVariables"] == {
        "PATH": "/opt/homebrew/bin:/usr/bin",
        "MIRROR_HOST_SERVICE": "launchd",  # the marker: serve refuses --log-packets under it
    }
    assert agent["StandardOutPath"] == agent["StandardErrorPath"] == paths.log
    assert agent["RunAtLoad"] is True
    assert agent["KeepAlive"] == {"SuccessfulExit": False}
    assert agent["WorkingDirectory"] == HOME


def test_what_the_docs_say_about_restarting_after_exit_2_is_what_the_definitions_do() -> None:
    unit = systemd_unit(spec())
    agent = plistlib.loads(launchd_plist(spec(), "/log"))
    assert "RestartPreventExitStatus=2" in unit.splitlines()
    # launchd has no such exception: every non-zero exit is started again.
    assert agent["KeepAlive"] == {"SuccessfulExit": False}
    every = f"every {agent['ThrottleInterval']} s"
    operations = " ".join((REPO / "docs" / "operations.md").read_text().split())
    assert f"systemd does not restart after it; launchd retries {every}" in operations
    assert cli_serve.serve.__doc__ is not None
    docstring = " ".join(cli_serve.serve.__doc__.split())
    assert f"systemd does not restart it, launchd starts it again {every}" in docstring
    security = " ".join((REPO / "docs" / "security.md").read_text().split())
    assert f"systemd leaves it stopped, launchd starts it again {every}" in security


def test_systemd_unit_path_follows_xdg_config_home() -> None:
    assert service_paths("systemd", home=HOME, environ={}).definition == (
        f"{HOME}/.config/systemd/user/{SYSTEMD_UNIT}"
    )
    assert service_paths("systemd", home=HOME, environ={"XDG_CONFIG_HOME": "/x"}).definition == (
        f"/x/systemd/user/{SYSTEMD_UNIT}"
    )


def test_install_and_uninstall_plans() -> None:
    service = spec("--source", "herdr")
    paths = service_paths("systemd", home=HOME, environ={})
    steps = install_plan("systemd", service, paths, uid=1000)
    assert steps == [
        MakeDirs(f"{HOME}/.config/systemd/user"),
        WriteFile(paths.definition, systemd_unit(service).encode()),
        Run(("systemctl", "--user", "daemon-reload")),
        Run(("systemctl", "--user", "enable", SYSTEMD_UNIT)),
        Run(("systemctl", "--user", "restart", SYSTEMD_UNIT)),
    ]
    assert uninstall_plan("systemd", paths, uid=1000) == [
        Run(("systemctl", "--user", "disable", "--now", SYSTEMD_UNIT), may_fail=True),
        RemoveFile(paths.definition),
        Run(("systemctl", "--user", "daemon-reload"), may_fail=True),
    ]
    mac = service_paths("launchd", home=HOME, environ={})
    assert mac.log is not None
    assert install_plan("launchd", service, mac, uid=501) == [
        MakeDirs(f"{HOME}/Library/LaunchAgents"),
        MakeDirs(f"{HOME}/Library/Logs/mirror-host"),
        WriteFile(mac.definition, launchd_plist(service, mac.log)),
        Run(("launchctl", "bootout", f"gui/501/{LAUNCHD_LABEL}"), may_fail=True),
        Run(("launchctl", "enable", f"gui/501/{LAUNCHD_LABEL}")),
        Run(("launchctl", "bootstrap", "gui/501", mac.definition), attempts=3),
    ]
    assert uninstall_plan("launchd", mac, uid=501) == [
        Run(("launchctl", "bootout", f"gui/501/{LAUNCHD_LABEL}"), may_fail=True),
        RemoveFile(mac.definition),
    ]


def test_status_reads_the_command_back_from_either_definition() -> None:
    service = spec("--source", "local", "--local-command", "htop -d 5")
    unit = systemd_unit(service).encode()
    assert command_from_definition("systemd", unit) == (
        f'{PYTHON} -m mirror_host serve --source local --local-command "htop -d 5"'
    )
    agent = launchd_plist(service, "/l.log")
    assert command_from_definition("launchd", agent) == (
        f"{PYTHON} -m mirror_host serve --source local --local-command 'htop -d 5'"
    )
    assert command_from_definition("launchd", b"not a plist") is None
    assert command_from_definition("systemd", b"[Unit]\n") is None


def test_service_manager_answers_are_parsed() -> None:
    shown = "LoadState=loaded\nActiveState=active\nSubState=running\nMainPID=4242\nnoise\n"
    assert parse_systemctl_show(shown) == {
        "LoadState": "loaded", "ActiveState": "active", "SubState": "running", "MainPID": "4242",
    }  # fmt: skip
    printed = (
        "gui/501/dev.mirror-host = {\n\tactive count = 1\n\tpath = /Users/ada/Library/...\n"
        "\tstate = running\n\tprogram = /usr/bin/python3\n\tpid = 812\n"
        "\tlast exit code = (never exited)\n\tspawn = {\n\t\tstate = idle\n\t}\n}\n"
    )
    assert parse_launchctl_print(printed) == {
        "state": "running", "pid": "812", "last exit code": "(never exited)",
    }  # fmt: skip
