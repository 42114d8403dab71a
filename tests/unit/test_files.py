"""The atomic writer: the old file or the new one, and a rename that happened is reported.

These write real files in a temporary directory; a failing directory ``fsync``
(which a test cannot provoke on a real disk) is injected in ``os.fsync`` for
directory descriptors only (:mod:`tests.fakes.disk_faults`), after the file's
own fsync and the rename.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from pathlib import Path

import pytest

from mirror_host.files import write_atomic
from tests.fakes.disk_faults import failing_directory_fsync

pytestmark = pytest.mark.timeout(10)


def test_the_new_file_replaces_the_old_one_privately(tmp_path: Path) -> None:
    target = tmp_path / "f.json"
    target.write_bytes(b"old")
    write_atomic(target, b"new")
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]


def test_a_failed_file_fsync_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "f.json"
    target.write_bytes(b"old")

    def fsync(fd: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OSError):
        write_atomic(target, b"new")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]


def test_a_failed_directory_fsync_after_the_rename_reports_the_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The rename has happened: raising now would tell the caller the old file
    # is still there when it is not.
    target = tmp_path / "f.json"
    target.write_bytes(b"old")
    monkeypatch.setattr(os, "fsync", failing_directory_fsync(errno.EIO))
    with caplog.at_level(logging.DEBUG, logger="mirror_host.files"):
        write_atomic(target, b"new")
    assert target.read_bytes() == b"new"
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert "could not be synced" in record.getMessage() and str(target) in record.getMessage()


@pytest.mark.parametrize("code", [errno.EINVAL, errno.ENOTSUP])
def test_a_file_system_that_cannot_fsync_a_directory_is_not_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, code: int
) -> None:
    target = tmp_path / "f.json"
    monkeypatch.setattr(os, "fsync", failing_directory_fsync(code))
    with caplog.at_level(logging.DEBUG, logger="mirror_host.files"):
        write_atomic(target, b"new")
    assert target.read_bytes() == b"new"
    assert [r.levelno for r in caplog.records] == [logging.DEBUG]
