"""The conformance suite: which checks, in which order, each with its own timeout. I/O.

``pair.wrong-proof`` (when selected) runs first, then the suite pairs once
(``pair.enroll``, always run: every other check logs in with that device),
lists the panes once if a selected check needs them, then runs the selected
checks one after another. A check that hangs is cut off by its own timeout
(a fixed part plus a multiple of ``--wait``) and reported with the step it was
at; a check that raises something unforeseen is reported as an internal error.
The next check starts on fresh connections.

Authentication failures: Prowl's host locks an address out after 12 failed
handshakes or logins in 60 s. The checks that cause one cost
:data:`AUTH_FAILURES` in all; except ``pair.wrong-proof`` (which must come
before pairing) they run last, so one run stays below the limit (two runs
within a minute may not).
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

import trio

from mirror_host.client.address import HostAddress
from mirror_host.client.client import ClientClosed, HandshakeFailed, connect_failure
from mirror_host.client.conformance import checks_clients as clients
from mirror_host.client.conformance import checks_features as features
from mirror_host.client.conformance import checks_panes as panes
from mirror_host.client.conformance import checks_transport as transport
from mirror_host.client.conformance.probe import (
    WAIT_SECONDS,
    CheckFailed,
    CheckSkipped,
    Context,
    SuiteAborted,
)
from mirror_host.client.conformance.report import CheckResult, Status, select
from mirror_host.control import Representation
from mirror_host.errors import MirrorHostError

__all__ = [
    "AUTH_FAILURES",
    "CHECKS",
    "DISCOVERY",
    "ENROLL",
    "Check",
    "SuiteOptions",
    "device_name",
    "run_suite",
]

CheckFn = Callable[[Context], Awaitable[str]]


@dataclass(frozen=True, slots=True)
class Check:
    """One named check."""

    name: str
    run: CheckFn
    #: The timeout is ``base + waits × --wait`` seconds (20 s with the default wait).
    base: float = 5.0
    waits: float = 3.0
    #: Types into the pane: runs only with ``--allow-input``.
    types: bool = False
    #: Needs the pane list (the suite lists the panes once, before the first such check).
    panes: bool = True
    #: Runs before ``pair.enroll`` (it needs the pairing window still open).
    before_enroll: bool = False
    #: Authentication failures it causes at the host (see the module docstring).
    auth_failures: int = 0

    @property
    def description(self) -> str:
        run = self.run.func if isinstance(self.run, partial) else self.run
        doc = run.__doc__
        return " ".join((doc or "").replace("``", "`").split())

    def timeout(self, wait: float) -> float:
        """Seconds the check may take with ``--wait`` ``wait``."""
        return self.base + self.waits * wait


CHECKS: tuple[Check, ...] = (
    Check(
        "pair.wrong-proof",
        transport.check_pair_wrong_proof,
        before_enroll=True,
        auth_failures=1,
        panes=False,
    ),
    Check("tls.policy", transport.check_tls_policy, panes=False),
    Check("auth.challenge", transport.check_auth_challenge, panes=False),
    Check("auth.login", transport.check_auth_login, panes=False),
    Check("heartbeat.pong", transport.check_heartbeat_pong, panes=False),
    Check("heartbeat.ping", transport.check_heartbeat_ping, panes=False),
    Check(
        "heartbeat.idle-close",
        transport.check_heartbeat_idle_close,
        base=15.0,
        waits=2.0,
        panes=False,
    ),
    Check("panes.list", panes.check_panes_list),
    Check("subscribe.vt", partial(panes.check_subscribe, representation=Representation.VT)),
    Check("subscribe.text", partial(panes.check_subscribe, representation=Representation.TEXT)),
    Check("subscribe.unknown-pane", panes.check_subscribe_unknown_pane),
    Check(
        "frames.gate",
        partial(panes.check_frames_gate, representation=Representation.VT),
        base=8.0,
    ),
    Check("frames.sequence", panes.check_frames_sequence),
    Check("frames.refresh", panes.check_frames_refresh),
    Check("frames.ack-rules", panes.check_frames_ack_rules, base=10.0, waits=6.0),
    Check(
        "text.gate",
        partial(panes.check_frames_gate, representation=Representation.TEXT),
        base=8.0,
    ),
    Check("lease.second-subscribe", panes.check_lease_second_subscribe),
    Check("takeover.busy", panes.check_takeover_busy),
    Check("takeover.takeover", panes.check_takeover_takeover),
    Check("scroll.result", features.check_scroll_result),
    Check("scroll.duplicate", features.check_scroll_duplicate, base=12.0, waits=7.0),
    Check("scroll.busy", features.check_scroll_busy),
    Check("history.pages", features.check_history_pages, base=30.0, waits=6.0),
    Check("history.invalid", features.check_history_invalid),
    Check("history.offset-range", features.check_history_offset_range, base=20.0, waits=12.0),
    Check("commands.send-refused", features.check_commands_send_refused),
    Check("commands.output-json", features.check_commands_output_json, base=10.0, waits=10.0),
    Check("input.empty", features.check_input_empty),
    Check("input.text-lease", features.check_input_text_lease),
    Check("input.echo", features.check_input_echo, types=True),
    Check("input.coalesce", features.check_input_coalesce, base=15.0, waits=7.0, types=True),
    # What Prowl's own apps require beyond the wire rules (prowl-clients.md).
    Check("clients.launch-profile", clients.check_launch_profile),
    Check("clients.history-8s", clients.check_history_within_8_s, base=15.0, waits=6.0),
    Check("clients.panes-unasked", clients.check_panes_unasked, base=8.0, waits=5.0),
    Check("clients.scroll-state", clients.check_scroll_state, base=8.0, waits=4.0),
    # Each of these costs the address one authentication failure at the host.
    Check("tls.version", transport.check_tls_version, auth_failures=1, panes=False),
    Check("tls.cipher", transport.check_tls_cipher, auth_failures=1, panes=False),
    Check(
        "tls.unknown-identity",
        transport.check_tls_unknown_identity,
        auth_failures=1,
        panes=False,
    ),
    Check(
        "pair.single-use",
        transport.check_pair_single_use,
        auth_failures=1,
        panes=False,
    ),
    Check("auth.wrong-proof", transport.check_auth_wrong_proof, auth_failures=1, panes=False),
    Check(
        "auth.replayed-proof",
        transport.check_auth_replayed_proof,
        auth_failures=1,
        panes=False,
    ),
    Check(
        "auth.before-login",
        transport.check_auth_before_login,
        auth_failures=1,
        panes=False,
    ),
)
ENROLL = "pair.enroll"
#: Listing the panes: reported only when it fails.
DISCOVERY = "discovery"
#: Pairing, and listing the panes, run between the checks, with timeouts of their own.
_ENROLL_STEP = Check(ENROLL, transport.check_pair_enroll, waits=4.0, panes=False)
_DISCOVERY_STEP = Check(DISCOVERY, panes.discover, waits=4.0, panes=False)
AUTH_FAILURES = sum(check.auth_failures for check in CHECKS)
NAMES = (ENROLL, *(check.name for check in CHECKS))


def device_name() -> str:
    """The name the suite pairs under (Prowl's Mac client caps names at 80 characters)."""
    return f"mirror-host conformance ({socket.gethostname() or 'unknown'})"[:80]


@dataclass(frozen=True, slots=True)
class SuiteOptions:
    """What to run and how."""

    code: str
    allow_input: bool = False
    only: Sequence[str] = ()
    skip: Sequence[str] = ()
    pane: str | None = None
    name: str = field(default_factory=device_name)
    #: How long the host may take for what it owes (replies, frames, closes).
    wait: float = WAIT_SECONDS


def choose(only: Sequence[str], skip: Sequence[str]) -> tuple[list[str], str]:
    """The checks ``--only``/``--skip`` select besides ``pair.enroll`` (run whatever
    they say: it is named like the others, so a pattern may name it too), and what
    is wrong with the patterns (``""``: nothing): one that matches no check, or a
    ``--skip`` that would skip ``pair.enroll`` alone."""
    names = [check.name for check in CHECKS]
    chosen, unknown = select([*names, ENROLL], only, skip)
    if unknown:
        return [], f"no check matches {', '.join(map(repr, unknown))}"
    for pattern in skip:
        if not select(names, [pattern])[0]:  # it matched pair.enroll alone
            return [], (
                f"--skip {pattern!r}: {ENROLL} always runs (every check after it logs in "
                "as the device it pairs)"
            )
    return [name for name in chosen if name != ENROLL], ""


async def _run_step(ctx: Context, check: Check) -> CheckResult:
    return await _run_one(ctx, check.name, check.run, check.timeout(ctx.wait))


async def _run_one(ctx: Context, name: str, fn: CheckFn, timeout: float) -> CheckResult:
    started = trio.current_time()
    ctx.step = "starting"
    status, detail = Status.PASSED, ""
    try:
        with trio.fail_after(timeout) as scope:
            detail = await fn(ctx)
    except SuiteAborted:
        raise
    except CheckSkipped as exc:
        status, detail = Status.SKIPPED, str(exc)
    except CheckFailed as exc:
        status, detail = Status.FAILED, str(exc)
    except trio.TooSlowError:
        status = Status.FAILED
        if scope.cancelled_caught:
            detail = f"timed out after {timeout:g} s ({ctx.step})"
        else:  # a deadline inside the check that nothing turned into a failure
            detail = f"internal error: an inner wait timed out ({ctx.step})"
    except HandshakeFailed as exc:
        status = Status.FAILED
        detail = f"the TLS handshake failed ({exc.reason}) at {ctx.step}"
    except ClientClosed as exc:
        status, detail = Status.FAILED, f"{exc} ({ctx.step})"
    except ssl.SSLError as exc:  # an OSError, but not a network one: this machine's TLS
        status, detail = Status.FAILED, f"this machine's TLS library refused: {exc} ({ctx.step})"
    except OSError as exc:
        status, detail = Status.FAILED, f"cannot reach {ctx.target}: {connect_failure(exc)}"
    except MirrorHostError as exc:
        status, detail = Status.FAILED, f"{exc} ({ctx.step})"
    except Exception as exc:
        status = Status.FAILED
        detail = f"internal error: {type(exc).__name__}: {exc} ({ctx.step})"
    return CheckResult(name, status, detail, trio.current_time() - started)


async def run_suite(
    target: HostAddress,
    options: SuiteOptions,
    *,
    on_result: Callable[[CheckResult], None] | None = None,
) -> list[CheckResult]:
    """Run the selected checks against ``target``; return every result in order.

    Raises:
        ValueError: an ``only``/``skip`` pattern matches no check.
        SuiteAborted: the host cannot be reached, or refuses this address before TLS
            (``on_result`` has seen every result so far).
    """
    chosen, problem = choose(options.only, options.skip)
    if problem:
        raise ValueError(problem)
    ctx = Context(
        target,
        allow_input=options.allow_input,
        pane_choice=options.pane,
        code=options.code,
        device_name=options.name,
        wait=options.wait,
    )
    selected = [check for check in CHECKS if check.name in chosen]
    results: list[CheckResult] = []

    def report(result: CheckResult) -> None:
        results.append(result)
        if on_result is not None:
            on_result(result)

    async def run(check: Check) -> None:
        if check.types and not options.allow_input:
            report(CheckResult(check.name, Status.SKIPPED, "types into the pane: --allow-input", 0))
            return
        report(await _run_step(ctx, check))

    for check in selected:
        if check.before_enroll:
            await run(check)
    if ctx.credential is not None:  # a host that paired on a wrong proof: keep that device
        report(
            CheckResult(
                ENROLL, Status.SKIPPED, "the host already paired a device (pair.wrong-proof)", 0
            )
        )
    else:
        report(await _run_step(ctx, _ENROLL_STEP))
    later = [check for check in selected if not check.before_enroll]
    if ctx.credential is not None and any(check.panes for check in later):
        discovery = await _run_step(ctx, _DISCOVERY_STEP)
        if discovery.status is not Status.PASSED:
            ctx.discovery_error = discovery.detail
            report(discovery)
    for check in later:
        await run(check)
    return results
