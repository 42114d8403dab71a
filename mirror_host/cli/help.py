"""How ``--help`` lays out its text, and where this installation's documentation is."""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

__all__ = ["HelpFormatter", "closing_text", "doc", "documentation", "documentation_dir"]


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Wraps each paragraph of a description or epilog to the terminal's width,
    except a paragraph with indented lines (an example block, a table), which is
    kept line for line: its columns mean something, and a command must stay
    copyable."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        paragraphs = []
        for paragraph in text.strip("\n").split("\n\n"):
            lines = paragraph.splitlines()
            if any(line[:1].isspace() for line in lines):
                paragraphs.append("\n".join(indent + line for line in lines))
            else:
                paragraphs.append(
                    textwrap.fill(
                        " ".join(line.strip() for line in lines),
                        width,
                        initial_indent=indent,
                        subsequent_indent=indent,
                        break_on_hyphens=False,
                        break_long_words=False,
                    )
                )
        return "\n\n".join(paragraphs) + "\n"


def documentation_dir() -> Path:
    """Where this installation's documentation is: inside the package for a wheel
    (pyproject.toml ships ``docs/`` there), ``docs/`` of the clone otherwise."""
    package = Path(__file__).resolve().parent.parent
    shipped = package / "docs"
    return shipped if shipped.is_dir() else package.parent / "docs"


def doc(name: str) -> Path:
    """The documentation file ``name`` (``operations.md``) of this installation."""
    return documentation_dir() / name


def closing_text(
    notes: str | None = None,
    *,
    examples: tuple[str, ...] = (),
    docs: tuple[tuple[str, str], ...] = (),
) -> str | None:
    """A help's epilog: ``notes`` (prose), the ``examples`` (command lines, kept
    line for line under ``examples:``), then the documentation files ``docs``
    names, ``(file, what it covers)``; ``None`` when it has none of them."""
    parts = [notes] if notes else []
    if examples:
        parts.append("examples:\n" + "".join(f"  {line}\n" for line in examples))
    if docs:
        parts.append(documentation(*docs))
    return "\n".join(parts) or None


def documentation(*files: tuple[str, str]) -> str:
    """An epilog's closing block: each ``(file, what it covers)`` as its path here,
    so a reader of ``--help`` finds it whether this is a clone or a wheel."""
    rows = "".join(f"  {doc(name)}   {covers}\n" for name, covers in files)
    return f"documentation (Markdown files of this installation):\n{rows}"
