"""The front door: ``mirror-host`` and its sub-commands, one module each.

Each command module (``serve``, ``pair``, ``devices``, ``revoke``, ``status``,
``check_config``, ``wire``, ``shell_init``, ``attach``, ``conformance``,
``service``) holds its parser (``add_parser``) and its run, which parses, loads
the settings, hands the work to the room that owns it and says the outcome.
What they share is written once: the parser factory (a command's examples and
its ``--json`` included), failures, argument types and ``SECONDS`` options
(:mod:`.command`), the settings' flags and group, read off the settings' own
declarations (:mod:`.settings`), the ``--help`` layout, its closing text and
where the documentation is (:mod:`.help`), a pairing window shown
(:mod:`.ticket`), the pane source a configuration names (:mod:`.sources`).
:mod:`.program` builds the top-level parser and runs a command. Exit codes: 0
success, 1 the command failed (an invalid packet, no running host …), 2 bad
usage or configuration.
"""

from __future__ import annotations

from mirror_host.cli.program import build_parser, main
from mirror_host.cli.settings import load_settings

__all__ = ["build_parser", "load_settings", "main"]
