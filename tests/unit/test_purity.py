"""The pure rooms import no I/O: no trio, socket, ssl, subprocess."""

from __future__ import annotations

import subprocess
import sys

import pytest

PURE_MODULES = [
    "mirror_host.errors",
    "mirror_host.limits",
    "mirror_host.width",
    "mirror_host.config",
    "mirror_host.wire",
    "mirror_host.control",
    "mirror_host.auth.pairing",
    "mirror_host.auth.proofs",
    "mirror_host.auth.qr",
    "mirror_host.inspect",
    "mirror_host.auth.devices",
    "mirror_host.auth.failures",
    "mirror_host.auth.login",
    "mirror_host.auth.window",
    "mirror_host.session.connection",
    "mirror_host.session.states",
    "mirror_host.session.link",
    "mirror_host.session.login",
    "mirror_host.session.logged_in",
    "mirror_host.session.pacer",
    "mirror_host.session.lease",
    "mirror_host.session.history",
    "mirror_host.panes.model",
    "mirror_host.panes.source",
    "mirror_host.panes.lines",
    "mirror_host.panes.tmux_protocol",
    "mirror_host.capture.styled",
    "mirror_host.capture.values",
    "mirror_host.panes.herdr.protocol",
    "mirror_host.panes.herdr.identity",
    "mirror_host.panes.agliteterm.protocol",
    "mirror_host.panes.agliteterm.render",
    "mirror_host.panes.agliteterm.scrollback",
    "mirror_host.panes.agliteterm.launch",
    "mirror_host.panes.agliteterm.offer",
    "mirror_host.commands.receipts",
    "mirror_host.commands.responses",
    "mirror_host.client.address",
    "mirror_host.client.chooser",
    "mirror_host.client.conformance.ledger",
    "mirror_host.client.conformance.report",
    "mirror_host.client.conformance.rules",
    "mirror_host.panes.activity",
    "mirror_host.agents",
    "mirror_host.agents.detect",
    "mirror_host.agents.model",
    "mirror_host.agents.process",
    "mirror_host.agents.layout",
    "mirror_host.agents.phrases",
    "mirror_host.agents.claude",
    "mirror_host.agents.codex",
    "mirror_host.agents.gemini",
    "mirror_host.agents.opencode",
    "mirror_host.agents.aider",
    "mirror_host.agents.omp",
    "mirror_host.shell",
    "mirror_host.shell.marks",
    "mirror_host.shell.verdict",
    "mirror_host.shell.integration",
    "mirror_host.shell.environment",
    "mirror_host.shell.exchange",
    "mirror_host.system_service.units",
]
FORBIDDEN = ["trio", "socket", "ssl", "subprocess", "asyncio", "threading"]


@pytest.mark.parametrize("module", PURE_MODULES)
def test_pure_module_imports_no_io(module: str) -> None:
    code = (
        "import sys\n"
        f"import {module}\n"
        f"bad = [m for m in {FORBIDDEN!r} if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run(
        [sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=30, check=True
    )
    assert result.stdout.strip() == "", f"{module} pulls in {result.stdout.strip()}"
