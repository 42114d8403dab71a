"""Logging set-up: text for people, JSON lines for machines. I/O.

Log records name connections by a short number, the peer address and the device
name and id. They never hold a key, pairing code, proof, nonce or QR payload;
``tests/integration/test_secrets_not_logged.py`` searches a debug log for them.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import TextIO

__all__ = ["configure_logging"]

_RESERVED = set(vars(logging.makeLogRecord({})))


class _JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        document: dict[str, object] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        document.update(
            (key, value)
            for key, value in vars(record).items()
            if key not in _RESERVED and not key.startswith("_")
        )
        if record.exc_info:
            document["exception"] = self.formatException(record.exc_info)
        return json.dumps(document, default=str, ensure_ascii=False)


def configure_logging(level: str, fmt: str, *, stream: TextIO | None = None) -> None:
    """Send mirror-host's logs to ``stream`` (stderr) at ``level`` in ``fmt``."""
    handler = logging.StreamHandler(stream or sys.stderr)
    if fmt == "json":
        handler.setFormatter(_JSONFormatter())
    else:
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s", "%H:%M:%S")
        )
    root = logging.getLogger("mirror_host")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
