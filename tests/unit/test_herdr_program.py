"""Which ``herdr`` program the host runs (one lookup for the source and serve)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mirror_host.panes.herdr.observe import find_herdr_program


def _program(path: Path, *, executable: bool = True) -> Path:
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755 if executable else 0o644)
    return path


def test_default_is_herdr_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_herdr_program(None) is None
    herdr = _program(tmp_path / "herdr")
    assert find_herdr_program(None) == str(herdr)
    assert find_herdr_program("") == str(herdr)


def test_a_configured_name_is_looked_up_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    custom = _program(tmp_path / "herdr-0.9")
    assert find_herdr_program("herdr-0.9") == str(custom)


def test_a_configured_path_must_be_an_executable_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "")
    runnable = _program(tmp_path / "herdr")
    assert find_herdr_program(str(runnable)) == str(runnable)
    assert find_herdr_program(str(_program(tmp_path / "plain", executable=False))) is None
    assert find_herdr_program(str(tmp_path)) is None  # a directory is never a program
    assert find_herdr_program(str(tmp_path / "absent")) is None


def test_a_bare_name_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "")
    monkeypatch.chdir(tmp_path)
    _program(tmp_path / "myherdr")
    assert find_herdr_program("myherdr") == "myherdr"
    (tmp_path / "myherdr").chmod(0o644)
    assert find_herdr_program("myherdr") is None
