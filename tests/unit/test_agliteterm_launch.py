"""A profile's argv as agliteterm's ``session.new`` ``command``: PowerShell's quoting, agwinterm's split.

Each command is read back the way the released programs read it
(``tests/fakes/launch_words.py``: PowerShell's tokenizer for a plain call,
Windows PowerShell 5.1's native command line, the C runtime's argv rules;
agwinterm 0.17.5's ``ParseArgv``), and must give exactly the argv it came from.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mirror_host.errors import InvalidArgument
from mirror_host.panes.agliteterm.launch import (
    MAX_COMMAND_BYTES,
    argv_command,
    native_argument,
    powershell_command,
    powershell_literal,
    session_command,
)
from mirror_host.panes.agliteterm.protocol import Dialect
from tests.fakes.launch_words import (
    Unsupported,
    agwinterm_argv,
    powershell_argvs,
    powershell_statements,
    windows_argv,
)

PROGRAM = r"C:\Program Files\agents\claude.exe"

AWKWARD = [
    ("spaces", ["--append-system-prompt", "be brief  and   kind"]),
    ("single quotes", ["--name", "it's Bob’s ‘x’ ‚y‛"]),
    ("double quotes", ["--say", 'say "hi"', '"', 'a\\"b']),
    ("dollars", ["$HOME", "${env:PATH}", "$(Remove-Item x)", "cost: $5"]),
    ("backticks", ["`n", "a`tb", "``"]),
    ("semicolons", ["a; Remove-Item -Recurse C:\\", ";", "x;y"]),
    ("shell syntax", ["a|b", "> out.txt", "(x)", "{y}", "@z", "a,b", "&", "#not a comment"]),
    ("backslashes", ["C:\\dir\\", "C:\\my dir\\", "\\\\server\\share", "a\\\\ b\\\\"]),
    ("empty", ["", "--flag", ""]),
    ("unicode", ["中文 ✓", "tab\there", "line\nbreak", "nbsp\u00a0x"]),
]


@pytest.mark.parametrize(("case", "args"), AWKWARD, ids=[case for case, _ in AWKWARD])
def test_powershell_runs_exactly_the_profiles_argv(case: str, args: list[str]) -> None:
    argv = [PROGRAM, *args]
    assert powershell_argvs(powershell_command(argv)) == [argv]


@pytest.mark.parametrize(("case", "args"), AWKWARD[:6], ids=[case for case, _ in AWKWARD[:6]])
def test_joining_with_spaces_is_what_breaks(case: str, args: list[str]) -> None:
    """What mirror-host sent before: the words joined by spaces. PowerShell reads
    something else (or refuses it), so the tests above can fail."""
    naive = " ".join([PROGRAM.replace(" ", "_"), *args])
    try:
        programs = powershell_argvs(naive)
    except Unsupported:
        return
    assert programs != [[PROGRAM.replace(" ", "_"), *args]]


@given(
    st.lists(
        st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0")),
        max_size=6,
    )
)
def test_any_argument_survives_powershell(args: list[str]) -> None:
    argv = ["claude", *args]
    assert powershell_argvs(powershell_command(argv)) == [argv]


def test_literals_and_native_escapes() -> None:
    assert powershell_literal("it's") == "'it''s'"
    assert powershell_literal("Bob’s") == "'Bob’’s'"
    assert powershell_literal("$x `n ;") == "'$x `n ;'"
    assert native_argument("") == '""'
    assert native_argument('say "hi"') == 'say \\"hi\\"'
    assert native_argument("C:\\dir\\") == "C:\\dir\\"  # no whitespace: left as it is
    assert native_argument("C:\\my dir\\") == "C:\\my dir\\\\"  # PowerShell quotes it
    assert powershell_command(["claude", "a b"]) == "& 'claude' 'a b'"


def test_nothing_to_run_or_a_nul_is_refused() -> None:
    for argv in ([], [""], ["claude", "a\0b"]):
        with pytest.raises(InvalidArgument):
            powershell_command(argv)
        with pytest.raises(InvalidArgument):
            argv_command(argv)


@pytest.mark.parametrize(
    "args", [["a b", "", "c"], ["$HOME", "a;b", "it's"], ["C:\\dir\\", "tab\tx"]]
)
def test_agwinterm_0_17_5_splits_the_command_back_into_the_argv(args: list[str]) -> None:
    argv = [PROGRAM, *args]
    assert agwinterm_argv(argv_command(argv)) == argv


def test_agwinterm_0_17_5_cannot_pass_a_double_quote() -> None:
    with pytest.raises(InvalidArgument, match="double quote"):
        argv_command(["claude", 'say "hi"'])


def test_the_build_decides_the_quoting() -> None:
    argv = ["claude", "a b"]
    powershell = "& 'claude' 'a b'"
    assert session_command(argv, Dialect.LITE, "agliteterm 0.1") == powershell
    assert session_command(argv, Dialect.LITE, "agliteterm 0.17.14") == powershell
    assert session_command(argv, Dialect.FULL, "agwinterm 0.17.12") == powershell
    assert session_command(argv, Dialect.FULL, "agwinterm 0.17.5") == 'claude "a b"'
    assert session_command(argv, Dialect.FULL, "agwinterm 0.16.2") == 'claude "a b"'
    with pytest.raises(InvalidArgument, match="longer"):
        session_command(["claude", "x" * MAX_COMMAND_BYTES], Dialect.LITE, None)


def test_the_fakes_reading_of_powershell() -> None:
    """The model the tests above lean on, against what PowerShell is documented to do."""
    assert powershell_statements("& 'a b' c; d 'e''f' \"g`th\" $nothing $env:X", {"X": "1"}) == [
        ["a b", "c"],
        ["d", "e'f", "g\th", "", "1"],
    ]
    assert powershell_statements("a 'b'c\"d\" # comment") == [["a", "bcd"]]
    for unsupported in ("a | b", "a > f", "a $(b)", "a 'b", "a (b)"):
        with pytest.raises(Unsupported):
            powershell_statements(unsupported)
    assert windows_argv('a "b c" d\\e "f\\"g" h\\\\"i j" ""') == [
        "a", "b c", "d\\e", 'f"g', "h\\i j", ""
    ]  # fmt: skip
    assert agwinterm_argv('a "b c"  "" d"e f"') == ["a", "b c", "", "de f"]
