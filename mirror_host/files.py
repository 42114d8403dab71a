"""Writing a file so that a crash leaves the old one or the new one. I/O (files).

The one atomic writer, for every file the program keeps: the device store
(:mod:`mirror_host.host.store`), ``serve.json``, ``attach``'s credentials and
the service files ``service install`` writes. The
data goes to a temporary file beside the target, is fsynced, renamed over the
target, and the directory is fsynced, so the rename itself survives a crash.

This blocks (two fsyncs): code on the event loop calls it in a worker thread.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

__all__ = ["write_atomic"]


def write_atomic(path: Path, data: bytes, *, mode: int = 0o600) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new file.

    ``mode`` is the new file's (less the umask).

    Raises:
        OSError: the write failed; the old file is untouched.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
