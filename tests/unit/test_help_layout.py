"""``--help`` reads in an 80-column terminal: prose wrapped, example blocks as written."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from mirror_host.cli import build_parser
from mirror_host.cli.help import HelpFormatter


def every_parser(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield from every_parser(child)


def test_every_help_wraps_its_prose_to_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    parsers = list(every_parser(build_parser()))
    assert len(parsers) > 10  # the walk reached the subcommands
    for parser in parsers:
        for line in parser.format_help().splitlines():
            # Indented lines are options and examples (kept whole so they stay copyable).
            if line and not line[0].isspace() and not line.startswith("usage:"):
                assert len(line) <= 80, (parser.prog, line)


def test_prose_is_wrapped_and_example_blocks_are_kept_line_for_line() -> None:
    formatter = HelpFormatter("prog", width=40)
    text = (
        "A first paragraph, written as one long line that is much wider than forty columns.\n\n"
        "examples:\n"
        "  prog --a-very-long-option-that-must-stay-on-its-line   and its explanation\n"
    )
    filled = formatter._fill_text(text, 40, "")
    prose, examples = filled.split("\n\n")
    assert all(len(line) <= 40 for line in prose.splitlines()) and prose.count("\n") >= 1
    assert examples == (
        "examples:\n  prog --a-very-long-option-that-must-stay-on-its-line   and its explanation\n"
    )


def test_the_default_paths_are_shown_alike_as_this_machine_resolves_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mirror_host.config_file import default_config_path, default_state_dir

    monkeypatch.setenv("COLUMNS", "400")  # one line per option, for the search below
    for parser in every_parser(build_parser()):
        text = parser.format_help()
        if "--state-dir" in text:
            assert f"(default: {default_state_dir()})" in text, parser.prog
            assert str(default_config_path()) in text, parser.prog
            assert "$XDG_STATE_HOME" not in text, parser.prog


def test_bare_help_names_documentation_files_this_installation_has() -> None:
    """Not ``docs/operations.md``, relative to nowhere in a wheel install (issue 28 item
    24); the wheel ships them (pyproject.toml, .ci/wheel_smoke.py checks an install)."""
    from pathlib import Path

    text = build_parser().format_help()
    _, _, listed = text.partition("documentation (Markdown files of this installation):\n")
    files = [Path(line.split()[0]) for line in listed.splitlines() if line.startswith("  ")]
    assert [path.name for path in files] == ["operations.md", "tools.md", "protocol.md"]
    assert all(path.is_absolute() and path.is_file() for path in files)


def test_every_documentation_file_a_help_names_is_listed_where_it_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``operations.md`` in a help (the settings group, ``--log-packets``, serve's
    epilog) is the file its closing block lists, at its path in this installation:
    never ``docs/…`` relative to nowhere (issue 27)."""
    import re
    from pathlib import Path

    monkeypatch.setenv("COLUMNS", "400")
    for parser in every_parser(build_parser()):
        text = parser.format_help()
        _, _, block = text.partition("documentation (Markdown files of this installation):\n")
        listed = {
            Path(line.split()[0]).name: Path(line.split()[0])
            for line in block.splitlines()
            if line.startswith("  ")
        }
        assert all(path.is_absolute() and path.is_file() for path in listed.values())
        before = text.split("documentation (Markdown files")[0]
        for name in re.findall(r"[\w/.-]*?(\w+\.md)", before):
            assert name in listed, (parser.prog, name)
        assert not re.search(r"(?<![\w/])docs/\w+\.md", before), parser.prog
