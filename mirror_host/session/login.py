"""The login phase of a session: who may log in on this TLS session, and by when. Pure.

The session opens with ``challenge``. On a TLS session made with a device's key
the peer must ``authenticate`` as that very device; on one made with the
pairing code (the ``pair`` identity) it must ``pair``. Either becomes a request
to the host, which alone holds the keys to check the proof. The whole login
must be over within 5 s of the challenge, except that a ``pair`` stops the
clock: storing the new device is the host's time, not the peer's.
"""

from __future__ import annotations

from typing import assert_never
from uuid import UUID

from mirror_host.auth.pairing import PAIR_IDENTITY
from mirror_host.control import Authenticate, Challenge, Pair
from mirror_host.errors import ProtocolViolation
from mirror_host.limits import AUTH_TIMEOUT_SECONDS
from mirror_host.session.events import AuthenticateRequested, PairRequested
from mirror_host.session.states import LoginMessage

__all__ = ["PAIRING_NOT_SAVED", "Login"]

#: The ``failure`` a phone is sent when the host could not store its new device
#: (a full disk, a read-only state directory). Prowl's host never refuses a
#: pairing this way (its Keychain write throws before it answers), so these are
#: mirror-host's words; Prowl's iPhone, Android and Mac apps show a ``failure``'s
#: ``error`` that arrives before login as the reason the connection ended.
PAIRING_NOT_SAVED = (
    "Host could not save this device, so it is not paired. "
    "Free disk space on Host or make its state directory writable, then pair again."
)


class Login:
    """The rules of one connection's login (the state is the session's)."""

    def __init__(self, *, host_id: UUID, identity: str, nonce: bytes, now: float) -> None:
        #: The PSK identity that made this TLS session: ``pair`` or a device UUID.
        self.identity = identity
        #: The login deadline, while one runs (``LOGIN_DEADLINE_PHASES``).
        self.deadline = now + AUTH_TIMEOUT_SECONDS
        #: The session's first message.
        self.challenge = Challenge(host_id=host_id, nonce=nonce)

    def receive(self, message: LoginMessage) -> AuthenticateRequested | PairRequested:
        """What the host must decide about ``message``.

        Raises:
            ProtocolViolation: ``authenticate`` on a pairing session or naming
                another device than the TLS identity; ``pair`` on a device's session.
        """
        match message:
            case Authenticate():
                if self.identity == PAIR_IDENTITY:
                    raise ProtocolViolation("authenticate on a pairing connection")
                if str(message.device_id).upper() != self.identity:
                    raise ProtocolViolation(
                        "authenticate names another device than the TLS identity"
                    )
                return AuthenticateRequested(message.device_id, message.proof)
            case Pair():
                if self.identity != PAIR_IDENTITY:
                    raise ProtocolViolation("pair on a device connection")
                return PairRequested(message.name, message.proof)
            case _:
                assert_never(message)
