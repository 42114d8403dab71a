"""The user's login shell: what a local pane runs when it is given no command. I/O (environment).

Both the local source (its first pane) and the local command backend (a
``create`` without a profile) start it, so it lives below both.
"""

from __future__ import annotations

import logging
import os
import pwd
import shutil

__all__ = ["default_shell_command"]

logger = logging.getLogger(__name__)


def default_shell_command() -> list[str]:
    """The user's login shell, started as a login shell.

    ``$SHELL`` first, then the account's shell, then ``/bin/sh``: the first that
    names a program this machine can run (a ``$SHELL`` left over from another
    machine or container is warned about, not fatal).
    """
    candidates = [os.environ.get("SHELL") or "", _account_shell(), "/bin/sh"]
    for index, shell in enumerate(candidates):
        if shell and shutil.which(shell):
            if index > 0 and candidates[0]:
                logger.warning(
                    "$SHELL is %s, which is not a program here; using %s instead "
                    "(fix SHELL, or give --local-command CMD)",
                    candidates[0],
                    shell,
                )
            return [shell, "-l"]
    return ["/bin/sh", "-l"]


def _account_shell() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_shell
    except KeyError:  # no passwd entry (some containers)
        return ""
