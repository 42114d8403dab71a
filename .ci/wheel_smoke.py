#!/usr/bin/env python3
"""Smoke test of an installed mirror-host wheel: version, then a loopback pairing and mirror.

Usage: VENV/bin/python .ci/wheel_smoke.py VERSION

Run with the Python of a fresh venv the wheel was installed into. It uses only
that venv's ``mirror-host`` program, from a temporary directory (never the
source tree): ``--version`` must say VERSION; the documentation files bare
``mirror-host`` names must be installed with it; ``serve`` on 127.0.0.1 must log
(at debug level) that its TLS-PSK route is ready; ``pair --json`` opens a
window; and the venv's own ``conformance`` client pairs with the code, checks
that the handshake is TLS 1.2 with ECDHE-PSK-CHACHA20-POLY1305, logs in,
subscribes to the pane and types into it. The host is stopped with SIGTERM by
its pid and must exit 0.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: Checks asked for; ``pair.enroll`` (pairing with the code) always runs first.
CHECKS = ["tls.policy", "auth.login", "panes.list", "subscribe.vt", "frames.sequence",
          "input.echo"]  # fmt: skip


def fail(message: str) -> None:
    raise SystemExit(f"wheel smoke: {message}")


def run(program: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(program), *args], capture_output=True, text=True, timeout=120, cwd=cwd, check=False
    )


def documentation(bare: str) -> None:
    """Bare ``mirror-host`` names documentation files: the wheel must hold them."""
    _, _, listed = bare.partition("documentation (Markdown files of this installation):\n")
    files = [Path(line.split()[0]) for line in listed.splitlines() if line.startswith("  ")]
    if not files:
        fail(f"bare mirror-host names no documentation: {bare[-300:]!r}")
    for path in files:
        if "site-packages" not in str(path) or not path.is_file():
            fail(f"bare mirror-host names {path}, which this installation does not have")


def main() -> None:
    version = sys.argv[1]
    program = Path(sys.executable).parent / "mirror-host"
    work = Path(tempfile.mkdtemp(prefix="mh-wheel-", dir="/tmp"))
    try:
        located = subprocess.run(
            [sys.executable, "-c", "import mirror_host; print(mirror_host.__file__)"],
            capture_output=True, text=True, cwd=work, check=True,
        ).stdout.strip()  # fmt: skip
        if "site-packages" not in located:
            fail(f"mirror_host comes from {located}, not from the installed wheel")
        said = run(program, "--version", cwd=work).stdout.strip()
        if said != f"mirror-host {version}":
            fail(f"--version says {said!r}, expected 'mirror-host {version}'")
        documentation(run(program, cwd=work).stdout)
        smoke(program, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def smoke(program: Path, work: Path) -> None:
    state = work / "state"
    log_path = work / "serve.log"
    with log_path.open("w") as log:
        host = subprocess.Popen(
            [str(program), "serve", "--source", "local", "--local-command", "sh",
             "--listen", "127.0.0.1:0", "--state-dir", str(state), "--log-level", "debug"],
            cwd=work, stdout=subprocess.DEVNULL, stderr=log,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not (state / "serve.json").exists():
            if host.poll() is not None or time.monotonic() > deadline:
                fail(f"the host did not start:\n{log_path.read_text()}")
            time.sleep(0.1)
        port = json.loads((state / "serve.json").read_text())["listen"].rsplit(":", 1)[1]
        ready = [line for line in log_path.read_text().splitlines() if "TLS-PSK ready" in line]
        if not ready or "ECDHE-PSK-CHACHA20-POLY1305 over TLS 1.2" not in ready[0]:
            fail(f"the host did not report its TLS-PSK route:\n{log_path.read_text()}")
        pairing = run(program, "pair", "--json", "--no-wait", "--state-dir", str(state), cwd=work)
        if pairing.returncode != 0:
            fail(f"pair failed: {pairing.stderr}")
        code = json.loads(pairing.stdout)["code"]
        only = [arg for check in CHECKS for arg in ("--only", check)]
        checked = run(program, "conformance", f"127.0.0.1:{port}", "--code", code,
                      "--allow-input", "--json", *only, cwd=work)  # fmt: skip
        report = json.loads(checked.stdout) if checked.stdout.strip() else {}
        results = {c["name"]: c for c in report.get("checks", [])}
        expected = ["pair.enroll", *CHECKS]
        missing = [name for name in expected if results.get(name, {}).get("status") != "pass"]
        if checked.returncode != 0 or missing:
            fail(f"conformance did not pass {missing}:\n{checked.stdout}{checked.stderr}")
        if code in log_path.read_text():
            fail("the pairing code reached the host's log")
        route = ready[0].split("TLS-PSK ready: ", 1)[1]
        print(f"wheel smoke ok: paired, logged in and mirrored a pane ({route})")
        print(f"  tls.policy: {results['tls.policy']['detail']}")
    finally:
        host.send_signal(signal.SIGTERM)
        try:
            code_ = host.wait(timeout=20)
        except subprocess.TimeoutExpired:
            host.kill()
            host.wait()
            fail("the host did not stop on SIGTERM")
    if code_ != 0:
        fail(f"the host exited {code_} on SIGTERM:\n{log_path.read_text()}")


if __name__ == "__main__":
    main()
