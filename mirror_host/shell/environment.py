"""The ``MIRROR_HOST_*`` variables that are not settings. Pure.

The shell integration hands some to the shells it starts, and a service's unit
or agent sets one for the host (:data:`SERVICE_MARKER`).

They share the settings' prefix but are not settings: the settings reader skips
them (:mod:`mirror_host.config_file`), so a ``mirror-host`` run from a shell that
inherited one is not refused for an unknown setting, and ``service install``
does not copy them into a service (:mod:`mirror_host.system_service.units`).
"""

from __future__ import annotations

__all__ = [
    "BASH_ENV_VARIABLE",
    "BASH_HISTFILE_VARIABLE",
    "BASH_INJECT_VARIABLE",
    "INJECTED_VARIABLES",
    "NONCE_VARIABLE",
    "SERVICE_MARKER",
    "SHELL_DIR_VARIABLE",
    "ZDOTDIR_VARIABLE",
]

#: Set for ``serve`` by the systemd unit or launchd agent ``service install``
#: writes (its value: ``systemd`` or ``launchd``); never handed on to a pane.
SERVICE_MARKER = "MIRROR_HOST_SERVICE"
#: The nonce a shell signs its prompt marks with (:mod:`mirror_host.shell.nonce`).
NONCE_VARIABLE = "MIRROR_HOST_MARK_NONCE"
#: The private directory a shell and the host exchange a phone's command line through
#: (:mod:`mirror_host.shell.directory`).
SHELL_DIR_VARIABLE = "MIRROR_HOST_SHELL_DIR"
#: bash's start-up flags, its own ``ENV`` and whether ``HISTFILE`` was ours
#: (:mod:`mirror_host.shell.inject`).
BASH_INJECT_VARIABLE = "MIRROR_HOST_BASH_INJECT"
BASH_ENV_VARIABLE = "MIRROR_HOST_BASH_ENV"
BASH_HISTFILE_VARIABLE = "MIRROR_HOST_BASH_HISTFILE"
#: zsh's own ``ZDOTDIR`` (:mod:`mirror_host.shell.inject`).
ZDOTDIR_VARIABLE = "MIRROR_HOST_ZDOTDIR"

#: Every name above: what a shell started by mirror-host (or under tmux after a
#: host ran) may carry.
INJECTED_VARIABLES = frozenset(
    {
        NONCE_VARIABLE,
        SHELL_DIR_VARIABLE,
        BASH_INJECT_VARIABLE,
        BASH_ENV_VARIABLE,
        BASH_HISTFILE_VARIABLE,
        ZDOTDIR_VARIABLE,
    }
)
