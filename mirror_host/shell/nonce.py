"""The secret a shell signs its prompt marks with, handed over in its environment. I/O.

Prompt marks are bytes any program can print, so output alone (a file being
``cat``-ed) could draw a prompt that looks like the shell's own while the
shell itself sits in a builtin ``read``. The host therefore starts shells with
a random nonce in ``MIRROR_HOST_MARK_NONCE``; mirror-host's integration
(:mod:`mirror_host.shell.integration`) moves it into a shell variable that is
not exported, so the shell's programs do not inherit it, and adds it to every
mark (``133;B;mh=NONCE``). A pane's screen then takes only marks that carry it
(:meth:`mirror_host.shell.marks.PromptMarks.expect`): output that was not
written by the shell cannot know it.

* Local panes: a new nonce per pane, in the environment the host starts it with.
* tmux panes: one nonce per tmux server, in its global environment
  (``set-environment -g``), which tmux hands to every pane it starts from then
  on. The host reads which nonce a pane's shell started with from its initial
  environment (``/proc/PID/environ``, Linux): a shell started before the host
  set it has none (docs/security.md says what that leaves open).
"""

from __future__ import annotations

import re
import secrets
from pathlib import Path

from mirror_host.shell.environment import NONCE_VARIABLE

__all__ = ["NONCE_VARIABLE", "is_nonce", "new_nonce", "started_with_nonce"]

#: What the integration accepts as a nonce (it is put into prompt strings, so hex only).
_NONCE = re.compile(r"[0-9a-f]{16,128}")


def new_nonce() -> str:
    """128 random bits from the OS, as hex."""
    return secrets.token_hex(16)


def is_nonce(text: str) -> bool:
    """Whether ``text`` is a nonce the integration would use."""
    return _NONCE.fullmatch(text) is not None


def started_with_nonce(pid: int, *, proc: Path = Path("/proc")) -> str | None:
    """The nonce process ``pid`` was started with, if the OS says and it had one.

    Linux keeps a process's initial environment in ``/proc/PID/environ``
    (readable for one's own processes); elsewhere this is ``None``.
    """
    try:
        environ = (proc / str(pid) / "environ").read_bytes()
    except OSError:
        return None
    prefix = NONCE_VARIABLE.encode() + b"="
    for entry in environ.split(b"\0"):
        if entry.startswith(prefix):
            value = entry[len(prefix) :].decode("ascii", "replace")
            return value if is_nonce(value) else None
    return None
