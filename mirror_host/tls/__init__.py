"""TLS-PSK for both ends of a connection: this Python's route, the contexts, the self-check."""

from __future__ import annotations
