"""``mirror-host conformance``: check any Prowl mirror host against the protocol.

Parses, then hands over to :mod:`mirror_host.client.conformance`. Exit codes: 0
no check failed and one passed, 1 otherwise, 2 bad usage, 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from mirror_host.cli.command import (
    Commands,
    add_command,
    add_seconds_option,
    argument_type,
    check_pairing_code,
    options_from,
)
from mirror_host.client.address import parse_address

__all__ = ["add_parser"]

_NOTES = """\
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
"""


def add_parser(commands: Commands) -> None:
    conformance = add_command(
        commands,
        "conformance",
        run,
        help="check a Prowl mirror host against the protocol",
        description="Check any Prowl mirror host (mirror-host or Prowl's own) against the "
        "remote-mirror protocol.",
        notes=_NOTES,
        examples=(
            "mirror-host conformance 127.0.0.1:7880 --code ABCD-2345 --allow-input",
            "mirror-host conformance 127.0.0.1:7880 --code ABCD-2345 --only 'frames.*' --json",
            "mirror-host conformance --list",
        ),
        docs=(("tools.md", "attach and conformance"),),
    )
    conformance.add_argument(
        "address", nargs="?", type=argument_type(parse_address), metavar="ADDRESS:PORT"
    )
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
    add_seconds_option(
        conformance,
        "--wait",
        low=0.5,
        high=120,
        default=5.0,
        help="how long the host may take for a reply, a frame or a close",
    )
    conformance.add_argument("--list", action="store_true", help="list the checks and exit")


def run(args: argparse.Namespace, stdin: TextIO, out: TextIO) -> int:
    import trio

    from mirror_host.client.conformance.probe import SuiteAborted
    from mirror_host.client.conformance.report import (
        CheckResult,
        Status,
        render_json,
        render_line,
        summary,
    )
    from mirror_host.client.conformance.rules import exit_status
    from mirror_host.client.conformance.suite import SuiteOptions, choose, run_suite
    from mirror_host.tls.psk import check_psk_route

    if args.list:
        return _list_checks(out)
    if args.address is None or args.code is None:
        args.parser.error("ADDRESS:PORT and --code CODE are required (or --list)")
    check_pairing_code(args)
    # Before anything connects: a refused pattern must not spend the pairing code.
    _, problem = choose(args.only, args.skip)
    if problem:
        args.parser.error(problem)
    options = options_from(args, SuiteOptions)
    check_psk_route()  # TLSUnsupported: said in one line by main
    results: list[CheckResult] = []

    def progress(result: CheckResult) -> None:
        results.append(result)
        if not args.json:
            out.write(render_line(result) + "\n")
            out.flush()

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
        out.write(render_json(str(args.address), results) + "\n")
    else:
        out.write(f"{passed} passed, {failed} failed\n")
    return exit_status(results)


def _list_checks(out: TextIO) -> int:
    from mirror_host.client.conformance.suite import CHECKS, ENROLL

    enroll = f"{ENROLL}  Pair as a new device (always run, before the checks below).\n"
    for check in CHECKS:
        if not check.before_enroll and enroll:
            out.write(enroll)
            enroll = ""
        flag = " [--allow-input]" if check.types else ""
        out.write(f"{check.name}{flag}  {check.description}\n")
    return 0
