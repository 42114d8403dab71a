"""The pairing windows' bookkeeping (pure): one open at a time, each ends one way."""

from __future__ import annotations

from itertools import count

from mirror_host.auth.window import PairingWindows

_COUNTER = count()


def _bytes(size: int) -> bytes:
    return bytes([next(_COUNTER) % 256]) * size


def _open(windows: PairingWindows, now: float = 0.0) -> int:
    return windows.open(now=now, now_unix=1_800_000_000.0, token_bytes=_bytes)[1]


def test_a_newer_window_replaces_the_open_one() -> None:
    windows = PairingWindows(seconds=60)
    first = _open(windows)
    second = _open(windows)
    assert (first, second) == (1, 2)
    assert windows.state_of(first, 1.0) == {"state": "replaced"}
    assert windows.state_of(second, 1.0) == {"state": "open", "secondsLeft": 59}
    assert windows.summary(1.0) == {
        "open": True,
        "secondsLeft": 59,
        "window": 2,
        "lastPaired": None,
    }


def test_a_taken_window_is_pairing_until_settled() -> None:
    windows = PairingWindows()
    number = _open(windows)
    assert windows.take() == number
    assert windows.window is None
    assert windows.state_of(number, 1.0) == {"state": "pairing"}
    windows.settle(number, "Phone")
    assert windows.state_of(number, 1.0) == {"state": "paired", "device": "Phone"}
    assert windows.summary(1.0) == {"open": False, "lastPaired": "Phone"}
    again = _open(windows)
    windows.take()
    windows.settle(again, None)
    assert windows.state_of(again, 1.0) == {"state": "failed"}


def test_closing_names_the_window_or_any() -> None:
    windows = PairingWindows()
    number = _open(windows)
    assert windows.close(number + 1) is False
    assert windows.close(number) is True
    assert windows.close() is False
    assert windows.state_of(number, 1.0) == {"state": "closed"}


def test_a_window_expires_at_its_deadline_not_before() -> None:
    windows = PairingWindows(seconds=60)
    number = _open(windows, now=100.0)
    assert windows.expire(159.9) is False
    assert windows.state_of(number, 160.0) == {"state": "expired"}  # due, not yet expired
    assert windows.expire(160.0) is True
    assert windows.window is None
    assert windows.state_of(number, 161.0) == {"state": "expired"}
    assert windows.state_of(99, 161.0) == {"state": "unknown"}


def test_a_ticket_names_where_a_client_on_this_machine_attaches() -> None:
    from mirror_host.auth.window import PairingWindow
    from mirror_host.host.pairing_ticket import pairing_ticket

    window = PairingWindow(code="ABCD2345", deadline=60.0, opened_at_unix=1_800_000_000.0)

    def ticket(listen: str, port: int | None = 7884) -> tuple[str | None, bool]:
        made = pairing_ticket(window, 1, seconds=60, listen_host=listen, advertise=None, port=port)
        return made.local_endpoint, made.loopback

    assert ticket("127.0.0.1") == ("127.0.0.1:7884", True)
    assert ticket("0.0.0.0") == ("127.0.0.1:7884", False)
    assert ticket("::") == ("[::1]:7884", False)
    assert ticket("::1") == ("[::1]:7884", True)
    assert ticket("192.0.2.10") == ("192.0.2.10:7884", False)
    assert ticket("0.0.0.0", port=None) == (None, False)  # not bound yet
