"""The agliteterm pane source (``--source agliteterm``): agliteterm's (and agwinterm's)
control API as values (``protocol.py``), frames built from its styled rows
(``render.py``), transports and a Trio client, discovery, and the source over them."""

from __future__ import annotations
