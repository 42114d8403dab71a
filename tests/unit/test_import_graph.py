"""Imports only go down: every module's imports against the doors of docs/architecture.md.

The modules are parsed (``ast``), never imported, so a lazy import inside a
function counts as much as one at the top. ``LAYERS`` is the package's
layering, top to bottom; ``DOORS`` says which lower rooms each room may import.
A door may only lead to a lower layer, so an upward or sideways edge can never
be allowed by adding a door: it needs the layering itself to change, here and
in docs/architecture.md (whose "Doors" table this test also reads).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

PACKAGE = REPO / "mirror_host"
ARCHITECTURE = REPO / "docs" / "architecture.md"

#: Top to bottom. A room is a package or module directly under ``mirror_host/``
#: (``cli`` stands for the front door: the ``cli/`` package and ``__main__.py``;
#: ``mirror_host`` for the package's own ``__init__.py``).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("front door", ("cli",)),
    ("the front door's rooms", ("config_file", "inspect", "logs", "qr_display")),
    ("programs", ("host", "client", "system_service")),
    ("commands", ("commands",)),
    ("pane sources", ("panes",)),
    ("terminal", ("terminal",)),
    ("shells", ("shell",)),
    ("agents", ("agents",)),
    ("session", ("session",)),
    ("TLS-PSK", ("tls",)),
    ("settings", ("config",)),
    ("auth", ("auth",)),
    ("control messages", ("control",)),
    ("values", ("wire", "capture", "files", "streams", "width")),
    ("limits", ("limits",)),
    ("errors", ("errors", "mirror_host")),
)

#: Each room's doors: the lower rooms it may import. ``"*"``: any lower room.
DOORS: dict[str, frozenset[str]] = {
    "cli": frozenset({"*"}),
    "config_file": frozenset({"config", "shell", "errors"}),
    "inspect": frozenset({"auth", "control", "wire", "errors"}),
    "logs": frozenset(),
    "qr_display": frozenset(),
    # B1/B2's new host modules may use anything below; sources only through the seam.
    "host": frozenset({"*"}),
    "client": frozenset(
        {
            "terminal",
            "tls",
            "config",
            "auth",
            "control",
            "wire",
            "files",
            "streams",
            "width",
            "limits",
            "errors",
        }
    ),
    "system_service": frozenset({"shell", "config", "files", "errors"}),
    "commands": frozenset(
        {"panes", "terminal", "shell", "agents", "session", "config", "control", "errors"}
    ),
    "panes": frozenset(
        {
            "terminal",
            "shell",
            "agents",
            "config",
            "control",
            "capture",
            "streams",
            "width",
            "limits",
            "errors",
        }
    ),
    "terminal": frozenset({"shell", "control", "capture", "limits", "errors"}),
    "shell": frozenset({"agents", "files"}),
    "agents": frozenset(),
    "session": frozenset({"auth", "control", "wire", "capture", "limits", "errors"}),
    "tls": frozenset({"errors"}),
    "config": frozenset({"auth", "errors"}),
    "auth": frozenset({"control", "errors"}),
    "control": frozenset({"errors"}),
    "wire": frozenset({"errors"}),
    "capture": frozenset({"limits", "errors"}),
    "files": frozenset(),
    "streams": frozenset(),
    "width": frozenset(),
    "limits": frozenset(),
    "errors": frozenset(),
    "mirror_host": frozenset(),
}

#: Narrower doors into one room: the only modules of it (and their submodules)
#: a room may import. The host never imports a concrete source (cli.sources
#: builds one and hands it over); command backends type against a Protocol of
#: what they use, and import a source's values, never the source.
ONLY: dict[tuple[str, str], tuple[str, ...]] = {
    # The names the shell integration hands to shells, which are not settings.
    ("config_file", "shell"): ("shell.environment",),
    ("system_service", "shell"): ("shell.environment",),
    ("host", "panes"): ("panes.model", "panes.source"),
    ("commands", "panes"): (
        "panes.model",
        "panes.activity",
        "panes.foreground",
        "panes.tmux_protocol",
        "panes.herdr.protocol",
        "panes.agliteterm.protocol",
        "panes.agliteterm.render",
        "panes.agliteterm.launch",
    ),
}


def room_of(module: str) -> str:
    """``mirror_host.panes.tmux`` → ``panes``; the front door's modules → ``cli``."""
    parts = module.split(".")
    if len(parts) == 1:
        return "mirror_host"
    top = parts[1]
    return "cli" if top == "__main__" else top


def module_name(path: Path) -> str:
    relative = path.relative_to(REPO).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(module: str, text: str, *, is_package: bool) -> Iterator[tuple[int, str]]:
    """``(line, module)`` for every import in ``module``'s ``text``, wherever it is."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            # ``from mirror_host.panes import model`` imports the module ``panes.model``.
            submodules = [
                f"{target}.{a.name}" for a in node.names if _is_module(f"{target}.{a.name}")
            ]
            for imported in submodules or [target]:
                yield node.lineno, imported


def _is_module(name: str) -> bool:
    path = REPO.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _layer_index() -> dict[str, int]:
    return {room: index for index, (_, rooms) in enumerate(LAYERS) for room in rooms}


def _through_a_door(source: str, imported: str) -> str | None:
    """Why ``source`` may not import ``imported`` (``None``: it may)."""
    layer = _layer_index()
    target = room_of(imported)
    if target == source:
        return None
    if source not in layer or target not in layer:
        return "a room missing from LAYERS"
    if layer[target] < layer[source]:
        return "upward"
    if layer[target] == layer[source]:
        return "sideways"
    if "*" not in DOORS[source] and target not in DOORS[source]:
        return f"no door from {source} to {target}"
    allowed = ONLY.get((source, target))
    if allowed is not None and not any(
        imported == f"mirror_host.{name}" or imported.startswith(f"mirror_host.{name}.")
        for name in allowed
    ):
        return f"only {', '.join(allowed)}"
    return None


def violations(module: str, text: str, *, is_package: bool = False) -> list[str]:
    """Every import of ``module`` that leaves its room by no door: ``line: a -> b (why)``."""
    found = []
    for line, imported in imports_of(module, text, is_package=is_package):
        if imported != "mirror_host" and not imported.startswith("mirror_host."):
            continue
        why = _through_a_door(room_of(module), imported)
        if why is not None:
            found.append(f"{line}: {module} -> {imported} ({why})")
    return found


def package_files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _docs_table() -> tuple[list[tuple[str, list[str]]], dict[str, frozenset[str]], str]:
    """The "Doors" section's layers (top to bottom), doors, and its whole text."""
    text = ARCHITECTURE.read_text()
    start = text.index("## Doors")
    section = text[start : text.index("\n## ", start + 1)]
    layers: list[tuple[str, list[str]]] = []
    doors: dict[str, frozenset[str]] = {}
    for line in section.splitlines():
        if not line.startswith("| ") or line.startswith(("| layer ", "| ---")):
            continue
        layer, room_cell, doors_cell = (cell.strip() for cell in line.strip().strip("|").split("|"))
        if layer:
            layers.append((layer, []))
        room = re.findall(r"`([^`]+)`", room_cell)[0]
        layers[-1][1].append(room)
        named = frozenset(re.findall(r"`([^`.]+)`", doors_cell))
        doors[room] = frozenset({"*"}) if doors_cell.startswith("anything below") else named
    return layers, doors, section


def test_the_architecture_page_states_these_doors() -> None:
    layers, doors, section = _docs_table()
    assert [(name, tuple(rooms)) for name, rooms in layers] == list(LAYERS)
    assert doors == DOORS
    for modules in ONLY.values():
        for module in modules:
            assert f"`{module}`" in section, module


def test_every_room_has_a_layer_and_doors() -> None:
    rooms = {room_of(module_name(path)) for path in package_files()}
    layered = set(_layer_index())
    assert rooms - layered == set(), "rooms missing from LAYERS"
    assert layered - rooms == set(), "LAYERS names rooms that do not exist"
    assert set(DOORS) == layered


def test_every_door_leads_down() -> None:
    layer = _layer_index()
    for room, doors in DOORS.items():
        for door in doors - {"*"}:
            assert layer[door] > layer[room], f"the door {room} -> {door} does not lead down"
    for room, target in ONLY:
        assert layer[target] > layer[room]


def test_every_door_is_used() -> None:
    """The table says what the code does, not what it might one day."""
    used: dict[str, set[str]] = {room: set() for room in DOORS}
    for path in package_files():
        module = module_name(path)
        for _, imported in imports_of(
            module, path.read_text(), is_package=path.name == "__init__.py"
        ):
            if imported == "mirror_host" or imported.startswith("mirror_host."):
                used[room_of(module)].add(room_of(imported))
    for room, doors in DOORS.items():
        if "*" not in doors:
            assert doors <= used[room], f"{room} never imports {sorted(doors - used[room])}"


def test_imports_only_go_down() -> None:
    found = [
        f"{path.relative_to(REPO)}:{violation}"
        for path in package_files()
        for violation in violations(
            module_name(path), path.read_text(), is_package=path.name == "__init__.py"
        )
    ]
    assert found == []


@pytest.mark.parametrize(
    ("module", "line", "why"),
    [
        ("mirror_host.session.planted", "from mirror_host.host.hub import Hub", "upward"),
        ("mirror_host.panes.planted", "from mirror_host.commands import service", "upward"),
        ("mirror_host.terminal.planted", "from mirror_host.panes.model import PaneInfo", "upward"),
        ("mirror_host.wire.planted", "from ..control import codec", "upward"),
        ("mirror_host.control.planted", "def f():\n    import mirror_host.session.link", "upward"),
        ("mirror_host.client.planted", "import mirror_host.host.tls", "sideways"),
        ("mirror_host.client.planted", "from mirror_host.session import link", "no door"),
        ("mirror_host.host.planted", "from mirror_host.panes.tmux import TmuxSource", "only"),
        ("mirror_host.commands.planted", "from mirror_host.panes import local", "only"),
    ],
)
def test_a_planted_import_is_caught(module: str, line: str, why: str) -> None:
    found = violations(module, line)
    assert len(found) == 1 and f"({why}" in found[0], found


def test_imports_within_a_room_and_down_through_its_doors_pass() -> None:
    text = "from mirror_host.session.link import Link\nfrom mirror_host.control import Ping\n"
    assert violations("mirror_host.session.planted", text) == []
    assert (
        violations("mirror_host.host.planted", "from mirror_host.panes.source import PaneSource")
        == []
    )
