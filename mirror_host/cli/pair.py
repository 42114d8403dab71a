"""``mirror-host pair``: open a pairing window on the running host, show it, follow it."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from mirror_host.cli.command import (
    CommandFailed,
    Commands,
    add_command,
    add_seconds_option,
    ask_host,
)
from mirror_host.cli.settings import add_settings_group, admin_settings
from mirror_host.cli.ticket import qr_text, show_ticket
from mirror_host.host.admin_client import ADMIN_SOCKET, NoHostRunning, admin_request
from mirror_host.qr_display import write_png

__all__ = ["add_parser"]


def add_parser(commands: Commands) -> None:
    pair = add_command(
        commands,
        "pair",
        run,
        help="open a pairing window on the running host",
        description=(
            "Open a 60-second, single-use pairing window on the running host and show its QR "
            "code and code. Scan it with Prowl's Add a Device. Waits until a device pairs or "
            "the code expires; Ctrl-C closes the window. A newer window replaces the code."
        ),
        examples=(
            "mirror-host pair                       show a QR code and code; wait for a device",
            "mirror-host pair --qr-png qr.png       the same, and save the QR code as a PNG",
            'mirror-host pair --json                {"code", "expiresAt", "payload"} for a script',
            "mirror-host pair --close               close the open window",
        ),
        docs=(("operations.md", "pairing, and every setting"),),
        json_help='print {"code", "expiresAt", "payload"} (and "payloadError") and exit',
    )
    pair.add_argument("--qr-png", type=Path, metavar="PATH", help="also write the QR code as a PNG")
    pair.add_argument(
        "--no-wait",
        action="store_true",
        help="show the code and exit (the window stays open for its 60 s)",
    )
    pair.add_argument(
        "--close",
        action="store_true",
        help="close the open pairing window instead (its code stops working)",
    )
    add_seconds_option(
        pair,
        "--wait-for-host",
        low=0,
        high=600,
        default=5.0,
        help="how long to wait for a host that is still starting",
    )
    add_settings_group(pair)


def run(args: argparse.Namespace, stdin: TextIO, out: TextIO) -> int:
    """Open a pairing window on the running host and show it (or close it: ``--close``)."""
    state_dir = Path(admin_settings(args).state.dir)
    if args.close:
        if args.json or args.qr_png is not None or args.no_wait:
            args.parser.error("--close takes none of --json, --qr-png, --no-wait")
        return _close_pairing(state_dir, out)
    if args.qr_png is not None:
        # Checked before the window opens: a typo must not burn a pairing code.
        problem = _unwritable(args.qr_png)
        if problem is not None:
            raise CommandFailed(f"cannot write {args.qr_png}: {problem}")
    if args.wait_for_host and sys.stderr.isatty() and not (state_dir / ADMIN_SOCKET).exists():
        print(
            f"mirror-host pair: waiting up to {args.wait_for_host:g} s for a host to start "
            f"in {state_dir} …",
            file=sys.stderr,
            flush=True,
        )
    reply = ask_host(state_dir, {"op": "pair"}, wait_for_host=args.wait_for_host)
    if not reply.get("ok"):
        raise CommandFailed(str(reply.get("error")))
    window = int(reply["window"])
    try:
        return _show_window(args, reply, state_dir, window, out)
    except KeyboardInterrupt:
        # Nobody is left to watch the code: it must not stay usable.
        out.write(f"\nInterrupted: {_end_window(state_dir, window)}.\n")
        return 130
    except (OSError, ValueError) as exc:  # a closed pipe, a terminal gone, an encoding
        # The code may never have reached anyone: it must not stay usable either.
        raise CommandFailed(
            f"cannot show the code ({type(exc).__name__}: {exc}): {_end_window(state_dir, window)}"
        ) from exc


def _show_window(
    args: argparse.Namespace, reply: dict[str, Any], state_dir: Path, window: int, out: TextIO
) -> int:
    """Write the PNG, show the code and follow the window; an error while writing
    any of it is the caller's, who closes the window."""
    png = args.qr_png if reply.get("payload") is not None else None
    if args.qr_png is not None and png is None:
        # Why there is none is said once, with the code (or as "payloadError").
        print(f"mirror-host pair: no QR code, so {args.qr_png} was not written", file=sys.stderr)
    if png is not None:
        try:
            write_png(qr_text(reply["payload"]), png)
        except OSError as exc:
            raise CommandFailed(
                f"cannot write {png}: {exc.strerror}: {_end_window(state_dir, window)}"
            ) from exc
    if args.json:
        document = {k: reply.get(k) for k in ("code", "expiresAt", "payload")}
        if reply.get("payloadError"):
            document["payloadError"] = reply["payloadError"]
        out.write(json.dumps(document) + "\n")
        out.flush()  # a failed write surfaces here, while the window can still be closed
        return 0
    show_ticket(reply, out, png=png)
    out.flush()  # here too: a code nobody was shown is not waited on for 60 s
    if args.no_wait:
        return 0
    return _count_down(state_dir, window, int(reply["expiresAt"]), out)


def _end_window(state_dir: Path, window: int) -> str:
    """Close pairing window ``window`` if it is still the open one; what became of it."""
    try:
        closed = admin_request(state_dir, {"op": "closePairing", "window": window})
    except NoHostRunning:
        closed = {}
    return "closed the pairing window" if closed.get("closed") else "the window had ended"


def _close_pairing(state_dir: Path, out: TextIO) -> int:
    if ask_host(state_dir, {"op": "closePairing"}).get("closed"):
        out.write("Closed the pairing window: its code no longer works.\n")
    else:
        out.write("No pairing window was open.\n")
    return 0


def _unwritable(path: Path) -> str | None:
    """Why ``path`` cannot be written as a new file, or ``None``."""
    if path.is_dir():
        return "it is a directory"
    if path.exists():  # written in place, so only the file itself matters
        return None if os.access(path, os.W_OK) else "permission denied"
    folder = path.parent
    if not folder.is_dir():
        return f"no directory {folder}"
    return None if os.access(folder, os.W_OK) else "permission denied"


#: What ``pair`` says when its window ended without pairing, by how it ended.
_WINDOW_ENDINGS = {
    "expired": "The code expired. Run `mirror-host pair` again.",
    "unknown": "The code expired. Run `mirror-host pair` again.",
    "replaced": (
        "A newer pairing window replaced this code (another `mirror-host pair` ran): "
        "it no longer works; use the newer code."
    ),
    "closed": "The pairing window was closed (`pair --close` or `revoke --all`): the code "
    "no longer works.",
    "failed": "A device used the code but the host could not pair it: its log says why.",
}


def _count_down(state_dir: Path, window: int, expires_at: int, out: TextIO) -> int:
    """Follow window ``window`` until it pairs a device or ends."""
    is_tty = out.isatty()
    start = "\r" if is_tty else ""
    try:
        while True:
            state = admin_request(state_dir, {"op": "pairing", "window": window})
            outcome = state.get("state")
            if outcome == "paired":
                out.write(f"{start}Paired {state.get('device') or 'a device'}.            \n")
                return 0
            if outcome in _WINDOW_ENDINGS:
                out.write(f"{start}{_WINDOW_ENDINGS[outcome]}\n")
                return 1
            if is_tty:
                left = state.get("secondsLeft", max(0, expires_at - int(time.time())))
                out.write(f"\rExpires in {left:2d} s ")
                out.flush()
            time.sleep(0.5)
    except NoHostRunning as exc:
        out.write(f"\nThe host stopped: {exc}\n")
        return 1
