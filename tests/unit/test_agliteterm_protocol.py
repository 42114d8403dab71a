"""agliteterm's control API as values: request guards, typed refusals, tree, events, styled rows."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mirror_host.errors import InvalidArgument, PaneNotFound, PaneSourceError
from mirror_host.panes.agliteterm.protocol import (
    AgliteError,
    AgliteSessionNotFound,
    AgliteUnknownCommand,
    Dialect,
    InputIncomplete,
    InputNotWritten,
    Run,
    StyledScreen,
    decode_reply,
    dialect_of,
    encode_request,
    grid_size,
    pane_uuid,
    parse_events,
    parse_metrics,
    parse_styled,
    parse_tree,
    plain_history,
    plain_screen,
)
from tests.fakes.agliteterm_fake import parse_lite_request

# ------------------------------------------------------------------ requests


def test_request_is_compact_ascii_json_on_one_line() -> None:
    line = encode_request(
        "session.type", target="lite-1", args={"text": "é中\n", "allow-control": True}
    )
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert b" " not in line and line.isascii()
    assert json.loads(line) == {
        "cmd": "session.type",
        "target": "lite-1",
        "args": {"text": "é中\n", "allow-control": True},
    }
    assert json.loads(encode_request("tree")) == {"cmd": "tree"}


@given(st.text(min_size=1, max_size=60))
@pytest.mark.slow
def test_lite_reads_every_text_back_exactly(text: str) -> None:
    # lite's own minimal parser (ported in the fake) must read what we send.
    line = encode_request(
        "session.type", target="lite-1", args={"text": text, "allow-control": True}
    )
    fields = parse_lite_request(line.decode("ascii").rstrip("\n"))
    assert fields is not None
    assert fields["cmd"] == "session.type" and fields["target"] == "lite-1"
    assert fields["args.text"] == text.encode("utf-8", "surrogatepass").decode(
        "utf-8", "surrogatepass"
    )
    assert fields["args.allow-control"] == "true"


def test_lite_reads_numbers_and_booleans_as_their_text() -> None:
    fields = parse_lite_request(
        encode_request("session.text", target="x", args={"styles": True, "lines": 0}).decode()
    )
    assert fields is not None
    assert fields["args.styles"] == "true" and fields["args.lines"] == "0"


@pytest.mark.parametrize("args", [{}, {"text": ""}, {"text": None}, {"text": 5}])
def test_an_empty_paste_is_never_built(args: dict[str, object]) -> None:
    # agliteterm pastes the Windows clipboard for an empty or missing text.
    with pytest.raises(InvalidArgument):
        encode_request("session.paste", target="lite-1", args=args)


@pytest.mark.parametrize("target", [None, "", "active"])
@pytest.mark.parametrize("cmd", ["session.type", "session.paste", "session.text", "session.close"])
def test_a_pane_verb_needs_a_real_target(cmd: str, target: str | None) -> None:
    # An empty target (or "active") is the focused session: never what we mean.
    with pytest.raises(InvalidArgument):
        encode_request(cmd, target=target, args={"text": "x"})


# ------------------------------------------------------------------ replies


def test_ok_reply_with_lf_or_crlf() -> None:
    assert decode_reply(b'{"ok":true,"result":"typed"}', cmd="session.type") == "typed"
    assert decode_reply(b'{"ok":true,"result":{"a":1}}\r', cmd="tree") == {"a": 1}
    assert decode_reply(b'{"ok":true,"result":7}\r', cmd="surface.cursor") == 7


@pytest.mark.parametrize("line", [b"nope", b"[1]", b'{"result":1}', b'{"ok":"yes"}'])
def test_not_a_reply(line: bytes) -> None:
    with pytest.raises(PaneSourceError):
        decode_reply(line, cmd="tree")


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ("session not found", AgliteSessionNotFound),
        ("no session", AgliteSessionNotFound),
        ("unknown command 'events' (lite subset)", AgliteUnknownCommand),
        ("unknown command 'session.metrics'", AgliteUnknownCommand),
        ("invalid JSON", AgliteError),
    ],
)
def test_refusals_are_typed(message: str, kind: type[AgliteError]) -> None:
    line = json.dumps({"ok": False, "error": message}).encode()
    with pytest.raises(kind) as caught:
        decode_reply(line, cmd="session.text")
    assert caught.value.message == message
    assert isinstance(caught.value, PaneNotFound) == (kind is AgliteSessionNotFound)


@pytest.mark.parametrize(
    ("message", "retryable"),
    [
        ("session type: input to this pane is busy or reserved; nothing typed", True),
        ("session paste: input to this pane is busy or reserved; nothing pasted", True),
        ("session type: pane has no live input; nothing typed", False),
        ("session.type refuses control byte 0x1B at index 0 (CR, LF and TAB are fine)", False),
        ("session paste: nothing to paste", False),
        ("session type: 0 of 12 bytes written before the 15 s input deadline; "
         "the remaining 12 bytes were not written", False),
    ],
)  # fmt: skip
def test_nothing_written(message: str, retryable: bool) -> None:
    cmd = "session.paste" if "paste" in message else "session.type"
    with pytest.raises(InputNotWritten) as caught:
        decode_reply(json.dumps({"ok": False, "error": message}).encode(), cmd=cmd)
    assert caught.value.retryable is retryable


@pytest.mark.parametrize(
    "message",
    [
        "session type: 4096 of 9000 bytes written; the 4096-byte chunk at offset 4096 was cancelled "
        "at the 15 s input deadline and may have been partly delivered; the remaining 808 bytes "
        "were not written",
        "session paste: 6 of 20 bytes written; the 14-byte chunk at offset 6 is still in flight and "
        "may still arrive; the remaining 0 bytes were not written; this pane's input stays "
        "reserved until that write resolves",
        "session type: input reserved or write failed/partial; shell outcome unknown",
        "session paste: something nobody documented",
        "session not found after all",
    ],
)
def test_partial_or_unknown_input_is_never_delivered(message: str) -> None:
    cmd = "session.paste" if "paste" in message else "session.type"
    with pytest.raises(InputIncomplete) as caught:
        decode_reply(json.dumps({"ok": False, "error": message}).encode(), cmd=cmd)
    if "4096 of 9000" in message:
        assert (caught.value.written, caught.value.total) == (4096, 9000)


def test_a_gone_session_on_input_is_not_found() -> None:
    with pytest.raises(AgliteSessionNotFound):
        decode_reply(b'{"ok":false,"error":"session not found"}', cmd="session.type")


def test_dialect_from_ping() -> None:
    assert dialect_of("agliteterm 0.17.14") is Dialect.LITE
    assert dialect_of("agwinterm 0.17.12") is Dialect.FULL
    assert dialect_of(None) is Dialect.LITE


# ------------------------------------------------------------------ tree

LITE_TREE = {
    "workspaces": [
        {
            "id": "0",
            "name": "work",
            "active": True,
            "focused": False,
            "sessions": [
                {"id": "lite-1", "name": "api", "active": True, "status": "working",
                 "statusChangedAt": 1790000000, "flagged": False, "exited": False,
                 "failed": False, "unread": 0, "cols": 120, "rows": 40},
                {"id": "lite-2", "name": "lite-2", "active": False, "status": "",
                 "statusChangedAt": 1790000001, "exited": True, "cols": 100, "rows": 30,
                 "paneCount": 2, "paneIds": ["lite-2", "lite-3"], "focusedPane": 0,
                 "axis": "vertical"},
                {"name": "no id"},
                "junk",
            ],
        },
        {"id": "1", "name": "docs", "sessions": [
            {"id": "lite-4", "name": "d", "cols": 80, "rows": 24, "paneCount": 2,
             "paneIds": ["lite-5", "lite-4"], "axis": "horizontal"}]},
    ]
}  # fmt: skip


def test_lite_tree() -> None:
    panes = parse_tree(LITE_TREE)
    assert [p.pane_id for p in panes] == ["lite-1", "lite-2", "lite-3", "lite-5", "lite-4"]
    api = panes[0]
    assert (api.label, api.status, api.status_changed_at) == ("work · api", "working", 1790000000)
    assert (api.columns, api.rows, api.active) == (120, 40, True)
    left, right = panes[1], panes[2]
    assert left.label == "work · lite-2 · Pane 1" and right.label == "work · lite-2 · Pane 2"
    assert left.exited and right.session_id == "lite-2" and right.slot == 1
    # Side by side: the other pane shares the height; its width comes from its own text.
    assert (left.columns, left.rows) == (100, 30) and (right.columns, right.rows) == (None, 30)
    # Stacked: it shares the width; the session's own shell is the one named by its id.
    top, bottom = panes[3], panes[4]
    assert (top.columns, top.rows) == (80, 24) and (bottom.columns, bottom.rows) == (80, 24)
    assert bottom.pane_id == "lite-4" and bottom.slot == 1


def test_full_tree_has_no_grid() -> None:
    tree = {"workspaces": [{"id": "w", "name": "Main", "sessions": [
        {"id": "9f1c", "name": "build", "active": False, "status": "active",
         "statusChangedAt": 5, "title": "pwsh", "paneCwds": {"9f1c": "C:\\src"}}]}]}  # fmt: skip
    (pane,) = parse_tree(tree)
    assert (pane.columns, pane.rows, pane.directory, pane.title) == (None, None, "C:\\src", "pwsh")
    assert parse_tree({"nope": 1}) == [] and parse_tree("x") == []


def test_metrics() -> None:
    assert parse_metrics({"cols": 132, "rows": 43, "cellWidth": 9}) == (132, 43)
    assert parse_metrics({"cols": 0, "rows": 43}) is None and parse_metrics(None) is None


def test_pane_ids_are_stable_and_per_instance() -> None:
    assert pane_uuid("unix:/a", "lite-1") == pane_uuid("unix:/a", "lite-1")
    assert pane_uuid("unix:/a", "lite-1") != pane_uuid("unix:/b", "lite-1")


def test_grid_size() -> None:
    (pane,) = parse_tree({"workspaces": [{"sessions": [{"id": "a", "cols": 100, "rows": 30}]}]})
    assert grid_size(pane, None) == (100, 30)
    assert grid_size(pane, None, (90, 20)) == (90, 20)
    # A styled answer is fresher than the tree; rows grow to hold the cursor and text.
    screen = StyledScreen(columns=110, rows={33: (Run(col=0, width=1, text="x"),)}, cursor=(35, 0))
    assert grid_size(pane, screen) == (110, 36)
    (bare,) = parse_tree({"workspaces": [{"sessions": [{"id": "b"}]}]})
    assert grid_size(bare, None) == (80, 24)


# ------------------------------------------------------------------ events


def test_events() -> None:
    batch = parse_events(
        {"cursor": 12, "events": [{"seq": 12, "type": "tree"},
                                  {"seq": 11, "type": "session", "session": "lite-3", "info": "created"},
                                  {"type": "no seq"}]}
    )  # fmt: skip
    assert batch.cursor == 12 and [e.seq for e in batch.events] == [11, 12]
    assert batch.events[0].session == "lite-3" and batch.events[0].info == "created"
    assert not batch.restarted(10) and not batch.missed(10)
    assert batch.missed(5)  # 6 … 10 fell off the ring
    assert parse_events({"cursor": 3, "events": []}).restarted(40)
    with pytest.raises(PaneSourceError):
        parse_events({"events": []})


# ------------------------------------------------------------------ styled text

STYLED = {
    "cols": 20,
    "rows": [
        {"row": -1, "runs": [{"col": 0, "width": 3, "text": "old"}]},
        {"row": 0, "runs": [
            {"col": 4, "width": 2, "text": "中", "faint": False, "bold": True, "italic": False,
             "underline": False, "inverse": False, "strike": False, "fg": "idx:9", "bg": "default"},
            {"col": 0, "width": 3, "text": "> a", "faint": True},
            {"col": 30, "width": 2, "text": "off the grid"},
            {"col": "x", "width": 1, "text": "bad"},
        ]},
        {"row": 2, "runs": []},
    ],
    "cursor": {"row": 5, "col": 20},
}  # fmt: skip


def test_styled_rows() -> None:
    screen = parse_styled(STYLED)
    assert screen.columns == 20 and screen.cursor == (5, 20)
    assert screen.history_rows == 1 and screen.extent() == 1
    first, wide = screen.rows[0]
    assert (first.col, first.text, first.faint, first.fg) == (0, "> a", True, "default")
    assert (wide.col, wide.width, wide.bold, wide.fg) == (4, 2, True, "idx:9")
    assert screen.rows[2] == ()
    assert parse_styled({"rows": []}, columns=33).columns == 33
    with pytest.raises(PaneSourceError):
        parse_styled("plain text")


def test_plain_fallbacks() -> None:
    assert plain_history("a\r\nb\n\n") == "a\nb"
    screen = plain_screen("one\ntwo\nthree\n", rows=2, columns=10)
    assert [run.text for runs in screen.rows.values() for run in runs] == ["two", "three"]
    assert screen.cursor == (1, 5)
