"""How agliteterm's and agwinterm's ``session.new`` turn a ``command`` into programs, for the fake.

The fake cannot run PowerShell, so it reads a command the way the released
programs would and runs what they would run:

* **agliteterm** starts ``powershell.exe -NoExit -Command <command>``
  (``yeroo/agliteterm:src/main.cpp`` at v0.17.7, ``ctlDispatch`` ``session.new``;
  newer builds add ``-NoLogo``: ``src/session_command.h``). PowerShell parses
  ``<command>`` as script text. :func:`powershell_statements` is the part of
  PowerShell's tokenizer a launch command meets (Microsoft's
  ``about_Parsing``, ``about_Quoting_Rules``, ``about_Special_Characters``):

  - ``;`` and line breaks end a statement; ``#`` at the start of a word begins
    a comment;
  - a statement that starts with ``&`` calls the program its next word names;
    otherwise its first word is the program;
  - single-quoted text is literal; a quote is doubled to stand for itself, and
    PowerShell's tokenizer takes five characters as single quotes (U+0027,
    U+2018 … U+201B: ``yeroo/agliteterm:src/powershell_quote.h``);
  - double-quoted text (``"``, U+201C … U+201E) and bare words expand
    variables (``$name``, ``${name}``, ``$env:NAME``) and take the backtick as
    their escape character (`` `n``, `` `t``, `` `0``, anything else itself);
  - quoted and bare parts of one word are joined into one argument;
  - ``|``, ``>``, ``<``, ``(``, ``)``, ``{``, ``}``, ``@``, ``,``, ``$(`` and a
    ``&`` inside a statement mean pipelines, redirections, arrays, script
    blocks and subexpressions: :class:`Unsupported`, so a test never mistakes
    one for a plain call.

  Variables other than ``$env:NAME`` are unset in a fresh shell and expand to
  nothing, as PowerShell expands an undefined variable.
  PowerShell then starts each program with a Windows command line built from
  its arguments: :func:`native_command_line` is Windows PowerShell 5.1's
  (``powershell.exe``) legacy rule: an argument holding whitespace outside a
  pair of unescaped double quotes is wrapped in double quotes, nothing is
  escaped, and an empty argument adds nothing (PowerShell's
  ``NativeCommandParameterBinder``, legacy argument passing). The program
  reads that line back with :func:`windows_argv`, the rules of
  ``CommandLineToArgvW`` and the C runtime (Microsoft's "Parsing C
  command-line arguments").
* **agwinterm** (0.17.5) runs the command without any shell:
  :func:`agwinterm_argv` ports ``ParseArgv`` (``yeroo/agwinterm:
  src/Agwinterm.Win32/Program.Sessions.cs`` at de6fdb9): words split on
  whitespace, a double quote toggles grouping and is dropped, nothing escapes.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping

__all__ = [
    "Unsupported",
    "agwinterm_argv",
    "native_command_line",
    "powershell_argvs",
    "powershell_statements",
    "windows_argv",
]

_SINGLE = "'\u2018\u2019\u201a\u201b"
_DOUBLE = '"\u201c\u201d\u201e'
_SPECIAL = "|><(){}@,"
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "a": "\a", "b": "\b", "e": "\x1b"}
_VARIABLE = re.compile(r"\{([^}]*)\}|(env:[A-Za-z_][A-Za-z0-9_]*|[A-Za-z_?][A-Za-z0-9_]*)")


class Unsupported(ValueError):
    """PowerShell syntax beyond a plain call (a pipeline, a subexpression …)."""


def _variable(text: str, index: int, environment: Mapping[str, str]) -> tuple[str, int]:
    """The value of the variable whose ``$`` is at ``index``, and where it ends."""
    if text.startswith("$(", index):
        raise Unsupported(f"a subexpression at {index}")
    match = _VARIABLE.match(text, index + 1)
    if match is None:
        return "$", index + 1  # a lone dollar is itself
    name = match.group(1) if match.group(1) is not None else match.group(2)
    value = environment.get(name[4:], "") if name.lower().startswith("env:") else ""
    return value, match.end()


def _single(text: str, index: int) -> tuple[str, int]:
    out: list[str] = []
    index += 1
    while index < len(text):
        char = text[index]
        if char in _SINGLE:
            if index + 1 < len(text) and text[index + 1] in _SINGLE:
                out.append(text[index + 1])
                index += 2
                continue
            return "".join(out), index + 1
        out.append(char)
        index += 1
    raise Unsupported("an unterminated single-quoted string")


def _double(text: str, index: int, environment: Mapping[str, str]) -> tuple[str, int]:
    out: list[str] = []
    index += 1
    while index < len(text):
        char = text[index]
        if char == "`" and index + 1 < len(text):
            out.append(_ESCAPES.get(text[index + 1], text[index + 1]))
            index += 2
        elif char in _DOUBLE:
            if index + 1 < len(text) and text[index + 1] in _DOUBLE:
                out.append(text[index + 1])
                index += 2
                continue
            return "".join(out), index + 1
        elif char == "$":
            value, index = _variable(text, index, environment)
            out.append(value)
        else:
            out.append(char)
            index += 1
    raise Unsupported("an unterminated double-quoted string")


def powershell_statements(
    command: str, environment: Mapping[str, str] | None = None
) -> list[list[str]]:
    """The programs (each an argv) ``powershell.exe -Command <command>`` runs, in order.

    Raises:
        Unsupported: syntax other than calls of programs with arguments.
    """
    env = environment or {}
    statements: list[list[str]] = []
    words: list[str] = []
    call = False
    index = 0

    def end_statement() -> None:
        nonlocal words, call
        if call and not words:
            raise Unsupported("& without a program")
        if words:
            statements.append(words)
        words, call = [], False

    while index < len(command):
        char = command[index]
        if char in " \t":
            index += 1
            continue
        if char in ";\n\r":
            end_statement()
            index += 1
            continue
        if char == "#":
            newline = command.find("\n", index)
            index = len(command) if newline < 0 else newline
            continue
        if char == "&" and not words and not call:
            call = True
            index += 1
            continue
        if char in _SPECIAL or char == "&":
            raise Unsupported(f"{char!r} at {index}")
        # One word: quoted and bare parts joined.
        part: list[str] = []
        while index < len(command) and command[index] not in " \t;\n\r":
            char = command[index]
            if char in _SINGLE:
                text, index = _single(command, index)
                part.append(text)
            elif char in _DOUBLE:
                text, index = _double(command, index, env)
                part.append(text)
            elif char == "`" and index + 1 < len(command):
                part.append(command[index + 1])
                index += 2
            elif char == "$":
                text, index = _variable(command, index, env)
                part.append(text)
            elif char in _SPECIAL or char == "&":
                raise Unsupported(f"{char!r} at {index}")
            else:
                part.append(char)
                index += 1
        words.append("".join(part))
    end_statement()
    return statements


def agwinterm_argv(command: str) -> list[str]:
    """agwinterm 0.17.5's ``ParseArgv``: whitespace splits, ``"`` toggles grouping."""
    args: list[str] = []
    current: list[str] = []
    quoted = has = False
    for char in command:
        if char == '"':
            quoted = not quoted
            has = True
        elif char.isspace() and not quoted:
            if has:
                args.append("".join(current))
                current, has = [], False
        else:
            current.append(char)
            has = True
    if has:
        args.append("".join(current))
    return args


def _dotnet_space(char: str) -> bool:
    """``char.IsWhiteSpace`` of .NET: the Unicode separators and the C0 spaces."""
    return char in "\t\n\v\f\r\x85\xa0" or unicodedata.category(char) in ("Zs", "Zl", "Zp")


def _needs_quotes(argument: str) -> bool:
    """PowerShell's ``NeedQuotes``: whitespace outside a pair of unescaped double quotes."""
    after_backslash = False
    quotes = 0
    for char in argument:
        if char == '"' and not after_backslash:
            quotes += 1
        elif _dotnet_space(char) and quotes % 2 == 0:
            return True
        after_backslash = char == "\\"
    return False


def native_command_line(arguments: list[str]) -> str:
    """The arguments part of the command line ``powershell.exe`` (5.1) gives a program."""
    return " ".join(
        f'"{argument}"' if _needs_quotes(argument) else argument for argument in arguments
    )


def windows_argv(line: str) -> list[str]:
    """A command line's arguments as a Windows program reads them (C runtime rules)."""
    args: list[str] = []
    current: list[str] = []
    quoted = has = False
    index = 0
    while index < len(line):
        char = line[index]
        if char == "\\":
            slashes = 0
            while index < len(line) and line[index] == "\\":
                slashes += 1
                index += 1
            if index < len(line) and line[index] == '"':
                current.append("\\" * (slashes // 2))
                has = True
                if slashes % 2:
                    current.append('"')
                    index += 1
                continue
            current.append("\\" * slashes)
            has = True
            continue
        if char == '"':
            if quoted and line[index + 1 : index + 2] == '"':
                current.append('"')  # "" inside quotes: a literal quote
                index += 2
                continue
            quoted = not quoted
            has = True
        elif char in " \t" and not quoted:
            if has:
                args.append("".join(current))
                current, has = [], False
        else:
            current.append(char)
            has = True
        index += 1
    if has:
        args.append("".join(current))
    return args


def powershell_argvs(command: str, environment: Mapping[str, str] | None = None) -> list[list[str]]:
    """The argv each program started by ``powershell.exe -Command <command>`` receives.

    Raises:
        Unsupported: syntax other than calls of programs with arguments.
    """
    return [
        [words[0], *windows_argv(native_command_line(words[1:]))]
        for words in powershell_statements(command, environment)
    ]
