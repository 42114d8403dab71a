"""What an agliteterm build offers, learned from its answers; reading a build that sends it all."""

from __future__ import annotations

from dataclasses import replace

from mirror_host.panes.agliteterm.offer import (
    WHOLE_IDLE_SECONDS,
    WHOLE_READ_FACTOR,
    Offer,
    whole_read_interval,
)
from mirror_host.panes.agliteterm.protocol import (
    DEFAULT_COLUMNS,
    Dialect,
    SessionPane,
    grid_size,
    plain_buffer,
    status_age,
    widest_line,
)

#: ``tree`` as agliteterm 0.17.7 answers it (main.cpp ctlDispatch: no cols, rows,
#: statusChangedAt) and as the newer code does.
TREE_0177 = {"workspaces": [{"id": "0", "name": "w", "active": True, "focused": False,
             "sessions": [{"id": "lite-1", "name": "a", "active": True, "status": "",
                           "flagged": False, "exited": False, "failed": False,
                           "unread": 0}]}]}  # fmt: skip
TREE_NEWER = {"workspaces": [{"id": "0", "name": "w", "sessions": [
    {"id": "lite-1", "name": "a", "status": "", "statusChangedAt": 1, "cols": 80, "rows": 24}]}]}  # fmt: skip


def test_agliteterm_0_17_7_lacks_four_things_and_says_which() -> None:
    # 0.17.7's ping names it: what it lacks is known before any other answer …
    offer = Offer().connected(Dialect.LITE, "agliteterm 0.1")
    assert offer.whole_buffer_reads
    missing = offer.missing()
    # … and its answers agree.
    confirmed = offer.with_tree(TREE_0177).with_screen_read(styled=False, history_rows=0)
    assert confirmed.missing() == missing
    assert len(missing) == 4
    assert [gap.split(" (")[0] for gap in missing] == [
        "colours and text styles",
        "reading the screen alone",
        "the pane's size",
        "the time of each agent status",
    ]
    assert offer.describe().startswith("agliteterm 0.1; a newer build would add: colours")


def test_an_unknown_build_is_what_it_answers() -> None:
    offer = Offer().connected(Dialect.LITE, "agliteterm dev")
    assert offer.missing() == ()  # nothing known yet: nothing claimed
    assert offer.with_tree({"workspaces": []}).missing() == ()  # an empty tree shows nothing
    offer = offer.with_tree(TREE_0177).with_screen_read(styled=False, history_rows=0)
    assert offer.whole_buffer_reads and len(offer.missing()) == 4
    # A build that answers styled rows of the screen after all.
    assert not offer.with_screen_read(styled=True, history_rows=0).whole_buffer_reads


def test_a_newer_agliteterm_lacks_nothing() -> None:
    offer = Offer().connected(Dialect.LITE, "agliteterm 0.17.14").with_tree(TREE_NEWER)
    offer = offer.with_screen_read(styled=True, history_rows=0)
    assert offer.missing() == () and not offer.whole_buffer_reads
    assert offer.describe() == "agliteterm 0.17.14"
    # A styled answer with rows above the screen: the build ignored lines:0.
    assert offer.with_screen_read(styled=True, history_rows=3).whole_buffer_reads


def test_agwinterm_0_17_5_reads_the_screen_but_has_no_scrollback() -> None:
    offer = Offer().connected(Dialect.FULL, "agwinterm 0.17.5")
    offer = offer.with_screen_read(styled=False, history_rows=0).with_metrics(False)
    assert not offer.whole_buffer_reads
    assert [gap.split(" (")[0] for gap in offer.missing()] == [
        "colours and text styles",
        "scrollback",
        "the pane's size",
        "the time of each agent status",
    ]


def test_a_reconnection_to_another_build_forgets_what_was_learned() -> None:
    offer = Offer().connected(Dialect.LITE, "agliteterm 0.1").with_tree(TREE_0177)
    assert offer.connected(Dialect.LITE, "agliteterm 0.1") is offer
    assert offer.connected(Dialect.LITE, "agliteterm 0.17.14").missing() == ()


def test_whole_buffer_reads_back_off_while_quiet_and_never_outpace_the_build() -> None:
    assert whole_read_interval(0.1, 0.0, 0, fast=False) == 0.1
    quiet = [whole_read_interval(0.1, 0.0, n, fast=False) for n in range(1, 6)]
    assert quiet == sorted(quiet) and quiet[-1] == WHOLE_IDLE_SECONDS
    assert whole_read_interval(0.03, 0.0, 5, fast=True) == 0.03  # after input: the echo
    assert whole_read_interval(0.03, 0.5, 0, fast=True) == 0.5 * WHOLE_READ_FACTOR


def test_plain_text_gives_a_grid_and_a_copy_to_scroll() -> None:
    lines = ["x" * 30, "中" * 60, "short"]
    assert widest_line(lines) == 120
    assert widest_line(lines, 200) == 200  # nothing can be wider: nothing measured
    pane = SessionPane(pane_id="p", session_id="p", name="p", workspace_id="0",
                       workspace_name="w")  # fmt: skip
    assert grid_size(pane, None) == (DEFAULT_COLUMNS, 24)
    assert grid_size(pane, None, None, (120, 3)) == (120, 24)
    assert grid_size(pane, None, None, (40, 30)) == (80, 30)
    text = "".join(f"{n}\n" for n in range(1, 51))
    copy = plain_buffer(text, rows=10, columns=80, keep=30)
    assert copy.history_rows == 20
    assert copy.rows[-20][0].text == "21" and copy.rows[9][0].text == "50"
    assert copy.cursor == (9, 2)


def test_the_status_shows_its_age_where_agliteterm_stamps_it() -> None:
    assert status_age(None, 1000.0) == ""  # 0.17.7 and agwinterm 0.17.5 stamp nothing
    assert status_age(1000, 999.0) == ""  # a clock that disagrees shows no age
    assert [status_age(1000, 1000.0 + s) for s in (0, 59, 60, 3599, 3600, 90_000)] == [
        "0 s", "59 s", "1 min", "59 min", "1 h", "1 d"
    ]  # fmt: skip
    pane = SessionPane(pane_id="p", session_id="p", name="claude", workspace_id="0",
                       workspace_name="w", status="working", status_changed_at=1000)  # fmt: skip
    assert pane.subtitle(1180.0) == "claude · working 3 min"
    assert replace(pane, status_changed_at=None).subtitle(1180.0) == "claude · working"
    assert replace(pane, title="✳ Fixing tests").subtitle(1180.0) == (
        "claude · ✳ Fixing tests · working 3 min"
    )
    assert replace(pane, title="✳ Fixing tests").pane_title == "✳ Fixing tests"
    assert replace(pane, exited=True).subtitle(1180.0) == "claude · exited"
    assert replace(pane, status="").subtitle(1180.0) == "claude"
