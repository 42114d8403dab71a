"""One state directory, one owner: the lock a host holds for its lifetime.

Real hosts in this process (``run_host``), a real ``revoke`` (the command's own
``main``, in a worker thread), and a socket bound by the test where a host
that is still starting would have bound its own.
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest
import trio

from mirror_host.auth.devices import DeviceRegistry
from mirror_host.cli import main
from mirror_host.errors import MirrorHostError
from mirror_host.host import revocation
from mirror_host.host.admin import bind_admin_socket, serve_admin
from mirror_host.host.admin_client import admin_request
from mirror_host.host.service import run_host
from mirror_host.host.state_lock import StateDirBusy, StateLock
from mirror_host.host.store import DeviceStore, ensure_private_dir
from mirror_host.panes.local import LocalSource
from tests.integration.conftest import host_config, paired, running_host

pytestmark = pytest.mark.timeout(30)


async def second_host(state_dir: Path) -> None:
    """A second host on ``state_dir``: it must be refused, not start."""
    with trio.fail_after(10):  # a host that started would run until cancelled
        await run_host(host_config(state_dir), LocalSource(["cat"], columns=80, rows=24))


async def test_a_second_host_is_refused_and_leaves_the_first_ones_files(state_dir: Path) -> None:
    async with running_host(state_dir) as host:
        admin, status = state_dir / "admin.sock", state_dir / "serve.json"
        before = (admin.stat().st_ino, status.read_bytes())
        with pytest.raises(MirrorHostError) as refused:
            await second_host(state_dir)
        assert str(refused.value) == (
            f"another mirror-host is running with this state directory ({admin})"
        )
        assert (admin.stat().st_ino, status.read_bytes()) == before
        reply = await trio.to_thread.run_sync(admin_request, state_dir, {"op": "status"})
        assert reply["hostRunID"] == str(host.host_run_id).upper()


async def test_a_host_still_starting_keeps_its_socket(state_dir: Path) -> None:
    # The first host holds the directory and has bound admin.sock but does not
    # listen yet (or is stalled): nobody answers on it, and still it is not stale.
    ensure_private_dir(state_dir)
    with StateLock(state_dir), socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as bound:
        bound.bind(str(state_dir / "admin.sock"))
        inode = (state_dir / "admin.sock").stat().st_ino
        with pytest.raises(StateDirBusy):
            await second_host(state_dir)
        assert (state_dir / "admin.sock").stat().st_ino == inode
        assert not (state_dir / "devices.json").exists()  # refused before the store


@pytest.mark.slow
async def test_the_lock_is_let_go_when_the_host_stops(state_dir: Path) -> None:
    async with running_host(state_dir):
        pass
    with StateLock(state_dir):  # taken at once: nobody holds it any more
        pass
    async with running_host(state_dir):  # and the next host starts
        pass


def revoke(state_dir: Path, device: str) -> int:
    return main(["revoke", device, "--state-dir", str(state_dir)])


@pytest.mark.slow
async def test_an_offline_revoke_never_writes_under_a_host_that_does_not_answer(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The race: a host that has loaded the store but does not answer on
    # its admin socket yet. A revoke that rewrote the store then would be undone
    # by the host's next save (the lastSeen flush writes the device back).
    monkeypatch.setattr(revocation, "HOST_START_SECONDS", 0.5, raising=False)
    async with running_host(state_dir) as host:
        credential = await paired(host, "Phone")
        capsys.readouterr()
        (state_dir / "admin.sock").unlink()  # loaded, holding the directory, not answering
        assert await trio.to_thread.run_sync(revoke, state_dir, credential.identity) == 1
        captured = capsys.readouterr()
        assert captured.out == ""
        assert captured.err == (
            "mirror-host revoke: another mirror-host holds this state directory but did not "
            "answer on its admin socket within 0.5 s; nothing was revoked: try again\n"
        )
        assert [d.identity for d in host.book.registry.devices] == [credential.identity]
        assert DeviceStore(state_dir).load() == host.book.registry


async def test_an_offline_revoke_waits_for_a_starting_host_and_goes_through_it(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    waiting = threading.Event()
    lock_offline = getattr(revocation, "_lock_offline", lambda path: None)

    def spy(path: Path) -> object:
        try:
            return lock_offline(path)
        except StateDirBusy:
            waiting.set()
            raise

    monkeypatch.setattr(revocation, "_lock_offline", spy, raising=False)
    async with running_host(state_dir) as host:
        credential = await paired(host, "Phone")
        capsys.readouterr()
        admin = state_dir / "admin.sock"
        admin.unlink()  # the host is "starting": it holds the directory, nothing answers
        async with trio.open_nursery() as nursery:
            codes: list[int] = []

            async def run() -> None:
                codes.append(await trio.to_thread.run_sync(revoke, state_dir, credential.identity))

            nursery.start_soon(run)
            assert await trio.to_thread.run_sync(waiting.wait, 10)
            listener = await bind_admin_socket(admin)  # now it answers
            nursery.start_soon(serve_admin, host, listener)
            with trio.fail_after(10):
                while not codes:
                    await trio.sleep(0.05)
            nursery.cancel_scope.cancel()
        captured = capsys.readouterr()
        assert codes == [0], captured.err
        assert captured.out == f"revoked {credential.identity}\n"
        assert "using the device store directly" not in captured.err
        assert host.book.registry.devices == ()
        assert DeviceStore(state_dir).load() == host.book.registry


async def test_an_offline_revoke_with_no_host_holds_the_lock(
    state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with running_host(state_dir) as host:
        credential = await paired(host, "Phone")
    held: list[bool] = []
    save = DeviceStore.save_sync

    def save_and_look(store: DeviceStore, registry: DeviceRegistry) -> None:
        try:
            StateLock(store.state_dir).release()
            held.append(False)
        except StateDirBusy:
            held.append(True)
        save(store, registry)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(DeviceStore, "save_sync", save_and_look)
        assert await trio.to_thread.run_sync(revoke, state_dir, credential.identity) == 0
    assert held == [True]
    assert "using the device store directly" in capsys.readouterr().err
    stored = DeviceStore(state_dir).load()
    assert stored is not None and stored.devices == ()
