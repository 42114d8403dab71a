"""The pure rooms import no I/O: no trio, socket, ssl, subprocess."""

from __future__ import annotations

import subprocess
import sys

import pytest

PURE_MODULES = [
    "mirror_host.errors",
    "mirror_host.config",
    "mirror_host.wire",
    "mirror_host.control",
    "mirror_host.auth.pairing",
    "mirror_host.auth.proofs",
    "mirror_host.auth.qr",
    "mirror_host.inspect",
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
