"""Discovery's event subscription list, without a socket."""

from __future__ import annotations

from pathlib import Path

from mirror_host.panes.herdr.client import HerdrClient
from mirror_host.panes.herdr.discovery import SCROLL_EVENT, HerdrDiscovery
from mirror_host.panes.herdr.protocol import HerdrError


def test_a_server_without_the_scroll_event_gets_subscriptions_without_it() -> None:
    discovery = HerdrDiscovery(HerdrClient(Path("/nonexistent.sock")), lambda *_: None)
    discovery.follow_scroll(frozenset({"w1:p1"}))
    assert discovery._followed_scroll() == {"w1:p1"}
    refusal = HerdrError(
        "invalid_request", f"unknown variant `{SCROLL_EVENT}`, expected one of `pane.created`"
    )
    assert discovery._drop_unknown_event_type(refusal)
    assert discovery._followed_scroll() == frozenset()
    # Any other refusal that names it (a moved pane) is not taken for an old server.
    fresh = HerdrDiscovery(HerdrClient(Path("/nonexistent.sock")), lambda *_: None)
    fresh.follow_scroll(frozenset({"w1:p1"}))
    assert not fresh._drop_unknown_event_type(HerdrError("pane_not_found", "pane w1:p1 not found"))
    assert fresh._followed_scroll() == {"w1:p1"}
