"""Starting bash, zsh and fish with prompt marks, without touching the user's files. I/O.

The local source starts shells itself, so it can load the integration
(:mod:`mirror_host.shell.integration`) the way Ghostty loads its own: the
shell is pointed at a file of ours, which first does what the shell would have
done (read the user's start-up files), then adds the marks.

* **bash** starts in POSIX mode with ``ENV`` naming our file, the one start-up
  file POSIX mode reads. The file turns POSIX mode off again, restores ``ENV``
  and ``HISTFILE``, reads the files bash would have read (``/etc/profile`` and
  the first of ``~/.bash_profile``, ``~/.bash_login``, ``~/.profile`` for a
  login shell; the system bashrc and ``~/.bashrc`` otherwise; none with
  ``--noprofile`` / ``--norc``), then loads the integration.
* **zsh** starts with ``ZDOTDIR`` naming our directory, whose ``.zshenv``
  restores the user's ``ZDOTDIR`` (so zsh goes on to read their ``.zprofile``,
  ``.zshrc`` and ``.zlogin``), reads their ``.zshenv`` and loads the
  integration, whose prompt hook puts itself after theirs.
* **fish** gets ``--init-command`` to source our file, which fish runs after
  the user's configuration.

Only a plain start of one of these shells is wrapped: the program alone, or
with ``-l``/``--login``/``-i`` (and bash's ``--norc``/``--noprofile``),
possibly as ``exec`` in a ``sh -c`` command. Anything else runs as given.
"""

from __future__ import annotations

import shlex
import shutil
import tempfile
from pathlib import Path

from mirror_host.shell.environment import (
    BASH_ENV_VARIABLE,
    BASH_HISTFILE_VARIABLE,
    BASH_INJECT_VARIABLE,
    ZDOTDIR_VARIABLE,
)
from mirror_host.shell.integration import snippet

__all__ = ["ShellIntegration", "plain_shell"]

_BASH_ENV = r"""# mirror-host: bash's $ENV in the panes mirror-host starts (docs/operations.md).
# It gives bash back its normal start-up (the user's own files), then adds prompt marks.
if [[ -n ${MIRROR_HOST_BASH_INJECT+x} ]]; then
    __mirror_host_flags=$MIRROR_HOST_BASH_INJECT
    builtin unset MIRROR_HOST_BASH_INJECT ENV
    if [[ -n ${MIRROR_HOST_BASH_ENV+x} ]]; then
        builtin export ENV=$MIRROR_HOST_BASH_ENV
        builtin unset MIRROR_HOST_BASH_ENV
    fi
    builtin set +o posix
    builtin shopt -u inherit_errexit 2>/dev/null
    if [[ -n ${MIRROR_HOST_BASH_HISTFILE+x} ]]; then
        builtin export -n HISTFILE
        builtin unset MIRROR_HOST_BASH_HISTFILE
    fi
    if builtin shopt -q login_shell; then
        if [[ $__mirror_host_flags != *--noprofile* ]]; then
            [[ -r /etc/profile ]] && builtin source /etc/profile
            for __mirror_host_file in ~/.bash_profile ~/.bash_login ~/.profile; do
                if [[ -r $__mirror_host_file ]]; then
                    builtin source "$__mirror_host_file"
                    break
                fi
            done
        fi
    elif [[ $__mirror_host_flags != *--norc* ]]; then
        for __mirror_host_file in /etc/bash.bashrc /etc/bash/bashrc /etc/bashrc; do
            if [[ -r $__mirror_host_file ]]; then
                builtin source "$__mirror_host_file"
                break
            fi
        done
        [[ -r ~/.bashrc ]] && builtin source ~/.bashrc
    fi
    builtin unset __mirror_host_flags __mirror_host_file
fi
"""

_ZSH_ENV = r"""# mirror-host: the .zshenv of the panes mirror-host starts (docs/operations.md).
# It gives zsh back the user's ZDOTDIR, so their .zprofile, .zshrc and .zlogin
# load as usual, reads their .zshenv, then adds prompt marks.
if [[ -n ${MIRROR_HOST_ZDOTDIR+x} ]]; then
    ZDOTDIR=$MIRROR_HOST_ZDOTDIR
    builtin unset MIRROR_HOST_ZDOTDIR
else
    builtin unset ZDOTDIR
fi
if [[ -r ${ZDOTDIR:-$HOME}/.zshenv ]]; then
    builtin source ${ZDOTDIR:-$HOME}/.zshenv
fi
"""

_FLAGS = {
    "bash": {"-l", "--login", "-i", "--norc", "--noprofile"},
    "zsh": {"-l", "--login", "-i"},
    "fish": {"-l", "--login", "-i"},
}


def plain_shell(argv: list[str]) -> tuple[str, list[str]] | None:
    """``(shell, argv)`` when ``argv`` just starts bash, zsh or fish (see the module docstring).

    A ``sh -c 'exec bash -l'`` is unwrapped to ``bash -l``.
    """
    if len(argv) == 3 and argv[1] == "-c" and Path(argv[0]).name in ("sh", "dash", "bash"):
        try:
            argv = shlex.split(argv[2])
        except ValueError:
            return None
        if argv[:1] == ["exec"]:
            argv = argv[1:]
    if not argv:
        return None
    shell = Path(argv[0]).name
    flags = _FLAGS.get(shell)
    if flags is None or not set(argv[1:]) <= flags:
        return None
    return shell, argv


class ShellIntegration:
    """The integration files in a private directory, and the way to start shells with them."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._bash = directory / "bash" / "mirror-host.bash"
        self._zsh = directory / "zsh"
        self._fish = directory / "fish" / "mirror-host.fish"

    @classmethod
    def create(cls) -> ShellIntegration:
        """Write the files into a new private temporary directory.

        Raises:
            OSError: the directory or a file could not be written.
        """
        directory = Path(tempfile.mkdtemp(prefix="mirror-host-shell-"))
        integration = cls(directory)
        try:
            _write(integration._bash, _BASH_ENV + snippet("bash"))
            _write(integration._zsh / ".zshenv", _ZSH_ENV + snippet("zsh"))
            _write(integration._fish, snippet("fish"))
        except OSError:
            integration.remove()
            raise
        return integration

    def remove(self) -> None:
        """Delete the directory (the shells already read their files)."""
        shutil.rmtree(self.directory, ignore_errors=True)

    def wrap(self, argv: list[str], env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
        """``argv`` and ``env`` that start the same shell with prompt marks (or unchanged)."""
        plain = plain_shell(argv)
        if plain is None:
            return argv, env
        shell, argv = plain
        env = dict(env)
        flags = argv[1:]
        if shell == "bash":
            if "ENV" in env:
                env[BASH_ENV_VARIABLE] = env["ENV"]
            env["ENV"] = str(self._bash)
            env[BASH_INJECT_VARIABLE] = " ".join(["1", *flags])
            if "HISTFILE" not in env:
                # POSIX mode would name ~/.sh_history; the script un-exports it again.
                env["HISTFILE"] = str(Path(env.get("HOME") or Path.home()) / ".bash_history")
                env[BASH_HISTFILE_VARIABLE] = "1"
            login = [flag for flag in flags if flag in ("-l", "--login")][:1]
            interactive = ["-i"] if "-i" in flags else []
            return [argv[0], "--posix", *login, *interactive], env
        if shell == "zsh":
            if "ZDOTDIR" in env:
                env[ZDOTDIR_VARIABLE] = env["ZDOTDIR"]
            env["ZDOTDIR"] = str(self._zsh)
            return argv, env
        quoted = "'" + str(self._fish).replace("\\", "\\\\").replace("'", "\\'") + "'"
        return [*argv, f"--init-command=source {quoted}"], env


def _write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` in the integration's own new directory.

    No fsync and no rename (and so nothing that blocks the event loop the local
    source starts on): the directory is new and private, nothing reads a file
    before :meth:`ShellIntegration.create` returns, and a crash takes the
    files' only readers, the shells this process starts, with them.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
