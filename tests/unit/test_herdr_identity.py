"""Herdr pane ids across moves, restarts, hand-offs and reused public ids; launch readings."""

from __future__ import annotations

from mirror_host.panes.herdr.identity import RETIRED_LIMIT, PaneIdentities
from mirror_host.panes.herdr.observe import version_refusal
from mirror_host.panes.herdr.protocol import (
    HerdrPane,
    LaunchFailed,
    LaunchProgress,
    launch_progress,
    pane_uuid,
)

SESSION = "/run/user/1000/herdr.sock"


def pane(pane_id: str, terminal_id: str) -> HerdrPane:
    workspace = pane_id.partition(":")[0]
    return HerdrPane(pane_id, terminal_id, workspace, f"{workspace}:t1", False, "unknown")


def test_first_sight_derives_ids_from_public_ids() -> None:
    ids = PaneIdentities(SESSION).assign([pane("w1:p1", "term_a"), pane("w1:p2", "term_b")])
    assert ids == {"term_a": pane_uuid(SESSION, "w1:p1"), "term_b": pane_uuid(SESSION, "w1:p2")}


def test_a_restart_with_restore_keeps_every_id() -> None:
    identities = PaneIdentities(SESSION)
    before = identities.assign([pane("w1:p1", "term_a"), pane("w2:p4", "term_b")])
    # Herdr restarts: same public ids, every terminal new.
    after = identities.assign([pane("w1:p1", "term_x"), pane("w2:p4", "term_y")])
    assert after == {"term_x": before["term_a"], "term_y": before["term_b"]}


def test_a_move_keeps_the_id_and_a_later_restart_too() -> None:
    identities = PaneIdentities(SESSION)
    first = identities.assign([pane("w1:p1", "term_a"), pane("w1:p2", "term_b")])
    moved = identities.assign([pane("w1:p1", "term_a"), pane("w2:p1", "term_b")])
    assert moved == first  # the same terminal under a new public id
    restarted = identities.assign([pane("w1:p1", "term_x"), pane("w2:p1", "term_y")])
    assert restarted == {"term_x": first["term_a"], "term_y": first["term_b"]}


def test_a_public_id_reused_after_its_pane_closed_gets_a_new_id() -> None:
    identities = PaneIdentities(SESSION)
    first = identities.assign([pane("w1:p1", "term_a"), pane("w3:p1", "term_c")])
    # w3's pane closes while Herdr runs (term_a lives on): w3:p1 is spent.
    identities.assign([pane("w1:p1", "term_a")])
    # After a restart Herdr gives w3 out again, to a new workspace.
    after = identities.assign([pane("w1:p1", "term_x"), pane("w3:p1", "term_z")])
    assert after["term_x"] == first["term_a"]
    assert after["term_z"] != first["term_c"]
    assert after["term_z"] == pane_uuid(SESSION, "w3:p1", terminal_id="term_z")
    # And it keeps that id across the next restart.
    again = identities.assign([pane("w1:p1", "term_1"), pane("w3:p1", "term_2")])
    assert again == {"term_1": first["term_a"], "term_2": after["term_z"]}


def test_a_pane_closed_down_to_an_empty_session_spends_its_id() -> None:
    # Found in review: an empty snapshot was taken for a Herdr restart, so the
    # id of the last pane closed was not retired and went to the next pane that
    # Herdr gave it to (after a restart without that workspace's pane).
    identities = PaneIdentities(SESSION)
    first = identities.assign([pane("w1:p1", "term_1")])
    assert identities.assign([]) == {}
    after = identities.assign([pane("w1:p1", "term_9")])
    assert after["term_9"] != first["term_1"]
    assert after["term_9"] == pane_uuid(SESSION, "w1:p1", terminal_id="term_9")


def test_a_pane_not_restored_frees_nothing_for_the_others() -> None:
    identities = PaneIdentities(SESSION)
    first = identities.assign([pane("w1:p1", "term_a"), pane("w1:p2", "term_b")])
    after = identities.assign([pane("w1:p1", "term_x")])  # w1:p2 did not come back
    assert after == {"term_x": first["term_a"]}


def test_ids_are_never_shared_in_one_snapshot() -> None:
    identities = PaneIdentities(SESSION)
    first = identities.assign([pane("w1:p1", "term_a")])
    # The pane moved away and another took its old public id at once (a restart
    # that mixes both: the moved terminal keeps its id, the newcomer gets its own).
    after = identities.assign([pane("w2:p1", "term_a"), pane("w1:p1", "term_b")])
    assert after["term_a"] == first["term_a"]
    assert after["term_b"] != first["term_a"]


def test_retired_ids_are_bounded() -> None:
    identities = PaneIdentities(SESSION)
    keeper = pane("w1:p1", "term_keep")
    for number in range(2, RETIRED_LIMIT + 50):
        identities.assign([keeper, pane(f"w1:p{number}", f"term_{number}")])
        identities.assign([keeper])
    assert len(identities._retired) == RETIRED_LIMIT


def agent(**fields: object) -> dict[str, object]:
    record: dict[str, object] = {"terminal_id": "term_a", "name": "claude-1", "agent": "claude"}
    record.update(fields)
    return record


def progress(record: dict[str, object] | None, *, seen: bool = True) -> object:
    return launch_progress(record, name="claude-1", terminal_id="term_a", kind="claude", seen=seen)


def test_only_an_explicit_interactive_ready_is_ready() -> None:
    # Herdr leaves both flags out when false: a record without them is not ready.
    assert progress(agent(agent_status="idle", launch_pending=True)) is LaunchProgress.WAITING
    assert progress(agent(agent_status="done", launch_pending=True)) is LaunchProgress.WAITING
    assert progress(agent(agent_status="unknown")) is LaunchProgress.WAITING
    assert progress(agent(agent_status="working")) is LaunchProgress.WAITING
    assert progress(agent(agent_status="done", interactive_ready=True)) is LaunchProgress.READY
    assert progress(agent(agent_status="idle", interactive_ready=True)) is LaunchProgress.READY


def test_idle_with_neither_flag_exited_before_ready() -> None:
    for status in ("idle", "done"):
        failed = progress(agent(agent_status=status))
        assert isinstance(failed, LaunchFailed) and failed.code == "agent_start_failed"
        assert "exited before" in failed.reason


def test_other_ends_of_a_launch() -> None:
    blocked = progress(agent(agent_status="blocked", launch_pending=True))
    assert isinstance(blocked, LaunchFailed) and blocked.code == "agent_not_ready"
    other = progress(agent(agent_status="idle", agent="codex", interactive_ready=True))
    assert isinstance(other, LaunchFailed) and other.code == "agent_kind_mismatch"
    moved = progress(agent(agent_status="idle", terminal_id="term_b", interactive_ready=True))
    assert isinstance(moved, LaunchFailed) and moved.code == "agent_name_not_found"
    unnamed = progress(agent(agent_status="idle", name=None, interactive_ready=True))
    assert isinstance(unnamed, LaunchFailed) and unnamed.code == "agent_name_not_found"
    # Neither the name nor the pane names an agent: gone, once it was seen.
    assert progress(None, seen=False) is LaunchProgress.WAITING
    gone = progress(None)
    assert isinstance(gone, LaunchFailed) and "exited before" in gone.reason
    # What agent.start did not say is not checked.
    unchecked = launch_progress(
        agent(agent_status="idle", agent="codex", interactive_ready=True),
        name="claude-1",
        terminal_id=None,
        kind=None,
        seen=True,
    )
    assert unchecked is LaunchProgress.READY


def test_an_observe_program_of_another_version_is_recognised() -> None:
    older = (
        "herdr: server rejected handshake (version 22): client version 20 is older than "
        "server version 22; please upgrade your herdr client\n"
    )
    assert version_refusal(older) == older.strip().removeprefix("herdr: ")
    newer = "herdr: server rejected handshake (version 20): client version 22 is newer than server version 20; please upgrade the herdr server"
    assert version_refusal(newer) is not None and "newer" in (version_refusal(newer) or "")
    connect = "herdr: failed to connect to server: No such file or directory"
    assert version_refusal(connect) is None
    assert version_refusal("") is None
