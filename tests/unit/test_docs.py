"""docs/protocol.md §12 names a test for every rule of Prowl's apps: each one exists."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.conftest import REPO

PROTOCOL = REPO / "docs" / "protocol.md"
#: ``tests/…/test_x.py::test_name``, or ``::test_name`` for the file named just before.
_NODE = re.compile(r"`(tests/[\w/]+\.py)?::(\w+)`")


def _section(text: str, title: str) -> str:
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def _tests_in(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")
    }


@pytest.mark.slow
def test_every_client_rule_names_tests_that_exist() -> None:
    section = _section(PROTOCOL.read_text(), "12. What the real clients require")
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    rules = [row for row in rows if not row.startswith("| rule ")]
    assert len(rules) >= 40
    missing: list[str] = []
    for row in rules:
        tests_cell = row.rstrip(" |").rsplit(" | ", 1)[-1]
        nodes = _NODE.findall(tests_cell)
        assert nodes, f"a rule without a test: {row}"
        current: str | None = None
        for file, name in nodes:
            current = file or current
            assert current is not None, row
            path = REPO / current
            if not path.is_file() or name not in _tests_in(path):
                missing.append(f"{current}::{name}")
    assert missing == []


def test_the_readmes_using_it_names_every_command() -> None:
    """``check-config`` was missing there (issue 28 item 20)."""
    import argparse

    from mirror_host.cli import build_parser

    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    using = _section((REPO / "README.md").read_text(), "Using it")
    missing = [name for name in commands.choices if f"mirror-host {name}" not in using]
    assert missing == []
