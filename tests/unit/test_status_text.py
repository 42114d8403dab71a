"""``mirror-host status`` as text: every figure of the admin reply that matters shows."""

from __future__ import annotations

from typing import Any

from mirror_host.cli.status import format_status


def reply(**panes: Any) -> dict[str, Any]:
    return {
        "version": "1.2.3",
        "uptimeSeconds": 75,
        "pid": 42,
        "stateDir": "/tmp/state",
        "listen": "127.0.0.1:7880",
        "hostID": "H",
        "devices": 2,
        "connections": 1,
        "pairing": {"open": False},
        "panes": {"listed": 1, "subscribed": 0, "items": [], **panes},
    }


def test_a_sources_own_figures_show_as_counters() -> None:
    text = format_status(
        reply(
            health={"kind": "agliteterm", "state": "following", "detail": "agwinterm 1.4"},
            source={
                "agliteterm": "1.4",
                "dialect": None,
                "requests": {"tree": 3, "session.read": 40},
                "connections": 4,
            },
        )
    )
    assert "source       agliteterm, following: agwinterm 1.4\n" in text
    assert (
        "counters     agliteterm 1.4, requests (tree 3, session.read 40), connections 4\n" in text
    )


def test_no_counters_line_for_a_source_without_figures() -> None:
    text = format_status(reply(health={"kind": "local", "state": "running", "detail": "1"}))
    assert "counters" not in text
    assert text.startswith("mirror-host  1.2.3, up 1 min (pid 42)\n")
