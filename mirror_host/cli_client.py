"""``mirror-host attach`` and ``mirror-host conformance``: the client tools' front door.

Parses, then hands over to :mod:`mirror_host.client.attach` and
:mod:`mirror_host.client.conformance`. Exit codes: 0 success (attach: detached
with Ctrl-]; conformance: no check failed, one passed), 1 failure, 2 bad usage,
130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TextIO

import trio

from mirror_host.cli_help import HelpFormatter
from mirror_host.client.address import HostAddress, parse_address
from mirror_host.client.chooser import DETACH_KEY, parse_detach_key

__all__ = ["add_client_commands"]

_ATTACH_EPILOG = """\
keys: everything you type goes to the pane; Ctrl-] (or --detach-key) detaches
(exit status 0), and quits the pane prompt.

The credential from pairing is kept in $XDG_CONFIG_HOME/mirror-host/credentials.json
(~/.config/mirror-host/, mode 0600), one per host address; later runs reuse it.
A lost connection is retried (1, 2, 4, 8, 15 s apart) until Ctrl-]. Another device
taking the pane over, the host stopping and the pane closing end the session
(exit status 1), each said in one line.

examples:
  mirror-host attach 192.168.1.20:7880 --code ABCD-2345   pair, then attach
  mirror-host attach 192.168.1.20:7880 --pane 2           attach to the second pane
  mirror-host attach 192.168.1.20:7880 --text             read-only text view
  mirror-host attach 192.168.1.20:7880 --code ABCD-2345 --name "lab laptop" --detach-key ctrl-q
"""

_CONFORMANCE_EPILOG = """\
The suite pairs as a new device with --code (a code from the host's pairing window:
`mirror-host pair`, or Prowl's Add a Device), then checks the host against the
protocol, one line per check; the last line is `N passed, M failed` (skipped checks
are listed, counted in neither). Exit status 0 when no check failed and at least
one passed, 1 otherwise.

It relies on the protocol only, so it runs against any Prowl mirror host. The pane
checks use --pane or the first pane no device mirrors; with --allow-input they type
harmless `echo` commands into it and scroll it up once (and back). The device it
paired stays on the host: remove it afterwards (mirror-host revoke, or Prowl's
device list).

examples:
  mirror-host conformance 127.0.0.1:7880 --code ABCD-2345 --allow-input
  mirror-host conformance 127.0.0.1:7880 --code ABCD-2345 --only 'frames.*' --json
  mirror-host conformance --list
"""


def _address_arg(text: str) -> HostAddress:
    try:
        return parse_address(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _detach_key_arg(text: str) -> bytes:
    try:
        return parse_detach_key(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _seconds_arg(text: str) -> float:
    try:
        value = float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from exc
    if not 0.5 <= value <= 120:
        raise argparse.ArgumentTypeError("expected 0.5 … 120 seconds")
    return value


def add_client_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``attach`` and ``conformance``."""
    attach = commands.add_parser(
        "attach",
        help="watch and drive a host's pane from this terminal",
        description=(
            "Attach this terminal to a pane of a Prowl mirror host (mirror-host or Prowl's "
            "own): its screen is drawn here, in the alternate screen, and your keys go to it."
        ),
        epilog=_ATTACH_EPILOG,
        formatter_class=HelpFormatter,
    )
    attach.add_argument("address", type=_address_arg, metavar="ADDRESS:PORT")
    attach.add_argument(
        "--code", metavar="CODE", help="pair first with this pairing code (then it is kept)"
    )
    attach.add_argument(
        "--pane",
        metavar="INDEX|ID",
        help="the pane: its number in the list (1 = first) or its id (default: ask, "
        "unless there is only one)",
    )
    attach.add_argument(
        "--text",
        action="store_true",
        help="a read-only text view (text-v1; keys are not sent; Ctrl-C detaches too)",
    )
    attach.add_argument(
        "--take-over",
        action="store_true",
        help="take the pane even if another device mirrors it (that device is told)",
    )
    attach.add_argument(
        "--forget",
        action="store_true",
        help="first forget the credential saved for this address (with --code: pair anew)",
    )
    attach.add_argument(
        "--name",
        metavar="NAME",
        help="the device name to pair under, as the host's device list shows it "
        "(default: this machine's host name)",
    )
    attach.add_argument(
        "--detach-key",
        type=_detach_key_arg,
        default=DETACH_KEY,
        metavar="KEY",
        help="the key that detaches, and quits the pane prompt: a control key such as "
        "ctrl-q or ^a (default ctrl-])",
    )
    attach.set_defaults(parser=attach, handler=_run_attach)

    conformance = commands.add_parser(
        "conformance",
        help="check a Prowl mirror host against the protocol",
        description="Check any Prowl mirror host (mirror-host or Prowl's own) against the "
        "remote-mirror protocol.",
        epilog=_CONFORMANCE_EPILOG,
        formatter_class=HelpFormatter,
    )
    conformance.add_argument("address", nargs="?", type=_address_arg, metavar="ADDRESS:PORT")
    conformance.add_argument("--code", metavar="CODE", help="a pairing code from the host")
    conformance.add_argument(
        "--allow-input",
        action="store_true",
        help="let checks type harmless `echo` commands into the pane and scroll it up",
    )
    conformance.add_argument("--json", action="store_true", help="print one JSON document")
    conformance.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="PATTERN",
        help="run only checks matching a name or glob such as 'frames.*' (repeatable)",
    )
    conformance.add_argument(
        "--skip",
        action="append",
        default=[],
        metavar="PATTERN",
        help="leave out checks matching a name or glob (repeatable)",
    )
    conformance.add_argument(
        "--pane", metavar="INDEX|ID", help="the pane to use (default: the first one not busy)"
    )
    conformance.add_argument(
        "--wait",
        type=_seconds_arg,
        default=5.0,
        metavar="SECONDS",
        help="how long the host may take for a reply, a frame or a close (default 5)",
    )
    conformance.add_argument("--list", action="store_true", help="list the checks and exit")
    conformance.set_defaults(parser=conformance, handler=_run_conformance)


def _check_code(args: argparse.Namespace) -> None:
    """``--code`` must look like a pairing code: a usage error (exit 2) otherwise."""
    from mirror_host.auth.pairing import InvalidPairingCode, normalize_code

    if args.code is None:
        return
    if not args.code.strip():  # "$(mirror-host pair …)" that printed nothing
        args.parser.error(
            "--code is empty (did the command that was to print the code fail? "
            "`mirror-host pair` on the host shows one)"
        )
    try:
        normalize_code(args.code)
    except InvalidPairingCode as exc:
        args.parser.error(f"--code {args.code!r} is not a pairing code: {exc}, such as ABCD-2345")


def _tls_unsupported() -> str | None:
    """Why this Python cannot speak Prowl's TLS-PSK, or None when it can."""
    from mirror_host.errors import TLSUnsupported
    from mirror_host.tls.psk import check_psk_route

    try:
        check_psk_route()
    except TLSUnsupported as exc:
        return str(exc)
    return None


def _run_attach(args: argparse.Namespace, stdin: TextIO, stdout: TextIO) -> int:
    from mirror_host.auth.devices import name_problem
    from mirror_host.client.attach import AttachError, AttachOptions, attach
    from mirror_host.errors import ClientError

    _check_code(args)
    if args.name is not None and (problem := name_problem(args.name)):
        args.parser.error(f"--name: {problem}")
    options = AttachOptions(
        address=args.address,
        code=args.code,
        pane=args.pane,
        text=args.text,
        take_over=args.take_over,
        forget=args.forget,
        name=args.name,
        detach_key=args.detach_key,
    )

    def say(message: str) -> None:
        print(f"mirror-host: {message}", file=sys.stderr, flush=True)

    def show(line: str) -> None:
        stdout.write(line + "\n")
        stdout.flush()

    def read_line() -> str:
        if stdin.isatty():
            # One read is one line as the terminal delivers it, also one ended by the
            # detach key without a newline (readline would wait for the newline).
            return os.read(stdin.fileno(), 4096).decode("utf-8", "replace")
        return stdin.readline()

    async def ask(prompt: str) -> str | None:
        stdout.write(prompt)
        stdout.flush()
        line = await trio.to_thread.run_sync(read_line, abandon_on_cancel=True)
        if line and not line.endswith("\n"):
            stdout.write("\n")  # the detach key ended it: leave the prompt's line
        return line if line else None

    unsupported = _tls_unsupported()
    if unsupported:
        say(unsupported)
        return 1
    try:
        return trio.run(lambda: attach(options, say=say, show=show, ask=ask))
    except AttachError as exc:
        say(str(exc))
        return 1
    except ClientError as exc:  # the credential file, the terminal
        say(str(exc))
        return 1
    except KeyboardInterrupt:
        return 130


def _run_conformance(args: argparse.Namespace, stdin: TextIO, stdout: TextIO) -> int:
    from mirror_host.client.conformance.probe import SuiteAborted
    from mirror_host.client.conformance.report import (
        CheckResult,
        Status,
        render_json,
        render_line,
        summary,
    )
    from mirror_host.client.conformance.rules import exit_status
    from mirror_host.client.conformance.suite import (
        CHECKS,
        ENROLL,
        SuiteOptions,
        choose,
        run_suite,
    )

    if args.list:
        enroll = f"{ENROLL}  Pair as a new device (always run, before the checks below).\n"
        for check in CHECKS:
            if not check.before_enroll and enroll:
                stdout.write(enroll)
                enroll = ""
            flag = " [--allow-input]" if check.types else ""
            stdout.write(f"{check.name}{flag}  {check.description}\n")
        return 0
    if args.address is None or args.code is None:
        args.parser.error("ADDRESS:PORT and --code CODE are required (or --list)")
    _check_code(args)
    # Before anything connects: a refused pattern must not spend the pairing code.
    _, problem = choose(args.only, args.skip)
    if problem:
        args.parser.error(problem)
    options = SuiteOptions(
        code=args.code,
        allow_input=args.allow_input,
        only=args.only,
        skip=args.skip,
        pane=args.pane,
        wait=args.wait,
    )
    unsupported = _tls_unsupported()
    if unsupported:
        print(f"mirror-host: {unsupported}", file=sys.stderr)
        return 1
    results: list[CheckResult] = []

    def progress(result: CheckResult) -> None:
        results.append(result)
        if not args.json:
            stdout.write(render_line(result) + "\n")
            stdout.flush()

    try:
        trio.run(lambda: run_suite(args.address, options, on_result=progress))
    except KeyboardInterrupt:
        return 130
    except SuiteAborted as exc:
        if not args.json:
            print(f"mirror-host conformance: {exc}", file=sys.stderr)
            return 1
        progress(CheckResult("suite", Status.FAILED, str(exc), 0.0))
    except Exception as exc:  # a bug outside any one check: still end with the counts
        progress(
            CheckResult("suite", Status.FAILED, f"internal error: {type(exc).__name__}: {exc}", 0.0)
        )
    passed, failed, _ = summary(results)
    if args.json:
        stdout.write(render_json(str(args.address), results) + "\n")
    else:
        stdout.write(f"{passed} passed, {failed} failed\n")
    return exit_status(results)
