"""The pairing window: one single-use code for 60 seconds (docs/protocol.md §8). Pure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from mirror_host.auth.pairing import generate_code

__all__ = ["WINDOW_SECONDS", "PairingWindow", "WindowFates", "open_window"]

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


class WindowFates:
    """What became of the recent pairing windows, by number.

    ``mirror-host pair`` waits on the window it opened; this is how it learns
    whether *that* window paired a device, expired, was closed, or was replaced
    by a newer one (whose code it never showed). Only the last ``keep`` are
    remembered.
    """

    #: The ways a window ends (``pairing``: its code is being used, the device not yet
    #: saved; then ``paired`` or ``failed``).
    FATES = ("pairing", "paired", "expired", "closed", "replaced", "failed")

    def __init__(self, keep: int = 16) -> None:
        self._keep = keep
        self._last = 0
        self._fates: dict[int, tuple[str, str | None]] = {}

    def opened(self) -> int:
        """The number of a newly opened window."""
        self._last += 1
        return self._last

    def ended(self, number: int, fate: str, device: str | None = None) -> None:
        """Window ``number`` ended as ``fate`` (``device``: the name that paired)."""
        assert fate in self.FATES, fate
        self._fates[number] = (fate, device)
        while len(self._fates) > self._keep:
            del self._fates[min(self._fates)]

    def fate(self, number: int) -> tuple[str, str | None] | None:
        """How window ``number`` ended, or ``None`` (still open, or long forgotten)."""
        return self._fates.get(number)
