"""The command line as users run it: serve in a subprocess, then pair/devices/revoke/status."""

from __future__ import annotations

import io
import json
import logging
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from mirror_host.auth.qr import parse_pairing_payload
from mirror_host.cli import build_parser
from mirror_host.cli.serve import _warn_about_ignored_flags
from mirror_host.client.client import HandshakeFailed, login, pair_device
from mirror_host.host.store import DeviceStore
from tests.integration.mirror_helpers import list_panes

pytestmark = pytest.mark.timeout(60)


def cli(
    state_dir: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mirror_host", *args, "--state-dir", str(state_dir)],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
    )


def wait_until_serving(state_dir: Path, process: subprocess.Popen[str]) -> None:
    """Until serve.json appears (30 s at most); the host's own error if it exits first."""
    deadline = time.monotonic() + 30
    while not (state_dir / "serve.json").exists():
        if process.poll() is not None:
            raise AssertionError(f"serve exited early: {process.communicate()[1]}")
        if time.monotonic() > deadline:
            raise AssertionError("serve did not start within 30 s")
        time.sleep(0.05)


def stop(process: subprocess.Popen[str]) -> int:
    """SIGTERM, then SIGKILL if it lingers; always reaped, pipes closed."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
    process.communicate()
    return process.returncode


@pytest.fixture
def served(state_dir: Path) -> Iterator[tuple[Path, int, subprocess.Popen[str]]]:
    process = subprocess.Popen(
        [
            sys.executable, "-m", "mirror_host", "serve", "--source", "local",
            "--local-command", "cat", "--listen", "127.0.0.1:0",
            "--advertise-address", "192.0.2.10", "--state-dir", str(state_dir),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Without a runtime directory, the shells' directory is the state dir's own.
        env={name: value for name, value in os.environ.items() if name != "XDG_RUNTIME_DIR"},
    )  # fmt: skip
    try:
        wait_until_serving(state_dir, process)
        document = json.loads((state_dir / "serve.json").read_text())
        assert document["pid"] == process.pid
        port = int(document["listen"].rsplit(":", 1)[1])
        yield state_dir, port, process
    finally:
        stop(process)


@pytest.mark.slow
def test_state_files_are_private_and_serve_json_is_removed_on_exit(
    served: tuple[Path, int, subprocess.Popen[str]],
) -> None:
    state_dir, _, process = served
    assert stat.S_IMODE(state_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE((state_dir / "devices.json").stat().st_mode) == 0o600
    assert stat.S_IMODE((state_dir / "admin.sock").stat().st_mode) == 0o600
    assert stat.S_IMODE((state_dir / "serve.json").stat().st_mode) == 0o600
    assert stat.S_IMODE((state_dir / "lock").stat().st_mode) == 0o600
    assert stat.S_IMODE((state_dir / "shells").stat().st_mode) == 0o700
    assert sorted(p.name for p in state_dir.iterdir()) == [
        "admin.sock", "devices.json", "lock", "serve.json", "shells",
    ]  # fmt: skip
    document = json.loads((state_dir / "serve.json").read_text())
    assert set(document) == {"listen", "pid", "hostID", "hostRunID"}
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=20) == 0
    assert not (state_dir / "serve.json").exists()
    assert not (state_dir / "admin.sock").exists()


@pytest.mark.slow
def test_second_host_on_the_same_state_dir_is_refused(
    served: tuple[Path, int, subprocess.Popen[str]],
) -> None:
    state_dir, _, _ = served
    admin, status = state_dir / "admin.sock", state_dir / "serve.json"
    before = (admin.stat().st_ino, status.read_bytes())
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mirror_host",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--state-dir",
            str(state_dir),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 1
    assert "another mirror-host is running" in result.stderr
    assert result.stderr == (
        f"mirror-host: another mirror-host is running with this state directory ({admin})\n"
    )
    # The first host's files are untouched, and it still answers.
    assert (admin.stat().st_ino, status.read_bytes()) == before
    assert cli(state_dir, "status", "--json").returncode == 0


@pytest.mark.slow
def test_pair_to_an_unwritable_png_opens_no_window(
    served: tuple[Path, int, subprocess.Popen[str]],
) -> None:
    state_dir, _, _ = served
    missing = state_dir / "no-such-dir" / "qr.png"
    result = cli(state_dir, "pair", "--no-wait", "--qr-png", str(missing))
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == (
        f"mirror-host pair: cannot write {missing}: no directory {missing.parent}\n"
    )
    status = json.loads(cli(state_dir, "status", "--json").stdout)
    assert status["pairing"]["open"] is False


@pytest.mark.slow
async def test_pair_json_devices_revoke_and_status(
    served: tuple[Path, int, subprocess.Popen[str]],
) -> None:
    state_dir, port, _ = served
    png = state_dir / "qr.png"
    result = await trio.to_thread.run_sync(
        lambda: cli(state_dir, "pair", "--json", "--qr-png", str(png))
    )
    assert result.returncode == 0, result.stderr
    ticket = json.loads(result.stdout)
    assert set(ticket) == {"code", "expiresAt", "payload"}
    payload = parse_pairing_payload(
        json.dumps(ticket["payload"]).encode(), now=ticket["expiresAt"] - 30
    )
    assert (payload.address, payload.port, payload.code) == ("192.0.2.10", port, ticket["code"])
    assert png.read_bytes().startswith(b"\x89PNG")
    credential = await pair_device("127.0.0.1", port, ticket["code"], "CLI Phone")

    devices = await trio.to_thread.run_sync(lambda: cli(state_dir, "devices", "--json"))
    listed = json.loads(devices.stdout)
    assert [(d["id"], d["name"]) for d in listed] == [(credential.identity, "CLI Phone")]
    text = await trio.to_thread.run_sync(lambda: cli(state_dir, "devices"))
    assert "CLI Phone" in text.stdout and credential.identity in text.stdout

    async with login("127.0.0.1", port, credential) as client:
        await list_panes(client)
        status = await trio.to_thread.run_sync(lambda: cli(state_dir, "status", "--json"))
        report = json.loads(status.stdout)
        assert report["devices"] == 1 and report["connections"] == 1
        assert report["pairing"]["open"] is False
        assert report["panes"]["listed"] == 1 and report["panes"]["subscribed"] == 0
        text = await trio.to_thread.run_sync(lambda: cli(state_dir, "status"))
        assert "panes        1 listed, 0 subscribed" in text.stdout
        revoked = await trio.to_thread.run_sync(
            lambda: cli(state_dir, "revoke", credential.identity)
        )
        assert revoked.returncode == 0 and credential.identity in revoked.stdout
        assert await client.expect_closed() == []
    again = await trio.to_thread.run_sync(lambda: cli(state_dir, "revoke", credential.identity))
    assert again.returncode == 1 and "no paired device" in again.stderr


@pytest.mark.slow
def test_pair_without_advertisable_address_says_why(state_dir: Path) -> None:
    process = subprocess.Popen(
        [
            sys.executable, "-m", "mirror_host", "serve", "--local-command", "cat",
            "--listen", "127.0.0.1:0", "--state-dir", str(state_dir),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        wait_until_serving(state_dir, process)
        result = cli(state_dir, "pair", "--json")
        ticket = json.loads(result.stdout)
        assert ticket["payload"] is None
        assert "loopback" in ticket["payloadError"]
        plain = cli(state_dir, "pair", "--no-wait")
        assert "No QR code" in plain.stdout and "-" in plain.stdout
        port = json.loads((state_dir / "serve.json").read_text())["listen"].rsplit(":", 1)[1]
        # Loopback only: no phone reaches it, so the one client that can is named.
        code = plain.stdout.split()[-1]
        assert (
            "Only a client on this machine reaches it: "
            f"`mirror-host attach 127.0.0.1:{port} --code {code}`, with this code:"
        ) in plain.stdout
        assert "in Prowl" not in plain.stdout
    finally:
        stop(process)


def test_a_busy_port_is_one_clear_line(state_dir: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = cli(state_dir, "serve", "--local-command", "cat", "--listen", f"127.0.0.1:{port}")
    assert result.returncode == 1
    assert result.stderr == (
        f"mirror-host: cannot listen on 127.0.0.1:{port}: Address already in use "
        "(is another host running? choose another port with --listen)\n"
    )
    # Nothing left behind that would make the next start think a host is running.
    assert not (state_dir / "admin.sock").exists()
    assert not (state_dir / "serve.json").exists()


@pytest.mark.slow
def test_commands_without_a_host_say_so(state_dir: Path) -> None:
    for command in ("pair", "status"):
        result = cli(state_dir, command)
        assert result.returncode == 1
        assert "no mirror-host is running" in result.stderr
    devices = cli(state_dir, "devices")
    assert devices.returncode == 0 and "No paired devices" in devices.stdout
    # `pair` needs a running host: the way to pair here is to start one.
    assert "Pair one with `mirror-host serve --pair`" in devices.stdout


@pytest.mark.slow
def test_configuration_errors_name_the_key(state_dir: Path, tmp_path: Path) -> None:
    # check-config (and serve) refuse them; the admin commands warn and go on (below).
    config = tmp_path / "mh.toml"
    config.write_text('[server]\nlisten = "0.0.0.0:7880"\nbogus = 1\n')
    result = cli(state_dir, "check-config", "--config", str(config))
    assert result.returncode == 2
    assert "server.bogus" in result.stderr and str(config) in result.stderr
    env = {**os.environ, "MIRROR_HOST_NOPE": "1"}
    result = cli(state_dir, "check-config", env=env)
    assert result.returncode == 2 and "MIRROR_HOST_NOPE" in result.stderr


@pytest.mark.slow
def test_the_shell_integrations_variables_are_not_unknown_settings(state_dir: Path) -> None:
    # What a shell started by a host (or by tmux after a host ran) carries.
    env = {**os.environ, "MIRROR_HOST_MARK_NONCE": "ab" * 16, "MIRROR_HOST_ZDOTDIR": "/z"}
    result = cli(state_dir, "check-config", env=env)
    assert result.returncode == 0, result.stderr
    assert "MIRROR_HOST" not in result.stderr
    devices = cli(state_dir, "devices", env=env)
    assert devices.returncode == 0 and "warning" not in devices.stderr, devices.stderr
    process = subprocess.Popen(
        [
            sys.executable, "-m", "mirror_host", "serve", "--source", "local",
            "--local-command", "cat", "--listen", "127.0.0.1:0",
            "--advertise-address", "192.0.2.10", "--state-dir", str(state_dir),
        ],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        wait_until_serving(state_dir, process)
    finally:
        assert stop(process) == 0


@pytest.mark.slow
def test_a_configuration_typo_does_not_block_the_admin_commands(
    state_dir: Path, tmp_path: Path
) -> None:
    config = tmp_path / "mh.toml"
    config.write_text('[server]\nlisten = "0.0.0.0:7880"\nbogus = 1\n[log]\nlevel = "loud"\n')
    env = {**os.environ, "MIRROR_HOST_CONFIG": str(config), "MIRROR_HOST_NOPE": "1"}
    devices = cli(state_dir, "devices", env=env)
    assert devices.returncode == 0, devices.stderr
    assert "No paired devices" in devices.stdout
    warnings = [line for line in devices.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 3
    for name in ("server.bogus", "log.level", "MIRROR_HOST_NOPE"):
        assert any(name in line and "ignoring" in line for line in warnings), devices.stderr
    # The state directory still comes from the settings that are right.
    other = tmp_path / "elsewhere"
    config.write_text(f'[state]\ndir = "{other}"\n[server]\nbogus = 1\n')
    plain = subprocess.run(
        [sys.executable, "-m", "mirror_host", "revoke", "--all"],
        capture_output=True, text=True, timeout=30, env=env,
    )  # fmt: skip
    assert plain.returncode == 0, plain.stderr
    assert f"state directory {other}" in plain.stderr and plain.stdout == "no paired devices\n"
    serve = cli(state_dir, "serve", "--listen", "127.0.0.1:0", env=env)
    assert serve.returncode == 2 and "server.bogus" in serve.stderr


@pytest.mark.slow
def test_help_explains_every_command() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mirror_host", "--help"], capture_output=True, text=True, timeout=30
    )
    for command in ("serve", "pair", "devices", "revoke", "status", "wire"):
        assert command in result.stdout
    serve_help = subprocess.run(
        [sys.executable, "-m", "mirror_host", "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert "--local-command" in serve_help.stdout and "--pair" in serve_help.stdout


@pytest.mark.slow
async def test_sigterm_tells_subscribers_the_host_stopped(
    served: tuple[Path, int, subprocess.Popen[str]],
) -> None:
    from mirror_host import control as c
    from tests.integration.mirror_helpers import next_frame, subscribe

    state_dir, port, process = served
    ticket = json.loads(
        (await trio.to_thread.run_sync(lambda: cli(state_dir, "pair", "--json"))).stdout
    )
    credential = await pair_device("127.0.0.1", port, ticket["code"], "Watcher")
    async with login("127.0.0.1", port, credential) as client:
        pane = (await list_panes(client)).panes[0]
        sub = await subscribe(client, pane.id)
        await next_frame(client, sub)
        process.send_signal(signal.SIGTERM)
        assert c.Ended(reason=c.EndReason.HOST_STOPPED) in await client.expect_closed()
    assert await trio.to_thread.run_sync(lambda: process.wait(timeout=20)) == 0


@pytest.mark.slow
async def test_sigterm_right_after_a_login_keeps_its_last_seen_and_logs_the_stop(
    served: tuple[Path, int, subprocess.Popen[str]],
) -> None:
    state_dir, port, process = served
    ticket = json.loads(
        (await trio.to_thread.run_sync(lambda: cli(state_dir, "pair", "--json"))).stdout
    )
    credential = await pair_device("127.0.0.1", port, ticket["code"], "Last Second")
    before = time.time()
    async with login("127.0.0.1", port, credential):
        # Within the second lastSeen waits before it is written: only the stop saves it.
        process.send_signal(signal.SIGTERM)
        _, log = await trio.to_thread.run_sync(lambda: process.communicate(timeout=20))
    assert process.returncode == 0
    assert any(line.endswith("mirror_host.host.server: stopped") for line in log.splitlines()), log
    stored = json.loads((state_dir / "devices.json").read_text())["devices"]
    assert [d["id"] for d in stored] == [credential.identity]
    assert stored[0]["lastSeen"] is not None and stored[0]["lastSeen"] >= before - 1


def test_flags_of_another_source_are_named_as_ignored(caplog: pytest.LogCaptureFixture) -> None:
    args = build_parser().parse_args(
        ["serve", "--source", "tmux", "--local-command", "cat", "--tmux-socket", "x"]
    )
    with caplog.at_level(logging.WARNING):
        _warn_about_ignored_flags(args, "tmux")
    assert caplog.messages == ["--local-command is ignored: it applies to --source local"]


def test_two_tmux_sockets_are_a_usage_error(state_dir: Path) -> None:
    result = cli(state_dir, "serve", "--tmux-socket", "a", "--tmux-socket-path", "/tmp/b")
    assert result.returncode == 2
    assert "not allowed with argument --tmux-socket" in result.stderr


def test_an_unknown_flag_shows_the_sub_commands_usage(state_dir: Path) -> None:
    result = cli(state_dir, "status", "--bogus")
    assert result.returncode == 2
    assert result.stderr.startswith("usage: mirror-host status ")
    assert "mirror-host status: error: unrecognized arguments: --bogus" in result.stderr


# ---------------------------------------------------------------- a new user's first hour


def _waiting_pair(state_dir: Path) -> tuple[subprocess.Popen[str], str]:
    """`mirror-host pair` left waiting, and the code it shows."""
    process = subprocess.Popen(
        [sys.executable, "-m", "mirror_host", "pair", "--state-dir", str(state_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith("    ") and len(line.strip()) == 9 and line.strip()[4] == "-":
            return process, line.strip().replace("-", "")
    raise AssertionError(f"pair showed no code: {process.communicate()}")


def _rest(process: subprocess.Popen[str]) -> tuple[str, str]:
    """What a `_waiting_pair` prints after its code, once it has exited."""
    assert process.stdout is not None and process.stderr is not None
    with process.stdout, process.stderr:
        out = process.stdout.read()  # through the buffer the code was read from
        err = process.stderr.read()
    process.wait(timeout=20)
    return out, err


@pytest.mark.slow
async def test_a_waiting_pair_knows_its_own_window(
    served: tuple[Path, int, subprocess.Popen[str]],
) -> None:
    state_dir, port, _ = served
    # A newer window replaces the code: the waiting pair says so, and never "Paired".
    first, _ = await trio.to_thread.run_sync(lambda: _waiting_pair(state_dir))
    newer = json.loads(
        (await trio.to_thread.run_sync(lambda: cli(state_dir, "pair", "--json"))).stdout
    )
    await pair_device("127.0.0.1", port, newer["code"], "Other Phone")
    out, _ = await trio.to_thread.run_sync(lambda: _rest(first))
    assert first.returncode == 1
    assert out.rstrip().endswith("A newer pairing window replaced this code (another "
                                 "`mirror-host pair` ran): it no longer works; use the newer code.")  # fmt: skip
    assert "Paired" not in out
    # Its own device: "Paired NAME".
    second, code = await trio.to_thread.run_sync(lambda: _waiting_pair(state_dir))
    await pair_device("127.0.0.1", port, code, "Own Phone")
    out, _ = await trio.to_thread.run_sync(lambda: _rest(second))
    assert second.returncode == 0 and out.rstrip().endswith("Paired Own Phone.")
    # Ctrl-C closes the window it opened: its code no longer opens TLS.
    third, code = await trio.to_thread.run_sync(lambda: _waiting_pair(state_dir))
    third.send_signal(signal.SIGINT)
    out, err = await trio.to_thread.run_sync(lambda: _rest(third))
    assert third.returncode == 130 and "Interrupted: closed the pairing window." in out, err
    assert "Traceback" not in err
    status = json.loads(cli(state_dir, "status", "--json").stdout)
    assert status["pairing"]["open"] is False
    with pytest.raises(HandshakeFailed):
        await pair_device("127.0.0.1", port, code, "Too Late")
    # --close closes whatever window is open.
    cli(state_dir, "pair", "--no-wait")
    closed = cli(state_dir, "pair", "--close")
    assert closed.stdout == "Closed the pairing window: its code no longer works.\n"
    again = cli(state_dir, "pair", "--close")
    assert (again.returncode, again.stdout) == (0, "No pairing window was open.\n")


@pytest.mark.slow
def test_pair_right_after_serve_waits_for_the_host_to_start(state_dir: Path) -> None:
    process = subprocess.Popen(
        [
            sys.executable, "-m", "mirror_host", "serve", "--local-command", "cat",
            "--listen", "127.0.0.1:0", "--state-dir", str(state_dir),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        # As the docs' recipe does: no wait between the two.
        result = cli(state_dir, "pair", "--json", "--no-wait", "--wait-for-host", "30")
        assert result.returncode == 0, result.stderr
        assert len(json.loads(result.stdout)["code"]) == 8
    finally:
        stop(process)
    nobody = cli(state_dir, "pair", "--wait-for-host", "0.3")
    assert nobody.returncode == 1
    assert nobody.stderr.startswith("mirror-host pair: no mirror-host is running")
    assert "after waiting 0.3 s" in nobody.stderr


@pytest.mark.slow
async def test_devices_json_has_one_shape_with_or_without_a_host(
    served: tuple[Path, int, subprocess.Popen[str]],
) -> None:
    state_dir, port, process = served
    ticket = json.loads(cli(state_dir, "pair", "--json").stdout)
    credential = await pair_device("127.0.0.1", port, ticket["code"], "Shape")
    online = json.loads(cli(state_dir, "devices", "--json").stdout)
    stop(process)
    offline = json.loads(cli(state_dir, "devices", "--json").stdout)
    assert isinstance(online, list) and isinstance(offline, list)
    assert [sorted(d) for d in online] == [sorted(d) for d in offline]
    assert [d["id"] for d in online] == [d["id"] for d in offline] == [credential.identity]


@pytest.mark.slow
def test_a_store_others_can_read_is_made_private(state_dir: Path) -> None:
    assert cli(state_dir, "revoke", "--all").returncode == 0  # no store yet: nothing to do
    DeviceStore(state_dir).load_or_create()
    store = state_dir / "devices.json"
    os.chmod(store, 0o644)  # a backup restored with the usual umask
    result = cli(state_dir, "devices")
    assert result.returncode == 0
    assert stat.S_IMODE(store.stat().st_mode) == 0o600
    assert "readable by other users (mode 0644); made it private" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
async def test_revoke_takes_a_unique_prefix_online_and_offline(
    served: tuple[Path, int, subprocess.Popen[str]],
) -> None:
    state_dir, port, process = served
    devices = []
    for name in ("One", "Two"):
        ticket = json.loads(cli(state_dir, "pair", "--json").stdout)
        devices.append(await pair_device("127.0.0.1", port, ticket["code"], name))
    one, two = (d.identity for d in devices)
    result = cli(state_dir, "revoke", one[:6].lower())
    assert (result.returncode, result.stdout) == (0, f"revoked {one}\n")
    assert cli(state_dir, "revoke", "zz").returncode == 2
    missing = cli(state_dir, "revoke", one[:6])
    assert missing.returncode == 1 and "no paired device" in missing.stderr
    stop(process)
    result = cli(state_dir, "revoke", two[:8])
    assert (result.returncode, result.stdout) == (0, f"revoked {two}\n")
    assert "using the device store directly" in result.stderr


def test_match_device_id_wants_one_match() -> None:
    from mirror_host.host.revocation import match_device_id

    known = ["3F2A9C1B-0000-4000-8000-000000000001", "3F2A0000-0000-4000-8000-000000000002"]
    assert match_device_id("3f2a9", known) == (known[0], "")
    matched, problem = match_device_id("3F2A", known)
    assert matched is None and problem == "3F2A matches 2 devices: give more of the id"
    assert match_device_id("ABCD", known)[0] is None


@pytest.mark.slow
def test_a_qr_png_without_a_qr_code_says_so(state_dir: Path) -> None:
    process = subprocess.Popen(
        [
            sys.executable, "-m", "mirror_host", "serve", "--local-command", "cat",
            "--listen", "127.0.0.1:0", "--state-dir", str(state_dir),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_until_serving(state_dir, process)  # type: ignore[arg-type]
        png = state_dir / "qr.png"
        result = cli(state_dir, "pair", "--no-wait", "--qr-png", str(png))
        assert result.returncode == 0 and not png.exists()
        assert result.stderr == f"mirror-host pair: no QR code, so {png} was not written\n"
        # Why there is no QR code is said once, with the code.
        assert result.stdout.count("which phones cannot reach") == 1
    finally:
        stop(process)  # type: ignore[arg-type]


@pytest.mark.slow
async def test_status_says_what_runs_where_and_lists_pane_ids(
    served: tuple[Path, int, subprocess.Popen[str]],
) -> None:
    from mirror_host import __version__

    state_dir, _, _ = served
    report = json.loads(cli(state_dir, "status", "--json").stdout)
    assert report["version"] == __version__ and report["stateDir"] == str(state_dir)
    assert report["panes"]["health"] == {
        "kind": "local",
        "state": "running",
        "detail": "1 pane running",
    }
    (pane,) = report["panes"]["items"]
    text = cli(state_dir, "status").stdout
    assert text.startswith(f"mirror-host  {__version__}, up ")
    assert f"state dir    {state_dir}\n" in text
    assert "source       local, running: 1 pane running\n" in text
    assert f"\n  {pane['id']}  cat  ({pane['directory']})\n" in text


@pytest.mark.slow
@pytest.mark.parametrize("problem", ["too long", "a directory"])
def test_an_unusable_admin_socket_path_is_one_line(state_dir: Path, problem: str) -> None:
    target = state_dir
    if problem == "too long":
        target = state_dir / ("x" * 120)
    else:
        (state_dir / "admin.sock").mkdir()
    result = cli(target, "serve", "--listen", "127.0.0.1:0", "--local-command", "cat")
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith("mirror-host: ")
    assert "choose a shorter --state-dir" in result.stderr or "another --state-dir" in result.stderr


@pytest.mark.slow
def test_a_shell_that_is_not_there_is_warned_about_not_fatal(state_dir: Path) -> None:
    process = subprocess.Popen(
        [
            sys.executable, "-m", "mirror_host", "serve", "--listen", "127.0.0.1:0",
            "--state-dir", str(state_dir),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "SHELL": "/nonexistent/zsh"},
    )  # fmt: skip
    try:
        wait_until_serving(state_dir, process)
        report = json.loads(cli(state_dir, "status", "--json").stdout)
        assert report["panes"]["listed"] == 1
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=20)
    assert "$SHELL is /nonexistent/zsh, which is not a program here; using" in err
    assert "Traceback" not in err


@pytest.mark.slow
def test_bare_mirror_host_prints_the_help_and_every_command_has_examples() -> None:
    bare = subprocess.run(
        [sys.executable, "-m", "mirror_host"], capture_output=True, text=True, timeout=30
    )
    assert bare.returncode == 0 and bare.stdout.startswith("usage: mirror-host")
    assert "examples:" in bare.stdout
    for command in (
        ["serve"], ["pair"], ["devices"], ["revoke"], ["status"], ["check-config"],
        ["wire", "decode"], ["attach"], ["conformance"],
    ):  # fmt: skip
        shown = subprocess.run(
            [sys.executable, "-m", "mirror_host", *command, "--help"],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        assert shown.returncode == 0 and "\nexamples:\n  mirror-host " in shown.stdout, command


async def test_a_source_that_cannot_start_stops_serve_with_its_own_error(state_dir: Path) -> None:
    from mirror_host.cli.serve import _main
    from mirror_host.errors import PaneSourceError
    from mirror_host.panes.local import LocalSource
    from tests.integration.conftest import host_config

    source = LocalSource(["cat"], cwd=str(state_dir / "no-such-dir"))
    with pytest.raises(PaneSourceError, match="cannot start 'cat'"):
        # Raised bare through the host's nurseries, so serve() prints it in one line.
        await _main(host_config(state_dir), source, None, False, lambda ticket: None)


@pytest.mark.slow
def test_a_removed_working_directory_is_no_traceback(state_dir: Path, tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    script = (
        f"cd {gone} && rmdir {gone} && exec {sys.executable} -m mirror_host serve "
        f"--listen 127.0.0.1:0 --local-command cat --state-dir {state_dir}"
    )
    process = subprocess.Popen(
        ["sh", "-c", script], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_until_serving(state_dir, process)
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=20)
    assert "the current directory no longer exists; local panes start in" in err
    assert "Traceback" not in err


@pytest.mark.slow
@pytest.mark.parametrize(
    ("code", "said"),
    [("", "--code is empty"), ("ABCD-23", "--code 'ABCD-23' is not a pairing code")],
)
def test_attach_with_an_empty_or_malformed_code_is_a_usage_error(code: str, said: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mirror_host", "attach", "127.0.0.1:1", "--code", code],
        capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines()[-1].startswith(f"mirror-host attach: error: {said}")


@pytest.mark.parametrize(
    ("home", "said"),
    [("", "HOME is empty"), ("relative/home", "HOME (relative/home) is not an absolute path")],
)
def test_attach_refuses_a_home_that_cannot_hold_its_credentials(
    home: str, said: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """As the state directory is refused (issue 27): never ``/.config/…`` or a path
    relative to wherever attach was run."""
    from mirror_host.cli import main

    monkeypatch.setenv("HOME", home)
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    assert main(["attach", "127.0.0.1:1"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"mirror-host: configuration error: credentials: {said}, so there is no default "
        "credential file: set XDG_CONFIG_HOME\n"
    )


def test_attach_takes_xdg_config_home_whatever_home_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from mirror_host.cli import main

    monkeypatch.setenv("HOME", "")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    # No credential for this address yet, and no --code: refused by attach itself.
    assert main(["attach", "127.0.0.1:1"]) == 1
    assert "this device is not paired with 127.0.0.1:1" in capsys.readouterr().err
