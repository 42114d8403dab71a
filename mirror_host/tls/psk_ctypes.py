"""TLS-PSK callbacks on Python 3.11 and 3.12, through ctypes. I/O edge.

Python 3.13 gave ``ssl.SSLContext`` PSK callbacks. Before that the standard
library has no PSK API, but the OpenSSL its ``_ssl`` module runs on has one, so
this module calls it directly, with nothing to compile:

1. **The library.** ``_ssl`` is an extension module linked against libssl (Linux
   distributions, pyenv, python.org's macOS installer, Homebrew): opening
   ``_ssl.__file__`` again gives a handle whose symbol lookups search ``_ssl``
   and then the libraries it loaded, so the functions found are the very ones
   ``_ssl`` calls (and where OpenSSL is linked into ``_ssl`` itself, they are
   found there). A Python with ``_ssl`` built into the interpreter is searched
   through the process's global symbols instead. Either way the library must
   report the OpenSSL version ``ssl.OPENSSL_VERSION_NUMBER`` names.
2. **The ``SSL_CTX*``.** In CPython 3.11 and 3.12, ``_ssl._SSLContext`` objects
   (``PySSLContext`` in ``Modules/_ssl.c``) hold their ``SSL_CTX *ctx`` right
   after the object header. Nothing is read there unless the type's size is
   exactly that struct's (:class:`_PySSLContext`: 96 bytes on 64-bit builds),
   and the pointer read is only used after OpenSSL agrees it is a context
   whose options are exactly ``context.options``.
3. **The callbacks** go on the ``SSL_CTX`` (``SSL_CTX_set_psk_server_callback``,
   ``SSL_CTX_set_psk_client_callback``); ``SSL_new`` copies them into every
   connection made from the context, so there is nothing to do per connection
   (sslpsk3 set them per connection, and Trio's retried ``do_handshake`` made
   that fragile). The ctypes function objects are stored on the context, which
   every connection object keeps alive, so OpenSSL never calls freed code.

The callbacks run inside ``SSL_do_handshake``, which ``_ssl`` calls with the GIL
released; ctypes takes the GIL back on the same thread and thread state, so the
Python code sees the calling task's ``contextvars`` (the host relies on this to
bind the PSK identity to its connection; ``tests/integration/test_tls.py``).
Key bytes are copied into OpenSSL's buffer and never logged.

4. **The session cache**, on every Python whose ``PySSLContext`` layout is known
   (3.11, 3.12 and 3.13: :func:`disable_session_cache`). OpenSSL keeps every
   server session whose connection ended with our ``close_notify`` for 300 s,
   up to 20,480 of them (about 1.2 KiB each), though no Prowl client resumes a
   session, and a resumed one would skip the PSK callback that binds a
   connection to its identity. The host turns the cache off
   (``SSL_SESS_CACHE_OFF``); the standard library has no call for it.

Nothing may escape a callback into OpenSSL, not even ``KeyboardInterrupt``: a
callback that raises leaves ctypes no return value to hand back, and OpenSSL
would read whatever is on the stack as the PSK's length. Every callback
catches ``BaseException`` and refuses (returns 0).
"""

from __future__ import annotations

import ctypes
import logging
import ssl
import sys
from collections.abc import Callable
from typing import Any

from mirror_host.errors import TLSUnsupported

__all__ = [
    "ClientCallback",
    "ServerCallback",
    "disable_session_cache",
    "install_client_callback",
    "install_server_callback",
]

logger = logging.getLogger(__name__)

#: identity (``None`` when the client sent none) → key, ``b""`` to refuse.
ServerCallback = Callable[[str | None], bytes]
#: server's identity hint → (identity, key), as ``SSLContext.set_psk_client_callback``.
ClientCallback = Callable[[str | None], tuple[str | None, bytes]]

#: CPython versions whose PSK callbacks come through this module.
SUPPORTED_PYTHONS = ((3, 11), (3, 12))

# SSL_CTX_ctrl commands and the cache mode (OpenSSL's ssl.h)
_SSL_CTRL_SET_SESS_CACHE_MODE = 44
_SSL_CTRL_GET_SESS_CACHE_MODE = 45
_SSL_SESS_CACHE_OFF = 0

# unsigned int (*)(SSL *ssl, const char *identity, unsigned char *psk, unsigned int max_psk_len)
_SERVER_CB = ctypes.CFUNCTYPE(
    ctypes.c_uint, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_uint
)
# unsigned int (*)(SSL *ssl, const char *hint, char *identity, unsigned int max_identity_len,
#                  unsigned char *psk, unsigned int max_psk_len)
_CLIENT_CB = ctypes.CFUNCTYPE(
    ctypes.c_uint,
    ctypes.c_void_p,
    ctypes.c_char_p,
    ctypes.c_void_p,
    ctypes.c_uint,
    ctypes.c_void_p,
    ctypes.c_uint,
)

#: Attribute of the SSLContext that keeps its ctypes callbacks alive.
_KEEPALIVE = "_mirror_host_psk_callbacks"


class _PySSLContext(ctypes.Structure):
    """CPython 3.11/3.12's ``PySSLContext`` (``Modules/_ssl.c``): the object header,
    then its fields in order. Only ``ctx`` is read; the rest pins the size."""

    _fields_ = [
        ("ob_base", ctypes.c_byte * object.__basicsize__),
        ("ctx", ctypes.c_void_p),
        ("alpn_protocols", ctypes.c_void_p),
        ("alpn_protocols_len", ctypes.c_uint),
        ("set_sni_cb", ctypes.c_void_p),
        ("check_hostname", ctypes.c_int),
        ("hostflags", ctypes.c_uint),
        ("protocol", ctypes.c_int),
        ("post_handshake_auth", ctypes.c_int),
        ("msg_cb", ctypes.c_void_p),
        ("keylog_filename", ctypes.c_void_p),
        ("keylog_bio", ctypes.c_void_p),
        ("state", ctypes.c_void_p),
    ]


class _PySSLContext313(ctypes.Structure):
    """CPython 3.13's ``PySSLContext``: 3.11/3.12's, then its PSK callbacks."""

    _fields_ = [
        *_PySSLContext._fields_,
        ("psk_client_callback", ctypes.c_void_p),
        ("psk_server_callback", ctypes.c_void_p),
    ]


#: The ``PySSLContext`` of each CPython version whose layout is known here.
_LAYOUTS: dict[tuple[int, int], type[ctypes.Structure]] = {
    (3, 11): _PySSLContext,
    (3, 12): _PySSLContext,
    (3, 13): _PySSLContext313,
}


class _LibSSL:
    """The OpenSSL functions this module calls, from the library ``_ssl`` uses."""

    def __init__(self, library: ctypes.CDLL, where: str) -> None:
        self.where = where
        self.set_server = library.SSL_CTX_set_psk_server_callback
        self.set_server.argtypes = [ctypes.c_void_p, _SERVER_CB]
        self.set_server.restype = None
        self.set_client = library.SSL_CTX_set_psk_client_callback
        self.set_client.argtypes = [ctypes.c_void_p, _CLIENT_CB]
        self.set_client.restype = None
        self.use_hint = library.SSL_CTX_use_psk_identity_hint
        self.use_hint.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        self.use_hint.restype = ctypes.c_int
        self.get_options = library.SSL_CTX_get_options
        self.get_options.argtypes = [ctypes.c_void_p]
        self.get_options.restype = ctypes.c_uint64
        self.ctrl = library.SSL_CTX_ctrl
        self.ctrl.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_long, ctypes.c_void_p]
        self.ctrl.restype = ctypes.c_long
        version = library.OpenSSL_version_num
        version.argtypes = []
        version.restype = ctypes.c_ulong
        self.version_number = int(version())


_libssl: _LibSSL | None = None


def _library_candidates() -> list[tuple[str, Callable[[], ctypes.CDLL]]]:
    import _ssl

    candidates: list[tuple[str, Callable[[], ctypes.CDLL]]] = []
    path = getattr(_ssl, "__file__", None)
    if isinstance(path, str):
        candidates.append((path, lambda: ctypes.CDLL(path)))
    candidates.append(("the interpreter's own symbols", lambda: ctypes.CDLL(None)))
    return candidates


def _load() -> _LibSSL:
    """The OpenSSL ``_ssl`` runs on, found once per process.

    Raises:
        TLSUnsupported: this interpreter is not one whose layout is known, or its
            OpenSSL's PSK functions cannot be reached.
    """
    version = sys.version_info[:2]
    if sys.implementation.name != "cpython" or version not in SUPPORTED_PYTHONS:
        raise TLSUnsupported(
            f"TLS-PSK through ctypes is for CPython 3.11 and 3.12, not "
            f"{sys.implementation.name} {version[0]}.{version[1]}"
        )
    return _library()


def _library() -> _LibSSL:
    """The OpenSSL ``_ssl`` runs on, whatever the Python (see :func:`_load`).

    Raises:
        TLSUnsupported: its OpenSSL's functions cannot be reached.
    """
    global _libssl
    if _libssl is not None:
        return _libssl
    tried: list[str] = []
    for where, opener in _library_candidates():
        try:
            found = _LibSSL(opener(), where)
        except (OSError, AttributeError) as exc:
            tried.append(f"{where}: {exc}")
            continue
        if found.version_number != ssl.OPENSSL_VERSION_NUMBER:
            tried.append(
                f"{where}: OpenSSL {found.version_number:#x}, "
                f"but ssl runs on {ssl.OPENSSL_VERSION_NUMBER:#x}"
            )
            continue
        _libssl = found
        return found
    raise TLSUnsupported(
        f"this Python's ssl module ({ssl.OPENSSL_VERSION}) does not expose OpenSSL's PSK "
        f"functions ({'; '.join(tried)})"
    )


def _ctx_pointer(context: ssl.SSLContext, libssl: _LibSSL) -> int:
    """The ``SSL_CTX*`` inside ``context``: read only from a type of exactly the
    known layout, and checked with OpenSSL before use."""
    import _ssl

    base: Any = _ssl._SSLContext
    layout = _LAYOUTS.get(sys.version_info[:2]) if sys.implementation.name == "cpython" else None
    if layout is None or not isinstance(context, base):
        raise TLSUnsupported("this Python's SSLContext has no layout this module knows")
    if base.__basicsize__ != ctypes.sizeof(layout):
        raise TLSUnsupported("this Python's SSLContext has not the layout of its version")
    pointer: int | None = layout.from_address(id(context)).ctx
    if not pointer or pointer % ctypes.alignment(ctypes.c_void_p):
        raise TLSUnsupported("this Python's SSLContext holds no OpenSSL context where expected")
    if libssl.get_options(pointer) != int(context.options):
        raise TLSUnsupported(
            "the OpenSSL context found in this Python's SSLContext is not the one it uses"
        )
    return pointer


def disable_session_cache(context: ssl.SSLContext) -> None:
    """Turn ``context``'s server session cache off (module docstring, 4).

    Raises:
        TLSUnsupported: this Python's ``SSLContext`` layout is not known here, or
            OpenSSL cannot be reached or would not take it.
    """
    libssl = _library()
    pointer = _ctx_pointer(context, libssl)
    libssl.ctrl(pointer, _SSL_CTRL_SET_SESS_CACHE_MODE, _SSL_SESS_CACHE_OFF, None)
    if libssl.ctrl(pointer, _SSL_CTRL_GET_SESS_CACHE_MODE, 0, None) != _SSL_SESS_CACHE_OFF:
        raise TLSUnsupported("OpenSSL kept the session cache on")


def _register(
    context: ssl.SSLContext,
    side: str,
    callback: Callable[..., int],
    c_type: Any,
    install: Callable[[int, Any], object],
    pointer: int,
) -> None:
    """Hand ``callback`` to OpenSSL (``install``) as a C function of ``c_type``, kept
    alive as long as ``context``. Whatever it raises (any ``BaseException``) is a
    refusal (0), logged by its type alone: nothing may escape into OpenSSL (module
    docstring)."""

    def guarded(*args: Any) -> int:
        try:
            return callback(*args)
        except BaseException as exc:
            _report(side, exc)
            return 0

    function = c_type(guarded)
    kept: list[object] = context.__dict__.setdefault(_KEEPALIVE, [])
    kept.append(function)
    install(pointer, function)


def install_server_callback(context: ssl.SSLContext, lookup: ServerCallback) -> None:
    """Make every server connection from ``context`` take its PSK from ``lookup``.

    An empty key, an identity that is not UTF-8, a key longer than OpenSSL's
    buffer or an exception in ``lookup`` (any ``BaseException``) all refuse the
    handshake (``unknown_psk_identity``), as the standard library's callback does.

    Raises:
        TLSUnsupported: see :func:`_load`, or ``context`` is not as expected.
    """
    libssl = _load()
    pointer = _ctx_pointer(context, libssl)

    def server(_ssl: int | None, identity: bytes | None, psk: int | None, max_len: int) -> int:
        try:
            name = None if identity is None else identity.decode("utf-8")
        except UnicodeDecodeError:
            return 0
        key = lookup(name)
        if not key or psk is None or len(key) > max_len:
            return 0
        ctypes.memmove(psk, key, len(key))
        return len(key)

    _register(context, "server", server, _SERVER_CB, libssl.set_server, pointer)
    if libssl.use_hint(pointer, b"") != 1:
        raise TLSUnsupported("OpenSSL refused an empty PSK identity hint")


def install_client_callback(context: ssl.SSLContext, choose: ClientCallback) -> None:
    """Make every client connection from ``context`` offer what ``choose`` returns.

    An identity or key that does not fit OpenSSL's buffers, or an exception in
    ``choose`` (any ``BaseException``), gives OpenSSL no PSK, which ends the
    handshake.

    Raises:
        TLSUnsupported: see :func:`_load`, or ``context`` is not as expected.
    """
    libssl = _load()
    pointer = _ctx_pointer(context, libssl)

    def client(
        _ssl: int | None,
        hint: bytes | None,
        identity_out: int | None,
        max_identity: int,
        psk: int | None,
        max_len: int,
    ) -> int:
        shown = None if hint is None else hint.decode("utf-8", "replace")
        identity, key = choose(shown)
        name = (identity or "").encode("utf-8") + b"\0"
        if identity_out is None or psk is None or len(name) > max_identity:
            return 0
        if not key or len(key) > max_len or b"\0" in name[:-1]:
            return 0
        ctypes.memmove(identity_out, name, len(name))
        ctypes.memmove(psk, key, len(key))
        return len(key)

    _register(context, "client", client, _CLIENT_CB, libssl.set_client, pointer)


def _report(side: str, exc: BaseException) -> None:
    """Log a callback's failure by its type alone (its message may hold key material);
    a second interrupt while logging is dropped rather than let into OpenSSL."""
    try:
        logger.error("TLS-PSK %s callback failed: %s", side, type(exc).__name__)
    except BaseException:  # nothing may escape into OpenSSL
        pass


def library_location() -> str:
    """Where the OpenSSL functions were found (for the start-up log line)."""
    return _load().where
