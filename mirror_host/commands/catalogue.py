"""What every command backend lists the same way: profiles, worktrees, git roots. I/O (PATH, files).

* Profiles are the ``[profiles]`` table of the config file or, without one,
  one profile per known agent installed on ``PATH``; ``profiles`` reports each
  with its availability on this machine.
* A worktree (the ``create`` command's ``worktree`` selector, ``data.worktrees``
  of ``list``) is a directory panes work in: the git root above it when there
  is one (``kind: git``), else the directory itself (``kind: plain``).
* ``list``'s answer is built the same way by every backend (:class:`Listing`):
  one item per pane, each worktree once.
* A pane a ``create`` made is waited for until its source lists it
  (:func:`until_listed`).
"""

from __future__ import annotations

import shutil
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import TypeVar

import trio

from mirror_host.commands.responses import cli_error, cli_success
from mirror_host.config import Profile
from mirror_host.control import CreateCommand
from mirror_host.control.swiftjson import JSONValue
from mirror_host.errors import PaneSourceError

__all__ = [
    "LISTED_SECONDS",
    "Listing",
    "created_result",
    "default_profiles",
    "launch_profile",
    "find_profile",
    "git_root",
    "profile_available",
    "profiles_result",
    "unavailable_reason",
    "unknown_worktree",
    "until_listed",
    "worktree_for",
    "worktree_record",
]


T = TypeVar("T")

#: How long a pane a ``create`` made may take to be listed by its source.
LISTED_SECONDS = 5.0


async def until_listed(find: Callable[[], Awaitable[T | None]], *, poll: float, what: str) -> T:
    """What ``find`` finds of a new pane, asked every ``poll`` seconds (it may refresh
    the listing itself) for at most :data:`LISTED_SECONDS`.

    Raises:
        PaneSourceError: it was never listed (``what`` names it); or ``find`` failed.
    """
    with trio.move_on_after(LISTED_SECONDS):
        while True:
            found = await find()
            if found is not None:
                return found
            await trio.sleep(poll)
    raise PaneSourceError(f"{what} was created but never listed")


def default_profiles(agents: Iterable[tuple[str, str]]) -> tuple[Profile, ...]:
    """One profile per ``(program, name)`` whose program is installed on ``PATH``."""
    return tuple(
        Profile(id=program, name=name, agent=program)
        for program, name in agents
        if shutil.which(program)
    )


def profile_available(profile: Profile) -> bool:
    """Whether the profile's program is on ``PATH`` (or is an executable path)."""
    return shutil.which(profile.agent) is not None


def find_profile(profiles: Iterable[Profile], wanted: str) -> Profile | None:
    """The profile with id ``wanted``, else the first named ``wanted``."""
    table = tuple(profiles)
    for profile in table:
        if profile.id == wanted:
            return profile
    return next((p for p in table if p.name == wanted), None)


def launch_profile(
    profiles: Iterable[Profile],
    command: CreateCommand,
    *,
    available: Callable[[Profile], bool] = profile_available,
) -> tuple[Profile | None, JSONValue | None]:
    """``create``'s profile (``None`` for a shell), or its refusal.

    ``PROFILE_NOT_FOUND`` when no profile has that id or name;
    ``PROFILE_UNAVAILABLE`` when one does but its program is not installed here
    (``launch-profile`` is advertised whether or not any is, as Prowl's host does,
    so this is where a phone learns why nothing started).

    ``available`` says whether a profile can start where the panes are (by
    default: on this machine's ``PATH``).
    """
    if command.launch is None:
        return None, None
    profile = find_profile(profiles, command.launch.profile)
    if profile is None:
        return None, cli_error(
            "create",
            "PROFILE_NOT_FOUND",
            f"No enabled Agent Profile matches “{command.launch.profile}”.",
        )
    if not available(profile):
        return None, cli_error(
            "create",
            "PROFILE_UNAVAILABLE",
            f"Agent Profile “{profile.name}” cannot start on Host: {unavailable_reason(profile)}.",
        )
    return profile, None


def unavailable_reason(profile: Profile) -> str:
    """Why a profile's program cannot start here (``profiles``' ``availability.reason``)."""
    return f"{profile.agent} is not on your shell's PATH"


def unknown_worktree(command: CreateCommand) -> JSONValue:
    """``create``'s refusal when no worktree has the id it names."""
    return cli_error("create", "TARGET_NOT_FOUND", f"No worktree matches “{command.worktree_id}”.")


def created_result(
    worktree: dict[str, JSONValue],
    tab: dict[str, JSONValue],
    pane: dict[str, JSONValue],
    profile: Profile | None,
) -> JSONValue:
    """``create``'s success result (with ``launch`` when a profile was started)."""
    data: dict[str, JSONValue] = {
        "resource": "tab",
        "target": {"worktree": worktree, "tab": tab, "pane": pane},
    }
    if profile is not None:
        data["launch"] = {
            "profile_id": profile.id,
            "profile_name": profile.name,
            "agent": profile.agent,
        }
    return cli_success("create", data)


def profiles_result(
    profiles: Iterable[Profile], *, available: Callable[[Profile], bool] = profile_available
) -> JSONValue:
    """The ``prowl.cli.profiles.v1`` catalogue with availability (``available``:
    by default, on this machine's ``PATH``)."""
    entries: list[JSONValue] = []
    for profile in profiles:
        availability: dict[str, JSONValue] = {"status": "available"}
        if not available(profile):
            availability = {"status": "unavailable", "reason": unavailable_reason(profile)}
        entries.append(
            {
                "id": profile.id,
                "name": profile.name,
                "enabled": True,
                "runtime": profile.agent,
                "availability": availability,
            }
        )
    return cli_success("profiles", {"count": len(entries), "profiles": entries})


def git_root(path: str | None) -> str | None:
    """The nearest directory at or above ``path`` that holds ``.git``, if any."""
    if not path:
        return None
    current = Path(path)
    for candidate in (current, *current.parents):
        if (candidate / ".git").exists():
            return str(candidate)
    return None


def worktree_record(
    identifier: str, name: str, path: str, root: str | None
) -> dict[str, JSONValue]:
    """One ``list`` worktree: where it is and whether it is a git checkout."""
    return {
        "id": identifier,
        "name": name,
        "path": path,
        "root_path": root or path,
        "kind": "git" if root else "plain",
    }


def worktree_for(directory: str) -> dict[str, JSONValue]:
    """The worktree a pane in ``directory`` works in, for sources without workspaces.

    Its id is the worktree's path (the git root, else the directory): stable
    across restarts and the same for every pane that shares it.
    """
    root = git_root(directory)
    path = root or directory
    return worktree_record(path, Path(path).name or path, path, root)


class Listing:
    """``prowl.cli.list.v1`` as a backend builds it: one item per pane, in the
    order added, and ``data.worktrees`` naming each worktree once, in the order
    first named.

    Args:
        worktrees: listed even if no pane works in them (Herdr's empty workspaces).
    """

    def __init__(self, worktrees: Iterable[dict[str, JSONValue]] = ()) -> None:
        self._worktrees = {str(worktree["id"]): worktree for worktree in worktrees}
        self._items: list[JSONValue] = []

    def add(
        self,
        worktree: dict[str, JSONValue],
        tab: dict[str, JSONValue],
        pane: dict[str, JSONValue],
        task: dict[str, JSONValue],
    ) -> None:
        """One pane's item; a worktree already named with ``worktree``'s id stands for it."""
        named = self._worktrees.setdefault(str(worktree["id"]), worktree)
        self._items.append({"worktree": named, "tab": tab, "pane": pane, "task": task})

    def result(self) -> JSONValue:
        """The ``list`` success result."""
        items = self._items
        worktrees: list[JSONValue] = list(self._worktrees.values())
        return cli_success("list", {"count": len(items), "items": items, "worktrees": worktrees})
