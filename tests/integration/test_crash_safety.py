"""The device store through crashes and broken disks: nothing paired is ever lost.

* SIGKILL at random moments while phones pair (``tests/crash_campaign.py``): the
  store always loads, and every phone that got ``paired`` is in it.
* ``revoke --all`` on a read-only state directory says so in words and revokes
  nothing.
* A full disk and a read-only state directory, made real in a mount namespace
  of the host's own (``tests/fakes/disk_jail.py``: a tmpfs the kernel fills,
  a read-only bind mount): the host stays up, the pairing is refused with a
  ``failure`` the phone shows and the reason in the host's log, logins go on,
  ``devices.json`` is byte for byte what it was, and pairing works again once
  the disk is.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from mirror_host import control as c
from mirror_host.auth.devices import DeviceRegistry
from mirror_host.client.client import PairingRefused, login, pair_device
from mirror_host.host.store import DeviceStore
from mirror_host.session.login import PAIRING_NOT_SAVED
from tests.crash_campaign import kill_during_pairings

pytestmark = pytest.mark.timeout(240)

#: Kills in the suite; `python -m benchmarks.pairing_kills --kills 100` runs more.
KILLS = 20
#: The jail's disk: room for the store, the lock, serve.json and a few devices.
DISK_KIB = 256


@pytest.mark.slow
async def test_sigkill_during_pairings_loses_nothing(state_dir: Path) -> None:
    tally = await kill_during_pairings(state_dir, KILLS, seed=20261201)
    assert (tally.corrupt, tally.lost) == (0, 0), tally.problems
    assert tally.kills == KILLS
    # The kills landed while phones paired, and enough pairings completed to mean
    # anything (orphans, a device saved whose `paired` never left, are allowed).
    assert tally.interrupted >= KILLS // 2, tally
    assert tally.received >= 10, tally


# ---------------------------------------------------------------- broken disks


def _jail_works() -> str | None:
    """Why the jail cannot run here, or ``None``."""
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return "needs unshare and mount (util-linux)"
    probe = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
         "mount -t tmpfs -o size=64k tmpfs /mnt && umount /mnt"],
        capture_output=True,
        check=False,
    )  # fmt: skip
    if probe.returncode != 0:
        return "user and mount namespaces are not available: " + probe.stderr.decode()[-200:]
    return None


class Jail:
    """A host in its own mount namespace whose state directory is a small disk."""

    def __init__(self, process: trio.Process, log: Path) -> None:
        self.process = process
        self.log = log
        self.port = 0
        self._buffer = b""

    async def _line(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        while b"\n" not in self._buffer:
            data = await self.process.stdout.receive_some(65536)
            if not data:
                raise AssertionError(f"the jail ended: {self.log.read_text()[-2000:]}")
            self._buffer += data
        line, self._buffer = self._buffer.split(b"\n", 1)
        reply: dict[str, Any] = json.loads(line)
        assert "error" not in reply, reply
        return reply

    async def ask(self, command: str) -> dict[str, Any]:
        assert self.process.stdin is not None
        await self.process.stdin.send_all(command.encode() + b"\n")
        with trio.fail_after(30):
            return await self._line()

    async def store_bytes(self) -> bytes:
        return base64.b64decode((await self.ask("read devices.json"))["data"])

    async def start(self) -> None:
        with trio.fail_after(40):
            self.port = int((await self._line())["port"])


async def run_jailed(state_dir: Path, log: Path) -> Jail:
    command = [
        "unshare", "--user", "--map-root-user", "--mount",
        sys.executable, "-m", "tests.fakes.disk_jail", str(state_dir), str(DISK_KIB), "--",
        sys.executable, "-m", "mirror_host", "serve", "--listen", "127.0.0.1:0",
        "--state-dir", str(state_dir), "--local-command", "cat", "--log-level", "info",
    ]  # fmt: skip
    with log.open("wb") as sink:
        process = await trio.lowlevel.open_process(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=sink,
            cwd=Path(__file__).resolve().parents[2],
        )
    jail = Jail(process, log)
    try:
        await jail.start()
    except BaseException:
        process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()
        raise
    return jail


@pytest.mark.parametrize(
    ("fault", "undo", "logged"),
    [
        ("fill", "unfill", "No space left on device"),
        ("ro", "rw", "Read-only file system"),
    ],
    ids=["full-disk", "read-only"],
)
@pytest.mark.slow
async def test_a_broken_disk_refuses_pairing_with_a_reason_and_serves_logins(
    state_dir: Path, tmp_path: Path, fault: str, undo: str, logged: str
) -> None:
    reason = _jail_works()
    if reason is not None:
        pytest.skip(reason)
    jail = await run_jailed(state_dir, tmp_path / "host.log")
    try:
        first = await pair_device("127.0.0.1", jail.port, (await jail.ask("pair"))["code"], "A")
        before = await jail.store_bytes()
        code = (await jail.ask("pair"))["code"]
        await jail.ask(fault)
        with pytest.raises(PairingRefused) as refused:
            await pair_device("127.0.0.1", jail.port, code, "B")
        assert refused.value.reason == PAIRING_NOT_SAVED  # the `failure` the phone shows
        for _ in range(3):  # logins go on (their lastSeen cannot be saved: logged)
            async with login("127.0.0.1", jail.port, first) as phone:
                await phone.send(c.ListPanes())
                assert isinstance(await phone.expect(c.Panes), c.Panes)
        await jail.ask(undo)
        assert await jail.store_bytes() == before  # untouched by the refused pairing
        # The refused pairings counted nothing toward this address's lock-out, and
        # the disk back in order, pairing works again.
        code = (await jail.ask("pair"))["code"]
        again = await pair_device("127.0.0.1", jail.port, code, "C")
        async with login("127.0.0.1", jail.port, again) as phone:
            await phone.send(c.ListPanes())
            assert isinstance(await phone.expect(c.Panes), c.Panes)
        assert (await jail.ask("stop"))["returncode"] == 0
    finally:
        if jail.process.returncode is None:
            jail.process.kill()
        with trio.CancelScope(shield=True):
            await jail.process.wait()
    log = jail.log.read_text()
    assert "pairing failed" in log and logged in log, log[-3000:]
    assert "Traceback" not in log, log[-3000:]


# ---------------------------------------------------------------- revoke on a read-only directory


@pytest.mark.parametrize(
    ("names", "said"),
    [
        (lambda name: True, "lock: cannot open the state directory lock (Read-only file system)"),
        (
            lambda name: name.endswith(".tmp"),
            "devices.json: cannot write the device store (Read-only file system)",
        ),
    ],
    ids=["lock", "store"],
)
def test_revoke_all_on_a_read_only_state_dir_says_so_in_words(
    state_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    names: Callable[[str], bool],
    said: str,
) -> None:
    """Not a raw ``[Errno 30]`` (issue 28 item 18); and nothing is revoked."""
    from mirror_host.cli import main
    from tests.fakes.disk_faults import read_only_under

    store = DeviceStore(state_dir)
    registry = store.load_or_create()
    before = (state_dir / "devices.json").read_bytes()
    assert isinstance(registry, DeviceRegistry)
    monkeypatch.setattr(os, "open", read_only_under(str(state_dir), names=names))
    assert main(["revoke", "--all", "--state-dir", str(state_dir)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == f"mirror-host revoke: {state_dir}/{said}; nothing was revoked", err
    assert "Errno" not in "\n".join(err)
    assert (state_dir / "devices.json").read_bytes() == before
