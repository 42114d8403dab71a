"""``socat - UNIX-CONNECT:PATH`` in a few lines: standard input and output to a Unix socket.

Stands in for ``npiperelay.exe -ep -s //./pipe/agliteterm`` in tests of
``--agliteterm-command``: one process, one connection, exiting when either
side closes. Standard library only.

    python3 tests/fakes/unix_relay.py PATH
"""

from __future__ import annotations

import os
import socket
import sys
import threading


def _pump_out(sock: socket.socket) -> None:
    try:
        while chunk := sock.recv(65536):
            os.write(1, chunk)
    except OSError:
        pass
    finally:
        os._exit(0)  # the far side closed: so does the relay


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: unix_relay.py PATH", file=sys.stderr)
        return 2
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(sys.argv[1])
    except OSError as exc:
        print(f"unix_relay: cannot connect to {sys.argv[1]}: {exc.strerror}", file=sys.stderr)
        return 1
    threading.Thread(target=_pump_out, args=(sock,), daemon=True).start()
    try:
        while chunk := os.read(0, 65536):
            sock.sendall(chunk)
    except OSError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
