"""What every command's parser gets from ``cli.command`` and ``cli.help`` alike:
its closing text, ``--json``, and options that take seconds."""

from __future__ import annotations

import pytest

from mirror_host.cli import build_parser
from mirror_host.cli.help import closing_text, doc


def test_a_closing_text_is_notes_then_examples_then_documentation() -> None:
    text = closing_text(
        "Some notes.\n",
        examples=("prog run   runs it", "prog stop"),
        docs=(("operations.md", "running it"),),
    )
    assert text == (
        "Some notes.\n"
        "\n"
        "examples:\n"
        "  prog run   runs it\n"
        "  prog stop\n"
        "\n"
        "documentation (Markdown files of this installation):\n"
        f"  {doc('operations.md')}   running it\n"
    )


def test_a_closing_text_has_only_the_parts_given() -> None:
    assert closing_text() is None
    assert closing_text(examples=("prog",)) == "examples:\n  prog\n"
    assert closing_text("Notes.\n") == "Notes.\n"


@pytest.mark.parametrize("command", ["status", "devices", "check-config", "pair"])
def test_json_help_gives_a_command_its_json_flag(command: str) -> None:
    assert build_parser().parse_args([command, "--json"]).json is True
    assert build_parser().parse_args([command]).json is False


def test_a_command_without_json_help_has_no_json_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["revoke", "--all", "--json"])
    assert exited.value.code == 2
    assert "unrecognized arguments: --json" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "dest", "expected"),
    [
        (["pair"], "wait_for_host", 5.0),
        (["pair", "--wait-for-host", "0"], "wait_for_host", 0.0),
        (["pair", "--wait-for-host", "600"], "wait_for_host", 600.0),
        (["conformance", "--wait", "0.5"], "wait", 0.5),
        (["conformance"], "wait", 5.0),
    ],
)
def test_a_seconds_option_takes_its_range_and_defaults(
    argv: list[str], dest: str, expected: float
) -> None:
    assert getattr(build_parser().parse_args(argv), dest) == expected


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["pair", "--wait-for-host", "601"], "expected 0 … 600 seconds"),
        (["conformance", "--wait", "0.4"], "expected 0.5 … 120 seconds"),
        (["conformance", "--wait", "soon"], "expected seconds, got 'soon'"),
    ],
)
def test_a_seconds_option_refuses_what_is_out_of_range(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_a_seconds_option_says_its_default(capsys: pytest.CaptureFixture[str]) -> None:
    for command, option in (
        ("pair", "--wait-for-host SECONDS how long to wait for a host that is still starting"),
        (
            "conformance",
            "--wait SECONDS how long the host may take for a reply, a frame or a close",
        ),
    ):
        with pytest.raises(SystemExit):
            build_parser().parse_args([command, "--help"])
        words = " ".join(capsys.readouterr().out.split())
        assert f"{option} (default 5)" in words, words
