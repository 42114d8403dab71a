"""A profile's program and arguments as the ``command`` of ``session.new``. Pure.

agliteterm does not take an argv: it takes one string and runs it
(``../shared/spec/agliteterm.md``, "As released"):

* **agliteterm** (0.17.7 and newer) and **newer agwinterm** builds start
  ``powershell.exe -NoExit -Command <command>`` (newer: with ``-NoLogo``;
  ``yeroo/agliteterm:src/main.cpp`` at v0.17.7 ``session.new``,
  ``src/session_command.h``; ``yeroo/agwinterm:src/Agwinterm.Pty/
  SessionCommand.cs``). PowerShell reads the string as script, so a space,
  ``'``, ``"``, ``$``, a backtick or ``;`` in an argument would split it, end
  it, expand a variable, escape a character or start another command.
  :func:`powershell_command` writes ``& 'program' 'arg' …``: the call operator
  and single-quoted literals, in which nothing is special but the quote
  itself, doubled (PowerShell takes U+2018 … U+201B as single quotes too,
  ``yeroo/agliteterm:src/powershell_quote.h``). PowerShell 5.1 then builds
  the program's Windows command line from those strings without escaping
  embedded double quotes (it wraps an argument holding whitespace in quotes,
  and drops an empty one), so each argument is first escaped the way the
  program's C runtime reads it back: a ``"`` as ``\\"`` (backslashes before it
  doubled), backslashes at the end of an argument with whitespace doubled,
  and an empty argument written ``""``. (A program that is a PowerShell
  script, not an executable, would see those escapes.)
* **agwinterm 0.17.5** splits the string itself (``ParseArgv`` in
  ``yeroo/agwinterm:src/Agwinterm.Win32/Program.Sessions.cs`` at de6fdb9):
  whitespace separates words, a double quote groups and is dropped, nothing
  escapes. :func:`argv_command` quotes words with whitespace (or empty
  ones); a double quote cannot be passed at all and is refused.

:func:`session_command` picks by the product and version ``ping`` named.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from mirror_host.errors import InvalidArgument
from mirror_host.panes.agliteterm.protocol import Dialect, release_of

__all__ = [
    "MAX_COMMAND_BYTES",
    "argv_command",
    "native_argument",
    "powershell_command",
    "powershell_literal",
    "session_command",
]

#: agliteterm carries a command in one argument field of 2048 bytes (NUL included).
MAX_COMMAND_BYTES = 2047
_QUOTES = "'\u2018\u2019\u201a\u201b"
_BEFORE_QUOTE = re.compile(r'(\\*)"')
_TRAILING = re.compile(r"(\\+)$")
#: The last agwinterm release whose session.new splits the command itself.
_ARGV_RELEASE = (0, 17, 5)


def _dotnet_space(char: str) -> bool:
    """.NET's ``char.IsWhiteSpace`` (what PowerShell's ``NeedQuotes`` asks)."""
    return char in "\t\n\v\f\r\x85\xa0" or unicodedata.category(char) in ("Zs", "Zl", "Zp")


def powershell_literal(text: str) -> str:
    """``text`` as a PowerShell single-quoted string: nothing inside is special."""
    return "'" + "".join(char * 2 if char in _QUOTES else char for char in text) + "'"


def native_argument(argument: str) -> str:
    """What PowerShell 5.1 must hand a program so its C runtime reads ``argument`` back."""
    if not argument:
        return '""'
    escaped = _BEFORE_QUOTE.sub(lambda m: m.group(1) * 2 + '\\"', argument)
    if any(_dotnet_space(char) for char in escaped):
        # PowerShell wraps it in quotes: trailing backslashes must not escape the last.
        escaped = _TRAILING.sub(lambda m: m.group(1) * 2, escaped)
    return escaped


def _checked(argv: Sequence[str]) -> None:
    if not argv or not argv[0]:
        raise InvalidArgument("a profile needs a program to run")
    if any("\0" in word for word in argv):
        raise InvalidArgument("a command line cannot carry a NUL character")


def powershell_command(argv: Sequence[str]) -> str:
    """``& 'program' 'arg' …``: what ``powershell.exe -Command`` runs as exactly ``argv``.

    Raises:
        InvalidArgument: no program, or a NUL in a word.
    """
    _checked(argv)
    words = [powershell_literal(argv[0])]
    words += [powershell_literal(native_argument(argument)) for argument in argv[1:]]
    return "& " + " ".join(words)


def argv_command(argv: Sequence[str]) -> str:
    """``argv`` as agwinterm 0.17.5's ``ParseArgv`` splits it back.

    Raises:
        InvalidArgument: no program, a NUL, or a double quote (it cannot pass one).
    """
    _checked(argv)
    if any('"' in word for word in argv):
        raise InvalidArgument(
            "this agwinterm (0.17.5) cannot pass a double quote in a program's arguments"
        )
    return " ".join(
        f'"{word}"' if not word or any(_dotnet_space(c) for c in word) else word for word in argv
    )


def session_command(argv: Sequence[str], dialect: Dialect | None, version: str | None) -> str:
    """The ``command`` that runs ``argv`` on this build (module docstring).

    Raises:
        InvalidArgument: it cannot be written for this build, or is longer than
            agliteterm carries.
    """
    release = release_of(version)
    old_full = dialect is Dialect.FULL and release is not None and release <= _ARGV_RELEASE
    command = argv_command(argv) if old_full else powershell_command(argv)
    if len(command.encode("utf-8")) > MAX_COMMAND_BYTES:
        raise InvalidArgument(
            f"its command line is longer than agliteterm takes ({MAX_COMMAND_BYTES} bytes)"
        )
    return command
