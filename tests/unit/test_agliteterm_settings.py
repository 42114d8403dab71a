"""Reaching agliteterm: settings layers, flags, the transport they name, the source built."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from mirror_host.cli import build_parser, load_settings
from mirror_host.cli.sources import build_source
from mirror_host.commands.service import CommandService
from mirror_host.config import AgliteSettings, Layer, build_config, flatten_table, render_toml
from mirror_host.config_file import env_layer, load_config
from mirror_host.errors import ConfigError
from mirror_host.panes.agliteterm.source import AgliteSource
from mirror_host.panes.agliteterm.transport import (
    CommandTransport,
    UnixSocketTransport,
    agliteterm_transport,
)


def test_settings_from_every_layer(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[source]\nkind = "agliteterm"\n[agliteterm]\nsocket = "/run/a.sock"\n')
    config = load_config(config_path=str(path), flags={}, environ={"HOME": str(tmp_path)})
    assert config.source.kind == "agliteterm"
    assert config.agliteterm == AgliteSettings(socket="/run/a.sock")
    layer = env_layer({"MIRROR_HOST_AGLITETERM_COMMAND": "npiperelay.exe -ep -s //./pipe/x"})
    assert layer.values == {"agliteterm.command": "npiperelay.exe -ep -s //./pipe/x"}
    with pytest.raises(ConfigError, match="agliteterm.pipe"):
        flatten_table({"agliteterm": {"pipe": "x"}}, "f")


def test_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("MIRROR_HOST_CONFIG", raising=False)
    args = build_parser().parse_args(
        ["serve", "--source", "agliteterm", "--agliteterm-command", "relay --pipe 'a b'"]
    )
    config = load_settings(args)
    assert config.agliteterm.command == "relay --pipe 'a b'" and config.agliteterm.socket is None
    with pytest.raises(SystemExit):  # one way to reach it, not two
        build_parser().parse_args(
            ["serve", "--agliteterm-socket", "/a", "--agliteterm-command", "relay"]
        )


def test_the_transport_the_settings_name() -> None:
    socket = agliteterm_transport(AgliteSettings(socket="~/a.sock"))
    assert isinstance(socket, UnixSocketTransport) and socket.path == Path("~/a.sock").expanduser()
    command = agliteterm_transport(AgliteSettings(command="npiperelay.exe -ep -s '//./pipe/a b'"))
    assert isinstance(command, CommandTransport)
    assert command.argv == ["npiperelay.exe", "-ep", "-s", "//./pipe/a b"]
    with pytest.raises(ConfigError, match="needs --agliteterm-socket"):
        agliteterm_transport(AgliteSettings())
    with pytest.raises(ConfigError, match="not both"):
        agliteterm_transport(AgliteSettings(socket="/a", command="b"))
    with pytest.raises(ConfigError, match="agliteterm.command"):
        agliteterm_transport(AgliteSettings(command="relay 'unclosed"))


def test_build_source() -> None:
    config = build_config(
        [Layer("f", {"source.kind": "agliteterm", "agliteterm.socket": "/tmp/a.sock"})]
    )
    source, commands = build_source(config)
    assert isinstance(source, AgliteSource) and isinstance(commands, CommandService)
    assert source.endpoint == "unix:/tmp/a.sock"
    assert {"history", "remote-scroll", "scroll-state-v1"} == set(source.capabilities)
    with pytest.raises(ConfigError):
        build_source(build_config([Layer("f", {"source.kind": "agliteterm"})]))


def test_rendered_settings_read_back() -> None:
    config = build_config([Layer("f", {"agliteterm.command": 'relay "//./pipe/x"'})])
    text = render_toml(config)
    back = build_config([Layer("r", flatten_table(tomllib.loads(text), "r"))])
    assert back == config and "# socket is not set" in text
