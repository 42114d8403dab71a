"""Per-address failure accounting for the pre-TLS lockout (docs/security.md). Pure.

An address with 12 recorded failures within the last 60 s is refused before TLS.
At most 256 addresses are tracked; when a new one arrives the one whose latest
failure is oldest is forgotten. Each address keeps at most 12 timestamps, so the
whole table is bounded whatever a peer does.
"""

from __future__ import annotations

from collections import OrderedDict, deque

__all__ = ["FailureLog"]


class FailureLog:
    """Failure timestamps by source address, bounded in both directions."""

    def __init__(
        self, *, limit: int = 12, window_seconds: float = 60.0, max_addresses: int = 256
    ) -> None:
        self._limit = limit
        self._window = window_seconds
        self._max_addresses = max_addresses
        # Least recently failed first, so eviction pops from the front.
        self._by_address: OrderedDict[str, deque[float]] = OrderedDict()

    def record(self, address: str, now: float) -> None:
        """Count one failure for ``address`` at ``now``."""
        times = self._by_address.pop(address, None)
        if times is None:
            times = deque(maxlen=self._limit)
            while len(self._by_address) >= self._max_addresses:
                self._by_address.popitem(last=False)
        times.append(now)
        self._by_address[address] = times

    def is_locked(self, address: str, now: float) -> bool:
        """True when ``address`` failed ``limit`` times within the window before ``now``."""
        times = self._by_address.get(address)
        if times is None:
            return False
        recent = sum(1 for t in times if now - t < self._window)
        return recent >= self._limit

    def clear(self) -> None:
        """Forget everything (host stop)."""
        self._by_address.clear()

    def __len__(self) -> int:
        return len(self._by_address)
