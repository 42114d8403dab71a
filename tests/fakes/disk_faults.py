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

__all__ = ["failing_directory_fsync", "read_only_under"]


def failing_directory_fsync(code: int) -> Callable[[int], None]:
    """``os.fsync`` as a disk that syncs files but fails ``code`` on a directory."""
    real = os.fsync

    def fsync(fd: int) -> None:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(code, os.strerror(code))
        real(fd)

    return fsync


def read_only_under(
    directory: str, *, names: Callable[[str], bool] = lambda name: True
) -> Callable[..., int]:
    """``os.open`` as a read-only file system at ``directory`` (``EROFS`` for any
    opening that could write), for the files whose names ``names`` picks: a test
    running as root cannot make a real directory unwritable with ``chmod``."""
    import errno

    real = os.open
    writing = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

    def open_(path: str | os.PathLike[str], flags: int, *args: object, **kwargs: object) -> int:
        text = os.fspath(path)
        if (
            flags & writing
            and os.path.dirname(os.path.abspath(text)) == directory
            and names(os.path.basename(text))
        ):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), text)
        return real(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    return open_
