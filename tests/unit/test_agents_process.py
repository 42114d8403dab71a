"""Which agent a foreground process is: names, interpreters, wrappers, groups."""

from __future__ import annotations

import pytest

from mirror_host.agents import Agent, ForegroundProcess, agent_named, identify, identify_group


def proc(*argv: str, name: str = "", pid: int = 1) -> ForegroundProcess:
    return ForegroundProcess(pid=pid, name=name or (argv[0].rsplit("/", 1)[-1] if argv else ""),
                             argv=tuple(argv))  # fmt: skip


@pytest.mark.parametrize(
    ("process", "agent"),
    [
        (proc("claude"), Agent.CLAUDE),
        (proc("/home/u/.local/bin/claude", "--resume"), Agent.CLAUDE),
        # Node-based agents, as ps shows them.
        (proc("node", "/usr/lib/node_modules/@anthropic-ai/claude-code/cli.js"), Agent.CLAUDE),
        (proc("node", "/home/u/.npm-global/bin/claude"), Agent.CLAUDE),
        (proc("node", "--no-warnings", "/opt/claude", "-c"), Agent.CLAUDE),
        (proc("/usr/bin/node", "/usr/lib/node_modules/@openai/codex/bin/codex.js"), Agent.CODEX),
        (proc("codex"), Agent.CODEX),
        (proc("node", "/usr/local/bin/gemini"), Agent.GEMINI),
        (proc("bun", "/home/u/.bun/bin/omp"), Agent.OMP),
        (proc("opencode"), Agent.OPENCODE),
        (proc(".opencode", name="opencode"), Agent.OPENCODE),
        # Python: a script by path, a module, a renamed interpreter.
        (proc("python3", "/work/fakes/claude"), Agent.CLAUDE),
        (proc("/usr/bin/python3.12", "-X", "utf8", "/home/u/bin/aider"), Agent.AIDER),
        (proc("python", "-m", "aider", "--model", "x"), Agent.AIDER),
        (proc("python3", "-m", "aider.main"), Agent.AIDER),
        (proc("claude", "fake.py", name="python3"), Agent.CLAUDE),  # exec -a claude
        (proc("python3", "server.py", name="claude"), Agent.CLAUDE),  # prctl name
        # A shell that did not exec its one command.
        (proc("/bin/sh", "-c", "exec claude --resume"), Agent.CLAUDE),
        (proc("sh", "-c", "FOO=1 codex"), Agent.CODEX),
        (proc("bash", "-lc", "exec claude"), Agent.CLAUDE),
        # A shell script named after the agent (`#!/usr/bin/env bash`, or `bash claude`).
        (proc("bash", "/tmp/x/claude"), Agent.CLAUDE),
        (proc("/bin/bash", "-e", "/home/u/bin/claude", "--resume"), Agent.CLAUDE),
        (proc("zsh", "-o", "pipefail", "--", "./codex.sh"), Agent.CODEX),
    ],
)
def test_recognised(process: ForegroundProcess, agent: Agent) -> None:
    assert identify(process) is agent


@pytest.mark.parametrize(
    "process",
    [
        proc("-bash"),
        proc("zsh"),
        proc("vim", "claude.md"),  # editing a file named after an agent
        proc("less", "/tmp/claude"),
        proc("cat", "claude--fresh-idle.txt"),
        proc("python3", "-c", "print('claude')"),
        proc("python3"),
        proc("node", "-e", "require('claude')"),
        proc("sh", "-c", "cat /tmp/claude"),
        proc("sh", "-c", "'unbalanced"),
        proc("bash", "/home/u/claude/build.sh"),  # only a shell script's own name counts
        proc("bash", "build.sh", "claude"),  # an argument of the script
        proc("bash", "-s", "claude"),  # commands from stdin; `claude` is $1
        proc("bash", "--rcfile", "/tmp/claude"),
        proc("bash", "--norc", "--noprofile"),
        proc("bash", "-"),
        proc("tmux", "attach"),
        proc("", name=""),
    ],
)
def test_not_an_agent(process: ForegroundProcess) -> None:
    assert identify(process) is None


def test_group_prefers_the_leader_then_members() -> None:
    shell = proc("/bin/sh", "-c", "/opt/fake", pid=10)
    agent = proc("python3", "/opt/claude", pid=11)
    assert identify_group([shell, agent]) == (Agent.CLAUDE, 11)
    assert identify_group([proc("codex", pid=5), agent]) == (Agent.CODEX, 5)
    assert identify_group([shell]) is None
    assert identify_group([]) is None


def test_agent_named() -> None:
    assert agent_named("Claude") is Agent.CLAUDE
    assert agent_named("/x/gemini.js") is Agent.GEMINI
    assert agent_named("claudette") is None
    assert Agent.CLAUDE.display_name == "Claude Code"
