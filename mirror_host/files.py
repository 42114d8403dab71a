"""Writing a file so that a crash leaves the old one or the new one. I/O (files).

The one atomic writer, for every file the program keeps: the device store
(:mod:`mirror_host.host.store`), ``serve.json``, ``attach``'s credentials and
the service files ``service install`` writes; and, without the fsyncs
(``durable=False``), the request files a phone's command line reaches a shell
through (:mod:`mirror_host.shell.directory`), which must never be read half
written but need not outlive a crash. The
data goes to a temporary file beside the target, is fsynced, renamed over the
target, and the directory is fsynced, so the rename itself survives a crash.

Once the rename has happened the new file is in place, and it stays the
answer: a directory fsync that fails afterwards cannot take the rename back,
so it is not reported as a failed write (the caller would believe the old
file is still there and act on a state the disk no longer has). It is logged
as a warning instead (the new file may not survive a power cut; a crash of
the program alone loses nothing). A file system that cannot fsync a directory
at all (``EINVAL``, ``ENOTSUP``) is the same outcome on every write and is
logged at debug level only.

This blocks (two fsyncs): code on the event loop calls it in a worker thread
(unless ``durable=False``: then it does no more than create, write and rename).
"""

from __future__ import annotations

import errno
import logging
import os
import uuid
from pathlib import Path

__all__ = ["write_atomic"]

logger = logging.getLogger(__name__)

#: A directory fsync failing with these means the file system does not do it.
_NO_DIRECTORY_FSYNC = frozenset({errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP})


def write_atomic(path: Path, data: bytes, *, mode: int = 0o600, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new file.

    ``mode`` is the new file's (less the umask). Returning means the new file
    is in place; whether its rename is durable too is only logged (see above).
    Without ``durable`` nothing is fsynced: readers never see a partial file,
    but a power cut may lose it.

    Raises:
        OSError: the write failed before the rename; the old file is untouched.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            if durable:
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
    if not durable:
        return
    try:
        _fsync_directory(path.parent)
    except OSError as exc:
        if exc.errno in _NO_DIRECTORY_FSYNC:
            logger.debug("%s: the file system cannot fsync a directory (%s)", path.parent, exc)
        else:
            logger.warning(
                "%s was written, but its directory could not be synced (%s): "
                "the change may not survive a power cut",
                path,
                exc,
            )


def _fsync_directory(directory: Path) -> None:
    """Make the renames in ``directory`` durable."""
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
