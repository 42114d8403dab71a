"""How ``--help`` lays out its text: prose wrapped to the terminal, examples as written."""

from __future__ import annotations

import argparse
import textwrap

__all__ = ["HelpFormatter"]


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
