"""A pairing window shown to the person at the terminal: its QR code and its code.

``pair`` shows the window it opened, ``serve --pair`` the one it opened at start-up.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TextIO

from mirror_host.auth.pairing import display_code
from mirror_host.control.swiftjson import dump_json
from mirror_host.qr_display import terminal_qr

__all__ = ["qr_text", "show_ticket"]


def show_ticket(reply: dict[str, Any], out: TextIO, *, png: Path | None = None) -> None:
    """Print the QR code (or why there is none) and the code; ``png`` is where it was saved.

    The QR code is drawn as ``out`` can show it: half blocks, ASCII where its
    encoding has no half blocks, or one line saying why not where it does not
    fit the terminal (:func:`~mirror_host.qr_display.terminal_qr`); the code
    itself is ASCII, so it is always shown.
    """
    payload = reply.get("payload")
    if payload is not None:
        drawn = terminal_qr(
            qr_text(payload), encoding=getattr(out, "encoding", None), columns=_columns(out)
        )
        if drawn.art is not None:
            out.write(drawn.art + "\n\n")
        else:
            out.write(f"No QR code here: {drawn.problem}.\n")
        if png is not None:
            out.write(f"QR code written to {png}\n")
        where = f"(host {payload.get('address')}, port {payload.get('port')})"
        if drawn.art is not None:
            out.write(f"Scan this with Prowl (Add a Device), or enter the code by hand {where}:\n")
        else:
            out.write(f"Enter this code in Prowl (Add a Device) by hand {where}:\n")
    else:
        out.write(f"No QR code: {reply.get('payloadError')}\n")
        port = reply.get("port")
        attach = reply.get("attach")
        here = f"`mirror-host attach {attach} --code {display_code(reply['code'])}`"
        if reply.get("loopback") and attach:
            # Prowl on a phone cannot reach it; attach, on this machine, can.
            out.write(f"Only a client on this machine reaches it: {here}, with this code:\n")
        else:
            where = f", with this machine's address and port {port}" if port else ""
            also = f" (on this machine: {here})" if attach else ""
            out.write(f"Enter this code in Prowl by hand{where}{also}:\n")
    out.write(f"\n    {display_code(reply['code'])}\n\n")


def _columns(out: TextIO) -> int | None:
    """How wide the terminal ``out`` writes to is (``None``: it is no terminal)."""
    try:
        return os.get_terminal_size(out.fileno()).columns if out.isatty() else None
    except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation is an OSError
        return None


def qr_text(payload: dict[str, Any]) -> bytes:
    """The bytes a QR code carries: the payload as the protocol's own encoder writes it."""
    return dump_json(payload)
