"""Each setting is declared once (``config.setting``); everything else reads the table.

The config file, ``MIRROR_HOST_*``, ``serve``'s flags, ``check-config`` and
``service install`` used to keep their own lists of the settings, which had to
agree. Now they derive from ``SETTINGS``: these tests hold the table to the
rooms it is read off, and each place a setting can be given to the table.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from mirror_host.cli import build_parser, load_settings
from mirror_host.config import (
    CONFIG_VARIABLE,
    ENV_PREFIX,
    SETTINGS,
    Config,
    Layer,
    Setting,
    build_config,
    flatten_table,
    render_toml,
)
from mirror_host.config_file import env_layer
from mirror_host.shell.environment import INJECTED_VARIABLES, SERVICE_MARKER
from mirror_host.system_service.units import service_environment, service_spec
from tests.conftest import REPO

#: A value each setting takes, as text, other than its default.
_TEXT_SAMPLES = {"server.advertise_address": "192.0.2.7", "server.listen": "127.0.0.1:9"}


def sample_text(setting: Setting) -> str:
    if setting.key in _TEXT_SAMPLES:
        return _TEXT_SAMPLES[setting.key]
    if setting.type.choices:
        return next(c for c in setting.type.choices if c != setting.default)
    if setting.fields == ("columns", "rows"):
        return "80x24"
    if isinstance(setting.default, bool):
        return "false" if setting.default else "true"
    if isinstance(setting.default, int):
        return "3"
    return "/srv/mirror-host/x"


def parsed(setting: Setting, text: str) -> Any:
    raw = setting.type.from_text(text)
    value = setting.type.parse(raw)
    return value


def test_every_field_of_every_room_is_set_by_exactly_one_setting() -> None:
    declared: dict[str, list[str]] = {}
    for setting in SETTINGS.values():
        for name in setting.fields:
            declared.setdefault(f"{setting.room}.{name}", []).append(setting.key)
    rooms = [
        f"{room.name}.{item.name}"
        for room in dataclasses.fields(Config)
        if dataclasses.is_dataclass(getattr(Config(), room.name))
        for item in dataclasses.fields(getattr(Config(), room.name))
    ]
    assert sorted(declared) == sorted(rooms)
    assert all(len(keys) == 1 for keys in declared.values()), declared
    assert SETTINGS["local.size"].fields == ("columns", "rows")


def test_environment_names_follow_the_keys_and_clash_with_nothing_reserved() -> None:
    names = [setting.env for setting in SETTINGS.values()]
    assert len(set(names)) == len(names)
    for setting in SETTINGS.values():
        assert setting.env == ENV_PREFIX + setting.key.replace(".", "_").upper()
    reserved = {CONFIG_VARIABLE, SERVICE_MARKER, *INJECTED_VARIABLES}
    assert reserved.isdisjoint(names)


def serve_args(*flags: str) -> argparse.Namespace:
    return build_parser().parse_args(["serve", "--state-dir", "/tmp/mh-state", *flags])


def flag_words(setting: Setting) -> list[str]:
    """The command line that gives ``setting`` its sample value."""
    assert setting.flag is not None
    if setting.flag.kind in ("on", "off"):
        return [setting.flag.name]
    return [setting.flag.name, sample_text(setting)]


def test_each_flag_sets_its_setting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv(CONFIG_VARIABLE, raising=False)
    flags = [setting.flag.name for setting in SETTINGS.values() if setting.flag is not None]
    assert len(set(flags)) == len(flags)
    for setting in SETTINGS.values():
        if setting.flag is None or setting.key == "state.dir":
            continue
        config = load_settings(serve_args(*flag_words(setting)))
        if setting.flag.kind == "on":
            expected: Any = True
        elif setting.flag.kind == "off":
            expected = False
        elif setting.flag.kind == "append":
            expected = (sample_text(setting),)
        else:
            expected = parsed(setting, sample_text(setting))
        assert setting.value_in(config) == expected, setting.key
        assert setting.value_in(config) != setting.default, setting.key


def test_every_flag_is_one_of_serves_with_its_declared_help() -> None:
    serve = build_parser()._subparsers._group_actions[0].choices["serve"]  # type: ignore[union-attr]
    options = {name: action for action in serve._actions for name in action.option_strings}
    for setting in SETTINGS.values():
        if setting.flag is None:
            continue
        action = options[setting.flag.name]
        assert action.dest == setting.flag.dest
        assert action.help is not None and "{" not in action.help, setting.key
        if "{default}" in setting.flag.help and setting.key != "state.dir":
            assert str(setting.shown(setting.default)) in action.help


def test_each_environment_variable_and_config_file_line_sets_its_setting() -> None:
    for setting in SETTINGS.values():
        text = sample_text(setting)
        from_env = build_config([env_layer({setting.env: text})])
        assert setting.value_in(from_env) == parsed(setting, text), setting.key
        # check-config writes it; the file it writes sets it back.
        rendered = tomllib.loads(render_toml(from_env))
        back = build_config([Layer("f", flatten_table(rendered, "f"))])
        assert setting.value_in(back) == setting.value_in(from_env), setting.key


def test_the_path_settings_are_declared_so() -> None:
    paths = {key: setting.path for key, setting in SETTINGS.items() if setting.path}
    assert paths == {
        "state.dir": "path",
        "herdr.socket": "path",
        "herdr.bin": "program",
        "tmux.socket_path": "path",
        "agliteterm.socket": "path",  # left relative by service install before the table
    }


def test_service_install_makes_every_path_setting_absolute() -> None:
    for setting in SETTINGS.values():
        words = (
            [setting.flag.name, "rel/x"] if setting.flag and setting.flag.kind == "value" else []
        )
        spec = service_spec("/usr/bin/python3", words, environ={}, cwd="/work", home="/h")
        environment = dict(service_environment({setting.env: "rel/x"}, "/work"))
        if setting.path is None:
            assert spec.command[4:] == tuple(words), setting.key
            assert environment == {setting.env: "rel/x"}, setting.key
        else:
            if words:
                assert spec.command[4:] == (setting.flag.name, "/work/rel/x"), setting.key  # type: ignore[union-attr]
            assert environment == {setting.env: "/work/rel/x"}, setting.key
    # A program named bare is left to PATH.
    assert dict(service_environment({"MIRROR_HOST_HERDR_BIN": "herdr"}, "/work")) == {
        "MIRROR_HOST_HERDR_BIN": "herdr"
    }


def test_operations_md_lists_every_setting_with_its_flag() -> None:
    text = (REPO / "docs" / "operations.md").read_text()
    for setting in SETTINGS.values():
        # | `--flag VALUE` | `room.key` | default … |  (a setting without a flag: an empty cell)
        flag = rf"`{re.escape(setting.flag.name)}[ `\\]" if setting.flag else ""
        cell = r"(?:\\\||[^|])*"  # a table cell: anything but a pipe, or an escaped one
        row = re.compile(rf"^\| {flag}{cell}\| `{re.escape(setting.key)}`", re.MULTILINE)
        assert row.search(text), f"docs/operations.md has no row for {setting.key}"
