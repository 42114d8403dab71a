"""Which agent a foreground process is, from its name and command line. Pure.

Agents rarely run under their own name: Claude Code, Codex and Gemini CLI are
Node programs (``node /usr/lib/node_modules/@anthropic-ai/claude-code/cli.js``),
aider is Python (``python -m aider``), and a script may be started through its
interpreter (``python3 ~/bin/claude``) or renamed with ``exec -a``. So each
process is looked at three ways: its kernel name, the basename of ``argv[0]``,
and, when ``argv[0]`` is an interpreter (node, bun, deno, python, a shell), the
script or module it runs. A package directory in the script's path counts too
(``@openai/codex/bin/codex.js``). A shell runs its ``-c`` command or the script
it was handed: ``bash /tmp/x/claude`` is how ``ps`` shows a ``#!/usr/bin/env
bash`` script called ``claude`` (for shell scripts only the script's own name
counts, not its directories).

Within a foreground process group the group leader is asked first; a shell
that did not ``exec`` its one command (``sh -c claude``) leaves the agent as a
second member of the same group, which is why the whole group is handed in.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence

from mirror_host.agents.model import Agent, ForegroundProcess

__all__ = ["agent_named", "identify", "identify_group"]

#: Program and package names → agent (lower case, extensions removed).
_NAMES = {
    "claude": Agent.CLAUDE,
    "claude-code": Agent.CLAUDE,
    "codex": Agent.CODEX,
    "codex-cli": Agent.CODEX,
    "gemini": Agent.GEMINI,
    "gemini-cli": Agent.GEMINI,
    "opencode": Agent.OPENCODE,
    "opencode-ai": Agent.OPENCODE,
    "aider": Agent.AIDER,
    "aider-chat": Agent.AIDER,
    "omp": Agent.OMP,
}
_SCRIPT_SUFFIX = re.compile(r"\.(?:js|mjs|cjs|ts|py|sh)$")
_PYTHON = re.compile(r"^(?:python|pypy)(?:\d+(?:\.\d+)*)?$")
_NODE_LIKE = frozenset({"node", "nodejs", "bun", "deno", "tsx", "npx", "bunx"})
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "fish", "ksh"})
#: Interpreter options that take a value (the script comes after it).
_OPTIONS_WITH_VALUE = frozenset({"-W", "-X", "--require", "-r", "--import", "--loader"})
#: Shell options that take a value.
_SHELL_OPTIONS_WITH_VALUE = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})


def _basename(path: str) -> str:
    name = path.rstrip("/").rsplit("/", 1)[-1].lower()
    return _SCRIPT_SUFFIX.sub("", name.lstrip("-"))


def agent_named(name: str) -> Agent | None:
    """The agent a program, script or package name stands for, if any."""
    return _NAMES.get(_basename(name))


def _script_of(argv: Sequence[str]) -> tuple[str | None, str | None]:
    """``(script, module)`` an interpreter command line runs, skipping its options."""
    index = 1
    while index < len(argv):
        arg = argv[index]
        if arg == "-m" and index + 1 < len(argv):
            return None, argv[index + 1]
        if arg in ("-c", "-e", "--eval"):
            return None, None  # inline code: nothing to name
        if arg in _OPTIONS_WITH_VALUE:
            index += 2
            continue
        if arg.startswith("-"):
            index += 1
            continue
        return arg, None
    return None, None


def _from_path(script: str) -> Agent | None:
    """A script's own name, else the nearest package directory that names an agent."""
    agent = agent_named(script)
    if agent is not None:
        return agent
    for part in reversed(script.split("/")[:-1]):
        found = agent_named(part)
        if found is not None:
            return found
    return None


def identify(process: ForegroundProcess) -> Agent | None:
    """The agent this one process is, or ``None``."""
    argv = process.argv
    program = _basename(argv[0]) if argv else ""
    for name in (program, process.name):
        agent = agent_named(name) if name else None
        if agent is not None:
            return agent
    launcher = program or process.name.lower()
    if launcher in _NODE_LIKE or _PYTHON.match(launcher):
        script, module = _script_of(argv)
        if module is not None:
            return agent_named(module.split(".", 1)[0])
        if script is not None:
            return _from_path(script)
        return None
    if launcher in _SHELLS and len(argv) >= 2:
        return _shell_runs(process.pid, argv)
    return None


def _shell_runs(pid: int, argv: Sequence[str]) -> Agent | None:
    """The agent a shell's command line runs: ``sh -c "claude …"`` or ``bash /x/claude``.

    Only the shell's first operand is looked at: the command string of ``-c``,
    else the script to run (never with ``-s``, whose operands are arguments).
    Values of options (``-o pipefail``, ``--rcfile x``) are skipped.
    """
    index, command, stdin = 1, False, False
    while index < len(argv):
        arg = argv[index]
        if arg == "--":
            index += 1
            break
        if arg in _SHELL_OPTIONS_WITH_VALUE:
            index += 2
            continue
        if arg.startswith("--"):
            index += 1  # --norc, --login …
            continue
        if len(arg) > 1 and arg[0] in "-+":
            command = command or (arg[0] == "-" and "c" in arg[1:])  # -c, -lc, -ec …
            stdin = stdin or (arg[0] == "-" and "s" in arg[1:])
            index += 1
            continue
        break
    if index >= len(argv):
        return None
    if not command:
        # `bash /tmp/x/claude`: a script (a `#!/usr/bin/env bash` one named after the agent).
        return None if stdin else agent_named(argv[index])
    # `sh -c "claude --resume"`: the first word of the command, if it is an agent.
    try:
        words = shlex.split(argv[index])
    except ValueError:
        return None
    while words and ("=" in words[0] or words[0] == "exec"):
        words = words[1:]  # VAR=value prefixes and `exec`
    return identify(ForegroundProcess(pid, "", tuple(words))) if words else None


def identify_group(processes: Iterable[ForegroundProcess]) -> tuple[Agent, int] | None:
    """The agent of a foreground process group and the pid it runs in.

    The first process is the group leader; it wins if it is an agent. Otherwise
    the first other member that is one.
    """
    for process in processes:
        agent = identify(process)
        if agent is not None:
            return agent, process.pid
    return None
