"""The address to advertise in the QR payload, read from the interfaces. I/O.

We never send a packet to find out (no "connect a UDP socket to 8.8.8.8"
trick): ``getifaddrs(3)`` lists the configured addresses, and the first IPv4
address of an interface that is up, not loopback and not link-local wins.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import ipaddress
import socket
import sys
from collections.abc import Callable

__all__ = ["advertised_address", "first_lan_ipv4", "unreachable_advertisement"]

_IFF_UP = 0x1
_IFF_LOOPBACK = 0x8


class _IfAddrs(ctypes.Structure):
    pass


_IfAddrs._fields_ = [
    ("ifa_next", ctypes.POINTER(_IfAddrs)),
    ("ifa_name", ctypes.c_char_p),
    ("ifa_flags", ctypes.c_uint),
    ("ifa_addr", ctypes.c_void_p),
    ("ifa_netmask", ctypes.c_void_p),
    ("ifa_ifu", ctypes.c_void_p),
    ("ifa_data", ctypes.c_void_p),
]


def _family_and_ipv4(addr: int) -> tuple[int, bytes]:
    raw = ctypes.string_at(addr, 8)
    # BSD sockaddrs start with a length byte, then the family byte.
    family = raw[1] if sys.platform == "darwin" else int.from_bytes(raw[0:2], sys.byteorder)
    return family, raw[4:8]


def first_lan_ipv4() -> tuple[str | None, str]:
    """``(address, "")`` or ``(None, reason)`` when no usable address exists."""
    libc_name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(libc_name, use_errno=True)
    except OSError as exc:
        return None, f"cannot read network interfaces ({exc})"
    head = ctypes.POINTER(_IfAddrs)()
    if libc.getifaddrs(ctypes.byref(head)) != 0:
        return None, f"cannot read network interfaces (errno {ctypes.get_errno()})"
    try:
        node = head
        while bool(node):  # a NULL pointer is falsy
            entry = node.contents
            node = entry.ifa_next
            if not entry.ifa_addr or not entry.ifa_flags & _IFF_UP:
                continue
            if entry.ifa_flags & _IFF_LOOPBACK:
                continue
            family, packed = _family_and_ipv4(entry.ifa_addr)
            if family != socket.AF_INET:
                continue
            address = ipaddress.IPv4Address(packed)
            if address.is_loopback or address.is_link_local or address.is_unspecified:
                continue
            return str(address), ""
    finally:
        libc.freeifaddrs(head)
    return None, (
        "no network interface has a non-loopback IPv4 address; "
        "pass --advertise-address with the address phones should connect to"
    )


def advertised_address(
    listen_host: str,
    advertise: str | None,
    discover: Callable[[], tuple[str | None, str]] = first_lan_ipv4,
) -> tuple[str | None, str]:
    """The address phones are told to dial, or ``(None, reason)``.

    ``--advertise-address`` wins. Otherwise a listener bound to one address is
    reachable only there, so that address is the answer (none at all when it is
    loopback); only a wildcard listener asks the interfaces.
    """
    if advertise is not None:
        return advertise, ""
    try:
        listening = ipaddress.ip_address(listen_host)
    except ValueError:
        return discover()
    if listening.is_unspecified and listening.version == 6:
        # Trio binds "::" IPv6-only, and interfaces are searched for IPv4 alone.
        return None, (
            f"the host listens on IPv6 only ({listen_host}); pass --advertise-address "
            "with this machine's IPv6 address, or listen on 0.0.0.0"
        )
    if listening.is_unspecified:
        return discover()
    if listening.is_loopback:
        return None, (
            f"the host listens on {listen_host} only (loopback), which phones cannot reach; "
            "listen on 0.0.0.0 or a LAN address with --listen"
        )
    return listen_host, ""


def unreachable_advertisement(listen_host: str, advertise: str | None) -> str | None:
    """A warning when ``advertise`` names an address the listener does not cover."""
    if advertise is None:
        return None
    try:
        listening = ipaddress.ip_address(listen_host)
    except ValueError:
        return None
    try:
        advertised = ipaddress.ip_address(advertise)
    except ValueError:
        return None  # the payload check reports a malformed address
    if listen_host == advertise or (
        listening.is_unspecified and listening.version == advertised.version
    ):
        return None
    return (
        f"the QR code sends phones to {advertise}, but the host listens on "
        f"{listen_host} only: they will not reach it"
    )
