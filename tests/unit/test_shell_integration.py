"""Shell integration: which starts get wrapped and how, the setting, and ``shell-init``."""

from __future__ import annotations

import argparse
import io
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from mirror_host.cli import build_parser, load_settings, main
from mirror_host.config import Layer, build_config, render_toml
from mirror_host.config_file import env_layer
from mirror_host.errors import ConfigError
from mirror_host.shell.environment import SHELL_DIR_VARIABLE
from mirror_host.shell.exchange import TRIGGER
from mirror_host.shell.inject import ShellIntegration, plain_shell
from mirror_host.shell.integration import SHELL_NAMES, snippet
from mirror_host.shell.nonce import NONCE_VARIABLE, is_nonce, new_nonce, started_with_nonce
from tests.pane_process import wait_program_in_place_sync


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["/bin/bash", "-l"], ("bash", ["/bin/bash", "-l"])),
        (["/bin/sh", "-c", "bash"], ("bash", ["bash"])),
        (["/bin/sh", "-c", "exec zsh -i"], ("zsh", ["zsh", "-i"])),
        (["/bin/sh", "-c", "fish --login"], ("fish", ["fish", "--login"])),
        (["/bin/sh", "-c", "bash --norc --noprofile"], ("bash", ["bash", "--norc", "--noprofile"])),
        (["/bin/sh", "-c", "bash -c ls"], None),
        (["/bin/sh", "-c", "cd /tmp && exec bash"], None),
        (["/bin/sh", "-c", "htop"], None),
        (["/bin/sh", "-c", "zsh --norc"], None),
        (["/bin/sh", "-c", "bash 'unterminated"], None),
        (["/usr/bin/python3", "-i"], None),
        ([], None),
    ],
)
def test_only_a_plain_shell_start_is_wrapped(
    argv: list[str], expected: tuple[str, list[str]] | None
) -> None:
    assert plain_shell(argv) == expected


def test_wrapping_keeps_the_users_settings_to_restore(tmp_path: Path) -> None:
    integration = ShellIntegration(tmp_path)
    env = {"HOME": "/home/u", "ENV": "/home/u/.shrc", "ZDOTDIR": "/home/u/.zsh"}
    argv, bash_env = integration.wrap(["/bin/bash", "-l"], env)
    assert argv == ["/bin/bash", "--posix", "-l"]
    assert bash_env["ENV"] == str(tmp_path / "bash" / "mirror-host.bash")
    assert bash_env["MIRROR_HOST_BASH_ENV"] == "/home/u/.shrc"
    assert bash_env["MIRROR_HOST_BASH_INJECT"] == "1 -l"
    assert bash_env["HISTFILE"] == "/home/u/.bash_history"
    assert env == {"HOME": "/home/u", "ENV": "/home/u/.shrc", "ZDOTDIR": "/home/u/.zsh"}
    argv, zsh_env = integration.wrap(["/bin/sh", "-c", "zsh"], env)
    assert argv == ["zsh"]
    assert zsh_env["ZDOTDIR"] == str(tmp_path / "zsh")
    assert zsh_env["MIRROR_HOST_ZDOTDIR"] == "/home/u/.zsh"
    argv, fish_env = integration.wrap(["fish", "-l"], env)
    assert argv == [
        "fish",
        "-l",
        f"--init-command=source '{tmp_path / 'fish' / 'mirror-host.fish'}'",
    ]
    assert fish_env == env
    assert integration.wrap(["/bin/sh", "-c", "htop"], env) == (["/bin/sh", "-c", "htop"], env)


def test_the_files_hold_the_snippets_and_go_away() -> None:
    integration = ShellIntegration.create()
    try:
        directory = integration.directory
        assert oct(directory.stat().st_mode & 0o777) == "0o700"
        bash = (directory / "bash" / "mirror-host.bash").read_text()
        assert "set +o posix" in bash and bash.endswith(snippet("bash"))
        zshenv = (directory / "zsh" / ".zshenv").read_text()
        assert "MIRROR_HOST_ZDOTDIR" in zshenv and zshenv.endswith(snippet("zsh"))
        assert (directory / "fish" / "mirror-host.fish").read_text() == snippet("fish")
        assert not list(directory.rglob("*.tmp"))
    finally:
        integration.remove()
    assert not directory.exists()


def test_every_snippet_marks_input_and_commands_and_loads_once() -> None:
    for shell in SHELL_NAMES:
        text = snippet(shell)
        assert "133;B" in text and "133;C" in text and "133;D" in text and "133;P;k=i" in text
        assert "133;A" not in text  # libghostty would move an A mid-line to a fresh line
        assert "__mirror_host_marks" in text
    with pytest.raises(KeyError):
        snippet("tcsh")


def test_shell_send_setting_and_flag() -> None:
    assert build_config([]).commands.shell_send is True
    assert build_config([Layer("t", {"commands.shell_send": False})]).commands.shell_send is False
    # Text is the environment's (a config file's "false" is refused: TOML has booleans).
    for raw, value in (("false", False), ("0", False), ("yes", True)):
        config = build_config([env_layer({"MIRROR_HOST_COMMANDS_SHELL_SEND": raw})])
        assert config.commands.shell_send is value
    with pytest.raises(ConfigError, match="MIRROR_HOST_COMMANDS_SHELL_SEND"):
        env_layer({"MIRROR_HOST_COMMANDS_SHELL_SEND": "maybe"})
    with pytest.raises(ConfigError, match="commands.shell_send"):
        build_config([Layer("t", {"commands.shell_send": "false"})])
    off = build_config([Layer("t", {"commands.shell_send": False})])
    assert "[commands]\nshell_send = false" in render_toml(off)
    args = build_parser().parse_args(["serve", "--no-shell-send", "--state-dir", "/tmp/x"])
    assert load_settings(args).commands.shell_send is False
    default = build_parser().parse_args(["serve", "--state-dir", "/tmp/x"])
    assert isinstance(default, argparse.Namespace) and default.shell_send is None


def test_shell_init_prints_the_snippet(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    for shell in SHELL_NAMES:
        assert main(["shell-init", shell]) == 0
        assert capsys.readouterr().out == snippet(shell)
    with pytest.raises(SystemExit) as exit_info:
        main(["shell-init", "powershell"])
    assert exit_info.value.code == 2


def test_every_snippet_signs_its_marks_with_the_nonce_it_is_given() -> None:
    for shell in SHELL_NAMES:
        text = snippet(shell)
        assert NONCE_VARIABLE in text and "mh=" in text and "__mirror_host_mh" in text
    # bash names the nonce in its prompt strings (often exported), never copies it there.
    assert "${__mirror_host_mh}" in snippet("bash")


@pytest.mark.skipif(not shutil.which("zsh"), reason="no zsh")
@pytest.mark.timeout(20)
def test_zsh_never_exports_its_marks(tmp_path: Path) -> None:
    """What a program started at zsh's prompt (a completion's) or by its command
    line inherits: PS1 as the user exported it, never the signed marks."""
    nonce = new_nonce()
    (tmp_path / "mh.zsh").write_text(snippet("zsh"))
    script = (
        "source ./mh.zsh; __mirror_host_precmd; print -r -- ${(t)PS1}; env > at-prompt; "
        "__mirror_host_preexec; print -r -- ${(t)PS1}; env > in-command"
    )
    environ = {"HOME": str(tmp_path), "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
               "TERM": "dumb", "PS1": "z%# ", NONCE_VARIABLE: nonce}  # fmt: skip
    result = subprocess.run(
        ["zsh", "-f", "-i", "-c", script], cwd=tmp_path, env=environ,
        capture_output=True, text=True, timeout=10,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    # Each hook's signed mark, then PS1's type at the prompt and in a command.
    assert result.stdout == (
        f"\x1b]133;D;0;mh={nonce}\x07scalar-special\n"
        f"\x1b]133;C;mh={nonce}\x07scalar-export-special\n"
    )
    at_prompt = (tmp_path / "at-prompt").read_text()
    in_command = (tmp_path / "in-command").read_text()
    assert "PS1=" not in at_prompt and "\nPS1=z%# \n" in in_command
    for inherited in (at_prompt, in_command):
        assert nonce not in inherited and "133;" not in inherited


def test_nonces(tmp_path: Path) -> None:
    assert is_nonce(new_nonce()) and new_nonce() != new_nonce() and len(new_nonce()) == 32
    for bad in (
        "",
        "abc",
        "0123456789ABCDEF",
        "0123456789abcdeg",
        "$(rm -rf ~)0123456789",
        "a" * 129,
    ):
        assert not is_nonce(bad)
    proc = tmp_path / "proc"
    (proc / "7").mkdir(parents=True)
    (proc / "7" / "environ").write_bytes(
        b"HOME=/h\0" + NONCE_VARIABLE.encode() + b"=" + b"ab" * 16 + b"\0TERM=x\0"
    )
    assert started_with_nonce(7, proc=proc) == "ab" * 16
    (proc / "7" / "environ").write_bytes(NONCE_VARIABLE.encode() + b"=$(evil)\0")
    assert started_with_nonce(7, proc=proc) is None
    assert started_with_nonce(8, proc=proc) is None


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="no /proc")
def test_a_process_started_with_a_nonce_is_known_by_it() -> None:
    nonce = new_nonce()
    env = {**os.environ, NONCE_VARIABLE: nonce}
    with subprocess.Popen(["sleep", "30"], env=env) as child:
        try:
            wait_program_in_place_sync(child.pid)
            assert started_with_nonce(child.pid) == nonce
        finally:
            child.kill()
    without = {k: v for k, v in os.environ.items() if k != NONCE_VARIABLE}
    with subprocess.Popen(["sleep", "30"], env=without) as child:
        try:
            wait_program_in_place_sync(child.pid)
            assert started_with_nonce(child.pid) is None
        finally:
            child.kill()


def test_every_snippet_binds_the_trigger_in_every_keymap() -> None:
    """CSI I (:data:`~mirror_host.shell.exchange.TRIGGER`) in each editing mode."""
    bash, zsh, fish = snippet("bash"), snippet("zsh"), snippet("fish")
    assert TRIGGER == b"\x1b[I"
    assert "for __mirror_host_map in emacs vi-insert vi-command" in bash
    assert '"\\e[I": "\\e[>mhA\\e[>mhB"' in bash and "-x '\"\\e[>mhA\": __mirror_host_take'" in bash
    for keymap in ("emacs", "viins", "vicmd"):
        assert f"bindkey -M {keymap} '\\e[I' __mirror_host_take" in zsh
    assert "zle .accept-line" in zsh  # the builtin widget: no user wrapper of it runs
    assert "for mode in default insert visual" in fish and "bind -M $mode \\e\\[I" in fish
    for text in (bash, zsh, fish):
        assert SHELL_DIR_VARIABLE in text and "__mirror_host_dir" in text


@pytest.mark.parametrize(
    ("shell", "argv"),
    [
        pytest.param(
            "bash", ["bash", "--norc", "--noprofile", "-i", "-c"],
            marks=pytest.mark.skipif(not shutil.which("bash"), reason="no bash"),
        ),
        pytest.param(
            "zsh", ["zsh", "-f", "-i", "-c"],
            marks=pytest.mark.skipif(not shutil.which("zsh"), reason="no zsh"),
        ),
        pytest.param(
            "fish", ["fish", "--no-config", "-i", "-c"],
            marks=pytest.mark.skipif(not shutil.which("fish"), reason="no fish"),
        ),
    ],
)  # fmt: skip
@pytest.mark.timeout(20)
def test_registering_is_silent_and_needs_the_directory(
    tmp_path: Path, shell: str, argv: list[str]
) -> None:
    """At every prompt the shell touches ``<dir>/<pid>.prompt``; a directory that is
    missing (removed, not made yet) must never print anything at a prompt."""
    (tmp_path / "mh").write_text(snippet(shell))
    shells = tmp_path / "shells"
    for present in (False, True):
        if present:
            shells.mkdir(mode=0o700)
        environ = {"HOME": str(tmp_path), "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                   "TERM": "dumb", SHELL_DIR_VARIABLE: str(shells)}  # fmt: skip
        pid = "$fish_pid" if shell == "fish" else "$$"
        script = f"source ./mh; __mirror_host_register; echo {pid}"
        result = subprocess.run(
            [*argv, script], cwd=tmp_path, env=environ, capture_output=True, text=True,
            timeout=10,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert "shells" not in result.stderr and "No such file" not in result.stderr
        pid_number = result.stdout.strip().splitlines()[-1]
        assert (shells / f"{pid_number}.prompt").exists() is present
