#!/usr/bin/env python3
"""TLS-PSK handshakes per second in one process, over memory BIOs: the cost of a PSK route.

Usage: python -m benchmarks.psk_handshakes [--seconds 5]

A server context from ``mirror_host.host.tls`` and a client context from
``mirror_host.tls.psk`` (so whichever PSK route this Python uses: the
standard library on 3.13+, ctypes on 3.11/3.12) complete full TLS 1.2
ECDHE-PSK-CHACHA20-POLY1305 handshakes back to back, with no sockets and no
event loop. Both ends run in this process on one core, so the figure is the
handshake cost of client plus server. Besides the rate it prints the CPU
time per handshake (``time.process_time``), which other load on the machine
does not inflate the way it does wall time. ``benchmarks.handshake_rate``
measures the whole login over loopback instead.
"""

from __future__ import annotations

import argparse
import os
import secrets
import ssl
import sys
import time
from types import MappingProxyType

from mirror_host.host.tls import PskTable, build_server_context
from mirror_host.tls.psk import CIPHER, client_context, memory_handshake, psk_backend


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=5)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {0})
    identity, key = "BENCH", secrets.token_bytes(32)
    server = build_server_context()
    server.set_table(PskTable(MappingProxyType({identity: key})))
    client = client_context(identity, key)
    count = 0
    cpu_started = time.process_time()
    started = time.perf_counter()
    deadline = started + args.seconds
    while time.perf_counter() < deadline:
        accepted, _ = memory_handshake(server.context, client)
        if (accepted.cipher() or ("",))[0] != CIPHER:
            raise SystemExit("a handshake negotiated another suite")
        count += 1
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    version = ".".join(map(str, sys.version_info[:3]))
    print(f"python {version} route {psk_backend()} {ssl.OPENSSL_VERSION}")
    print(f"handshakes/s: {count / elapsed:.0f} ({1e6 * elapsed / count:.0f} µs each)")
    print(f"CPU per handshake: {1e6 * cpu / count:.0f} µs (client and server)")


if __name__ == "__main__":
    main()
