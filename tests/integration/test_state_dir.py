"""The state directory: created private, and an existing one never taken over."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from mirror_host.errors import StoreError
from mirror_host.host.store import DeviceStore, ensure_private_dir

pytestmark = pytest.mark.timeout(30)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_directory_is_created_private(tmp_path: Path) -> None:
    state = tmp_path / "a" / "b"
    DeviceStore(state).load_or_create()
    assert mode(state) == 0o700
    assert mode(state / "devices.json") == 0o600


def test_an_empty_directory_is_tightened(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    os.chmod(state, 0o755)
    ensure_private_dir(state)  # empty: nothing of the user's to expose or hide
    assert mode(state) == 0o700


def test_a_directory_others_can_write_is_refused_and_left_alone(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    (shared / "someone-elses-file").write_text("x")
    with pytest.raises(StoreError, match="other users can write to this directory"):
        DeviceStore(shared).load_or_create()
    assert mode(shared) == 0o1777
    assert not (shared / "devices.json").exists()


def test_a_private_directory_with_other_files_keeps_its_mode(tmp_path: Path) -> None:
    home_like = tmp_path / "home"
    home_like.mkdir()
    os.chmod(home_like, 0o755)
    (home_like / ".profile").write_text("x")
    for _ in range(2):  # the second run finds our devices.json: still not ours to lock
        DeviceStore(home_like).load_or_create()
        assert mode(home_like) == 0o755
    assert mode(home_like / "devices.json") == 0o600


def test_a_file_is_not_a_directory(tmp_path: Path) -> None:
    file = tmp_path / "file"
    file.write_text("x")
    with pytest.raises(StoreError, match="is not a directory"):
        ensure_private_dir(file)


@pytest.mark.skipif(os.getuid() != 0, reason="only root can hand a directory to another user")
def test_another_users_directory_is_refused(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 65534, 65534)
    with pytest.raises(StoreError, match="belongs to another user"):
        ensure_private_dir(theirs)
