"""The agliteterm and agwinterm releases users have, against the host over real TLS.

The fake answers as agliteterm 0.17.7 and agwinterm 0.17.5 do (``release=``;
tests/fakes/agliteterm_fake.py names the upstream files): a plain whole
buffer (or screen) whatever ``session.text`` asks, no grid, no status times,
``session.new`` selecting the new session (agliteterm) or not with
``no-select`` (agwinterm), a ``command`` run through PowerShell (or split by
agwinterm 0.17.5 itself).
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from mirror_host import control as c
from mirror_host.commands import first_prompt
from mirror_host.config import Profile
from mirror_host.wire import TextFramePacket, VTFramePacket
from tests.integration.agent_helpers import FakeAgent, command, submissions_after
from tests.integration.mirror_helpers import (
    frame_containing,
    list_panes,
    messages_within,
    next_frame,
    scroll_until_result,
    subscribe,
)
from tests.integration.test_agliteterm import (
    SHELL,
    aglite_host,
    client_of,
    fake_agliteterm,
    key,
    replica_of,
)

pytestmark = pytest.mark.timeout(120)

WIDE = "echo $((6*7))-$(printf 'W%.0s' $(seq 100))"


def upgrade_warnings(log: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in log.records
        if r.levelno == logging.WARNING and "a newer one would add" in r.getMessage()
    ]


async def test_agliteterm_0_17_7_is_mirrored_and_typed_into(
    state_dir: Path, host_log: pytest.LogCaptureFixture
) -> None:
    async with fake_agliteterm(state_dir, release="0.17.7", columns=120, rows=30) as fake:
        work = fake.add_workspace("w")
        shell = await fake.add_session(work, SHELL, name="shell")
        phone_pane = await fake.add_session(
            work, "printf 'phone view 中\\n'; exec sleep 120", name="phone"
        )
        async with (
            aglite_host(state_dir, fake) as (host, source),
            client_of(host) as mac,
            client_of(host, "phone") as phone,
        ):
            sub = await subscribe(mac, key(fake, shell))
            await next_frame(mac, sub)
            await mac.send(c.Input(data=WIDE.encode() + b"\r", subscription_id=sub))
            frame = await frame_containing(mac, sub, "42-WWW")
            assert isinstance(frame, VTFramePacket)
            # No grid is reported: the width is the widest line seen, so the
            # 103-cell line is shown whole instead of cut at a guessed 80.
            assert frame.columns >= 103
            assert "42-" + "W" * 100 in replica_of(frame).active_text()
            assert b"echo $((6*7))" in fake.received_input(shell)
            # Typed into, and the connection goes on.
            await mac.send(c.Input(data=b"echo typed-$((2+3))\r", subscription_id=sub))
            await frame_containing(mac, sub, "typed-5")
            seen = await messages_within(mac, sub, 1.0)
            assert not [m for m in seen if isinstance(m, c.Failure | c.Ended)], seen

            text_sub = await subscribe(phone, key(fake, phone_pane), c.Representation.TEXT)
            text = await frame_containing(phone, text_sub, "phone view 中")
            assert isinstance(text, TextFramePacket)
            assert text.text.split("\n")[0] == "phone view 中"

            # Said once in the log, and in status, with what a newer build adds.
            health = source.health()
            assert health["state"] == "following"
            assert "agliteterm 0.1; a newer build would add: colours" in health["detail"]
            assert "statusChangedAt" in health["detail"]
            warned = upgrade_warnings(host_log)
            assert len(warned) == 1, warned
            assert "reading the screen alone" in warned[0]
            assert "the pane's size" in warned[0]


async def test_a_newer_agliteterm_is_not_told_to_upgrade(
    state_dir: Path, host_log: pytest.LogCaptureFixture
) -> None:
    async with fake_agliteterm(state_dir) as fake:
        session = await fake.add_session(fake.add_workspace("w"), "echo hi; exec sleep 120")
        async with aglite_host(state_dir, fake) as (host, source), client_of(host) as mac:
            sub = await subscribe(mac, key(fake, session))
            await frame_containing(mac, sub, "hi")
            assert source.health()["detail"].startswith("agliteterm 0.17.14 at ")
            assert upgrade_warnings(host_log) == []


@pytest.mark.slow
async def test_a_quiet_pane_of_0_17_7_is_read_less_often(state_dir: Path) -> None:
    """Every read of 0.17.7 brings the whole buffer: a pane that shows nothing new
    is read less and less often (down to once a second), not every 100 ms."""
    async with fake_agliteterm(state_dir, release="0.17.7") as fake:
        session = await fake.add_session(
            fake.add_workspace("w"), "seq 1 2000; exec sleep 120", name="quiet"
        )
        async with aglite_host(state_dir, fake) as (host, _source), client_of(host) as mac:
            sub = await subscribe(mac, key(fake, session))
            await frame_containing(mac, sub, "2000")
            before = len(fake.requests_for("session.text", target=session))
            await messages_within(mac, sub, 4.0)
            reads = len(fake.requests_for("session.text", target=session)) - before
            # At 100 ms, 40; backing off 0.25, 0.5, 1, 1 … s: about 5.
            assert 1 <= reads <= 10, reads


async def test_scrolling_0_17_7_pages_its_plain_copy(state_dir: Path) -> None:
    async with fake_agliteterm(state_dir, release="0.17.7") as fake:
        session = await fake.add_session(fake.add_workspace("w"), "seq 1 60; exec sleep 120")
        async with aglite_host(state_dir, fake) as (host, _source), client_of(host) as mac:
            sub = await subscribe(mac, key(fake, session), include_scroll_state=True)
            await frame_containing(mac, sub, "60")
            # 60 lines (the empty row under them is not in the dump) on 24 rows:
            # 36 rows above the screen, 21 per page.
            seen = await scroll_until_result(mac, sub, c.ScrollDirection.UP)
            state, frame = seen[-3], seen[-2]
            assert isinstance(state, c.ScrollState) and isinstance(frame, VTFramePacket)
            assert (state.at_top, state.at_bottom) == (False, False)
            shown = replica_of(frame).active_text().split("\n")
            assert shown[0] == "16" and shown[-1] == "39"
            seen = await scroll_until_result(mac, sub, c.ScrollDirection.UP)
            state, frame = seen[-3], seen[-2]
            assert isinstance(state, c.ScrollState) and isinstance(frame, VTFramePacket)
            assert state.at_top is True
            assert replica_of(frame).active_text().split("\n")[0] == "1"


# ------------------------------------------------------------------ create


@pytest.mark.parametrize("release", [None, "0.17.5"])
async def test_create_on_agwinterm_leaves_the_operators_selection_alone(
    state_dir: Path, release: str | None
) -> None:
    async with fake_agliteterm(state_dir, dialect="full", release=release) as fake:
        work = fake.add_workspace("work")
        await fake.add_session(work, SHELL, name="first")
        shown = await fake.add_session(work, SHELL, name="operator's")
        fake.select(shown)
        async with aglite_host(state_dir, fake) as (host, _source), client_of(host) as phone:
            result = await command(
                phone,
                c.CreateCommand(resource="tab", worktree_id=work, launch=None, background=True),
            )
            assert result["ok"] is True, result
            target = result["data"]["target"]
            (request,) = fake.requests_for("session.new")
            assert request["args"]["no-select"] is True
            assert fake.active == shown  # the window still shows the operator's session
            assert target["tab"]["selected"] is False and target["pane"]["focused"] is False
            assert target["worktree"]["id"] == work


@pytest.mark.parametrize("release", [None, "0.17.7"])
async def test_create_on_agliteterm_says_the_window_now_shows_the_new_session(
    state_dir: Path, release: str | None
) -> None:
    async with fake_agliteterm(state_dir, release=release) as fake:
        active = fake.add_workspace("active")
        other = fake.add_workspace("other")
        shown = await fake.add_session(active, SHELL, name="operator's")
        await fake.add_session(other, SHELL, name="elsewhere")
        async with aglite_host(state_dir, fake) as (host, _source), client_of(host) as phone:
            result = await command(
                phone,
                c.CreateCommand(resource="tab", worktree_id=other, launch=None, background=True),
            )
            assert result["ok"] is True, result
            target = result["data"]["target"]
            created = fake.active
            assert created not in (None, shown)  # agliteterm shows every new session
            assert target["tab"]["id"] == created
            assert target["tab"]["selected"] is True and target["pane"]["focused"] is True
            # 0.17.7 puts it in the window's active workspace whatever was asked.
            assert target["worktree"]["id"] == (active if release else other)


def recorder(out: Path, *args: str) -> Profile:
    """A profile whose program writes the arguments it received to ``out``."""
    code = "import sys,json; open(sys.argv[1],'w').write(json.dumps(sys.argv[2:]))"
    return Profile(
        id="rec", name="Recorder", agent=sys.executable, args=("-c", code, str(out), *args)
    )


AWKWARD = ("a b", "it's", "$HOME", "`n", "x;y", "C:\\my dir\\", "")


@pytest.mark.parametrize(
    ("dialect", "release", "args"),
    [
        ("lite", "0.17.7", (*AWKWARD, 'say "hi"')),
        ("lite", None, (*AWKWARD, 'say "hi"')),
        ("full", None, (*AWKWARD, 'say "hi"')),
        ("full", "0.17.5", AWKWARD),
    ],
)
async def test_a_profiles_arguments_reach_its_program_exactly(
    state_dir: Path, dialect: str, release: str | None, args: tuple[str, ...]
) -> None:
    out = state_dir / "argv.json"
    profile = recorder(out, *args)
    async with fake_agliteterm(state_dir, dialect=dialect, release=release) as fake:
        work = fake.add_workspace("w")
        await fake.add_session(work, SHELL, name="shell")  # a workspace is known by its panes
        async with (
            aglite_host(state_dir, fake, profiles=(profile,)) as (host, _source),
            client_of(host) as phone,
        ):
            result = await command(
                phone,
                c.CreateCommand(
                    resource="tab",
                    worktree_id=work,
                    launch=c.Launch(profile="rec"),
                    background=True,
                ),
            )
            assert result["ok"] is True, result
            with trio.fail_after(10):
                while not out.exists():
                    await trio.sleep(0.05)
            assert json.loads(out.read_text()) == list(args)
            (launched,) = [fake.launched[new] for new in fake.launched]
            assert launched == [[sys.executable, *profile.args]]


async def test_agwinterm_0_17_5_refuses_a_profile_it_cannot_pass(state_dir: Path) -> None:
    profile = recorder(state_dir / "argv.json", 'say "hi"')
    async with fake_agliteterm(state_dir, dialect="full", release="0.17.5") as fake:
        work = fake.add_workspace("w")
        await fake.add_session(work, SHELL, name="shell")
        async with (
            aglite_host(state_dir, fake, profiles=(profile,)) as (host, _source),
            client_of(host) as phone,
        ):
            result = await command(
                phone,
                c.CreateCommand(
                    resource="tab", worktree_id=work, launch=c.Launch(profile="rec"),
                    background=True,
                ),
            )  # fmt: skip
            assert result["ok"] is False
            assert result["error"]["code"] == "PROFILE_UNAVAILABLE"
            assert "double quote" in result["error"]["message"]
            assert fake.requests_for("session.new") == []


@pytest.mark.slow
async def test_create_answers_in_time_and_the_first_prompt_follows(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch, host_log: pytest.LogCaptureFixture
) -> None:
    """An agent still starting when ``create`` must answer: ``create`` answers (the
    pane exists) and the prompt goes once the agent is ready, the guarded way."""
    monkeypatch.setattr(first_prompt, "ANSWER_SECONDS", 3.0)
    launched = FakeAgent(state_dir / "launched", "launched")
    launched.set(state="working")
    profile = Profile(
        id="fake", name="Fake Claude", agent=sys.executable, args=tuple(launched.arguments())
    )
    async with fake_agliteterm(state_dir, columns=120, rows=40) as fake:
        work = fake.add_workspace("w")
        await fake.add_session(work, SHELL, name="shell")
        async with (
            aglite_host(state_dir, fake, profiles=(profile,)) as (host, _source),
            client_of(host, "phone") as phone,
        ):
            before = set(fake.sessions)

            async def working_hook() -> None:
                while not set(fake.sessions) - before:
                    await trio.sleep(0.02)
                (created,) = set(fake.sessions) - before
                fake.set_status(created, "working")

            result: dict[str, Any] = {}
            async with trio.open_nursery() as nursery:
                nursery.start_soon(working_hook)
                result = await command(
                    phone,
                    c.CreateCommand(
                        resource="tab",
                        worktree_id=work,
                        launch=c.Launch(profile="fake", prompt="first task"),
                        background=True,
                    ),
                )
            assert result["ok"] is True, result
            assert result["data"]["first_prompt"]["status"] == "pending", result
            assert launched.submissions() == []  # answered before the agent was ready
            (created,) = set(fake.sessions) - before
            launched.set(state="idle")
            fake.set_status(created, "idle")
            assert await submissions_after(launched, 1) == [
                {"prompt": "first task", "state": "idle"}
            ]
            with trio.fail_after(10):
                while not any("went through after its create" in m for m in host_log.messages):
                    await trio.sleep(0.05)
            (paste,) = fake.requests_for("session.paste", target=created)
            assert paste["args"]["text"] == "first task"


# ------------------------------------------------------------------ titles and status


@pytest.mark.parametrize(("dialect", "release"), [("lite", None), ("lite", "0.17.7"),
                                                   ("full", None), ("full", "0.17.5")])  # fmt: skip
async def test_the_pane_list_shows_the_status_with_its_age_and_the_terminals_title(
    state_dir: Path, dialect: str, release: str | None
) -> None:
    stamped = release is None
    async with fake_agliteterm(state_dir, dialect=dialect, release=release) as fake:
        work = fake.add_workspace("w")
        agent = await fake.add_session(
            work, "printf '\\033]0;Fixing tests\\007ready\\n'; exec sleep 120", name="claude"
        )
        done = await fake.add_session(work, "exec sleep 120", name="done")
        fake.set_status(agent, "active" if dialect == "full" else "working")
        fake.sessions[agent].status_changed_at -= 180  # three minutes ago
        fake.set_status(done, "completed" if dialect == "full" else "idle")
        async with aglite_host(state_dir, fake) as (host, _source), client_of(host) as phone:
            with trio.fail_after(10):  # the title arrives with the program's output
                while stamped and dialect == "full" and not fake.sessions[agent].screen.title:
                    await trio.sleep(0.05)
            subtitles = {p.title: p.subtitle for p in (await list_panes(phone)).panes}
            working = "active" if dialect == "full" else "working"
            title = " · Fixing tests" if stamped and dialect == "full" else ""
            age = " 3 min" if stamped else ""
            assert subtitles["w · claude"] == f"claude{title} · {working}{age}"
            listed = await command(phone, c.ListCommand())
            items = {i["tab"]["title"]: i for i in listed["data"]["items"]}
            # Only the words the apps know: running while it works, idle otherwise.
            assert items["claude"]["task"] == {"status": "running"}
            assert items["done"]["task"] == {"status": "idle"}
            expected = "Fixing tests" if title else "claude"
            assert items["claude"]["pane"]["title"] == expected
            for item in items.values():
                worktree = item["worktree"]
                assert all(
                    isinstance(worktree[k], str) for k in ("id", "name", "path", "root_path")
                )
