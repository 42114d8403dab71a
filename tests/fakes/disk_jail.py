"""A host whose state directory is a small disk of its own, which a test can fill
or make read-only while the host runs.

Run as::

    unshare --user --map-root-user --mount \\
        python -m tests.fakes.disk_jail STATE_DIR KIB -- HOST ARGV...

In its own mount namespace (nothing outside sees it, and it goes away with the
process) the jail mounts a ``KIB`` KiB tmpfs over ``STATE_DIR``, starts the
host, and says ``{"port": N}`` on standard output once the host listens. Then
it takes one command per line on standard input and answers each with one JSON
line:

* ``fill``: write a file until the disk is full (``ENOSPC``); ``{"free": bytes}``
* ``unfill``: delete that file
* ``ro`` / ``rw``: make the directory read-only (``EROFS``) / writable again
* ``pair``: open a pairing window over the admin socket (the socket lives on the
  jail's disk, out of the test's sight); the admin reply
* ``read NAME``: a file of the state directory, base64 (``{"data": ...}``)
* ``stop``: SIGTERM the host and wait for it; ``{"returncode": N}``

A real kernel refuses the writes: ``ENOSPC`` from tmpfs, ``EROFS`` from a
read-only mount, exactly what a full disk or a read-only file system gives the
host. The host's standard output and error go to the jail's standard error.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from mirror_host.host.admin_client import STATUS_FILE, admin_request

FILLER = ".filler"
START_SECONDS = 30.0


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True)


def _bound(state_dir: Path) -> bool:
    """Whether the read-only bind is already over ``state_dir``."""
    target = f" {state_dir} "
    return sum(target in line for line in Path("/proc/self/mounts").read_text().splitlines()) > 1


def _fill(state_dir: Path) -> int:
    chunk = b"\0" * 65536
    fd = os.open(state_dir / FILLER, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for size in (65536, 4096, 1):  # down to the last byte the disk will take
            while True:
                try:
                    os.write(fd, chunk[:size])
                except OSError:
                    break
    finally:
        os.close(fd)
    stats = os.statvfs(state_dir)
    return stats.f_bavail * stats.f_frsize


def _answer(state_dir: Path, host: subprocess.Popen[bytes], words: list[str]) -> dict[str, Any]:
    match words:
        case ["fill"]:
            return {"free": _fill(state_dir)}
        case ["unfill"]:
            (state_dir / FILLER).unlink(missing_ok=True)
            return {"ok": True}
        case ["ro" | "rw" as mode]:
            # A read-only bind of the directory over itself: the disk itself cannot
            # be remounted read-only while the host holds files open for writing
            # (its `lock`), but a new mount on top has no writers, and every path
            # the host opens from now on goes through it.
            if mode == "ro" and not _bound(state_dir):
                _mount("--bind", str(state_dir), str(state_dir))
            _mount("-o", f"remount,bind,{mode}", str(state_dir))
            return {"ok": True}
        case ["pair"]:
            reply: dict[str, Any] = admin_request(state_dir, {"op": "pair"})
            return reply
        case ["read", name]:
            return {"data": base64.b64encode((state_dir / name).read_bytes()).decode()}
        case ["stop"]:
            host.terminate()
            return {"returncode": host.wait(timeout=20)}
    return {"error": f"unknown command {words!r}"}


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: disk_jail STATE_DIR KIB -- HOST ARGV...", file=sys.stderr)
        return 2
    state_dir, kib, command = Path(argv[0]), int(argv[1]), argv[3:]
    _mount("-t", "tmpfs", "-o", f"size={kib}k,mode=0700", "tmpfs", str(state_dir))
    host = subprocess.Popen(command, stdout=sys.stderr)
    try:
        deadline = time.monotonic() + START_SECONDS
        while not (state_dir / STATUS_FILE).exists():
            if host.poll() is not None or time.monotonic() > deadline:
                print(json.dumps({"error": "the host did not start"}), flush=True)
                return 1
            time.sleep(0.02)
        listen = json.loads((state_dir / STATUS_FILE).read_text())["listen"]
        print(json.dumps({"port": int(listen.rsplit(":", 1)[1])}), flush=True)
        for line in sys.stdin:
            words = line.split()
            try:
                reply = _answer(state_dir, host, words)
            except Exception as exc:  # the test reads the failure and fails itself
                reply = {"error": f"{type(exc).__name__}: {exc}"}
            print(json.dumps(reply), flush=True)
            if words == ["stop"]:
                break
        return 0
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
