"""Talk to a running host's admin socket from the command line. Blocking I/O."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

from mirror_host.errors import NoHostRunning

__all__ = ["ADMIN_SOCKET", "STATUS_FILE", "NoHostRunning", "admin_request"]

#: The state directory's files while a host runs (named here, the light module
#: the command line and the benchmarks import without starting Trio).
ADMIN_SOCKET = "admin.sock"
STATUS_FILE = "serve.json"


def admin_request(
    state_dir: Path,
    request: dict[str, Any],
    *,
    timeout: float = 10.0,
    wait_for_host: float = 0.0,
) -> dict[str, Any]:
    """Send one request and return the reply.

    ``wait_for_host``: seconds to wait for the socket to appear, for a host that
    is still starting (``serve &`` followed at once by ``pair``).

    Raises:
        NoHostRunning: no socket, nobody listening on it, or no answer within
            ``timeout`` seconds (the message says which).
    """
    path = state_dir / ADMIN_SOCKET
    deadline = time.monotonic() + wait_for_host
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    if not path.exists():
        waited = f" after waiting {wait_for_host:g} s" if wait_for_host else ""
        raise NoHostRunning(
            f"no mirror-host is running for state directory {state_dir} "
            f"(no {path.name}{waited}); start one with `mirror-host serve`"
        )
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(str(path))
        except (TimeoutError, BlockingIOError) as exc:
            # Its queue of connections is full (with a timeout set, a Unix socket
            # says so at once): it is there, and takes nothing.
            raise NoHostRunning(_silent(state_dir, timeout)) from exc
        except OSError as exc:
            if _removed_soon(path):
                raise NoHostRunning(_stopped(state_dir)) from exc
            raise NoHostRunning(
                f"no mirror-host answers on {path} ({exc.strerror}); "
                "it may have crashed: start one with `mirror-host serve`"
            ) from exc
        try:
            sock.sendall(json.dumps(request).encode() + b"\n")
            buffer = b""
            while b"\n" not in buffer:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                buffer += chunk
        except ConnectionError:  # reset or a closed pipe: the host is closing
            buffer = b""
        except TimeoutError as exc:  # it took the request and never answered
            raise NoHostRunning(_silent(state_dir, timeout)) from exc
        if b"\n" not in buffer:
            if _removed_soon(path):
                raise NoHostRunning(_stopped(state_dir))
            raise NoHostRunning(f"the host closed {path} without answering")
    reply: dict[str, Any] = json.loads(buffer.split(b"\n", 1)[0])
    return reply


#: How long a socket that refuses a connection is watched for its removal: a host
#: that stops removes ``admin.sock`` within milliseconds of closing it.
_STOPPING_SECONDS = 1.0


def _removed_soon(path: Path) -> bool:
    """Whether ``path`` is gone, or goes within :data:`_STOPPING_SECONDS`: the host
    stopped as it does, rather than crashing and leaving its socket behind."""
    deadline = time.monotonic() + _STOPPING_SECONDS
    while path.exists():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def _stopped(state_dir: Path) -> str:
    return (
        f"the mirror-host of state directory {state_dir} has stopped; "
        "start one with `mirror-host serve`"
    )


def _silent(state_dir: Path, timeout: float) -> str:
    return (
        f"the mirror-host of state directory {state_dir} did not answer on its admin "
        f"socket within {timeout:g} s (it may be stuck: try again, or restart it)"
    )
