"""``mirror-host conformance``: check any Prowl mirror host against the protocol.

:mod:`.suite` lists the checks and runs them; :mod:`.probe` is the strict
connection they use; :mod:`.ledger` (pure) judges frames; :mod:`.rules` (pure)
makes the other judgments (pane choice, history pages, scrolled views, the exit
status); :mod:`.report` (pure) selects checks and renders results.

The protocol's numbers and strings the checks hold a host to (200-line pages,
``PANE_BUSY: …``, the heartbeat timing) are written here from the spec on
purpose, not imported from mirror-host's own session: the suite is an oracle,
and a host bug must not be able to agree with itself.
"""

from __future__ import annotations
