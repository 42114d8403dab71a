"""How a local pane's program is started on its PTY: a new session the PTY controls, every
signal at its default and none blocked, whatever the host inherited. I/O.

A host started from a script in the background (``mirror-host serve … &``,
``nohup``, a start-up script) inherits SIGINT and SIGQUIT *ignored*: a shell
without job control starts its background commands that way, and ``exec``
keeps an ignored signal ignored. Handed on to a pane's shell, Ctrl-C then
shows ``^C`` and interrupts nothing. So a pane starts through a small exec
helper that, in the new process and before the program runs:

1. makes the PTY (its standard input) the session's controlling terminal with
   ``TIOCSCTTY``, which Linux and macOS both honour (``subprocess``'s
   ``start_new_session`` has made the process a session leader; gaining one by
   merely opening the terminal is a System V habit the BSDs do not share);
2. sets every signal back to its default disposition and empties the signal
   mask (a mask is inherited across ``exec`` too);
3. ``exec``\\s the program, which keeps its process id: the pane's pid is still
   the one ``Popen`` returned.

Why a helper and not the alternatives: ``Popen(preexec_fn=…)`` runs Python
between ``fork`` and ``exec`` of a threaded process (Trio's worker threads),
which Python documents as unsafe (a lock held by another thread at the fork
stays held for ever); ``os.posix_spawn`` can reset signals and start a session
but cannot change the working directory (a ``create`` starts a pane in its
worktree) nor issue ``TIOCSCTTY``. The helper is this same
Python started with ``-I -S`` (no site, no user settings, no environment
variables read: a few milliseconds), with the code below; the environment
``Popen`` hands it passes to the program unchanged.
"""

from __future__ import annotations

import os
import shutil
import sys

from mirror_host.errors import PaneSourceError

__all__ = ["EXEC_HELPER", "pane_argv"]

#: Run as ``python -I -S -c EXEC_HELPER PROGRAM ARGV0 ARGS…`` with the PTY as
#: standard input, output and error. A failure is said on the PTY (the pane
#: shows it) and ends the helper with the shell's "cannot run" statuses, which
#: the local source logs as a warning.
EXEC_HELPER = """\
import fcntl, os, signal, sys, termios
def fail(what, error, status):
    os.write(2, f"mirror-host: {what}: {error.strerror}\\r\\n".encode(errors="replace"))
    os._exit(status)
try:
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
except OSError as error:
    fail("cannot make the pane's terminal its controlling terminal", error, 126)
for number in signal.valid_signals():
    if number not in (signal.SIGKILL, signal.SIGSTOP):
        try:
            signal.signal(number, signal.SIG_DFL)
        except (OSError, ValueError):
            pass  # a signal the C library keeps for itself
signal.pthread_sigmask(signal.SIG_SETMASK, ())
try:
    os.execv(sys.argv[1], sys.argv[2:])
except OSError as error:
    fail(f"cannot start {sys.argv[1]}", error, 127)
"""


def pane_argv(argv: list[str], *, env: dict[str, str], cwd: str, label: str) -> list[str]:
    """The command line that starts ``argv`` through the exec helper.

    The program is looked up here, on the pane's own ``PATH``, so a program that
    is not there is refused at once, as a ``Popen`` of it would be, instead of
    after the helper has started.

    Raises:
        PaneSourceError: no such program, or no Python to run the helper with.
    """
    program = argv[0]
    if os.sep in program and not os.path.isabs(program):
        program = os.path.join(cwd, program)
    found = shutil.which(program, path=env.get("PATH", os.defpath))
    if found is None:
        where = "" if os.sep in argv[0] else " on PATH"
        raise PaneSourceError(f"cannot start {label!r}: no program {argv[0]!r}{where}")
    if not sys.executable:
        raise PaneSourceError(f"cannot start {label!r}: this Python does not know its own path")
    return [sys.executable, "-I", "-S", "-c", EXEC_HELPER, found, *argv]
