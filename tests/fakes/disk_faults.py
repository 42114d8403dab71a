"""A disk that syncs files but fails to sync a directory.

A test cannot make a real directory ``fsync`` fail, so
:func:`failing_directory_fsync` stands in for ``os.fsync``: files are synced
for real, a directory descriptor fails with the given ``errno``, as a full or
broken disk (``EIO``) or a file system without directory fsync (``EINVAL``).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable

__all__ = ["failing_directory_fsync"]


def failing_directory_fsync(code: int) -> Callable[[int], None]:
    """``os.fsync`` as a disk that syncs files but fails ``code`` on a directory."""
    real = os.fsync

    def fsync(fd: int) -> None:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(code, os.strerror(code))
        real(fd)

    return fsync
