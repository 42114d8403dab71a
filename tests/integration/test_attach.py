"""``mirror-host attach`` in a real terminal: tmux on a private socket runs it against
a host on loopback whose pane is a real shell in a PTY."""

from __future__ import annotations

import os
import secrets
import shutil
import stat
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from mirror_host.client.address import parse_address
from mirror_host.client.attach import (
    AttachError,
    AttachOptions,
    device_name,
    list_panes,
    obtain_credential,
)
from mirror_host.client.chooser import LOCKED_OUT
from mirror_host.client.client import Credential, login
from mirror_host.client.credentials import CredentialStore
from mirror_host.control import Intent, ListPanes, Panes, Representation, Subscribe, Subscribed
from mirror_host.panes.local import LocalSource
from mirror_host.session.login import PAIRING_NOT_SAVED
from tests.integration.conftest import port_of, running_host

pytestmark = [
    pytest.mark.timeout(90),
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

MIRROR_HOST = [sys.executable, "-m", "mirror_host"]
ATTACH = " ".join([*MIRROR_HOST, "attach"])


class Tmux:
    """A private tmux server (its own -L socket), stopped by its pid at the end."""

    def __init__(self, socket: str) -> None:
        self.socket = socket
        self.pid: int | None = None

    async def run(self, *args: str) -> str:
        result = await trio.run_process(
            ["tmux", "-L", self.socket, *args], capture_stdout=True, capture_stderr=True
        )
        return result.stdout.decode()

    async def type(self, *keys: str) -> None:
        await self.run("send-keys", "-t", "main", *keys)

    async def screen(self) -> str:
        return await self.run("capture-pane", "-p", "-t", "main")

    async def wait_for(self, needle: str, *, seconds: float = 15) -> str:
        with trio.move_on_after(seconds):
            while True:
                shown = await self.screen()
                if needle in shown:
                    return shown
                await trio.sleep(0.1)
        raise AssertionError(
            f"{needle!r} never appeared; the terminal shows:\n{await self.screen()}"
        )

    async def wait_alternate(self, on: bool, *, seconds: float = 15) -> None:
        want = "1" if on else "0"
        with trio.move_on_after(seconds):
            while (
                await self.run("display", "-p", "-t", "main", "#{alternate_on}")
            ).strip() != want:
                await trio.sleep(0.1)
            return
        raise AssertionError(f"alternate screen never {want}:\n{await self.screen()}")


@asynccontextmanager
async def tmux_shell(config_home: Path) -> AsyncIterator[Tmux]:
    tmux = Tmux(f"mh-attach-{secrets.token_hex(4)}")
    env = f"XDG_CONFIG_HOME={config_home}"
    await tmux.run(
        "-f", "/dev/null", "new-session", "-d", "-s", "main", "-x", "100", "-y", "30",
        "-e", env, "env PS1='local$ ' sh",
    )  # fmt: skip
    try:
        tmux.pid = int((await tmux.run("display", "-p", "#{pid}")).strip())
        await tmux.wait_for("local$")
        yield tmux
    finally:
        with trio.CancelScope(shield=True):
            await trio.run_process(["tmux", "-L", tmux.socket, "kill-server"], check=False)
            if tmux.pid is not None:
                try:
                    os.kill(tmux.pid, 15)
                except ProcessLookupError:
                    pass


def remote_shell() -> LocalSource:
    return LocalSource(["sh"], columns=80, rows=24, env={**os.environ, "PS1": "remote$ "})


@pytest.mark.slow
async def test_attach_shows_the_pane_types_into_it_and_detaches(
    state_dir: Path, tmp_path: Path
) -> None:
    source = remote_shell()
    async with running_host(state_dir, source) as host, tmux_shell(tmp_path) as tmux:
        address = f"127.0.0.1:{port_of(host)}"
        code = (await host.open_pairing_window()).code
        await tmux.type(
            f"stty -g > {tmp_path}/before; {ATTACH} {address} --code {code}; echo EXIT=$?", "Enter"
        )
        await tmux.wait_alternate(True)
        await tmux.wait_for("remote$")  # the host's shell, drawn by attach
        await tmux.type("echo remote-$((6*7))", "Enter")
        await tmux.wait_for("remote-42")  # typed through attach, run by the host's shell
        await tmux.type("C-]")
        await tmux.wait_alternate(False)
        shown = await tmux.wait_for("EXIT=0")
        assert "mirror-host: detached from 'sh'" in shown
        # The terminal is as it was: same settings, and the shell still runs commands.
        await tmux.type(
            f"stty -g > {tmp_path}/after; cmp {tmp_path}/before {tmp_path}/after && echo SAME-$((1+1))",
            "Enter",
        )
        await tmux.wait_for("SAME-2")
        credentials = tmp_path / "mirror-host" / "credentials.json"
        assert stat.S_IMODE(credentials.stat().st_mode) == 0o600
        assert code not in credentials.read_text()

        # Later runs reuse the credential; another device taking over ends the session.
        await tmux.type("clear; " + f"{ATTACH} {address}; echo EXIT=$?", "Enter")
        await tmux.wait_alternate(True)
        await tmux.wait_for("remote-42")  # the pane's screen as the host has it
        stored = host.book.registry.devices[0]
        taker = Credential(host.book.registry.host_id, stored.id, stored.key)
        async with login("127.0.0.1", port_of(host), taker) as client:
            await client.send(ListPanes())
            panes = await client.expect(Panes)
            assert isinstance(panes, Panes)
            await client.send(
                Subscribe(
                    pane_id=panes.panes[0].id,
                    representation=Representation.TEXT,
                    intent=Intent.TAKEOVER,
                )
            )
            assert isinstance(await client.expect(Subscribed), Subscribed)
            await tmux.wait_alternate(False)
            shown = await tmux.wait_for("EXIT=1")
            # Taken over by this same device (its credential): not "another device".
            assert "mirror-host: the pane was taken over, by another device or" in shown
            # While that one holds it, a second attach of the same device is told so.
            # (Its own marker: the last EXIT=1 stays on screen until `clear` has run.)
            await tmux.type("clear; " + f"{ATTACH} {address}; echo AGAIN-EXIT=$?", "Enter")
            shown = await tmux.wait_for("AGAIN-EXIT=1")
            assert "mirror-host: 'sh' is already mirrored, by another device or" in shown


@pytest.mark.slow
async def test_a_text_view_says_it_is_read_only_and_ctrl_c_leaves_it(
    state_dir: Path, tmp_path: Path
) -> None:
    async with running_host(state_dir, remote_shell()) as host, tmux_shell(tmp_path) as tmux:
        address = f"127.0.0.1:{port_of(host)}"
        code = (await host.open_pairing_window()).code
        await tmux.type(f"{ATTACH} {address} --code {code} --text; echo EXIT=$?", "Enter")
        await tmux.wait_for("remote$")
        await tmux.wait_for("read-only text view (keys are not sent) · Ctrl-] or Ctrl-C detaches")
        await tmux.type("C-c")
        shown = await tmux.wait_for("EXIT=0")
        assert "mirror-host: detached from 'sh'" in shown


@pytest.mark.slow
async def test_the_chooser_shows_ids_and_the_detach_key_quits_it(
    state_dir: Path, tmp_path: Path
) -> None:
    source = LocalSource(["sh", "sh"], columns=80, rows=24, env={**os.environ, "PS1": "remote$ "})
    async with running_host(state_dir, source) as host, tmux_shell(tmp_path) as tmux:
        address = f"127.0.0.1:{port_of(host)}"
        code = (await host.open_pairing_window()).code
        await tmux.type(
            f"{ATTACH} {address} --code {code} --name 'Lab Laptop' --detach-key ctrl-q; "
            "echo EXIT=$?",
            "Enter",
        )
        shown = await tmux.wait_for("Ctrl-Q quits")
        for pane in await source.list_panes():
            assert f"id {str(pane.id).upper()[:8]}" in shown
        assert [device.name for device in host.book.registry.devices] == ["Lab Laptop"]
        await tmux.type("C-q")  # no Enter: the detach key ends the prompt by itself
        shown = await tmux.wait_for("EXIT=0")
        assert "mirror-host: no pane chosen" in shown
        await tmux.type(
            "clear; " + f"{ATTACH} {address} --detach-key ^q --pane 2; echo EXIT=$?", "Enter"
        )
        await tmux.wait_alternate(True)
        await tmux.wait_for("remote$")
        await tmux.type("C-]")  # not the detach key now: it goes to the pane
        await tmux.type("C-q")
        await tmux.wait_alternate(False)
        shown = await tmux.wait_for("EXIT=0")
        assert "mirror-host: detached from 'sh'" in shown


async def _attach(config_home: Path, *args: str) -> tuple[int, str]:
    result = await trio.run_process(
        [*MIRROR_HOST, "attach", *args],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        stdin=b"",
        start_new_session=True,  # no controlling terminal, whoever runs the tests
        env={**os.environ, "XDG_CONFIG_HOME": str(config_home)},
    )
    return result.returncode, result.stderr.decode()


@pytest.mark.slow
async def test_attach_refusals_are_one_clear_line(state_dir: Path, tmp_path: Path) -> None:
    async with running_host(state_dir) as host:
        address = f"127.0.0.1:{port_of(host)}"
        status, err = await _attach(tmp_path, address)
        assert status == 1
        assert err == (
            f"mirror-host: this device is not paired with {address}: run again with --code CODE "
            "(from `mirror-host pair` on the host, or Prowl's Add a Device)\n"
        )
        # Without a terminal it stops before pairing: the code is not used up.
        ticket = await host.open_pairing_window()
        status, err = await _attach(tmp_path, address, "--code", ticket.code)
        assert status == 1 and err.count("\n") == 1
        assert "interactive terminal" in err and "paired with" not in err
        assert host.book.window is not None and host.book.registry.devices == ()
        assert not (tmp_path / "mirror-host" / "credentials.json").exists()
        # What the user is told about the pairing itself (the same line attach prints).
        store = CredentialStore(tmp_path / "credentials.json")
        with pytest.raises(AttachError) as wrong:
            await obtain_credential(_options(address, "ABCD-2345"), store, print)
        assert str(wrong.value).startswith(f"pairing with {address} failed: ")
        assert "the code is wrong or has expired" in str(wrong.value)
        said: list[str] = []
        code = (await host.open_pairing_window()).code
        credential = await obtain_credential(_options(address, code), store, said.append)
        assert said == [f"paired with {address} as {device_name()!r}"]
        await host.book.revoke(None)
        with pytest.raises(AttachError) as revoked:
            await list_panes(_options(address).address, credential)
        assert str(revoked.value).endswith(
            "does not know this device (it was revoked or unpaired): pair again with --code CODE"
        )


def _options(address: str, code: str | None = None, **more: object) -> AttachOptions:
    return AttachOptions(address=parse_address(address), code=code, **more)  # type: ignore[arg-type]


async def test_a_locked_out_address_is_told_to_wait(state_dir: Path, tmp_path: Path) -> None:
    async with running_host(state_dir) as host:
        address = f"127.0.0.1:{port_of(host)}"
        code = (await host.open_pairing_window()).code
        for _ in range(12):  # as many failures as the lock-out needs, as a guesser leaves
            host.failures.record("127.0.0.1", trio.current_time())
        with pytest.raises(AttachError) as locked:
            await obtain_credential(
                _options(address, code), CredentialStore(tmp_path / "c.json"), print
            )
        assert str(locked.value) == f"{address} {LOCKED_OUT}"
        assert "wait a minute" in LOCKED_OUT
        assert host.book.window is not None  # refused before TLS: the code is still good


async def test_a_pairing_the_host_cannot_save_is_not_called_a_wrong_code(
    state_dir: Path, tmp_path: Path
) -> None:
    async with running_host(state_dir) as host:
        address = f"127.0.0.1:{port_of(host)}"
        code = (await host.open_pairing_window()).code
        store_file = state_dir / "devices.json"
        store_file.unlink()
        store_file.mkdir()  # the host cannot replace it: "could not save the device"
        with pytest.raises(AttachError) as refused:
            await obtain_credential(
                _options(address, code, name="Kept Name"),
                CredentialStore(tmp_path / "c.json"),
                print,
            )
        message = str(refused.value)
        # The host says why in a `failure` before it closes (issue 29): shown as it is.
        assert message == f"{address} refused to pair this device: {PAIRING_NOT_SAVED}"
        assert "wrong" not in message


class CuttableProxy:
    """A loopback TCP proxy whose connections the test can cut (a lost network)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self._scopes: list[trio.CancelScope] = []

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._handle, listeners)

    async def _handle(self, client: trio.SocketStream) -> None:
        try:
            upstream = await trio.open_tcp_stream("127.0.0.1", self.target_port)
        except BaseException:
            await trio.aclose_forcefully(client)
            raise
        try:
            with trio.CancelScope() as scope:
                self._scopes.append(scope)

                async def pump(source: trio.SocketStream, sink: trio.SocketStream) -> None:
                    try:
                        while data := await source.receive_some(65536):
                            await sink.send_all(data)
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        pass
                    scope.cancel()

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(pump, client, upstream)
                    nursery.start_soon(pump, upstream, client)
        finally:
            await trio.aclose_forcefully(client)
            await trio.aclose_forcefully(upstream)

    def cut(self) -> None:
        for scope in self._scopes:
            scope.cancel()
        self._scopes.clear()


@pytest.mark.slow
async def test_a_lost_connection_is_retried_until_it_comes_back(
    state_dir: Path, tmp_path: Path
) -> None:
    source = remote_shell()
    async with (
        running_host(state_dir, source) as host,
        trio.open_nursery() as nursery,
        tmux_shell(tmp_path) as tmux,
    ):
        proxy = CuttableProxy(port_of(host))
        await nursery.start(proxy.serve)
        code = (await host.open_pairing_window()).code
        await tmux.type(f"{ATTACH} 127.0.0.1:{proxy.port} --code {code}; echo EXIT=$?", "Enter")
        await tmux.wait_alternate(True)
        # Typed at once: keys that come before the subscription wait for it.
        await tmux.type("echo before-$((1+1))", "Enter")
        await tmux.wait_for("before-2")
        proxy.cut()
        await tmux.wait_for("connection lost (the host closed the connection); reconnecting")
        with trio.move_on_after(15):
            while "after-3" not in await tmux.screen():
                await tmux.type("echo after-$((1+2))", "Enter")
                await trio.sleep(1.0)
        await tmux.wait_for("after-3")
        await tmux.type("C-]")
        await tmux.wait_for("EXIT=0")
        nursery.cancel_scope.cancel()
