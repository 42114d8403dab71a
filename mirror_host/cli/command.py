"""What every command module builds on: its parser, how it fails, argument types."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeAlias, TypeVar

from mirror_host.cli.help import HelpFormatter, closing_text
from mirror_host.host.admin_client import NoHostRunning, admin_request

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = [
    "CommandFailed",
    "Commands",
    "Run",
    "add_command",
    "add_command_group",
    "add_seconds_option",
    "argument_type",
    "ask_host",
    "check_pairing_code",
    "options_from",
    "seconds",
]

#: Where a command module adds its parser: ``mirror-host``'s (or ``service``'s) sub-commands.
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
#: A command's run: its arguments, standard input and output; its exit status.
Run = Callable[[argparse.Namespace, TextIO, TextIO], int]

_T = TypeVar("_T")
_Options = TypeVar("_Options", bound="DataclassInstance")


class CommandFailed(Exception):
    """The command cannot do what was asked; ``main`` says the message in one line,
    after the command's name (``mirror-host pair: …``), and exits 1."""


def add_command(
    commands: Commands,
    name: str,
    run: Run,
    *,
    help: str,
    description: str,
    notes: str | None = None,
    examples: tuple[str, ...] = (),
    docs: tuple[tuple[str, str], ...] = (),
    json_help: str | None = None,
) -> argparse.ArgumentParser:
    """A sub-command's parser, laid out by :class:`HelpFormatter`, that runs ``run``.

    Its help closes with ``notes``, the ``examples`` (command lines) and the
    documentation files ``docs`` names (:func:`~mirror_host.cli.help.closing_text`).
    With ``json_help``, its first option is ``--json`` (print JSON instead of
    text), with that help.
    """
    parser = commands.add_parser(
        name,
        help=help,
        description=description,
        epilog=closing_text(notes, examples=examples, docs=docs),
        formatter_class=HelpFormatter,
    )
    parser.set_defaults(parser=parser, handler=run)
    if json_help is not None:
        parser.add_argument("--json", action="store_true", help=json_help)
    return parser


def add_command_group(
    commands: Commands, name: str, *, help: str, description: str, dest: str, metavar: str
) -> Commands:
    """A sub-command that only groups others (``wire decode``, ``service install``);
    where they are added."""
    group = commands.add_parser(name, help=help, description=description)
    return group.add_subparsers(dest=dest, required=True, metavar=metavar)


def options_from(args: argparse.Namespace, options: type[_Options], **rest: Any) -> _Options:
    """``options``, the dataclass a command hands over, from the parsed arguments
    named as its fields (``rest`` for fields that are no argument)."""
    given = {
        item.name: getattr(args, item.name)
        for item in dataclasses.fields(options)
        if hasattr(args, item.name)
    }
    return options(**given, **rest)


def argument_type(parse: Callable[[str], _T]) -> Callable[[str], _T]:
    """``parse`` as an argparse type: its ``ValueError`` is a usage error that says why."""

    def checked(text: str) -> _T:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from exc

    return checked


def seconds(low: float, high: float) -> Callable[[str], float]:
    """An argparse type for a number of seconds from ``low`` to ``high``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from exc
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected {low:g} … {high:g} seconds")
        return value

    return parse


def add_seconds_option(
    parser: argparse.ArgumentParser,
    flag: str,
    *,
    low: float,
    high: float,
    default: float,
    help: str,
) -> None:
    """A ``flag SECONDS`` option taking ``low`` to ``high`` seconds; its help ends
    with the default, so what it says is what it is."""
    parser.add_argument(
        flag,
        type=seconds(low, high),
        default=default,
        metavar="SECONDS",
        help=f"{help} (default {default:g})",
    )


def ask_host(
    state_dir: Path, request: dict[str, Any], *, wait_for_host: float = 0.0
) -> dict[str, Any]:
    """The running host's reply to ``request`` on its admin socket.

    Raises:
        CommandFailed: no host answers (the message says what to do).
    """
    try:
        return admin_request(state_dir, request, wait_for_host=wait_for_host)
    except NoHostRunning as exc:
        raise CommandFailed(str(exc)) from exc


def check_pairing_code(args: argparse.Namespace) -> None:
    """``--code`` must look like a pairing code: a usage error (exit 2) otherwise."""
    from mirror_host.auth.pairing import InvalidPairingCode, normalize_code

    if args.code is None:
        return
    if not args.code.strip():  # "$(mirror-host pair …)" that printed nothing
        args.parser.error(
            "--code is empty (did the command that was to print the code fail? "
            "`mirror-host pair` on the host shows one)"
        )
    try:
        normalize_code(args.code)
    except InvalidPairingCode as exc:
        args.parser.error(f"--code {args.code!r} is not a pairing code: {exc}, such as ABCD-2345")
