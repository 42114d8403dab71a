"""Herdr protocol values: replies, errors, snapshots, labels, sizes, captures."""

from __future__ import annotations

import json
from pathlib import Path
from uuid import UUID

import pytest

from mirror_host.errors import PaneNotFound, PaneSourceError
from mirror_host.panes.herdr.protocol import (
    HerdrError,
    HerdrPaneNotFound,
    HerdrUnknownMethod,
    ScrollChange,
    Snapshot,
    decode_reply,
    encode_request,
    frame_from_rows,
    grid_size,
    pane_labels,
    pane_name,
    pane_uuid,
    parse_pane,
    parse_scroll_changed,
    parse_snapshot,
    resolve_socket_path,
    scroll_bounds,
    split_rows,
    strip_escapes,
)
from mirror_host.terminal import Screen
from tests.conftest import SHARED

CAPTURES = SHARED / "data" / "herdr-pane-captures"


def test_request_line_shape() -> None:
    line = encode_request("mh-1", "pane.read", {"pane_id": "w1:p1"})
    assert line.endswith(b"\n")
    assert json.loads(line) == {"id": "mh-1", "method": "pane.read", "params": {"pane_id": "w1:p1"}}
    assert json.loads(encode_request("mh-2", "ping"))["params"] == {}


def test_reply_errors_are_typed() -> None:
    unknown = b'{"id":"","error":{"code":"invalid_request","message":"invalid request: unknown variant `session.snapshot`, expected one of `ping`"}}'
    with pytest.raises(HerdrUnknownMethod):
        decode_reply(unknown, method="session.snapshot")
    with pytest.raises(HerdrError) as other:  # unknown variant of *another* name is not this
        decode_reply(unknown, method="pane.read")
    assert not isinstance(other.value, HerdrUnknownMethod)
    gone = b'{"id":"x","error":{"code":"pane_not_found","message":"pane w9:p9 not found"}}'
    with pytest.raises(HerdrPaneNotFound) as info:
        decode_reply(gone, method="pane.read")
    assert isinstance(info.value, PaneNotFound) and info.value.code == "pane_not_found"
    with pytest.raises(PaneSourceError):
        decode_reply(b"not json", method="ping")
    assert decode_reply(b'{"id":"x","result":{"type":"ok","future":1}}', method="x") == {
        "type": "ok",
        "future": 1,
    }


SNAPSHOT = {
    "workspaces": [
        {"workspace_id": "w2", "number": 1, "label": "api", "focused": True, "pane_count": 3,
         "tab_count": 2, "active_tab_id": "w2:t2", "agent_status": "working"},
        {"workspace_id": "w1", "number": 2, "label": "web", "focused": False, "pane_count": 0,
         "tab_count": 0, "active_tab_id": "w1:t1", "agent_status": "unknown"},
    ],
    "tabs": [
        {"tab_id": "w2:t2", "workspace_id": "w2", "number": 2, "label": "agents", "focused": True,
         "pane_count": 2, "agent_status": "working"},
        {"tab_id": "w2:t1", "workspace_id": "w2", "number": 1, "label": "1", "focused": False,
         "pane_count": 1, "agent_status": "unknown"},
    ],
    "panes": [
        {"pane_id": "w2:p3", "terminal_id": "term_c", "workspace_id": "w2", "tab_id": "w2:t1",
         "focused": False, "agent_status": "unknown", "revision": 0, "cwd": "/src/api"},
        {"pane_id": "w2:p1", "terminal_id": "term_a", "workspace_id": "w2", "tab_id": "w2:t2",
         "focused": True, "agent_status": "working", "revision": 0, "cwd": "/src/api",
         "agent": "claude", "scroll": {"offset_from_bottom": 0, "max_offset_from_bottom": 40,
                                       "viewport_rows": 30}},
        {"pane_id": "w2:p2", "terminal_id": "term_b", "workspace_id": "w2", "tab_id": "w2:t2",
         "focused": False, "agent_status": "idle", "revision": 0, "cwd": "/src/api/sub",
         "extra_future_field": {"x": 1}},
    ],
    "layouts": [
        {"workspace_id": "w2", "tab_id": "w2:t2", "zoomed": False, "panes": [
            {"pane_id": "w2:p1", "focused": True, "rect": {"x": 0, "y": 0, "width": 100, "height": 32}},
            {"pane_id": "w2:p2", "focused": False, "rect": {"x": 100, "y": 0, "width": 60, "height": 32}},
        ], "splits": []},
    ],
}  # fmt: skip


def _ids(snapshot: Snapshot) -> dict[str, UUID]:
    return {p.terminal_id: pane_uuid("/h.sock", p.pane_id) for p in snapshot.panes}


def test_labels_follow_array_order_and_name_agents() -> None:
    snapshot = parse_snapshot(**SNAPSHOT)  # type: ignore[arg-type]
    labelled = pane_labels(snapshot, _ids(snapshot))
    titles = [info.title for _, info in labelled]
    # Tabs in array order (t2 before t1), never sorted by number.
    assert titles == [
        "api · agents · Claude · Pane 1",
        "api · agents · Shell · Pane 2",
        "api · 1 · Shell",
    ]
    first = labelled[0][1]
    assert first.id == pane_uuid("/h.sock", "w2:p1") and first.directory == "/src/api"
    # What the agent does, in Herdr's words, after the name.
    assert first.project_name == "api" and first.subtitle == "agents · Claude · Pane 1 · working"
    assert labelled[1][1].subtitle == "agents · Shell · Pane 2"  # a shell says nothing more


def test_ids_come_from_the_session_and_the_public_pane_id() -> None:
    assert pane_uuid("/h.sock", "w1:p1") == pane_uuid("/h.sock", "w1:p1")
    assert pane_uuid("/h.sock", "w1:p1") != pane_uuid("/h.sock", "w1:p2")
    assert pane_uuid("/h.sock", "w1:p1") != pane_uuid("/other.sock", "w1:p1")
    reused = pane_uuid("/h.sock", "w1:p1", terminal_id="term_b")
    assert reused != pane_uuid("/h.sock", "w1:p1") and reused == pane_uuid(
        "/h.sock", "w1:p1", terminal_id="term_b"
    )


def test_titles_and_status_words_from_herdr() -> None:
    record = {"pane_id": "w1:p1", "terminal_id": "t", "workspace_id": "w1", "tab_id": "w1:t1",
              "focused": False, "agent_status": "done", "revision": 0, "agent": "claude",
              "terminal_title": "\u2733 Fix\nthe bug", "terminal_title_stripped": "Fix\nthe bug"}  # fmt: skip
    snapshot = parse_snapshot(
        workspaces=[{"workspace_id": "w1", "label": "api"}],
        tabs=[{"tab_id": "w1:t1", "workspace_id": "w1", "label": "agents"}],
        panes=[record],
    )
    ((pane, info),) = pane_labels(snapshot, _ids(snapshot))
    assert pane.terminal_title == "Fix the bug"  # one line, whatever the program set
    assert pane_name(pane) == "Fix the bug"
    assert info.title == "api · agents · Fix the bug"
    assert info.subtitle == "agents · Fix the bug · Claude · done"
    titled = parse_pane({**record, "title": "Review", "display_agent": "Claude Code",
                         "agent_status": "unknown"})  # fmt: skip
    assert titled is not None and pane_name(titled) == "Review"
    ((_, unknown),) = pane_labels(
        parse_snapshot(workspaces=[], tabs=[], panes=[{**record, "agent_status": "unknown",
                                                       "display_agent": "Claude Code"}]),
        {"t": pane_uuid("/h.sock", "w1:p1")},
    )  # fmt: skip
    assert unknown.subtitle == "w1:t1 · Fix the bug · Claude Code"  # "unknown" says nothing
    assert pane_labels(snapshot, {}) == []  # a pane without an id is not listed


def test_grid_size_from_layout_and_rows() -> None:
    snapshot = parse_snapshot(**SNAPSHOT)  # type: ignore[arg-type]
    panes = {p.pane_id: p for p in snapshot.panes}
    assert grid_size(panes["w2:p1"], snapshot) == (98, 30)  # border of a split tab removed
    assert grid_size(panes["w2:p3"], snapshot) == (80, 24)  # nothing known: a sane default
    assert grid_size(panes["w2:p3"], snapshot, ["x" * 130, "y"]) == (130, 24)


def test_scroll_bounds() -> None:
    snapshot = parse_snapshot(**SNAPSHOT)  # type: ignore[arg-type]
    pane = snapshot.panes[1]
    bounds = scroll_bounds(pane)
    assert (bounds.at_top, bounds.at_bottom) == (False, True)
    assert scroll_bounds(snapshot.panes[0]).at_top is None  # no scrollback info


def test_scroll_changed_events() -> None:
    scroll = {"offset_from_bottom": 12, "max_offset_from_bottom": 240, "viewport_rows": 24}
    event = {"event": "pane.scroll_changed", "data": {"pane_id": "w1:p2", "workspace_id": "w1",
                                                      "scroll": scroll}}  # fmt: skip
    assert parse_scroll_changed(event) == ScrollChange("w1:p2", 12, 240, 24)
    snake = {**event, "event": "pane_scroll_changed"}
    assert parse_scroll_changed(snake) == ScrollChange("w1:p2", 12, 240, 24)
    assert parse_scroll_changed({"event": "pane_updated", "data": {"pane_id": "w1:p2"}}) is None
    assert parse_scroll_changed({"event": "pane.scroll_changed", "data": {"pane_id": "w1"}}) is None
    partial = {"event": "pane.scroll_changed", "data": {"pane_id": "w1:p2", "scroll": {}}}
    assert parse_scroll_changed(partial) == ScrollChange("w1:p2", None, None, None)


def test_socket_path_resolution_order() -> None:
    env = {"HOME": "/home/u", "HERDR_SOCKET_PATH": "/run/h.sock", "HERDR_SESSION": "work"}
    assert resolve_socket_path("/x.sock", env) == Path("/x.sock")
    assert resolve_socket_path(None, env) == Path("/run/h.sock")
    env.pop("HERDR_SOCKET_PATH")
    assert resolve_socket_path(None, env) == Path("/home/u/.config/herdr/sessions/work/herdr.sock")
    assert resolve_socket_path(None, {"HOME": "/home/u", "XDG_CONFIG_HOME": "/cfg"}) == Path(
        "/cfg/herdr/herdr.sock"
    )


def test_frame_from_rows_places_trimmed_rows() -> None:
    screen = Screen(20, 5)
    screen.feed(frame_from_rows(["\x1b[31mred\x1b[0m", "", "third"]))
    assert screen.active_text().split("\n")[:3] == ["red", "", "third"]
    assert screen.cell(0, 0)[1] == screen.cell(1, 0)[1]  # styled alike


def captures() -> list[Path]:
    if not CAPTURES.is_dir():
        return []
    return sorted(CAPTURES.glob("*.txt"))


@pytest.mark.skipif(not CAPTURES.is_dir(), reason="../shared/data/herdr-pane-captures is absent")
@pytest.mark.parametrize("path", captures(), ids=lambda p: p.name)
def test_real_captures_become_faithful_frames(path: Path) -> None:
    text = path.read_bytes().decode("utf-8")  # keep the \r\n row separators as they are
    rows = split_rows(text)
    snapshot = parse_snapshot(workspaces=[], tabs=[], panes=[])
    from mirror_host.panes.herdr.protocol import HerdrPane

    pane = HerdrPane("w1:p1", "term_x", "w1", "w1:t1", True, "idle", viewport_rows=len(rows))
    columns, height = grid_size(pane, snapshot, rows)
    host = Screen(columns, height)
    host.feed(frame_from_rows(rows))
    replica = Screen(columns, height)
    replica.feed(b"\x1bc" + host.vt_frame())
    expected = [strip_escapes(row).rstrip() for row in rows]
    got = [row.rstrip() for row in replica.active_text().split("\n")]
    got += [""] * (len(expected) - len(got))
    assert got[: len(expected)] == expected
    # The replica formats back to the very same frame: same cells, styles and cursor.
    assert replica.vt_frame() == host.vt_frame()
