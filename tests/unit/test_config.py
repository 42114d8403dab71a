"""Settings: layering, validation, unknown keys."""

from __future__ import annotations

import inspect
import re
import sys
import tomllib
from pathlib import Path

import pytest

from mirror_host.config import (
    Config,
    Endpoint,
    Layer,
    build_config,
    flatten_table,
    parse_endpoint,
    render_toml,
)
from mirror_host.config_file import env_layer, load_config
from mirror_host.errors import ConfigError
from mirror_host.shell import inject
from mirror_host.shell.environment import INJECTED_VARIABLES
from mirror_host.shell.integration import snippet


def test_defaults() -> None:
    config = build_config([])
    assert config.server.listen == Endpoint("0.0.0.0", 7880)
    assert config.local.columns == 120 and config.local.rows == 40
    assert config.source.kind == "local"
    assert config.profiles is None


def test_later_layers_win() -> None:
    config = build_config(
        [
            Layer("a", {"server.listen": "127.0.0.1:1", "log.level": "debug"}),
            Layer("b", {"server.listen": "[::1]:2"}),
        ]
    )
    assert config.server.listen == Endpoint("::1", 2)
    assert str(config.server.listen) == "[::1]:2"
    assert config.log.level == "debug"


def test_unknown_key_names_key_and_origin() -> None:
    with pytest.raises(ConfigError) as info:
        build_config([Layer("/etc/x.toml", {"server.lisen": "x"})])
    assert info.value.key == "server.lisen"
    assert "/etc/x.toml" in str(info.value)


def test_invalid_value_names_key_and_origin() -> None:
    with pytest.raises(ConfigError, match=r"local.size: .*COLSxROWS.*\(in command line\)"):
        build_config([Layer("command line", {"local.size": "wide"})])
    with pytest.raises(ConfigError, match="server.listen"):
        build_config([Layer("f", {"server.listen": "example.com:80"})])


def test_toml_tables_flatten_and_unknown_sections_fail() -> None:
    flat = flatten_table({"local": {"size": "80x24"}, "profiles": {"cc": {"agent": "claude"}}}, "f")
    assert flat == {"local.size": "80x24", "profiles.cc.agent": "claude"}
    with pytest.raises(ConfigError, match="nope.x: unknown setting"):
        flatten_table({"nope": {"x": 1}}, "f")


def test_profiles_need_an_agent() -> None:
    config = build_config([Layer("f", {"profiles.cc.agent": "claude", "profiles.cc.args": ["-c"]})])
    assert config.profiles is not None
    assert config.profiles[0].id == "cc" and config.profiles[0].args == ("-c",)
    with pytest.raises(ConfigError, match="profiles.cc.agent"):
        build_config([Layer("f", {"profiles.cc.name": "CC"})])


def test_env_layer_maps_names_and_refuses_unknown() -> None:
    layer = env_layer({"MIRROR_HOST_SERVER_LISTEN": "127.0.0.1:9", "PATH": "/bin"})
    assert layer.values == {"server.listen": "127.0.0.1:9"}
    commands = env_layer({"MIRROR_HOST_LOCAL_COMMANDS": '["htop", "bash -l"]'})
    assert commands.values == {"local.commands": ["htop", "bash -l"]}
    with pytest.raises(ConfigError, match="MIRROR_HOST_LISTEN"):
        env_layer({"MIRROR_HOST_LISTEN": "x"})


def test_the_variables_the_shell_integration_hands_out_are_not_settings() -> None:
    # A shell the host (or a tmux server after a host ran) started carries them;
    # mirror-host run from it must not call them unknown settings.
    scripts = "".join(snippet(shell) for shell in ("bash", "zsh", "fish"))
    scripts += inspect.getsource(inject)
    named = set(re.findall(r"MIRROR_HOST_[A-Z_]+", scripts))
    assert {"MIRROR_HOST_MARK_NONCE", "MIRROR_HOST_BASH_INJECT", "MIRROR_HOST_ZDOTDIR"} <= named
    assert named <= INJECTED_VARIABLES
    environ = dict.fromkeys([*INJECTED_VARIABLES, "MIRROR_HOST_SERVICE"], "x")
    assert env_layer({**environ, "MIRROR_HOST_LOG_LEVEL": "debug"}).values == {"log.level": "debug"}


def test_load_config_precedence(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        '[server]\nlisten = "127.0.0.1:1"\n[log]\nlevel = "debug"\n[local]\nsize = "80x24"\n'
    )
    config = load_config(
        config_path=str(path),
        flags={"server.listen": "127.0.0.1:3", "log.format": None},
        environ={"MIRROR_HOST_LOG_LEVEL": "error", "HOME": str(tmp_path)},
    )
    assert config.server.listen.port == 3
    assert config.log.level == "error"
    assert (config.local.columns, config.local.rows) == (80, 24)
    assert Path(config.state.dir).is_absolute()


def test_load_config_bad_file(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[server\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(config_path=str(path), flags={}, environ={})
    with pytest.raises(ConfigError, match="^--config: file not found"):
        load_config(config_path=str(tmp_path / "missing.toml"), flags={}, environ={})
    missing = {"MIRROR_HOST_CONFIG": str(tmp_path / "missing.toml")}
    with pytest.raises(ConfigError, match="^MIRROR_HOST_CONFIG: file not found"):
        load_config(config_path=None, flags={}, environ=missing)
    path.write_text("[server]\nport = 1\n")
    with pytest.raises(ConfigError, match=r"server.port: unknown setting \(in .*c.toml\)"):
        load_config(config_path=str(path), flags={}, environ={})


def test_a_bad_default_config_file_is_not_blamed_on_a_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    (tmp_path / "mirror-host").mkdir()
    (tmp_path / "mirror-host" / "config.toml").write_text("[server\n")
    with pytest.raises(ConfigError, match="^config file: not valid TOML"):
        load_config(config_path=None, flags={}, environ={})


def test_parse_endpoint() -> None:
    assert parse_endpoint("0.0.0.0:0") == Endpoint("0.0.0.0", 0)
    # `attach localhost:…` works, and the help says HOST:PORT: the listener takes it too.
    assert parse_endpoint("localhost:7884") == Endpoint("127.0.0.1", 7884)
    assert parse_endpoint("LocalHost:7884") == Endpoint("127.0.0.1", 7884)
    with pytest.raises(ValueError, match="'mini.local' is not a numeric address: give one of"):
        parse_endpoint("mini.local:7880")
    for bad in ["7880", "host:1", "1.2.3.4:99999", "[::1]"]:
        with pytest.raises(ValueError):
            parse_endpoint(bad)


def round_trip(config: Config) -> Config:
    text = render_toml(config)
    return build_config([Layer("rendered", flatten_table(tomllib.loads(text), "rendered"))])


def test_rendered_toml_reads_back_as_the_same_settings() -> None:
    odd = build_config(
        [
            Layer(
                "f",
                {
                    "server.listen": "[::1]:9000",
                    "server.advertise_address": "192.0.2.7",
                    "server.max_connections": 3,
                    "state.dir": '/tmp/a "quoted" dir\\with\\backslashes',
                    "log.level": "debug",
                    "source.kind": "tmux",
                    "local.commands": [
                        "bash -lc 'echo \"hi\"'",
                        "tab\there",
                        "naïve 🐚",
                        "del\x7f",
                    ],
                    "local.size": "80x24",
                    "herdr.bin": "/opt/herdr",
                    "tmux.socket_name": "work",
                    "profiles.cc.agent": "claude",
                    "profiles.cc.name": "Claude Code",
                    "profiles.cc.args": ["--model", "x"],
                },
            )
        ]
    )
    assert round_trip(odd) == odd
    defaults = build_config([])
    assert round_trip(defaults) == defaults
    assert "# [profiles]: the built-in catalogue" in render_toml(defaults)


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("127.0.0.1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("fe80::1%eth0", "zone id"),
        ("mini.local", "not a numeric"),
    ],
)
def test_an_advertise_address_no_phone_can_dial_is_refused(address: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why) as refused:
        build_config([Layer("command line", {"server.advertise_address": address})])
    assert str(refused.value).startswith("server.advertise_address: ")
    assert "give the address phones dial" in str(refused.value)
    good = build_config([Layer("x", {"server.advertise_address": " 192.168.1.20 "})])
    assert good.server.advertise_address == "192.168.1.20"


def test_a_lenient_load_reports_each_problem_and_keeps_the_rest(tmp_path: Path) -> None:
    config_file = tmp_path / "c.toml"
    config_file.write_text(
        '[state]\ndir = "/srv/mh"\n[server]\nbogus = 1\nlisten = "nope"\n'
        '[profiles.x]\nname = "no agent"\n'
    )
    problems: list[ConfigError] = []
    config = load_config(
        config_path=str(config_file),
        flags={"log.level": "debug"},
        environ={"MIRROR_HOST_NOPE": "1", "MIRROR_HOST_LOG_FORMAT": "json"},
        on_problem=problems.append,
    )
    assert sorted(p.key for p in problems) == [
        "MIRROR_HOST_NOPE",
        "profiles.x.agent",
        "server.bogus",
        "server.listen",
    ]
    assert config.state.dir == "/srv/mh" and config.log.level == "debug"
    assert config.log.format == "json" and config.profiles == ()
    with pytest.raises(ConfigError):
        load_config(config_path=str(config_file), flags={}, environ={})
    broken = tmp_path / "broken.toml"
    broken.write_text("[state\n")
    problems.clear()
    load_config(config_path=str(broken), flags={}, environ={}, on_problem=problems.append)
    assert [p.key for p in problems] == ["--config"] and "not valid TOML" in str(problems[0])


def test_local_respawn_and_packet_log_settings() -> None:
    environment = {"MIRROR_HOST_LOCAL_RESPAWN": "true", "MIRROR_HOST_LOG_PACKETS": "0"}
    config = build_config([env_layer(environment)])
    assert config.local.respawn is True and config.log.packets is False
    with pytest.raises(ConfigError, match="expected true or false"):
        env_layer({"MIRROR_HOST_LOCAL_RESPAWN": "maybe"})
    assert tomllib.loads(render_toml(config))["local"]["respawn"] is True


def test_a_config_file_says_numbers_and_yes_no_in_tomls_own_types(tmp_path: Path) -> None:
    """``max_connections = "16"`` and ``shell_send = "yes"`` were taken silently
    (issue 28 item 15): text there is refused, naming the key; the environment,
    which has only text, still reads it."""
    for line, said in (
        ('[server]\nmax_connections = "16"', "server.max_connections: expected an integer"),
        ('[commands]\nshell_send = "yes"', "commands.shell_send: expected true or false"),
        ('[log]\npackets = "false"', "log.packets: expected true or false"),
    ):
        path = tmp_path / "config.toml"
        path.write_text(line + "\n")
        with pytest.raises(
            ConfigError, match=f"^{re.escape(said)}.*no quotes.*{re.escape(str(path))}"
        ):
            load_config(config_path=str(path), flags={}, environ={})
    path.write_text("[server]\nmax_connections = 16\n[commands]\nshell_send = false\n")
    typed = load_config(config_path=str(path), flags={}, environ={})
    assert (typed.server.max_connections, typed.commands.shell_send) == (16, False)
    environment = {
        "MIRROR_HOST_SERVER_MAX_CONNECTIONS": "16",
        "MIRROR_HOST_COMMANDS_SHELL_SEND": "no",
    }
    from_env = load_config(config_path=None, flags={}, environ=environment)
    assert (from_env.server.max_connections, from_env.commands.shell_send) == (16, False)
    with pytest.raises(ConfigError, match="^MIRROR_HOST_SERVER_MAX_CONNECTIONS: expected an"):
        load_config(config_path=None, flags={}, environ={"MIRROR_HOST_SERVER_MAX_CONNECTIONS": "x"})


@pytest.mark.parametrize(
    ("home", "said"),
    [
        ("", "HOME is empty"),
        ("relative/home", "HOME (relative/home) is not an absolute path"),
        (
            "/nonexistent-mirror-host-home",
            "HOME (/nonexistent-mirror-host-home) is not a directory that exists",
        ),
    ],
)
def test_a_home_that_cannot_hold_the_default_state_dir_is_refused(
    home: str, said: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", home)
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    with pytest.raises(ConfigError, match=f"^state.dir: {re.escape(said)}, .*give --state-dir DIR"):
        load_config(config_path=None, flags={}, environ={"HOME": home})
    # Refused for the admin commands too, which otherwise go on past a bad setting.
    with pytest.raises(ConfigError, match="^state.dir: "):
        load_config(config_path=None, flags={}, environ={"HOME": home}, on_problem=lambda e: None)
    # Any state directory that is named is taken as it is.
    chosen = load_config(config_path=None, flags={"state.dir": "/srv/mh"}, environ={"HOME": home})
    assert chosen.state.dir == "/srv/mh"
    if sys.platform != "darwin":
        monkeypatch.setenv("XDG_STATE_HOME", "/var/lib/someone")
        elsewhere = load_config(
            config_path=None, flags={}, environ={"HOME": home, "XDG_STATE_HOME": "/var/lib/someone"}
        )
        assert elsewhere.state.dir == "/var/lib/someone/mirror-host"


def test_path_settings_are_shown_expanded_like_the_state_dir(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        '[herdr]\nsocket = "~/h.sock"\nbin = "~/bin/herdr"\n[tmux]\nsocket_path = "~/t"\n'
        '[state]\ndir = "~/state"\n'
    )
    config = load_config(config_path=str(path), flags={}, environ={})
    home = str(Path.home())
    assert config.herdr.socket == f"{home}/h.sock" and config.herdr.bin == f"{home}/bin/herdr"
    assert config.tmux.socket_path == f"{home}/t" and config.state.dir == f"{home}/state"
    assert "~" not in render_toml(config)


@pytest.mark.parametrize(("flag", "given", "dest"), [
    ("--log-level", "DEBUG", "log_level"),
    ("--source", "TMUX", "source"),
])  # fmt: skip
def test_a_flag_with_choices_reads_them_as_the_environment_does(
    flag: str, given: str, dest: str
) -> None:
    from mirror_host.cli import build_parser

    args = build_parser().parse_args(["serve", flag, given])
    assert getattr(args, dest) == given.lower()  # MIRROR_HOST_… takes either case too


def test_a_later_layer_naming_the_other_alternative_overrides_it() -> None:
    # A flag beats the config file even when it names the same thing the other way.
    config = build_config(
        [
            Layer("config file", {"tmux.socket_path": "/tmp/file.sock"}),
            Layer("flags", {"tmux.socket_name": "work"}),
        ]
    )
    assert (config.tmux.socket_name, config.tmux.socket_path) == ("work", None)
    config = build_config(
        [
            Layer("config file", {"agliteterm.socket": "/tmp/aglite.sock"}),
            Layer("flags", {"agliteterm.command": "npiperelay.exe -ep -s //./pipe/agliteterm"}),
        ]
    )
    assert config.agliteterm.socket is None and config.agliteterm.command is not None
    # One layer that sets both still says both (agliteterm refuses that pair).
    both = build_config(
        [Layer("flags", {"agliteterm.socket": "/tmp/a.sock", "agliteterm.command": "relay"})]
    )
    assert both.agliteterm.socket and both.agliteterm.command
