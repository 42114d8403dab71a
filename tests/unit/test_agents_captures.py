"""Every real Herdr capture (Claude Code and omp screens) gets its expected verdict.

The captures are ``pane.read format=ansi`` rows recorded by Collie (MIT); they
are read from the shared data directory, never copied into the repository. Each
one is drawn on a real libghostty screen the way the Herdr source draws it, and
the whole pipeline classifies it: foreground process → agent, screen → state
and composer. The blocked screens (permission prompts, menus, plan approvals,
trust prompt, question wizards, pickers) must never read as ready.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mirror_host.agents import (
    Agent,
    AgentState,
    Composer,
    ForegroundProcess,
    detect,
    read_screen,
)
from mirror_host.panes.herdr.protocol import frame_from_rows, split_rows, strip_escapes
from mirror_host.terminal import Screen
from mirror_host.terminal.view import ScreenText
from tests.conftest import SHARED

CAPTURES = SHARED / "data" / "herdr-pane-captures"

IDLE, WORKING, BLOCKED = AgentState.IDLE, AgentState.WORKING, AgentState.BLOCKED
EMPTY, DRAFT, ABSENT = Composer.EMPTY, Composer.DRAFT, Composer.ABSENT

#: capture → (state, composer); the agent is the file name's prefix.
EXPECTED: dict[str, tuple[AgentState, Composer]] = {
    # Claude Code: the input box at the bottom.
    "claude--done.txt": (IDLE, EMPTY),  # the faint suggestion is not a draft
    "claude--fresh-idle.txt": (IDLE, EMPTY),
    "claude--menu-model-picker-dismissed.txt": (IDLE, EMPTY),
    "claude--draft-paste-placeholder.txt": (IDLE, DRAFT),
    "claude--draft-paste-split-partial.txt": (IDLE, DRAFT),
    "claude--draft-paste-split-tail.txt": (IDLE, DRAFT),
    "claude--draft-wrapped.txt": (IDLE, DRAFT),
    "claude--send-inflight.txt": (IDLE, DRAFT),
    # Working: a live spinner, or background agents still running.
    "claude--working.txt": (WORKING, EMPTY),
    "claude--rename-resolved.txt": (WORKING, EMPTY),
    "claude--draft-footer-empty.txt": (WORKING, EMPTY),
    "claude--draft-footer-single.txt": (WORKING, DRAFT),
    "claude--draft-footer-wrapped.txt": (WORKING, DRAFT),
    # Dialogs replace the input box.
    "claude--menu-model-picker.txt": (BLOCKED, ABSENT),
    "claude--menu-model-picker-moved.txt": (BLOCKED, ABSENT),
    "claude--permission-bash.txt": (BLOCKED, ABSENT),
    "claude--permission-edit.txt": (BLOCKED, ABSENT),
    "claude--plan-approval.txt": (BLOCKED, ABSENT),
    "claude--plan-approval--feedback-focused.txt": (BLOCKED, ABSENT),
    "claude--plan-approval--feedback-typed.txt": (BLOCKED, ABSENT),
    "claude--plan-approval--feedback-wrapped.txt": (BLOCKED, ABSENT),
    "claude--plan-approval--numbered-body.txt": (BLOCKED, ABSENT),
    "claude--plan-approval--three-row.txt": (BLOCKED, ABSENT),
    "claude--plan-approval--three-row-focused.txt": (BLOCKED, ABSENT),
    "claude--plan-approval--three-row-typed-focused.txt": (BLOCKED, ABSENT),
    "claude--select-menu.txt": (BLOCKED, ABSENT),
    "claude--select-multi.txt": (BLOCKED, ABSENT),
    "claude--select-multiselect-checked.txt": (BLOCKED, ABSENT),
    "claude--select-multiselect-review.txt": (BLOCKED, ABSENT),
    "claude--select-multiselect-single.txt": (BLOCKED, ABSENT),
    "claude--select-preview.txt": (BLOCKED, ABSENT),
    "claude--select-preview-note-attached.txt": (BLOCKED, ABSENT),
    "claude--select-preview-note-input.txt": (BLOCKED, ABSENT),
    "claude--trust-prompt.txt": (BLOCKED, ABSENT),
    "claude--wizard-multiselect-checked.txt": (BLOCKED, ABSENT),
    "claude--wizard-multiselect-final.txt": (BLOCKED, ABSENT),
    "claude--wizard-multiselect-pointer-next.txt": (BLOCKED, ABSENT),
    "claude--wizard-multiselect-q1.txt": (BLOCKED, ABSENT),
    "claude--wizard-preview-note-attached.txt": (BLOCKED, ABSENT),
    "claude--wizard-preview-q1.txt": (BLOCKED, ABSENT),
    "claude--wizard-preview-wrapped-label.txt": (BLOCKED, ABSENT),
    "claude--wizard-q1.txt": (BLOCKED, ABSENT),
    "claude--wizard-q1-revisit.txt": (BLOCKED, ABSENT),
    "claude--wizard-q2.txt": (BLOCKED, ABSENT),
    "claude--wizard-submit.txt": (BLOCKED, ABSENT),
    "claude--wizard-submit-unanswered.txt": (BLOCKED, ABSENT),
    # omp: the editor box at the bottom.
    "omp--done.txt": (IDLE, EMPTY),
    "omp--done--tool-result.txt": (IDLE, EMPTY),
    "omp--fresh-idle.txt": (IDLE, EMPTY),
    "omp--menu-dismissed.txt": (IDLE, EMPTY),
    "omp--draft-single.txt": (IDLE, DRAFT),
    "omp--draft-wrapped.txt": (IDLE, DRAFT),
    "omp--slash-palette.txt": (IDLE, DRAFT),
    "omp--slash-palette--filtered.txt": (IDLE, DRAFT),
    "omp--working.txt": (WORKING, EMPTY),
    "omp--menu-model.txt": (BLOCKED, ABSENT),
    "omp--menu-model-moved.txt": (BLOCKED, ABSENT),
    "omp--menu-resume.txt": (BLOCKED, ABSENT),
    "omp--menu-resume-moved.txt": (BLOCKED, ABSENT),
    "omp--menu-settings.txt": (BLOCKED, ABSENT),
    "omp--menu-settings-moved.txt": (BLOCKED, ABSENT),
    "omp--select-menu.txt": (BLOCKED, ABSENT),
    "omp--select-menu-moved.txt": (BLOCKED, ABSENT),
    "omp--select-multi.txt": (BLOCKED, ABSENT),
    "omp--select-multi-checked.txt": (BLOCKED, ABSENT),
    "omp--select-multi-review.txt": (BLOCKED, ABSENT),
}

#: The drafts the composer holds, where the exact text matters.
DRAFTS = {
    "claude--draft-paste-placeholder.txt": "[Pasted text #3 +3 lines]",
    "claude--draft-paste-split-partial.txt": (
        "[Pasted text #3 +5 lines] TAIL-ONE-alpha-bravo TAIL-TWO-charlie-delta"
    ),
    "claude--send-inflight.txt": "/rename",
    "claude--draft-footer-single.txt": "remember to update the changelog before tagging",
    "omp--draft-single.txt": "list the files in this repo",
    "omp--slash-palette--filtered.txt": "/new",
}

pytestmark = pytest.mark.skipif(
    not CAPTURES.is_dir(), reason="../shared/data/herdr-pane-captures is absent"
)


def captures() -> list[Path]:
    return sorted(CAPTURES.glob("*.txt")) if CAPTURES.is_dir() else []


def screen_of(path: Path) -> Screen:
    """The capture drawn as the Herdr source draws a pane.read (rows placed one by one)."""
    rows = split_rows(path.read_bytes().decode("utf-8"))
    width = max(len(strip_escapes(row)) for row in rows)
    screen = Screen(max(width, 80), max(len(rows), 24))
    screen.feed(frame_from_rows(rows))
    return screen


def agent_of(path: Path) -> Agent:
    return Agent(path.name.split("--", 1)[0])


def test_every_capture_has_an_expectation() -> None:
    assert sorted(EXPECTED) == [p.name for p in captures()]


@pytest.mark.parametrize("path", captures(), ids=lambda p: p.name)
def test_capture_classification(path: Path) -> None:
    agent = agent_of(path)
    process = ForegroundProcess(pid=4242, name="node", argv=("node", f"/opt/bin/{agent.value}"))
    verdict = detect([process], ScreenText(screen_of(path)))
    assert (verdict.agent, verdict.state, verdict.composer) == (agent, *EXPECTED[path.name])
    assert verdict.pid == 4242
    assert verdict.ready is (EXPECTED[path.name] == (IDLE, EMPTY))
    assert bool(verdict.draft) is (verdict.composer is DRAFT)
    if path.name in DRAFTS:
        assert verdict.draft == DRAFTS[path.name]


@pytest.mark.parametrize("path", captures(), ids=lambda p: p.name)
def test_no_capture_is_ready_for_another_agent(path: Path) -> None:
    """Fail closed across agents: another reader never finds an empty, idle composer."""
    view = ScreenText(screen_of(path))
    for agent in Agent:
        if agent is not agent_of(path):
            assert not read_screen(agent, view).ready, agent


@pytest.mark.parametrize("path", captures(), ids=lambda p: p.name)
def test_a_shell_showing_a_capture_is_no_agent(path: Path) -> None:
    """`cat` of a saved agent screen is a shell's output, not an agent to type into."""
    shell = ForegroundProcess(pid=7, name="bash", argv=("-bash",))
    verdict = detect([shell], ScreenText(screen_of(path)))
    assert verdict.agent is None and not verdict.ready
