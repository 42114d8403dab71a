"""Which address the QR payload names, and when it cannot reach the host."""

from __future__ import annotations

from mirror_host.host.addresses import advertised_address, unreachable_advertisement


def lan() -> tuple[str | None, str]:
    return "192.168.1.20", ""


def test_an_explicit_advertise_address_wins() -> None:
    assert advertised_address("0.0.0.0", "203.0.113.9", lan) == ("203.0.113.9", "")
    assert advertised_address("127.0.0.1", "203.0.113.9", lan) == ("203.0.113.9", "")


def test_a_wildcard_listener_asks_the_interfaces() -> None:
    assert advertised_address("0.0.0.0", None, lan) == ("192.168.1.20", "")


def test_an_ipv6_wildcard_is_ipv6_only_so_no_ipv4_is_guessed() -> None:
    address, reason = advertised_address("::", None, lan)
    assert address is None and "IPv6 only" in reason
    assert unreachable_advertisement("::", "192.168.1.20") is not None
    assert unreachable_advertisement("::", "2001:db8::5") is None


def test_a_listener_on_one_address_advertises_that_address() -> None:
    assert advertised_address("10.0.0.5", None, lan) == ("10.0.0.5", "")


def test_a_loopback_listener_has_nothing_to_advertise_and_says_why() -> None:
    address, reason = advertised_address("127.0.0.1", None, lan)
    assert address is None
    assert "listens on 127.0.0.1 only" in reason and "--listen" in reason
    assert advertised_address("::1", None, lan)[0] is None


def test_a_warning_when_the_advertised_address_is_not_listened_on() -> None:
    warning = unreachable_advertisement("127.0.0.1", "192.0.2.10")
    assert warning is not None and "192.0.2.10" in warning and "127.0.0.1" in warning
    assert unreachable_advertisement("0.0.0.0", "192.0.2.10") is None
    assert unreachable_advertisement("192.0.2.10", "192.0.2.10") is None
    assert unreachable_advertisement("127.0.0.1", None) is None
