"""The pairing window: one single-use code for 60 seconds (docs/protocol.md §8). Pure.

:class:`PairingWindow` is one window as a value; :class:`PairingWindows` keeps the
one open now, numbers them, and remembers how the recent ones ended
(:class:`WindowFates`), so ``mirror-host pair`` can ask what became of *its*
window. The host's device book drives it under its lock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mirror_host.auth.pairing import generate_code

__all__ = ["WINDOW_SECONDS", "PairingWindow", "PairingWindows", "WindowFates", "open_window"]

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


class PairingWindows:
    """The pairing window open now (at most one), its number, and the recent ones' fates.

    A window ends in exactly one way: ``replaced`` by a newer one, ``closed``
    (``pair --close``, ``revoke --all``), ``expired``, or taken by a pairing
    (``pairing`` while the device is saved, then ``paired`` or ``failed``).
    Time comes in as monotonic ``now``.
    """

    def __init__(self, *, seconds: float = WINDOW_SECONDS, keep: int = 16) -> None:
        #: How long a window stays open (Prowl's is 60 s; tests shorten it).
        self.seconds = seconds
        #: The name of the device paired last, for ``status``.
        self.last_paired: str | None = None
        self._fates = WindowFates(keep)
        self._window: PairingWindow | None = None
        self._number: int | None = None

    @property
    def window(self) -> PairingWindow | None:
        """The window opened last, until it is replaced, closed, taken or expired
        (between its deadline and :meth:`expire` it is still here, but not open)."""
        return self._window

    def open(
        self, *, now: float, now_unix: float, token_bytes: Callable[[int], bytes]
    ) -> tuple[PairingWindow, int]:
        """A new window with a new code, replacing any open one; and its number."""
        window = open_window(
            now=now, now_unix=now_unix, token_bytes=token_bytes, seconds=self.seconds
        )
        self._end("replaced")
        self._window, self._number = window, self._fates.opened()
        return window, self._number

    def close(self, number: int | None = None) -> bool:
        """Close the window (only if it is ``number``, when given); whether one closed."""
        if self._window is None or (number is not None and number != self._number):
            return False
        self._end("closed")
        return True

    def expire(self, now: float) -> bool:
        """Close the window if its time is up at ``now``; whether it did."""
        if self._window is None or self._window.is_open(now):
            return False
        self._end("expired")
        return True

    def take(self) -> int:
        """A pairing uses the open window's code: the window closes at once (single use)
        and stays ``pairing`` until :meth:`settle`. Returns its number."""
        number = self._number
        assert self._window is not None and number is not None, "no window to take"
        self._end("pairing")
        return number

    def settle(self, number: int, device: str | None) -> None:
        """The pairing that took window ``number`` ended: ``device`` paired, or (``None``) not."""
        if device is None:
            self._fates.ended(number, "failed")
        else:
            self._fates.ended(number, "paired", device)
            self.last_paired = device

    def summary(self, now: float) -> dict[str, Any]:
        """Whether a window is open at ``now``, and for how long still (``status``)."""
        window = self._window
        if window is None or not window.is_open(now):
            return {"open": False, "lastPaired": self.last_paired}
        return {
            "open": True,
            "secondsLeft": max(0, int(window.deadline - now)),
            "window": self._number,
            "lastPaired": self.last_paired,
        }

    def state_of(self, number: int, now: float) -> dict[str, Any]:
        """What became of window ``number``: ``open`` (with ``secondsLeft``), or how it
        ended (``pairing`` while the device is saved, ``paired`` with the ``device``
        name, ``expired``, ``closed``, ``replaced``, ``failed``), or ``unknown``."""
        window = self._window
        if number == self._number and window is not None:
            if window.is_open(now):
                return {"state": "open", "secondsLeft": max(0, int(window.deadline - now))}
            return {"state": "expired"}
        fate = self._fates.fate(number)
        if fate is None:
            return {"state": "unknown"}
        state, device = fate
        return {"state": state, "device": device} if device else {"state": state}

    def _end(self, fate: str) -> None:
        if self._window is not None:
            assert self._number is not None
            self._fates.ended(self._number, fate)
            self._window = self._number = None
