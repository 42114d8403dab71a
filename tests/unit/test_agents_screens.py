"""Screen readers on hand-drawn screens: each agent's idle, working, blocked and draft
layouts, placeholders told from drafts by style, and the look-alikes that must not
read as an empty, idle composer."""

from __future__ import annotations

import pytest

from mirror_host.agents import Agent, AgentState, Composer, TextView, read_screen

IDLE, WORKING, BLOCKED, UNKNOWN = (
    AgentState.IDLE,
    AgentState.WORKING,
    AgentState.BLOCKED,
    AgentState.UNKNOWN,
)
EMPTY, DRAFT, ABSENT = Composer.EMPTY, Composer.DRAFT, Composer.ABSENT
RULE = "─" * 60


def verdict(agent: Agent, view: TextView) -> tuple[AgentState, Composer, str]:
    found = read_screen(agent, view)
    return found.state, found.composer, found.draft


def faint_after(text: str, row: int, column: int) -> dict[int, range]:
    """Mark everything from ``column`` to the end of ``row`` faint."""
    return {row: range(column, len(text.split("\n")[row]))}


# ---------------------------------------------------------------- Claude Code


def claude(
    box: str, *, above: str = "● Done.", footer: str = "  [Opus] ~/p\n  ? for shortcuts"
) -> str:
    return f"{above}\n\n{RULE}\n{box}\n{RULE}\n{footer}"


def test_claude_idle_empty_and_draft() -> None:
    assert verdict(Agent.CLAUDE, TextView.of(claude("❯\u00a0"))) == (IDLE, EMPTY, "")
    assert verdict(Agent.CLAUDE, TextView.of(claude("❯ fix it\n  and test"))) == (
        IDLE, DRAFT, "fix it\nand test",
    )  # fmt: skip


def test_claude_faint_suggestion_is_empty_but_solid_words_are_a_draft() -> None:
    text = claude("❯ try: write a test")
    row = text.split("\n").index("❯ try: write a test")
    assert verdict(Agent.CLAUDE, TextView.of(text, faint_after(text, row, 2)))[:2] == (IDLE, EMPTY)
    assert verdict(Agent.CLAUDE, TextView.of(text))[:2] == (IDLE, DRAFT)


def test_claude_working_signals() -> None:
    spinner = claude("❯ ", above="❯ do it\n\n✶ Cogitating… (12s · ↑ 1.2k tokens)")
    assert verdict(Agent.CLAUDE, TextView.of(spinner))[0] is WORKING
    interrupt = claude("❯ ", footer="  esc to interrupt")
    assert verdict(Agent.CLAUDE, TextView.of(interrupt))[0] is WORKING
    # A spinner older than the last prompt echo belongs to a finished turn.
    stale = claude("❯ ", above="✶ Cogitating…\n\n❯ next question\n\n● Answer.\n\n✻ Worked for 3s")
    assert verdict(Agent.CLAUDE, TextView.of(stale))[0] is IDLE


def test_claude_survey_holds_digit_keys() -> None:
    survey = claude(
        "❯ ", above="● How is Claude doing this session? (optional)\n  1: Bad  0: Dismiss"
    )
    assert verdict(Agent.CLAUDE, TextView.of(survey))[0] is BLOCKED


@pytest.mark.parametrize(
    "screen",
    [
        # A dialog phrase under the box (fail closed even if the box is drawn).
        claude("❯ ", footer="  Esc to cancel"),
        # A focused option between two rules is a menu, not the input box.
        f"{RULE}\n❯ 1. Yes\n  2. No\n{RULE}\n  Enter to select",
        f"{RULE}\n❯ 1. Yes\n  2. No\n{RULE}",
        # A permission prompt ending the screen.
        f"● Bash(rm -rf build)\n{RULE}\n Bash command\n\n Do you want to proceed?\n ❯ 1. Yes\n   2. No",
        # Options between rules, with more options (not status rows) under the rule.
        f"{RULE}\n❯ 1. Yes\n  2. No\n{RULE}\n  3. Chat about this",
        f"{RULE}\n❯ 1. Red\n{RULE}\n  2. Blue\n\n  ? for shortcuts",
    ],
)
def test_claude_dialogs_are_blocked(screen: str) -> None:
    state, composer, _ = verdict(Agent.CLAUDE, TextView.of(screen))
    assert state is BLOCKED
    assert not (state is IDLE and composer is EMPTY)


@pytest.mark.parametrize(
    "screen",
    [
        "",  # nothing drawn yet (starting up)
        "~/p on main\n❯ ",  # a shell prompt drawn with ❯, no box
        f"{RULE}\n\n❯ \n{RULE}",  # a blank row between the rule and the prompt
        f"❯ \n{RULE}\n  status",  # no top rule
        f"{RULE}\n❯ \nstray text\n{RULE}",  # a row inside the box that is no continuation
        f"{RULE}\n❯ \n{RULE}\n" + "\n".join(f"  status {i}" for i in range(14)),  # box too far up
    ],
)
def test_claude_unknown_layouts_are_not_ready(screen: str) -> None:
    found = read_screen(Agent.CLAUDE, TextView.of(screen))
    assert found.state is UNKNOWN and found.composer is ABSENT and not found.ready


def test_claude_soft_wrapped_draft_rows_belong_to_the_box() -> None:
    """A long draft printed as one line: the terminal wraps it to column 0 of the next row."""
    text = claude("❯ " + "a" * 58 + "\n" + "b" * 30)
    row = text.split("\n").index("b" * 30)
    assert verdict(Agent.CLAUDE, TextView.of(text, wrapped={row})) == (
        IDLE, DRAFT, "a" * 58 + "b" * 30,
    )  # fmt: skip
    # The same row without the soft-wrap flag is stray text: no input box.
    assert verdict(Agent.CLAUDE, TextView.of(text))[:2] == (UNKNOWN, ABSENT)


def test_claude_text_starting_with_a_number_in_the_box_is_a_draft_not_a_menu() -> None:
    """`❯ 1. Fix…` right under the top rule, status rows under the box: the composer."""
    for prompt in ("❯\u00a01. Fix the parser", "❯ 1. Fix the parser", "❯ 1. Fix\n  2. Test"):
        draft = prompt[2:].replace("\n  ", "\n")
        assert verdict(Agent.CLAUDE, TextView.of(claude(prompt))) == (IDLE, DRAFT, draft)


def test_claude_the_echo_of_a_numbered_prompt_is_no_menu() -> None:
    """After `1. Fix the bug` was sent, its echo above the box does not block the next one."""
    echoed = claude("❯ ", above="● Earlier.\n\n❯ 1. Fix the bug\n\n● Done.")
    assert verdict(Agent.CLAUDE, TextView.of(echoed))[:2] == (IDLE, EMPTY)
    # A focused option with others beside it is still a menu, above or below it.
    for menu in ("❯ 1. Red\n  2. Blue", "  1. Red\n    warm\n❯ 2. Blue"):
        above = f"● Pick one\n\n{menu}\n\n● Done."
        assert verdict(Agent.CLAUDE, TextView.of(claude("❯ ", above=above)))[0] is BLOCKED


# ---------------------------------------------------------------- Codex

CODEX_IDLE = "• READY\n\n› Ask Codex to do anything\n\n  gpt-5.6-luna · 100% context left"


def test_codex_placeholder_is_dim_and_a_typed_one_is_a_draft() -> None:
    dim = TextView.of(CODEX_IDLE, faint_after(CODEX_IDLE, 2, 2))
    assert verdict(Agent.CODEX, dim) == (IDLE, EMPTY, "")
    assert verdict(Agent.CODEX, TextView.of(CODEX_IDLE)) == (
        IDLE, DRAFT, "Ask Codex to do anything",
    )  # fmt: skip


def test_codex_wrapped_draft_and_old_bar_marker() -> None:
    screen = "• READY\n\n› unsent draft\n  spanning lines\n\n  gpt-5.6-luna"
    assert verdict(Agent.CODEX, TextView.of(screen)) == (
        IDLE,
        DRAFT,
        "unsent draft\nspanning lines",
    )
    old = "▌ Ask Codex to do anything\n\n  ⏎ send"
    assert verdict(Agent.CODEX, TextView.of(old, faint_after(old, 0, 2)))[:2] == (IDLE, EMPTY)


@pytest.mark.parametrize(
    "status",
    [
        "Working (4s • esc to interrupt)",
        "• Reviewing approval request (4s • esc to interrupt)",
        "Waiting for background terminal (1m 02s) · 1 background terminal running",
    ],
)
def test_codex_working_clock(status: str) -> None:
    screen = f"{status}\n\n› Ask Codex to do anything\n\n  gpt-5.6-luna"
    assert verdict(Agent.CODEX, TextView.of(screen, faint_after(screen, 2, 2)))[0] is WORKING


def test_codex_clock_inside_history_or_draft_is_not_working() -> None:
    indented = "• Example:\n\n    Compacting context (1s • esc to interrupt)\n\n› draft\n\n  m"
    assert verdict(Agent.CODEX, TextView.of(indented))[0] is IDLE
    in_draft = "› Explain Compacting context (1s • esc to interrupt)\n\n  gpt"
    assert verdict(Agent.CODEX, TextView.of(in_draft))[0] is IDLE


@pytest.mark.parametrize(
    "screen",
    [
        "Would you like to run the following command?\n\n  $ rm -rf build\n\n"
        "› 1. Yes, proceed (y)\n  2. No, and tell Codex what to do differently (esc)\n\n"
        "  Press enter to confirm or esc to cancel",
        "> You are in /tmp/x\n\n  Do you trust the contents of this directory?\n\n"
        "› 1. Yes, continue\n  2. No, quit\n\n  Press enter to continue",
        f"{CODEX_IDLE}\nPress enter to confirm or esc to cancel",
    ],
)
def test_codex_approvals_are_blocked(screen: str) -> None:
    assert verdict(Agent.CODEX, TextView.of(screen))[0] is BLOCKED


def test_codex_transcript_viewer_is_unknown() -> None:
    screen = f"{CODEX_IDLE}\n↑/↓ to scroll · pgup/pgdn to move · q to quit"
    assert verdict(Agent.CODEX, TextView.of(screen))[0] is UNKNOWN


# ---------------------------------------------------------------- Gemini CLI


def gemini(inner: str, above: str = "✦ Done.") -> str:
    return (
        f"{above}\n\n╭{'─' * 50}╮\n│ > {inner:<47}│\n╰{'─' * 50}╯\n"
        "~/p (main*)   no sandbox   gemini-2.5-pro (99% context left)"
    )


def test_gemini_states() -> None:
    assert verdict(Agent.GEMINI, TextView.of(gemini("  Type your message or @path/to/file"))) == (
        IDLE, EMPTY, "",
    )  # fmt: skip
    assert verdict(Agent.GEMINI, TextView.of(gemini("explain main.py"))) == (
        IDLE, DRAFT, "explain main.py",
    )  # fmt: skip
    working = gemini("", above="⠏ Counting electrons... (esc to cancel, 3s)")
    assert verdict(Agent.GEMINI, TextView.of(working))[0] is WORKING
    confirm = gemini(
        "", above="? Shell rm -rf build\n Allow execution of: 'rm'?\n ● 1. Yes, allow once"
    )
    assert verdict(Agent.GEMINI, TextView.of(confirm))[0] is BLOCKED


def test_gemini_shell_and_vim_normal_modes_are_not_empty() -> None:
    shell = gemini("").replace("│ > ", "│ ! ")
    assert verdict(Agent.GEMINI, TextView.of(shell))[1] is ABSENT
    normal = gemini("Press 'i' for INSERT mode.")
    assert verdict(Agent.GEMINI, TextView.of(normal))[1] is ABSENT
    assert verdict(Agent.GEMINI, TextView.of("no box at all"))[:2] == (UNKNOWN, ABSENT)


# ---------------------------------------------------------------- OpenCode


def opencode(draft: str, status: str = "~/p                 tab agents  ctrl+p commands") -> str:
    return (
        f"  Earlier answer.\n\n┃\n┃  {draft}\n┃\n┃  Build · Claude Sonnet 4.5 Anthropic\n"
        f"╹{'▀' * 50}\n{status}"
    )


def test_opencode_states() -> None:
    assert verdict(Agent.OPENCODE, TextView.of(opencode('Ask anything... "Fix a TODO"'))) == (
        IDLE, EMPTY, "",
    )  # fmt: skip
    assert verdict(Agent.OPENCODE, TextView.of(opencode("add tests")))[:2] == (IDLE, DRAFT)
    working = opencode('Ask anything... "x"', status="■■■■⬝⬝⬝⬝  esc interrupt")
    assert verdict(Agent.OPENCODE, TextView.of(working))[0] is WORKING
    dialog = "┃  △ Permission required\n┃  Allow once   Allow always   Reject\n┃  ⇆ select  enter confirm"
    assert verdict(Agent.OPENCODE, TextView.of(dialog))[:2] == (BLOCKED, ABSENT)
    no_separator = opencode("x").replace("┃\n┃  Build", "┃  Build")
    assert verdict(Agent.OPENCODE, TextView.of(no_separator))[:2] == (UNKNOWN, ABSENT)


# ---------------------------------------------------------------- aider


def test_aider_states() -> None:
    idle = "Aider v0.86\n" + RULE + "\n> "
    assert verdict(Agent.AIDER, TextView.of(idle, cursor=(2, 2))) == (IDLE, EMPTY, "")
    assert verdict(Agent.AIDER, TextView.of("architect> refactor", cursor=(19, 0)))[:2] == (
        IDLE, DRAFT,
    )  # fmt: skip
    question = "Run shell command? (Y)es/(N)o/(D)on't ask again [Yes]: "
    assert verdict(Agent.AIDER, TextView.of(question))[0] is BLOCKED
    assert verdict(Agent.AIDER, TextView.of("Add file to the chat? [Yes]: "))[0] is BLOCKED
    streaming = "Here is the plan:\n> quoted line of the reply\nmore text"
    assert verdict(Agent.AIDER, TextView.of(streaming))[0] is WORKING
    quote_with_cursor_elsewhere = "Here is the plan:\n> "
    assert (
        verdict(Agent.AIDER, TextView.of(quote_with_cursor_elsewhere, cursor=(0, 0)))[0] is WORKING
    )
    assert verdict(Agent.AIDER, TextView.of(""))[0] is UNKNOWN


# ---------------------------------------------------------------- omp


def test_omp_editor_states() -> None:
    top = "╭── π  > ⬢ Auto > ~/p " + "─" * 30 + "╮"
    bottom = "╰─" + " " * 40 + "─╯"
    idle = f" Done.\n\n{top}\n{bottom}"
    assert verdict(Agent.OMP, TextView.of(idle)) == (IDLE, EMPTY, "")
    working = f" ⠸ Working… ⟦esc⟧\n\n{top}\n{bottom}"
    assert verdict(Agent.OMP, TextView.of(working))[0] is WORKING
    draft = f"{top}\n│  first line{' ' * 20}│\n╰─ second{' ' * 20}─╯"
    assert verdict(Agent.OMP, TextView.of(draft)) == (IDLE, DRAFT, "first line\nsecond")
    covered = f"{top}\n{bottom}\nsomething below"
    assert verdict(Agent.OMP, TextView.of(covered))[:2] == (UNKNOWN, ABSENT)
    tool_box = "╭────╮\n│ $ ls │\n╰────╯"
    assert verdict(Agent.OMP, TextView.of(tool_box))[:2] == (UNKNOWN, ABSENT)


def test_claude_dialog_above_a_visible_box_is_blocked() -> None:
    """A half-redrawn screen (or a look-alike) can show a dialog and the box at once."""
    both = claude(
        "❯ ",
        above="❯ clean up\n\n● Bash(rm -rf build)\n\n Do you want to proceed?\n ❯ 1. Yes\n   2. No",
    )
    assert verdict(Agent.CLAUDE, TextView.of(both))[0] is BLOCKED
    pointer_only = claude("❯ ", above="● Pick one\n❯ 1. Red\n  2. Blue")
    assert verdict(Agent.CLAUDE, TextView.of(pointer_only))[0] is BLOCKED


def test_claude_answers_mentioning_dialog_words_are_not_dialogs() -> None:
    answer = claude(
        "❯ ",
        above="❯ what is that prompt?\n\n● It asks: Do you want to proceed?\n  Esc to cancel closes it.",
    )
    assert verdict(Agent.CLAUDE, TextView.of(answer))[:2] == (IDLE, EMPTY)
    older_turn = claude("❯ ", above=" Do you want to proceed?\n ❯ 1. Yes\n\n❯ next\n\n● Done.")
    assert verdict(Agent.CLAUDE, TextView.of(older_turn))[:2] == (IDLE, EMPTY)


def test_codex_and_omp_dialogs_above_a_visible_input_are_blocked() -> None:
    codex = (
        "Allow command?\n\n  $ rm -rf build\n\n› 1. Yes (y)\n  2. No (n)\n\n"
        "› Ask Codex to do anything\n\n  gpt-5.6-luna"
    )
    assert verdict(Agent.CODEX, TextView.of(codex, faint_after(codex, 7, 2)))[0] is BLOCKED
    top = "╭── π  > ⬢ Auto " + "─" * 30 + "╮"
    omp = f"│ Enter select · ↑/↓ move · Esc cancel │\n╰{'─' * 38}╯\n{top}\n╰─{' ' * 40}─╯"
    assert verdict(Agent.OMP, TextView.of(omp))[0] is BLOCKED


def test_claude_a_drawn_block_cursor_is_not_a_draft() -> None:
    assert verdict(Agent.CLAUDE, TextView.of(claude("❯ █")))[:2] == (IDLE, EMPTY)
    assert verdict(Agent.CLAUDE, TextView.of(claude("❯ fix it█"))) == (IDLE, DRAFT, "fix it")
