"""``mirror-host attach``: watch and drive a host's pane from this terminal. I/O.

Theory of operation
-------------------

1. **Credential.** With ``--code`` the tool pairs (device name: this machine's
   host name) and saves the credential for the address
   (:mod:`mirror_host.client.credentials`); otherwise it uses the saved one.
2. **Pane.** One connection lists the panes; ``--pane`` or a numbered chooser
   picks one.
3. **Attachment.** The terminal goes to raw mode and the alternate screen. Three
   tasks run until the attachment ends: the *keyboard* (keys become ``input``
   bytes; Ctrl-] detaches), *signals* (a resize redraws; SIGTERM/SIGHUP end)
   and the *connection*, which logs in, subscribes (``vt-v1``, or ``text-v1``
   with ``--text``), draws each frame through a libghostty replica
   (:mod:`mirror_host.client.replay`) and acknowledges it once written. It pings
   every 2 s and calls the connection lost after 8 s without a packet; a lost
   connection is retried with backoff (1, 2, 4, 8, 15 s) until Ctrl-].
4. **Ending.** ``ended`` (taken over, host stopped, pane closed) and the host's
   own disconnect end the attachment with a plain sentence; Ctrl-] ends it with
   status 0. The terminal is restored on every path.
"""

from __future__ import annotations

import math
import signal
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar
from uuid import UUID

import trio

from mirror_host.auth.pairing import InvalidPairingCode, normalize_code
from mirror_host.client.address import HostAddress
from mirror_host.client.chooser import (
    DETACH_KEY,
    LOCKED_OUT,
    NOT_PROWL,
    backoff,
    describe_end,
    find_pane,
    format_pane_list,
    key_name,
    parse_choice,
)
from mirror_host.client.client import (
    ClientClosed,
    Credential,
    HandshakeFailed,
    HostIdentityChanged,
    Incoming,
    MirrorClient,
    PairingRefused,
    connect_failure,
    login,
    pair_device,
)
from mirror_host.client.credentials import CredentialStore
from mirror_host.client.replay import Presenter, Replica, crop_window
from mirror_host.client.terminal import ALT_SCREEN_OFF, ALT_SCREEN_ON, LocalTerminal
from mirror_host.control import (
    Acknowledge,
    Ended,
    Failure,
    Input,
    Intent,
    ListPanes,
    PaneDescriptor,
    Panes,
    Ping,
    Representation,
    Subscribe,
    Subscribed,
)
from mirror_host.errors import ClientError
from mirror_host.limits import HEARTBEAT_SECONDS, IDLE_TIMEOUT_SECONDS, MAX_INPUT_BYTES
from mirror_host.wire import TextFramePacket, VTFramePacket

__all__ = ["DETACH_KEY", "AttachError", "AttachOptions", "Ending", "attach"]

#: How long the host may take to answer ``list`` or ``subscribe``.
REPLY_SECONDS = 10.0


class AttachError(ClientError):
    """Attach cannot start; the message is the one line shown to the user."""


@dataclass(frozen=True, slots=True)
class AttachOptions:
    """The command line of ``mirror-host attach``."""

    address: HostAddress
    code: str | None = None
    pane: str | None = None
    text: bool = False
    take_over: bool = False
    forget: bool = False
    store: Path | None = None
    #: The name to pair under (default: this machine's host name).
    name: str | None = None
    #: The key that detaches (and quits the pane prompt).
    detach_key: bytes = DETACH_KEY


@dataclass(frozen=True, slots=True)
class Ending:
    """How an attachment ended: the exit status and the sentence shown."""

    status: int
    message: str


def device_name() -> str:
    """This machine's host name, as Prowl's Mac client names itself (≤ 80 characters)."""
    return (socket.gethostname() or "mirror-host attach")[:80]


def _unreachable(address: HostAddress, exc: OSError) -> AttachError:
    return AttachError(f"cannot reach {address}: {connect_failure(exc)}")


def saved_credential(options: AttachOptions, store: CredentialStore) -> Credential | None:
    """The credential saved for the address (``None`` is fine only with ``--code``).

    Raises:
        AttachError: no credential and no code.
    """
    saved = store.get(options.address)
    if saved is None and options.code is None:
        raise AttachError(
            f"this device is not paired with {options.address}: run again with --code CODE "
            "(from `mirror-host pair` on the host, or Prowl's Add a Device)"
        )
    return saved


async def obtain_credential(
    options: AttachOptions, store: CredentialStore, say: Callable[[str], None]
) -> Credential:
    """The saved credential, or a new one from pairing with ``--code``.

    Raises:
        AttachError: no credential and no code, or pairing failed.
    """
    address = options.address
    saved = saved_credential(options, store)
    if options.code is None:
        assert saved is not None
        return saved
    try:
        code = normalize_code(options.code)
    except InvalidPairingCode as exc:
        raise AttachError(f"--code: {exc}") from exc
    expected = saved.host_id if saved is not None else None
    name = options.name or device_name()
    try:
        credential = await pair_device(
            address.host, address.port, code, name, expected_host_id=expected
        )
    except HostIdentityChanged as exc:
        raise _identity_changed(address) from exc
    except HandshakeFailed as exc:
        raise _not_a_key_problem(address, exc) or AttachError(
            f"pairing with {address} failed: the code is wrong or has expired "
            "(open a new pairing window on the host and try again)"
        ) from exc
    except PairingRefused as exc:
        if exc.reason:  # the host said why (mirror-host: it could not save the device)
            raise AttachError(f"{address} refused to pair this device: {exc.reason}") from exc
        raise AttachError(
            f"{address} accepted the code but refused to pair this device: its log says "
            "why (mirror-host: it could not save the device); fix that and pair again"
        ) from exc
    except ClientClosed as exc:
        raise AttachError(f"pairing with {address} failed: {exc}") from exc
    except OSError as exc:
        raise _unreachable(address, exc) from exc
    store.put(address, credential)
    say(f"paired with {address} as {name!r}")
    return credential


def _identity_changed(address: HostAddress) -> AttachError:
    return AttachError(
        f"the host at {address} is not the one this device paired with (its identity "
        "changed); if it was reinstalled, run again with --forget --code CODE"
    )


def _not_a_key_problem(address: HostAddress, exc: HandshakeFailed) -> AttachError | None:
    """A failed handshake whose cause is not the code or the key: the host's lock-out
    (refused before TLS), or a peer that is not a Prowl host."""
    if exc.before_tls:
        return AttachError(f"{address} {LOCKED_OUT}")
    if exc.not_prowl:
        return AttachError(f"{address} {NOT_PROWL}")
    return None


def _login_error(address: HostAddress, exc: Exception) -> AttachError:
    if isinstance(exc, HostIdentityChanged):
        return _identity_changed(address)
    if isinstance(exc, HandshakeFailed):
        if (problem := _not_a_key_problem(address, exc)) is not None:
            return problem
        if exc.unknown_identity:
            return AttachError(
                f"{address} does not know this device (it was revoked or unpaired): "
                "pair again with --code CODE"
            )
        return AttachError(
            f"{address} refused this device during TLS ({exc.reason}); if it was "
            "revoked, pair again with --code CODE"
        )
    if isinstance(exc, OSError):
        return _unreachable(address, exc)
    return AttachError(f"{address} refused this device's login ({exc})")


async def list_panes(address: HostAddress, credential: Credential) -> Panes:
    """The host's panes, over a connection of their own.

    Raises:
        AttachError: the host cannot be reached or refuses the device.
    """
    try:
        async with login(address.host, address.port, credential) as client:
            await client.send(ListPanes())
            while True:
                item = await client.receive(timeout=REPLY_SECONDS)
                if isinstance(item, Panes):
                    return item
    except (ClientClosed, OSError) as exc:
        raise _login_error(address, exc) from exc
    except trio.TooSlowError as exc:
        raise AttachError(f"{address} did not list its panes within {REPLY_SECONDS:g} s") from exc


async def choose_pane(
    panes: Panes,
    choice: str | None,
    *,
    show: Callable[[str], None],
    ask: Callable[[str], Awaitable[str | None]],
    detach_key: bytes = DETACH_KEY,
) -> PaneDescriptor | None:
    """``--pane``, the only pane, or the one picked from a numbered list; ``None``
    when the detach key was typed at the prompt (the user quit).

    Raises:
        AttachError: no panes, an unknown ``--pane``, or no choice made.
    """
    listed = panes.panes
    if not listed:
        raise AttachError("the host lists no panes")
    if choice is not None:
        pane = find_pane(listed, choice)
        if pane is None:
            raise AttachError(
                f"no pane {choice!r}: give a number from 1 to {len(listed)} or a pane id"
            )
        return pane
    if len(listed) == 1:
        return listed[0]
    show("Panes on the host:")
    for line in format_pane_list(listed, with_ids=True):
        show(line)
    quit_key = key_name(detach_key)
    for _ in range(3):
        answer = await ask(f"Pane number (1-{len(listed)}; {quit_key} quits): ")
        if answer is None:
            break
        if detach_key.decode("latin-1") in answer:
            return None
        index = parse_choice(answer, len(listed))
        if index is not None:
            return listed[index]
        show(f"Type a number from 1 to {len(listed)}.")
    raise AttachError("no pane chosen")


class _InputTarget:
    """The connection the keyboard types into.

    Keys typed before the first subscription wait for it (up to 64 KiB); keys
    typed while reconnecting are dropped: the user cannot see what they would do.
    """

    def __init__(self) -> None:
        self.client: MirrorClient | None = None
        self.lease: UUID | None = None
        self._early = bytearray()
        self._connected_once = False

    async def connected(self, client: MirrorClient, lease: UUID) -> None:
        self.client, self.lease = client, lease
        self._connected_once = True
        early, self._early = bytes(self._early), bytearray()
        if early:
            await self.send_input(early)

    def lost(self) -> None:
        self.client = self.lease = None

    async def send_input(self, data: bytes) -> None:
        client, lease = self.client, self.lease
        if client is None or lease is None:
            if not self._connected_once:
                self._early += data[: MAX_INPUT_BYTES - len(self._early)]
            return
        for start in range(0, len(data), MAX_INPUT_BYTES):
            try:
                chunk = data[start : start + MAX_INPUT_BYTES]
                await client.send(Input(data=chunk, subscription_id=lease))
            except ClientClosed:
                return  # the connection task notices and reconnects


@dataclass(frozen=True, slots=True)
class _Lost:
    reason: str


_HOST_CLOSED = _Lost("the host closed the connection")
_Answer = TypeVar("_Answer")


def _panes(item: Incoming) -> Panes | None:
    return item if isinstance(item, Panes) else None


class Attachment:
    """One attached terminal; see the module docstring."""

    def __init__(
        self,
        options: AttachOptions,
        credential: Credential,
        pane: PaneDescriptor,
        terminal: LocalTerminal,
    ) -> None:
        self.options = options
        self.credential = credential
        self.pane = pane
        self.terminal = terminal
        self.presenter = Presenter(detach=key_name(options.detach_key))
        self.representation = Representation.TEXT if options.text else Representation.VT
        self._input = _InputTarget()
        self._replica: Replica | None = None
        self._last: VTFramePacket | TextFramePacket | None = None
        self._draw_lock = trio.Lock()
        self._ending: Ending | None = None
        self._scope = trio.CancelScope()
        self._subscribed_this_time = False

    async def run(self) -> Ending:
        """Attach until Ctrl-], an ``ended``, or a signal."""
        with self._scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._keyboard)
                nursery.start_soon(self._signals)
                nursery.start_soon(self._connections)
        if self._replica is not None:
            self._replica.close()
        return self._ending or Ending(0, f"detached from {self.pane.title!r}")

    def _finish(self, ending: Ending) -> None:
        if self._ending is None:
            self._ending = ending
        self._scope.cancel()

    # ------------------------------------------------------------ keyboard and signals

    async def _keyboard(self) -> None:
        while True:
            data = await self.terminal.read()
            if not data:
                self._finish(Ending(1, "the terminal went away"))
                return
            cut = data.find(self.options.detach_key)
            if self.representation is Representation.TEXT and cut < 0:
                # A text view sends no keys: Ctrl-C, the key people try, leaves it too.
                cut = data.find(b"\x03")
            keys = data if cut < 0 else data[:cut]
            if keys and self.representation is Representation.VT:
                await self._input.send_input(keys)
            if cut >= 0:
                self._finish(Ending(0, f"detached from {self.pane.title!r}"))
                return

    async def _signals(self) -> None:
        watched = (signal.SIGWINCH, signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
        with trio.open_signal_receiver(*watched) as signals:
            async for number in signals:
                if number == signal.SIGWINCH:
                    await self._redraw()
                else:
                    self._finish(Ending(1, f"stopped by {signal.Signals(number).name}"))
                    return

    # ------------------------------------------------------------ drawing

    async def _write(self, data: bytes) -> None:
        async with self._draw_lock:
            await self.terminal.write(data)

    async def _redraw(self) -> None:
        async with self._draw_lock:
            await self.terminal.write(self._render())

    def _render(self) -> bytes:
        frame, local = self._last, self.terminal.size()
        if isinstance(frame, VTFramePacket):
            assert self._replica is not None
            host = (frame.columns, frame.rows)
            cursor = self._replica.cursor
            window = crop_window(host, local, cursor)
            body = self._replica.window_vt(window)
            return self.presenter.vt(body, window, cursor, host, local)
        if isinstance(frame, TextFramePacket):
            return self.presenter.text(frame.text, (frame.columns, frame.rows), local)
        return b""

    async def _draw(self, frame: VTFramePacket | TextFramePacket) -> None:
        if isinstance(frame, VTFramePacket):
            size = (frame.columns, frame.rows)
            if self._replica is None or self._replica.size != size:
                if self._replica is not None:
                    self._replica.close()
                self._replica = Replica(frame.columns, frame.rows, scrollback_lines=0)
            self._replica.replay(frame.data)
        self._last = frame
        await self._redraw()

    async def _status(self, message: str) -> None:
        await self._write(self.presenter.status(message, self.terminal.size()))

    # ------------------------------------------------------------ the connection

    async def _connections(self) -> None:
        address = self.options.address
        attempt = 0
        while True:
            try:
                outcome = await self._connection()
            except HandshakeFailed as exc:
                if exc.unknown_identity:
                    self._finish(Ending(1, str(_login_error(address, exc))))
                    return
                if exc.before_tls:
                    outcome = _Lost("refused before TLS: too many failed attempts from here")
                else:
                    outcome = _Lost(f"TLS failed ({exc.reason})")
            except HostIdentityChanged as exc:
                self._finish(Ending(1, str(_login_error(address, exc))))
                return
            except ClientClosed as exc:
                outcome = _Lost(str(exc))
            except OSError as exc:
                outcome = _Lost(connect_failure(exc))
            self._input.lost()
            if isinstance(outcome, Ending):
                self._finish(outcome)
                return
            problem = outcome.reason
            if self._subscribed_this_time:
                attempt = 0
            attempt += 1
            wait = backoff(attempt)
            await self._status(
                f"connection lost ({problem}); reconnecting in {wait:g} s · "
                f"{self.presenter.detach} quits"
            )
            await trio.sleep(wait)
            await self._status("reconnecting…")

    async def _connection(self) -> Ending | _Lost:
        self._subscribed_this_time = False
        address, options = self.options.address, self.options
        intent = Intent.TAKEOVER if options.take_over else Intent.IF_FREE
        async with login(address.host, address.port, self.credential) as client:
            # The pane may be gone by now (closed, or the host restarted with new panes):
            # subscribing to it would only get the connection closed.
            await client.send(ListPanes())
            panes = await self._reply(client, _panes, "`panes`")
            if not isinstance(panes, Panes):
                return panes
            if all(pane.id != self.pane.id for pane in panes.panes):
                return Ending(1, f"the pane {self.pane.title!r} is no longer on the host")
            await client.send(
                Subscribe(pane_id=self.pane.id, representation=self.representation, intent=intent)
            )
            answer: Subscribed | Ending | _Lost = await self._reply(
                client, self._subscribe_answer, "answer to subscribe"
            )
            if not isinstance(answer, Subscribed):
                return answer
            self._subscribed_this_time = True
            await self._input.connected(client, answer.subscription_id)
            lost: list[_Lost] = []
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._heartbeat, client, lost, nursery.cancel_scope)
                ending = await self._receive(client, answer.subscription_id)
                nursery.cancel_scope.cancel()
            if lost:
                return lost[0]
            return ending

    async def _reply(
        self, client: MirrorClient, pick: Callable[[Incoming], _Answer | None], awaited: str
    ) -> _Answer | _Lost:
        """What ``pick`` makes of the first message it answers, within the reply
        time; anything else that arrives meanwhile is passed over."""
        with trio.move_on_after(REPLY_SECONDS):
            while True:
                try:
                    item = await client.receive(timeout=REPLY_SECONDS)
                except ClientClosed:
                    return _HOST_CLOSED
                picked = pick(item)
                if picked is not None:
                    return picked
        return _Lost(f"no {awaited} within {REPLY_SECONDS:g} s")

    def _subscribe_answer(self, item: Incoming) -> Subscribed | Ending | _Lost | None:
        if isinstance(item, Subscribed):
            return item
        if isinstance(item, Failure):
            if item.error.startswith("PANE_BUSY"):
                if self._ever_subscribed:
                    return _Lost("the pane is still held, probably by the lost connection")
                # Prowl's PANE_BUSY names nobody: it may be this device's
                # own other attach (its credential, in another terminal).
                return Ending(
                    1,
                    f"{self.pane.title!r} is already mirrored, by another device or "
                    "another `mirror-host attach` of this one: run again with "
                    "--take-over to take it",
                )
            return Ending(1, f"the host refused the pane: {item.error}")
        if isinstance(item, Ended):
            return Ending(1, describe_end(item.reason))
        return None

    @property
    def _ever_subscribed(self) -> bool:
        return self._last is not None

    async def _heartbeat(
        self, client: MirrorClient, lost: list[_Lost], scope: trio.CancelScope
    ) -> None:
        started = trio.current_time()
        while True:
            await trio.sleep(HEARTBEAT_SECONDS)
            last = client.last_received or started
            if trio.current_time() - last > IDLE_TIMEOUT_SECONDS:
                lost.append(_Lost(f"nothing from the host for {IDLE_TIMEOUT_SECONDS:g} s"))
                scope.cancel()
                return
            try:
                await client.send(Ping())
            except ClientClosed:
                lost.append(_HOST_CLOSED)
                scope.cancel()
                return

    async def _receive(self, client: MirrorClient, lease: UUID) -> Ending | _Lost:
        while True:
            try:
                item = await client.receive(timeout=math.inf)
            except ClientClosed:
                return _HOST_CLOSED
            if isinstance(item, VTFramePacket | TextFramePacket):
                if item.subscription_id != lease:
                    continue
                await self._draw(item)
                try:
                    await client.send(Acknowledge(sequence=item.sequence, subscription_id=lease))
                except ClientClosed:
                    return _HOST_CLOSED
            elif isinstance(item, Ended):
                return Ending(1, describe_end(item.reason))
            elif isinstance(item, Failure):
                return Ending(1, f"the host ended the mirror: {item.error}")


async def attach(
    options: AttachOptions,
    *,
    say: Callable[[str], None],
    show: Callable[[str], None],
    ask: Callable[[str], Awaitable[str | None]],
) -> int:
    """Run ``mirror-host attach``; return the exit status.

    Raises:
        AttachError: it could not start (the message is for the user).
    """
    store = CredentialStore(options.store)
    if options.forget:
        removed = store.forget(options.address)
        say(
            f"forgot the credential for {options.address}"
            if removed
            else f"no saved credential for {options.address}"
        )
        if options.code is None:
            return 0
    saved_credential(options, store)  # nothing to attach with: say so, terminal or not
    # Before pairing: without a terminal, pairing would burn the code and add a
    # device for nothing.
    terminal = LocalTerminal.open()
    try:
        credential = await obtain_credential(options, store, say)
        panes = await list_panes(options.address, credential)
        with terminal.key_ends_line(options.detach_key):
            pane = await choose_pane(
                panes, options.pane, show=show, ask=ask, detach_key=options.detach_key
            )
        if pane is None:
            say("no pane chosen")
            return 0
        with terminal.raw():
            attachment = Attachment(options, credential, pane, terminal)
            try:
                await terminal.write(ALT_SCREEN_ON)
                ending = await attachment.run()
            finally:
                # Put the terminal back even when cancelled mid-write.
                terminal.write_blocking(attachment.presenter.leave() + ALT_SCREEN_OFF)
    finally:
        terminal.close()
    say(ending.message)
    return ending.status
