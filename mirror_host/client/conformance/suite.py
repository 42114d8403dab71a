"""The conformance suite: which checks, in which order, each with its own timeout. I/O.

The suite pairs once (``pair.enroll``, always run: every other check logs in
with that device), lists the panes once, then runs the selected checks one
after another. A check that hangs is cut off by its own timeout and reported
with the step it was at; the next check starts on fresh connections.

Authentication failures: Prowl's host locks an address out after 12 failed
handshakes or logins in 60 s. The checks that cause one run last and cost
:data:`AUTH_FAILURES` in all, so one run stays well below the limit (two runs
within a minute may not).
"""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

import trio

from mirror_host.client.address import HostAddress
from mirror_host.client.client import ClientClosed, HandshakeFailed
from mirror_host.client.conformance import checks_features as features
from mirror_host.client.conformance import checks_panes as panes
from mirror_host.client.conformance import checks_transport as transport
from mirror_host.client.conformance.probe import (
    WAIT_SECONDS,
    CheckFailed,
    CheckSkipped,
    Context,
)
from mirror_host.client.conformance.report import CheckResult, Status, select
from mirror_host.control import Representation
from mirror_host.errors import MirrorHostError

__all__ = ["AUTH_FAILURES", "CHECKS", "Check", "SuiteOptions", "device_name", "run_suite"]

CheckFn = Callable[[Context], Awaitable[str]]


@dataclass(frozen=True, slots=True)
class Check:
    """One named check."""

    name: str
    run: CheckFn
    timeout: float = 20.0
    #: Types into the pane: runs only with ``--allow-input``.
    types: bool = False
    #: Authentication failures it causes at the host (see the module docstring).
    auth_failures: int = 0

    @property
    def description(self) -> str:
        run = self.run.func if isinstance(self.run, partial) else self.run
        doc = run.__doc__
        return " ".join((doc or "").replace("``", "`").split())


def _code_bound(fn: Callable[[Context, str], Awaitable[str]]) -> CheckFn:
    """Checks that need the pairing code get it from the context's options."""

    async def run(ctx: Context) -> str:
        return await fn(ctx, ctx.code)

    run.__doc__ = fn.__doc__
    return run


CHECKS: tuple[Check, ...] = (
    Check("tls.policy", transport.check_tls_policy),
    Check("auth.challenge", transport.check_auth_challenge),
    Check("auth.login", transport.check_auth_login),
    Check("heartbeat.pong", transport.check_heartbeat_pong),
    Check("heartbeat.ping", transport.check_heartbeat_ping),
    Check("heartbeat.idle-close", transport.check_heartbeat_idle_close, timeout=25.0),
    Check("panes.list", panes.check_panes_list),
    Check("subscribe.vt", partial(panes.check_subscribe, representation=Representation.VT)),
    Check("subscribe.text", partial(panes.check_subscribe, representation=Representation.TEXT)),
    Check("subscribe.unknown-pane", panes.check_subscribe_unknown_pane),
    Check("frames.gate", partial(panes.check_frames_gate, representation=Representation.VT)),
    Check("frames.sequence", panes.check_frames_sequence),
    Check("frames.refresh", panes.check_frames_refresh),
    Check("frames.ack-rules", panes.check_frames_ack_rules, timeout=30.0),
    Check("text.gate", partial(panes.check_frames_gate, representation=Representation.TEXT)),
    Check("lease.second-subscribe", panes.check_lease_second_subscribe),
    Check("takeover.busy", panes.check_takeover_busy),
    Check("takeover.takeover", panes.check_takeover_takeover),
    Check("scroll.result", features.check_scroll_result),
    Check("scroll.duplicate", features.check_scroll_duplicate),
    Check("scroll.busy", features.check_scroll_busy),
    Check("history.pages", features.check_history_pages, timeout=60.0),
    Check("history.invalid", features.check_history_invalid),
    Check("commands.send-refused", features.check_commands_send_refused),
    Check("input.empty", features.check_input_empty),
    Check("input.echo", features.check_input_echo, types=True),
    Check("input.coalesce", features.check_input_coalesce, types=True),
    Check("input.text-lease", features.check_input_text_lease, types=True),
    # Each of these costs the address one authentication failure at the host.
    Check("tls.version", transport.check_tls_version, auth_failures=1),
    Check("tls.cipher", transport.check_tls_cipher, auth_failures=1),
    Check("tls.unknown-identity", transport.check_tls_unknown_identity, auth_failures=1),
    Check("pair.single-use", _code_bound(transport.check_pair_single_use), auth_failures=1),
    Check("auth.wrong-proof", transport.check_auth_wrong_proof, auth_failures=1),
    Check("auth.replayed-proof", transport.check_auth_replayed_proof, auth_failures=1),
    Check("auth.before-login", transport.check_auth_before_login, auth_failures=1),
)
ENROLL = "pair.enroll"
ENROLL_SECONDS = 20.0
DISCOVERY_SECONDS = 10.0
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


async def _run_one(ctx: Context, name: str, fn: CheckFn, timeout: float) -> CheckResult:
    started = trio.current_time()
    ctx.step = "starting"
    status, detail = Status.PASSED, ""
    try:
        with trio.fail_after(timeout):
            detail = await fn(ctx)
    except CheckSkipped as exc:
        status, detail = Status.SKIPPED, str(exc)
    except CheckFailed as exc:
        status, detail = Status.FAILED, str(exc)
    except trio.TooSlowError:
        status, detail = Status.FAILED, f"timed out after {timeout:g} s ({ctx.step})"
    except HandshakeFailed as exc:
        status = Status.FAILED
        detail = f"the TLS handshake failed ({exc.reason}) at {ctx.step}"
    except ClientClosed as exc:
        status, detail = Status.FAILED, f"{exc} ({ctx.step})"
    except OSError as exc:
        status, detail = Status.FAILED, f"cannot reach {ctx.target}: {exc.strerror or exc}"
    except MirrorHostError as exc:
        status, detail = Status.FAILED, f"{exc} ({ctx.step})"
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
    """
    chosen, unknown = select([c.name for c in CHECKS], options.only, options.skip)
    if unknown:
        raise ValueError(f"no check matches {', '.join(map(repr, unknown))}")
    ctx = Context(target, allow_input=options.allow_input, pane_choice=options.pane)
    ctx.code = options.code
    ctx.wait = options.wait
    results: list[CheckResult] = []

    def report(result: CheckResult) -> None:
        results.append(result)
        if on_result is not None:
            on_result(result)

    report(
        await _run_one(
            ctx,
            ENROLL,
            partial(transport.check_pair_enroll, code=options.code, name=options.name),
            ENROLL_SECONDS,
        )
    )
    if ctx.credential is not None:
        discovery = await _run_one(ctx, "discovery", panes.discover, DISCOVERY_SECONDS)
        if discovery.status is not Status.PASSED:
            ctx.discovery_error = discovery.detail
    for check in CHECKS:
        if check.name not in chosen:
            continue
        if check.types and not options.allow_input:
            report(CheckResult(check.name, Status.SKIPPED, "types into the pane: --allow-input", 0))
            continue
        report(await _run_one(ctx, check.name, check.run, check.timeout))
    return results
