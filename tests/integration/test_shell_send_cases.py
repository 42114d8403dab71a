"""A phone's command runs exactly once, byte for byte as sent, or nothing of it is typed.

The cases the screen could not decide (issue 25), on real PTYs and a real tmux with
bash, zsh and fish: vi command mode; a half-typed line that output hid; fish's
autosuggestions and abbreviations; oh-my-zsh's paste and URL widgets; right prompts; a
replaced ``PROMPT_COMMAND``; a prompt on the last row with a 4 KiB command; leading
spaces; tmux panes nobody watches; and the race, where the trigger reaches another
program (cat, vim, less, a Python REPL) instead of the shell.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from mirror_host.client.client import MirrorClient
from mirror_host.commands.delivery import Delivery, deliver
from mirror_host.commands.local import LocalCommands
from mirror_host.commands.shell_input import Handover, ShellTarget
from mirror_host.shell.exchange import (
    TRIGGER,
    answer_name,
    encode_request,
    request_expiry,
    request_name,
)
from tests.integration.agent_helpers import command
from tests.integration.test_shell_send import (
    HAS_TMUX,
    ShellRig,
    appends,
    cursor_row,
    file_reads,
    line_starting,
    local_rig,
    phone_on,
    ran,
    send_command,
    shell_init_bash,
    status_becomes,
    tmux_rig,
)

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

SHELLS = [
    pytest.param(name, marks=pytest.mark.skipif(not shutil.which(name), reason=f"no {name}"))
    for name in ("bash", "zsh", "fish")
]


def start_up_file(state_dir: Path, shell: str, text: str) -> None:
    """The user's own start-up file in the rig's HOME (the host loads it, then its own)."""
    home = state_dir / "home"
    path = {
        "bash": home / ".bashrc",
        "zsh": home / ".zshrc",
        "fish": home / ".config" / "fish" / "config.fish",
    }[shell]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def fish_quiet(text: str = "") -> str:
    """fish's config: no greeting, a plain prompt, then ``text``."""
    return "set -g fish_greeting\nfunction fish_prompt; echo -n 'fish> '; end\n" + text


def sum_of(shell: str) -> str:
    """``6*7`` worked out by ``shell`` (so the output proves the shell ran it)."""
    return "(math 6 \\* 7)" if shell == "fish" else "$((6*7))"


@asynccontextmanager
async def shell_pane(
    state_dir: Path, shell: str, rc: str = "", **options: Any
) -> AsyncIterator[tuple[ShellRig, MirrorClient, Any]]:
    """A local pane of ``shell`` with ``rc`` as the user's start-up file, and a phone on it
    that has seen it idle."""
    start_up_file(state_dir, shell, fish_quiet(rc) if shell == "fish" else rc)
    async with local_rig(state_dir, f"{shell} -i", **options) as setup:
        async with phone_on(setup) as (phone, sub, _):
            await status_becomes(phone, sub, setup, "idle")
            yield setup, phone, sub


async def sends(phone: MirrorClient, sub: Any, setup: ShellRig, text: str) -> None:
    """``text`` runs: the phone hears it ran, with its exact byte count."""
    assert await command(phone, send_command(setup.pane, text), sub=sub) == ran(text)


async def screen_shows(setup: ShellRig, words: str, *, timeout: float = 10) -> None:
    with trio.fail_after(timeout):
        while (screen := setup.screen()) is None or words not in screen.active_text():
            await trio.sleep(0.02)


# ---------------------------------------------------------------- the line editor's modes


@pytest.mark.parametrize("shell", SHELLS)
async def test_vi_command_mode(state_dir: Path, shell: str) -> None:
    """Esc at an empty prompt: keys would be vi commands (``kvZZ`` re-ran history)."""
    rc = {"bash": "set -o vi", "zsh": "bindkey -v", "fish": "fish_vi_key_bindings"}[shell]
    async with shell_pane(state_dir, shell, rc) as (setup, phone, sub):
        await setup.type(b"\x1b")
        await trio.sleep(0.5)  # past the shells' escape timeouts: in command mode now
        text = f"echo kvZZ-{sum_of(shell)} >> {setup.out}"
        await sends(phone, sub, setup, text)
        await file_reads(setup.out, "kvZZ-42\n")
        await status_becomes(phone, sub, setup, "idle")
        assert setup.out.read_text() == "kvZZ-42\n"


@pytest.mark.parametrize("shell", SHELLS)
async def test_a_half_typed_line_that_output_hid(state_dir: Path, shell: str) -> None:
    """The user typed without Enter; a background job then cleared the row and drew a
    prompt look-alike. The line is refused, never run, never changed, never lost."""
    hider_pid = state_dir / "hider.pid"
    async with shell_pane(state_dir, shell) as (setup, phone, sub):
        # It stays alive afterwards: a job that ends has its shell redraw the line.
        hider = (
            f'sh -c \'echo $$ > {hider_pid}; sleep 1; printf "\\r\\033[Kfake> "; '
            "exec sleep 60' &\r"
        )
        await setup.type(hider.encode())
        try:
            await trio.sleep(0.3)
            typed = state_dir / "typed"
            await setup.type(f"touch {typed} ".encode())
            await line_starting(setup, "fake>")  # the row shows an empty prompt now
            screen = setup.screen()
            assert screen is not None and cursor_row(screen) == "fake>"
            result = await command(phone, send_command(setup.pane, appends(setup, "no")), sub=sub)
            assert (result["ok"], result["error"]["code"]) == (False, "SHELL_NOT_READY")
            assert "not empty" in result["error"]["message"]
            await trio.sleep(0.3)
            assert not typed.exists() and not setup.out.exists()
            await setup.type(b"\r")  # the user's own line, unchanged, runs when they say so
            with trio.fail_after(10):
                while not typed.exists():
                    await trio.sleep(0.02)
            assert not setup.out.exists()
        finally:
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(hider_pid.read_text()), signal.SIGKILL)


@pytest.mark.skipif(not shutil.which("fish"), reason="no fish")
async def test_fish_autosuggestion_of_a_longer_history_line(state_dir: Path) -> None:
    async with shell_pane(state_dir, "fish") as (setup, phone, sub):
        longer = f"echo sugg-(math 6 \\* 7) >> {setup.out}; echo more >> {setup.out}"
        await setup.type(longer.encode() + b"\r")
        await file_reads(setup.out, "sugg-42\nmore\n")
        await status_becomes(phone, sub, setup, "idle")
        await sends(phone, sub, setup, f"echo sugg-(math 6 \\* 7) >> {setup.out}")
        await file_reads(setup.out, "sugg-42\nmore\nsugg-42\n")
        await trio.sleep(0.3)
        assert setup.out.read_text() == "sugg-42\nmore\nsugg-42\n"


@pytest.mark.skipif(not shutil.which("fish"), reason="no fish")
async def test_fish_abbreviations_are_not_expanded(state_dir: Path) -> None:
    """The text runs as sent, even when its word is an abbreviation (fish expands them as
    a line is executed)."""
    rc = (
        "function mhcmd; echo ran-as-sent >> $argv[1]; end\n"
        "abbr -a mhcmd 'echo expanded >>'\n"
        "abbr -a --position anywhere -- here 'expanded-too'\n"
    )
    async with shell_pane(state_dir, "fish", rc) as (setup, phone, sub):
        await sends(phone, sub, setup, f"mhcmd {setup.out}")
        await file_reads(setup.out, "ran-as-sent\n")
        await status_becomes(phone, sub, setup, "idle")
        await sends(phone, sub, setup, f"echo here >> {setup.out}")
        await file_reads(setup.out, "ran-as-sent\nhere\n")
        # The user's abbreviations still work for what they type.
        await setup.type(f"echo here >> {setup.out}\r".encode())
        await file_reads(setup.out, "ran-as-sent\nhere\nexpanded-too\n")


@pytest.mark.skipif(not shutil.which("zsh"), reason="no zsh")
async def test_zsh_paste_and_url_widgets(state_dir: Path) -> None:
    """oh-my-zsh's set-up: zsh's own bracketed-paste-magic and url-quote-magic."""
    rc = (
        "autoload -Uz bracketed-paste-magic url-quote-magic\n"
        "zle -N bracketed-paste bracketed-paste-magic\n"
        "zle -N self-insert url-quote-magic\n"
    )
    async with shell_pane(state_dir, "zsh", rc) as (setup, phone, sub):
        url = "https://example.org/search?q=a&b=c"
        await sends(phone, sub, setup, f"echo '{url}' >> {setup.out}")
        await file_reads(setup.out, url + "\n")


@pytest.mark.parametrize(
    ("shell", "rc"),
    [
        pytest.param(
            "zsh",
            "RPROMPT='[%?] right'",
            marks=pytest.mark.skipif(not shutil.which("zsh"), reason="no zsh"),
        ),
        pytest.param(
            "fish",
            "function fish_right_prompt; echo -n 'right side'; end",
            marks=pytest.mark.skipif(not shutil.which("fish"), reason="no fish"),
        ),
    ],
)
async def test_right_prompts(state_dir: Path, shell: str, rc: str) -> None:
    async with shell_pane(state_dir, shell, rc) as (setup, phone, sub):
        await screen_shows(setup, "right")
        await sends(phone, sub, setup, f"echo right-{sum_of(shell)} >> {setup.out}")
        await file_reads(setup.out, "right-42\n")


async def test_a_replaced_prompt_command(state_dir: Path) -> None:
    async with shell_pane(state_dir, "bash") as (setup, phone, sub):
        await setup.type(b"PROMPT_COMMAND='true'\r")
        await trio.sleep(0.3)
        await status_becomes(phone, sub, setup, "idle")
        await sends(phone, sub, setup, appends(setup, "replaced"))
        await file_reads(setup.out, "replaced-42\n")
        await status_becomes(phone, sub, setup, "idle")
        await sends(phone, sub, setup, appends(setup, "again"))
        await file_reads(setup.out, "replaced-42\nagain-42\n")


async def test_a_prompt_on_the_last_row_with_a_4_kib_command(state_dir: Path) -> None:
    async with shell_pane(state_dir, "bash", rows=10, columns=60) as (setup, phone, sub):
        await setup.type(b"seq 40\r")
        await line_starting(setup, "40")
        await status_becomes(phone, sub, setup, "idle")
        screen = setup.screen()
        assert screen is not None and screen.cursor[1] == 9  # the prompt is on the last row
        text = f"printf %s {'x' * 4096} | wc -c >> {setup.out}"
        assert len(text.encode()) > 4096
        await sends(phone, sub, setup, text)
        await file_reads(setup.out, "4096\n")


@pytest.mark.parametrize("shell", SHELLS)
async def test_leading_spaces(state_dir: Path, shell: str) -> None:
    async with shell_pane(state_dir, shell) as (setup, phone, sub):
        await sends(phone, sub, setup, f"   echo '  lead' {sum_of(shell)} >> {setup.out}")
        await file_reads(setup.out, "  lead 42\n")


# ---------------------------------------------------------------- the race

MARKER = "RACE-MARKER-7f3a"


async def trigger_reaches(setup: ShellRig) -> dict[str, Any]:
    """The host hands a command to the pane's shell while another program has the
    terminal (as when it starts between the check and the trigger): the answer."""
    source, commands = setup.local_source, setup.commands
    assert source is not None and isinstance(commands, LocalCommands)
    directory = source.shell_directory
    assert directory is not None
    handover = Handover(pid=source.pane(setup.pane).pid, directory=directory)
    text = f"echo {MARKER} > /dev/null"
    delivery = Delivery(text=text, pane_id=setup.pane, command="send", authorized=lambda: True)
    # Handed over as if the verification had just passed (``ready``): the race.
    result = await deliver(ShellTarget(commands.panes), delivery, ready=handover)
    assert isinstance(result, dict)
    return result


async def in_front(setup: ShellRig, name: str) -> None:
    """Wait until ``name`` leads the pane's foreground group."""
    commands = setup.commands
    assert isinstance(commands, LocalCommands)
    with trio.fail_after(10):
        while True:
            foreground = await commands.panes.shell_foreground(setup.pane)
            if foreground.processes and foreground.processes[0].name == name:
                return
            await trio.sleep(0.05)


def not_taken(result: dict[str, Any]) -> None:
    assert result["ok"] is False and result["error"]["code"] == "SHELL_NOT_READY", result
    assert "did not take" in result["error"]["message"]


async def no_marker_anywhere(setup: ShellRig, *files: Path) -> None:
    screen = setup.screen()
    assert screen is not None and MARKER not in screen.history_text()
    for path in files:
        assert not path.exists() or MARKER.encode() not in path.read_bytes()


async def back_at_the_prompt(setup: ShellRig, phone: MirrorClient, sub: Any) -> None:
    await status_becomes(phone, sub, setup, "idle")


@asynccontextmanager
async def racing(state_dir: Path) -> AsyncIterator[tuple[ShellRig, MirrorClient, Any]]:
    async with shell_pane(state_dir, "bash", "PS1='race$ '") as pane:
        yield pane


async def test_the_trigger_reaching_cat(state_dir: Path) -> None:
    typed = state_dir / "typed"
    async with racing(state_dir) as (setup, phone, sub):
        await setup.type(f"cat > {typed}\r".encode())
        await in_front(setup, "cat")
        not_taken(await trigger_reaches(setup))
        await setup.type(b"\x04\x04")  # end the line, then the input
        await back_at_the_prompt(setup, phone, sub)
        assert typed.read_bytes() == b"\x1b[I"  # the trigger alone: a focus report
        await no_marker_anywhere(setup, typed)


@pytest.mark.skipif(not shutil.which("vim"), reason="no vim")
async def test_the_trigger_reaching_vim_in_normal_and_insert_mode(state_dir: Path) -> None:
    edited = state_dir / "edited.txt"
    edited.write_text("line one\nline two\n")
    async with racing(state_dir) as (setup, phone, sub):
        await setup.type(f"vim -u DEFAULTS -i NONE {edited}\r".encode())
        await in_front(setup, "vim")
        await screen_shows(setup, "line two")
        not_taken(await trigger_reaches(setup))  # normal mode
        await setup.type(b"i")
        await screen_shows(setup, "-- INSERT --")
        not_taken(await trigger_reaches(setup))  # insert mode
        await screen_shows(setup, "-- INSERT --")  # still inserting: no Esc reached it
        await setup.type(b"\x1b:wq\r")
        await back_at_the_prompt(setup, phone, sub)
        assert edited.read_text() == "line one\nline two\n"
        await no_marker_anywhere(setup, edited)


@pytest.mark.skipif(not shutil.which("less"), reason="no less")
async def test_the_trigger_reaching_less(state_dir: Path) -> None:
    paged = state_dir / "paged.txt"
    paged.write_text("".join(f"row {n}\n" for n in range(100)))
    async with racing(state_dir) as (setup, phone, sub):
        await setup.type(f"LESSHISTFILE=- less {paged}\r".encode())
        await in_front(setup, "less")
        await screen_shows(setup, "row 5")
        not_taken(await trigger_reaches(setup))
        screen = setup.screen()
        assert screen is not None
        rows = screen.active_text().split("\n")
        assert rows[0].startswith("row 0") and "row 8" in rows  # still at the top, unmoved
        await setup.type(b"q")
        await back_at_the_prompt(setup, phone, sub)
        await no_marker_anywhere(setup)


@pytest.mark.skipif(not shutil.which("python3"), reason="no python3")
async def test_the_trigger_reaching_a_python_repl(state_dir: Path) -> None:
    async with racing(state_dir) as (setup, phone, sub):
        await setup.type(b"python3 -q\r")
        await screen_shows(setup, ">>>")
        not_taken(await trigger_reaches(setup))
        await setup.type(b"\r")  # whatever the trigger left on the line runs now: nothing
        await setup.type(b"print('py', 6 * 7)\r")
        await screen_shows(setup, "py 42")
        screen = setup.screen()
        assert screen is not None and "Error" not in screen.active_text()
        await setup.type(b"exit()\r")
        await back_at_the_prompt(setup, phone, sub)
        await no_marker_anywhere(setup)


# ---------------------------------------------------------------- tmux panes nobody watches


@pytest.mark.skipif(not HAS_TMUX, reason="tmux is not installed")
async def test_tmux_panes_nobody_watches_stay_paused_and_report_their_shell(
    state_dir: Path,
) -> None:
    """A phone on one window lists another, which nobody watches: its output is never
    read (tmux keeps it paused for the host), yet its status tells the truth from its
    shell's registration and the foreground. Subscribed, before any prompt mark was
    read, the registration is what lets it take a command."""
    async with tmux_rig(state_dir) as setup:
        server, source = setup.tmux_server, setup.tmux_source
        assert server is not None and source is not None
        server.tmux("new-window", "-d", "-t", "shell:", "-n", "other", shell_init_bash(state_dir))
        with trio.fail_after(10):
            while not (found := [p for p, r in source.pane_rows() if r.window_name == "other"]):
                await trio.sleep(0.02)
        other = found[0]

        async def type_other(data: bytes) -> None:
            hex_bytes = (f"{b:02x}" for b in data)
            await trio.to_thread.run_sync(
                server.tmux, "send-keys", "-t", "shell:other", "-H", *hex_bytes
            )

        other_rig = ShellRig(
            setup.host, other, state_dir / "other.txt", type_other,
            lambda: source.pane_screen(other), setup.advance,
        )  # fmt: skip

        def paused() -> bool:
            tmux_id = source.pane_row(other).pane_id
            return source.pane_screen(other) is None and any(
                tmux_id in client.paused for client in source._clients.values()
            )

        async with phone_on(setup) as (phone, sub, _):
            await status_becomes(phone, sub, other_rig, "idle")
            await type_other(b"sleep 3\r")
            await status_becomes(phone, sub, other_rig, "running")
            await status_becomes(phone, sub, other_rig, "idle")
            assert paused()  # never followed
        async with phone_on(other_rig) as (phone, sub, _):
            screen = other_rig.screen()
            assert screen is not None and screen.prompt.last is None  # no mark read yet
            item = await status_becomes(phone, sub, other_rig, "idle")
            assert item["task"] == {"status": "idle"}
            text = appends(other_rig, "unmarked")
            assert await command(phone, send_command(other, text), sub=sub) == ran(text)
            await file_reads(other_rig.out, "unmarked-42\n")
        with trio.fail_after(5):
            while not paused():  # paused again once its phone left
                await trio.sleep(0.02)


@pytest.mark.skipif(not HAS_TMUX, reason="tmux is not installed")
async def test_a_tmux_shell_that_lost_its_integration_takes_nothing(state_dir: Path) -> None:
    """``exec bash --norc`` keeps the pid (and so the registration) but drops the
    integration: the trigger is an unknown key to it, nothing runs, the phone is told."""
    async with tmux_rig(state_dir) as setup, phone_on(setup) as (phone, sub, _):
        await status_becomes(phone, sub, setup, "idle")
        await setup.type(b"exec bash --norc --noprofile\r")
        await trio.sleep(0.5)
        result = await command(phone, send_command(setup.pane, appends(setup, "lost")), sub=sub)
        assert result["ok"] is False
        assert result["error"]["code"] in ("SHELL_BUSY", "SHELL_NOT_READY")
        await trio.sleep(0.3)
        assert not setup.out.exists()
        screen = setup.screen()
        assert screen is not None and "lost-" not in screen.active_text()


BARE_SHELLS = {
    # Started so that the host does not add its integration (not a plain start).
    "bash": ("bash --norc --noprofile +o vi", "bash --norc --noprofile -o vi"),
    "zsh": ("zsh -f +o vi", "zsh -f -o vi"),
    # fish binds CSI I itself, to its focus event, in every mode.
    "fish": ("fish --no-config -C true", None),
}


@pytest.mark.parametrize(
    ("shell", "mode"),
    [
        pytest.param(name, mode, marks=pytest.mark.skipif(not shutil.which(name), reason=f"no {name}"))
        for name, modes in BARE_SHELLS.items()
        for mode, argv in zip(("emacs", "vi-command"), modes, strict=True)
        if argv is not None
    ],
)  # fmt: skip
async def test_the_trigger_reaching_a_shell_without_the_integration(
    state_dir: Path, shell: str, mode: str
) -> None:
    """The three bytes leave the line as it was: the next line typed runs as typed. (In
    vi command mode bash and zsh take the last byte, ``I``, as "insert at the start of
    the line": the mode changes, the line does not.)"""
    emacs, vi = BARE_SHELLS[shell]
    proof = state_dir / "proof.txt"
    command_line = vi if mode == "vi-command" else emacs
    assert command_line is not None
    async with local_rig(state_dir, command_line) as setup:
        await trio.sleep(1.0)  # its prompt is up
        if mode == "vi-command":
            await setup.type(b"\x1b")
            await trio.sleep(0.5)
        not_taken(await trigger_reaches(setup))
        if mode == "vi-command":
            await setup.type(b"\x1b")  # back to command mode, whichever mode it is in
            await trio.sleep(0.5)
            await setup.type(b"i")
        await setup.type(f"echo bare > {proof}\r".encode())
        await file_reads(proof, "bare\n")
        await no_marker_anywhere(setup)


@pytest.mark.parametrize("shell", SHELLS)
async def test_a_request_left_by_a_dead_host_never_runs(state_dir: Path, shell: str) -> None:
    """A host killed mid-send leaves its request behind; a focus report (the same three
    bytes the trigger is) long after must not run it: the shell ignores a request past
    its expiry. A request of the right age still runs, so the test can fail."""
    async with shell_pane(state_dir, shell) as (setup, _phone, _sub):
        source = setup.local_source
        assert source is not None and source.shell_directory is not None
        shells = source.shell_directory.path
        pid = source.pane(setup.pane).pid
        stale_proof, fresh_proof = state_dir / "stale.txt", state_dir / "fresh.txt"
        stale_id, fresh_id = "a" * 32, "b" * 32
        expired = request_expiry(time.time()) - 60  # written a minute ago
        (shells / request_name(pid)).write_bytes(
            encode_request(stale_id, f"echo stale > {stale_proof}", expired)
        )
        await setup.type(TRIGGER)  # a terminal's focus-in report
        await trio.sleep(1.0)
        assert not stale_proof.exists()
        assert not (shells / answer_name(pid, stale_id)).exists()
        (shells / request_name(pid)).write_bytes(
            encode_request(fresh_id, f"echo fresh > {fresh_proof}", request_expiry(time.time()))
        )
        await setup.type(TRIGGER)
        await file_reads(fresh_proof, "fresh\n")
        assert not stale_proof.exists()
