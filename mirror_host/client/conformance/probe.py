"""Connections as the conformance checks use them: strict, explicit, bounded. I/O.

A :class:`Conn` wraps one :class:`~mirror_host.client.client.MirrorClient` and
turns every surprise into a :class:`CheckFailed` that says what was expected:
a message kind nobody asked for, a frame that breaks the frame rules (judged by
:class:`~mirror_host.client.conformance.ledger.FrameLedger`, ``scrollState``
included on a lease that opted in), a close while waiting, or nothing within
the wait. A ``panes`` that answers no ``list`` fails any check at once, with
what it costs Prowl's own apps. Pings are answered in the background unless a
check wants silence.

Everything here relies on the protocol alone, never on mirror-host's files,
logs or admin socket, so the suite runs against any Prowl mirror host.
"""

from __future__ import annotations

import ssl
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import NoReturn, TypeVar
from uuid import UUID

import trio

from mirror_host.auth.proofs import device_proof
from mirror_host.client.address import HostAddress
from mirror_host.client.chooser import LOCKED_OUT, NOT_PROWL
from mirror_host.client.client import (
    ClientClosed,
    Credential,
    HandshakeFailed,
    Incoming,
    MirrorClient,
    connect_failure,
    open_client,
)
from mirror_host.client.conformance.ledger import FrameLedger, FrameView
from mirror_host.control import (
    Acknowledge,
    Authenticate,
    Authenticated,
    Challenge,
    ControlMessage,
    Failure,
    Intent,
    ListPanes,
    PaneDescriptor,
    Panes,
    Refresh,
    Representation,
    Scroll,
    ScrollState,
    Subscribe,
    Subscribed,
)
from mirror_host.wire import TextFramePacket, VTFramePacket

__all__ = [
    "HANDSHAKE_SECONDS",
    "PANE_BUSY_PREFIX",
    "UNASKED_PANES",
    "WAIT_SECONDS",
    "CheckFailed",
    "CheckSkipped",
    "Conn",
    "SuiteAborted",
    "Context",
    "Frame",
    "connect",
    "device",
    "fail",
    "frame_text",
    "subscribed",
]

Frame = VTFramePacket | TextFramePacket
M = TypeVar("M")

#: How long the host may take for what it owes: a reply, a frame, a close after a
#: violation (``--wait``).
WAIT_SECONDS = 5.0
#: How long a TLS handshake may take (Prowl's Mac client allows 10 s).
HANDSHAKE_SECONDS = 10.0
PANE_BUSY_PREFIX = "PANE_BUSY"
UNASKED_PANES = (
    "the host sent `panes` that answers no `list`: Prowl's iPhone app then sends "
    "`subscribe` again, and a second `subscribe` on a connection closes it; the Mac "
    "re-subscribes when it has no frame yet. Send `panes` only in reply to `list`"
)


class CheckFailed(Exception):
    """The host broke a rule; the message says which, for the report."""


class CheckSkipped(Exception):
    """The check does not apply to this host (a capability it does not advertise …)."""


class SuiteAborted(Exception):
    """Nothing can be checked: the very first connection could not reach the host, or
    the host refused this address before TLS. The message is the one line to show."""


def fail(reason: str) -> NoReturn:
    """Fail the running check with ``reason``."""
    raise CheckFailed(reason)


@dataclass(slots=True)
class Context:
    """What the checks share: the target, the paired device, the listed panes."""

    target: HostAddress
    allow_input: bool = False
    pane_choice: str | None = None
    #: The pairing code (``pair.single-use`` shows the host it no longer opens TLS).
    code: str = ""
    #: The name the suite pairs under.
    device_name: str = "mirror-host conformance"
    #: How long the host may take for what it owes (see :data:`WAIT_SECONDS`).
    wait: float = WAIT_SECONDS
    credential: Credential | None = None
    host_run_id: UUID | None = None
    capabilities: tuple[str, ...] = ()
    panes: tuple[PaneDescriptor, ...] = ()
    #: Where the running check is, for a timeout's report.
    step: str = "starting"
    #: Why listing the panes failed, if it did (the pane checks are then skipped).
    discovery_error: str | None = None
    #: The pane the checks use (set by discovery), or why there is none.
    chosen: PaneDescriptor | None = None
    no_pane: str | None = None
    #: Every pane was listed busy, yet one was free: ``takeover.busy`` reports it.
    busy_error: str | None = None
    #: ``pair.wrong-proof`` ran before pairing (``pair.enroll`` mentions it if it fails).
    tried_wrong_pair_proof: bool = False
    #: The host has answered a TLS handshake (completed or refused with an alert) once.
    reached: bool = False

    @property
    def host_id(self) -> UUID:
        return self.require_credential().host_id

    def require_credential(self) -> Credential:
        if self.credential is None:
            raise CheckSkipped("no paired device (pair.enroll failed)")
        return self.credential

    def seconds(self, waits: float, base: float = 0.0) -> float:
        """``base`` seconds plus ``waits`` times ``--wait``."""
        return base + waits * self.wait

    def pane(self) -> PaneDescriptor:
        """The pane the checks subscribe to: ``--pane``, the first one not busy, or
        (every pane listed busy, but the first one free) the first one."""
        if self.discovery_error is not None:
            raise CheckSkipped(f"listing the panes failed: {self.discovery_error}")
        if self.chosen is None:
            raise CheckSkipped(self.no_pane or "the panes were not listed")
        return self.chosen

    def needs(self, capability: str) -> None:
        if self.discovery_error is not None:
            raise CheckSkipped(f"listing the panes failed: {self.discovery_error}")
        if capability not in self.capabilities:
            raise CheckSkipped(f"the host does not advertise {capability!r}")


def frame_text(frame: Frame) -> str:
    """A frame's text with escape sequences removed (good enough to find a word)."""
    if isinstance(frame, TextFramePacket):
        return frame.text
    out: list[str] = []
    data = frame.data.decode("utf-8", "replace")
    i, n = 0, len(data)
    while i < n:
        ch = data[i]
        if ch == "\x1b" and i + 1 < n:
            follower = data[i + 1]
            if follower == "[":  # CSI: parameters, then one final byte @ … ~
                i += 2
                while i < n and not "@" <= data[i] <= "~":
                    i += 1
                i += 1
            elif follower == "]":  # OSC: up to BEL or ST
                end_bel, end_st = data.find("\x07", i), data.find("\x1b\\", i)
                ends = [e for e in (end_bel, end_st) if e >= 0]
                end = min(ends) if ends else n
                i = end + (2 if end == end_st else 1)
            else:
                i += 2
            continue
        if ch == "\r":
            i += 1
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _view(frame: Frame) -> FrameView:
    if isinstance(frame, VTFramePacket):
        return FrameView(
            frame.subscription_id,
            frame.sequence,
            Representation.VT,
            (frame.columns, frame.rows, frame.data),
        )
    return FrameView(
        frame.subscription_id,
        frame.sequence,
        Representation.TEXT,
        (frame.columns, frame.rows, frame.truncated, frame.text),
    )


def _describe(item: Incoming) -> str:
    if isinstance(item, VTFramePacket | TextFramePacket):
        kind = "VT frame" if isinstance(item, VTFramePacket) else "text frame"
        return f"a {kind} (sequence {item.sequence})"
    if isinstance(item, Failure):
        return f"failure {item.error!r}"
    return f"`{item.CASE}`"


class Conn:
    """One connection to the host under test. Use :func:`device` to open one."""

    def __init__(self, ctx: Context, client: MirrorClient, name: str) -> None:
        self.ctx = ctx
        self.client = client
        self.name = name
        #: The host closed the connection (nothing more will be read).
        self.closed = False
        #: Sending failed (the host is closing); what it sent before is still read.
        self.send_closed = False
        self.ledger: FrameLedger | None = None
        #: The latest frame received, and every frame since :meth:`mark`.
        self.last_frame: Frame | None = None
        self.marked: list[Frame] = []
        #: What the host sent instead of closing (see :meth:`expect_closed`).
        self.unexpected: Incoming | None = None
        self.subscribed: Subscribed | None = None
        self.challenge: Challenge | None = None
        #: ``list`` requests sent and not yet answered by ``panes``.
        self.lists_pending = 0

    # ------------------------------------------------------------ basics

    @property
    def lease(self) -> UUID:
        assert self.subscribed is not None, "subscribe first"
        return self.subscribed.subscription_id

    def _step(self, what: str) -> None:
        self.ctx.step = f"{self.name}: {what}"

    async def send(self, message: ControlMessage) -> None:
        """Send one message; a connection the host already closed fails the check."""
        try:
            await self.client.send(message)
        except ClientClosed:
            self.send_closed = True
            fail(f"{self.name}: the host closed the connection before {message.CASE} was sent")
        if isinstance(message, Refresh | Scroll) and self.ledger is not None:
            self.ledger.forced()
        if isinstance(message, ListPanes):
            self.lists_pending += 1

    async def _next(self, timeout: float, what: str) -> Incoming | None:
        """The next item, or ``None`` when nothing came within ``timeout``."""
        if self.closed:
            fail(f"{self.name}: the connection is closed (waiting for {what})")
        self._step(f"waiting for {what}")
        deadline = trio.current_time() + max(timeout, 0.0)
        while True:
            try:
                item = await self.client.receive(timeout=max(deadline - trio.current_time(), 0))
            except trio.TooSlowError:
                return None
            except ClientClosed:
                self.closed = True
                reason = self.client.decode_error
                if reason:
                    fail(f"{self.name}: the host sent an invalid packet ({reason}) while {what}")
                fail(f"{self.name}: the host closed the connection while waiting for {what}")
            if isinstance(item, Panes):
                if self.lists_pending == 0:
                    fail(f"{self.name}: {UNASKED_PANES}")
                self.lists_pending -= 1
            if isinstance(item, ScrollState) and self.ledger is not None:
                # Judged with the frame it belongs to, never handed to a check.
                problems = self.ledger.scroll_state_message(item.sequence, item.subscription_id)
                if problems:
                    fail(f"{self.name}: " + "; ".join(problems))
                continue
            return item

    def mark(self) -> None:
        """Start collecting frames afresh in :attr:`marked`."""
        self.marked = []

    def _record_frame(self, frame: Frame, what: str) -> None:
        if self.ledger is None:
            fail(f"{self.name}: {_describe(frame)} arrived before `subscribed` ({what})")
        problems = self.ledger.frame(_view(frame))
        if problems:
            fail(f"{self.name}: " + "; ".join(problems))
        self.last_frame = frame
        self.marked.append(frame)

    # ------------------------------------------------------------ waiting

    async def expect(
        self, kind: type[M], what: str, *, timeout: float | None = None, ack: bool = True
    ) -> M:
        """Wait for a control message of ``kind``; frames meanwhile are checked
        (and acknowledged with ``ack``); anything else fails the check."""
        item = await self.expect_one((kind,), what, timeout=timeout, ack=ack)
        assert isinstance(item, kind)
        return item

    async def expect_one(
        self,
        kinds: tuple[type, ...],
        what: str,
        *,
        timeout: float | None = None,
        ack: bool = True,
    ) -> ControlMessage:
        """Like :meth:`expect`, for any of ``kinds`` (control messages)."""
        timeout = self.ctx.wait if timeout is None else timeout
        item = await self.maybe_one(kinds, what, timeout=timeout, ack=ack)
        if item is None:
            fail(f"{self.name}: no {what} within {timeout:g} s")
        return item

    async def maybe_one(
        self, kinds: tuple[type, ...], what: str, *, timeout: float, ack: bool = True
    ) -> ControlMessage | None:
        """Like :meth:`expect_one`, but ``None`` when nothing of ``kinds`` came in time."""
        deadline = trio.current_time() + timeout
        while True:
            item = await self._next(deadline - trio.current_time(), what)
            if item is None:
                return None
            if isinstance(item, VTFramePacket | TextFramePacket):
                self._record_frame(item, what)
                if ack:
                    await self.ack(item)
                continue
            if isinstance(item, kinds):
                return item
            fail(f"{self.name}: {_describe(item)} while waiting for {what}")

    async def frame(
        self, what: str = "a frame", *, timeout: float | None = None, ack: bool = True
    ) -> Frame:
        """The next frame (rule-checked), acknowledged unless ``ack`` is false."""
        timeout = self.ctx.wait if timeout is None else timeout
        item = await self._next(timeout, what)
        if item is None:
            fail(f"{self.name}: no {what} within {timeout:g} s")
        if not isinstance(item, VTFramePacket | TextFramePacket):
            fail(f"{self.name}: {_describe(item)} while waiting for {what}")
        self._record_frame(item, what)
        if ack:
            await self.ack(item)
        return item

    async def quiet(self, seconds: float, what: str, *, ack: bool = True) -> list[Frame]:
        """Frames that arrive within ``seconds`` (rule-checked); nothing else may."""
        frames: list[Frame] = []
        deadline = trio.current_time() + seconds
        while (left := deadline - trio.current_time()) > 0:
            item = await self._next(left, what)
            if item is None:
                break
            if not isinstance(item, VTFramePacket | TextFramePacket):
                fail(f"{self.name}: {_describe(item)} while {what}")
            self._record_frame(item, what)
            frames.append(item)
            if ack:
                await self.ack(item)
        return frames

    async def settle(self, *, quiet: float = 0.8, limit: float = 5.0) -> None:
        """Acknowledge frames until none has come for ``quiet`` seconds."""
        deadline = trio.current_time() + limit
        while trio.current_time() < deadline:
            if not await self.quiet(quiet, "waiting for the pane to settle"):
                return
        raise CheckSkipped(
            f"the pane kept changing for {limit:g} s; choose a quiet one with --pane"
        )

    async def expect_closed(self, violation: str, *, within: float | None = None) -> None:
        """The host must close the connection (silently) soon after ``violation``."""
        within = self.ctx.wait if within is None else within
        deadline = trio.current_time() + within
        while True:
            if self.closed:
                return
            self._step(f"waiting for the host to close the connection after {violation}")
            try:
                item = await self.client.receive(timeout=max(deadline - trio.current_time(), 0))
            except trio.TooSlowError:
                fail(f"{self.name}: the connection stayed open {within:g} s after {violation}")
            except ClientClosed:
                self.closed = True
                return
            if isinstance(item, VTFramePacket | TextFramePacket):
                if self.ledger is not None:
                    problems = self.ledger.frame(_view(item))
                    if problems:
                        fail(f"{self.name}: after {violation}: " + "; ".join(problems))
                    self.last_frame = item
                continue
            self.unexpected = item
            fail(
                f"{self.name}: the host answered {violation} with {_describe(item)} "
                "instead of closing the connection"
            )

    async def stays_open(self, what: str) -> None:
        """Prove the connection still works: ``list`` must be answered."""
        await self.send(ListPanes())
        await self.expect(Panes, f"`panes` ({what})")

    # ------------------------------------------------------------ protocol steps

    async def read_challenge(self) -> Challenge:
        challenge = await self.expect(Challenge, "`challenge`", ack=False)
        if len(challenge.nonce) != 32:
            fail(f"{self.name}: the challenge nonce has {len(challenge.nonce)} bytes, not 32")
        self.challenge = challenge
        return challenge

    async def login(self) -> None:
        """Challenge, authenticate, authenticated (the host's ids checked)."""
        credential = self.ctx.require_credential()
        challenge = await self.read_challenge()
        if challenge.host_id != credential.host_id:
            fail(
                f"{self.name}: the challenge names host {challenge.host_id}, "
                f"but pairing named {credential.host_id}"
            )
        proof = device_proof(
            credential.key, challenge.host_id, credential.device_id, challenge.nonce
        )
        await self.send(Authenticate(device_id=credential.device_id, proof=proof))
        done = await self.expect(Authenticated, "`authenticated`", ack=False)
        if done.host_id != credential.host_id:
            fail(f"{self.name}: `authenticated` names host {done.host_id}, not the paired one")

    async def list_panes(self) -> Panes:
        await self.send(ListPanes())
        return await self.expect(Panes, "`panes`")

    async def subscribe(
        self,
        pane_id: UUID,
        representation: Representation = Representation.VT,
        intent: Intent = Intent.IF_FREE,
        *,
        scroll_state: bool = False,
    ) -> Subscribed | Failure:
        """Send ``subscribe`` (opting in to scroll state with ``scroll_state``); return
        ``subscribed`` (the lease set up) or the ``failure``."""
        await self.send(
            Subscribe(
                pane_id=pane_id,
                representation=representation,
                intent=intent,
                include_scroll_state=True if scroll_state else None,
            )
        )
        while True:
            item = await self._next(self.ctx.wait, "`subscribed`")
            if item is None:
                fail(f"{self.name}: no `subscribed` within {self.ctx.wait:g} s")
            if isinstance(item, Failure):
                return item
            if isinstance(item, Subscribed):
                break
            if isinstance(item, VTFramePacket | TextFramePacket):
                fail(f"{self.name}: {_describe(item)} arrived before `subscribed`")
            fail(f"{self.name}: {_describe(item)} while waiting for `subscribed`")
        if item.pane_id != pane_id:
            fail(f"{self.name}: `subscribed` names pane {item.pane_id}, not {pane_id}")
        if self.ctx.host_run_id is not None and item.host_run_id != self.ctx.host_run_id:
            fail(
                f"{self.name}: `subscribed` carries hostRunID {item.host_run_id}, "
                f"but `panes` said {self.ctx.host_run_id}"
            )
        self.subscribed = item
        self.ledger = FrameLedger(item.subscription_id, representation, scroll_state=scroll_state)
        return item

    async def ack(self, frame: Frame) -> None:
        """Acknowledge ``frame``. A connection the host is closing is no failure here:
        what it sent before closing (an ``ended`` …) is still read, and the wait that
        follows judges it."""
        if not self.send_closed:
            try:
                await self.client.send(
                    Acknowledge(sequence=frame.sequence, subscription_id=self.lease)
                )
            except ClientClosed:
                self.send_closed = True
        if self.ledger is not None:
            self.ledger.acknowledged(frame.sequence)

    async def refresh(self) -> None:
        await self.send(Refresh(subscription_id=self.lease))


@asynccontextmanager
async def connect(
    ctx: Context,
    identity: str,
    key: bytes,
    what: str,
    *,
    answer_pings: bool = True,
    context: ssl.SSLContext | None = None,
) -> AsyncIterator[MirrorClient]:
    """A TLS connection to the target; a handshake that neither completes nor fails
    within :data:`HANDSHAKE_SECONDS` fails the check with its own message.

    Until the host has answered once, a host that cannot be reached or refuses this
    address before TLS aborts the whole suite (:class:`SuiteAborted`): every check
    would only fail the same way.
    """
    entered = False
    try:
        async with (
            _first_contact(ctx),
            open_client(
                ctx.target.host,
                ctx.target.port,
                identity,
                key,
                answer_pings=answer_pings,
                context=context,
                handshake_timeout=HANDSHAKE_SECONDS,
            ) as client,
        ):
            entered = True
            ctx.reached = True
            yield client
    except trio.TooSlowError:
        if entered:
            raise
        fail(
            f"{what}: the TLS handshake neither completed nor failed within {HANDSHAKE_SECONDS:g} s"
        )


@asynccontextmanager
async def _first_contact(ctx: Context) -> AsyncIterator[None]:
    """Turn the first connection's "unreachable" or "locked out" into :class:`SuiteAborted`."""
    try:
        yield
    except HandshakeFailed as exc:
        if exc.before_tls and not ctx.reached:
            raise SuiteAborted(f"{ctx.target} {LOCKED_OUT}") from exc
        if exc.not_prowl and not ctx.reached:
            raise SuiteAborted(f"{ctx.target} {NOT_PROWL} ({exc.reason})") from exc
        ctx.reached = True
        raise
    except ssl.SSLError:  # an OSError, but this machine's TLS library, not the network
        raise
    except OSError as exc:
        if ctx.reached:
            raise
        raise SuiteAborted(
            f"cannot reach {ctx.target}: {connect_failure(exc)} (is the host running and "
            "listening on that address and port?)"
        ) from exc


@asynccontextmanager
async def device(
    ctx: Context, name: str = "connection", *, answer_pings: bool = True, login: bool = True
) -> AsyncIterator[Conn]:
    """A connection with the paired device's key, logged in unless ``login`` is false."""
    credential = ctx.require_credential()
    ctx.step = f"{name}: TLS handshake"
    async with connect(
        ctx, credential.identity, credential.key, name, answer_pings=answer_pings
    ) as client:
        conn = Conn(ctx, client, name)
        if login:
            await conn.login()
        yield conn


@asynccontextmanager
async def subscribed(
    ctx: Context,
    name: str = "connection",
    representation: Representation = Representation.VT,
    *,
    pane: PaneDescriptor | None = None,
    intent: Intent = Intent.IF_FREE,
    busy_wait: float = 4.0,
    scroll_state: bool = False,
) -> AsyncIterator[Conn]:
    """A logged-in connection subscribed to the checks' pane.

    The pane may still be held by a connection an earlier check just closed
    (the host notices a close a moment later), so ``PANE_BUSY`` is retried on a
    fresh connection for up to ``busy_wait`` seconds.
    """
    target = pane or ctx.pane()
    deadline = trio.current_time() + busy_wait
    while True:
        async with device(ctx, name) as conn:
            answer = await conn.subscribe(
                target.id, representation, intent, scroll_state=scroll_state
            )
            if isinstance(answer, Subscribed):
                yield conn
                return
            if not answer.error.startswith(PANE_BUSY_PREFIX):
                fail(f"{name}: subscribe was refused: {answer.error!r}")
        if trio.current_time() >= deadline:
            fail(f"{name}: the pane stayed busy for {busy_wait:g} s (another device holds it?)")
        await trio.sleep(0.25)


def new_id() -> UUID:
    """A random request id."""
    return uuid.uuid4()
