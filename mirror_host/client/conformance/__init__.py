"""``mirror-host conformance``: check any Prowl mirror host against the protocol.

:mod:`.suite` lists the checks and runs them; :mod:`.probe` is the strict
connection they use; :mod:`.ledger` (pure) judges frames; :mod:`.rules` (pure)
makes the other judgments (pane choice, history pages, scrolled views, the exit
status); :mod:`.report` (pure) selects checks and renders results.
"""

from __future__ import annotations
