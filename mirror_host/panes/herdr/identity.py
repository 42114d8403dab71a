"""Which UUID each Herdr pane carries, across moves and Herdr restarts. Pure.

Herdr names a pane twice: its public id (``w1:p2``: the workspace, then a number
that workspace never gives out again) and its ``terminal_id``. A Herdr restart
with session restore, and a live hand-off, keep the public ids and give every
pane a new ``terminal_id`` (src/persist/restore.rs); a move to another workspace
keeps the ``terminal_id`` and gives a new public id. So a pane's UUID is derived
from its public id within its Herdr session (the socket), and each snapshot is
matched against the one before:

1. a terminal seen before keeps its UUID (the pane may have moved);
2. a new terminal under a public id another terminal held, now gone, takes
   that UUID over (Herdr restarted or handed off and restored the pane);
3. any other new pane gets the UUID of its public id, unless that id is
   **retired**: a pane that had it went away while Herdr kept running (other
   terminals lived on, or no pane was left at all). Herdr does not give such
   an id out again while it runs, but after a restart it can: a workspace
   closed before it and then created anew gets the same id
   (reserve_workspace_ids, src/workspace.rs 0.8.2). A pane under a retired
   id gets a UUID of its own (public id and terminal), so a phone that chose
   the closed pane is never handed the new one.

What cannot be told apart: a Herdr started *without* restoring its session
whose first pane is ``w1:p1`` again, seen by a host that followed the old one
(the id is not retired, since Herdr went away as a whole). Unless the host
saw that Herdr with no pane at all first, that pane takes the old
``w1:p1``'s UUID: the same place, a new shell. And a host started
afresh knows no history: it derives every UUID from the public id, so a pane
that moved keeps its UUID only while the host runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from uuid import UUID

from mirror_host.panes.herdr.protocol import HerdrPane, pane_uuid

__all__ = ["RETIRED_LIMIT", "PaneIdentities"]

#: Retired public ids remembered (the oldest are forgotten past this).
RETIRED_LIMIT = 4096


class PaneIdentities:
    """The UUIDs of one Herdr session's panes, snapshot after snapshot."""

    def __init__(self, session: str) -> None:
        self.session = session
        #: terminal_id → UUID, and public pane id → UUID, as of the last snapshot.
        self._by_terminal: dict[str, UUID] = {}
        self._by_public: dict[str, UUID] = {}
        #: Public ids whose pane went away while Herdr kept running (insertion order).
        self._retired: dict[str, None] = {}

    def assign(self, panes: Iterable[HerdrPane]) -> dict[str, UUID]:
        """Each pane's UUID by its ``terminal_id``, for this snapshot (module docstring)."""
        current = list(panes)
        terminals = {pane.terminal_id for pane in current}
        kept = terminals & self._by_terminal.keys()
        # No terminal kept while some are listed: Herdr restarted (or handed off).
        # An empty snapshot is not one: its panes closed while Herdr ran, and
        # their ids are spent like any other closed pane's.
        restarted = bool(self._by_terminal) and bool(current) and not kept
        assigned: dict[str, UUID] = {}
        taken: set[UUID] = set()
        # Terminals seen before first: their UUIDs are theirs, wherever they are now.
        for pane in current:
            key = self._by_terminal.get(pane.terminal_id)
            if key is not None and key not in taken:
                assigned[pane.terminal_id] = key
                taken.add(key)
        # A UUID not taken above belonged to a terminal that is gone now.
        previous_holder = {
            public: key for public, key in self._by_public.items() if key not in taken
        }
        for pane in current:
            if pane.terminal_id in assigned:
                continue
            key = previous_holder.get(pane.pane_id)
            if key is None or key in taken:
                key = self._fresh(pane)
            if key in taken:  # two panes can never share one (a reused id of a moved pane)
                key = pane_uuid(self.session, pane.pane_id, terminal_id=pane.terminal_id)
            assigned[pane.terminal_id] = key
            taken.add(key)
        if not restarted:
            # Panes that went away while Herdr kept running: their ids are spent.
            now_public = {pane.pane_id for pane in current}
            for public in self._by_public.keys() - now_public:
                self._retire(public)
        self._by_terminal = dict(assigned)
        self._by_public = {pane.pane_id: assigned[pane.terminal_id] for pane in current}
        return assigned

    def _fresh(self, pane: HerdrPane) -> UUID:
        if pane.pane_id in self._retired:
            return pane_uuid(self.session, pane.pane_id, terminal_id=pane.terminal_id)
        return pane_uuid(self.session, pane.pane_id)

    def _retire(self, public: str) -> None:
        self._retired.pop(public, None)
        self._retired[public] = None
        while len(self._retired) > RETIRED_LIMIT:
            del self._retired[next(iter(self._retired))]
