"""The protocol's numbers that more than one room needs. Pure.

Both ends of a connection keep the same timing (the session here, ``attach``
in :mod:`mirror_host.client.attach`), and the size limits bind a pane source,
the terminal that formats a capture and the session that frames it alike, so
each number lives here once (docs/protocol.md §11). A limit only one module
enforces stays beside it (the 16 MiB outbound queue in ``session/link.py``,
scroll timing in ``session/lease.py``, history pages in ``session/history.py``).
"""

from __future__ import annotations

__all__ = [
    "AUTH_TIMEOUT_SECONDS",
    "HEARTBEAT_SECONDS",
    "IDLE_TIMEOUT_SECONDS",
    "MAX_ARCHIVE_BYTES",
    "MAX_ARCHIVE_CELLS",
    "MAX_ARCHIVE_ROWS",
    "MAX_HISTORY_BYTES",
    "MAX_INPUT_BYTES",
    "MAX_TEXT_BYTES",
    "MAX_VT_BYTES",
    "POLL_SECONDS",
]

#: Each side pings this often once TLS is up.
HEARTBEAT_SECONDS = 2.0
#: A connection with no packet from the peer for this long is closed.
IDLE_TIMEOUT_SECONDS = 8.0
#: A client must log in (``authenticate`` or ``pair``) within this of ``challenge``.
AUTH_TIMEOUT_SECONDS = 5.0
#: ``input.bytes``: 1 … this many bytes per message.
MAX_INPUT_BYTES = 65_536

#: A VT frame's bytes, a text frame's (and the viewport text's) UTF-8 bytes,
#: and a history snapshot's UTF-8 bytes (Prowl's host).
MAX_VT_BYTES = 4 * 1024 * 1024
MAX_TEXT_BYTES = 1024 * 1024
MAX_HISTORY_BYTES = 2 * 1024 * 1024
#: Styled scrollback (Prowl's ``GhosttyMirrorPaneSource``): at most this many
#: rows, rows × columns cells and bytes; the Mac client also refuses a
#: ``rowOffset`` above the row limit.
MAX_ARCHIVE_ROWS = 5_000
MAX_ARCHIVE_CELLS = 250_000
MAX_ARCHIVE_BYTES = 2 * 1024 * 1024

#: Prowl's 200 ms tick: how often the Herdr source reads a pane it has no observe
#: stream for, and how soon a sampler tries a capture that timed out again.
POLL_SECONDS = 0.2
