"""The pairing window: one single-use code for 60 seconds (docs/protocol.md §8). Pure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from mirror_host.auth.pairing import generate_code

__all__ = ["WINDOW_SECONDS", "PairingWindow", "open_window"]

WINDOW_SECONDS = 60.0


@dataclass(frozen=True, slots=True, kw_only=True)
class PairingWindow:
    """An open window. ``deadline`` is on the monotonic clock the host runs on;
    ``opened_at_unix`` is wall-clock time, used only for the QR ``expiresAt``."""

    code: str = field(repr=False)
    deadline: float
    opened_at_unix: float

    def is_open(self, now: float) -> bool:
        """Whether the code is still usable at monotonic ``now``."""
        return now < self.deadline


def open_window(
    *,
    now: float,
    now_unix: float,
    token_bytes: Callable[[int], bytes],
    seconds: float = WINDOW_SECONDS,
) -> PairingWindow:
    """A fresh window with a new CSPRNG code, open for ``seconds``."""
    return PairingWindow(
        code=generate_code(token_bytes), deadline=now + seconds, opened_at_unix=now_unix
    )
