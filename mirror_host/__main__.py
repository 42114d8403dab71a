"""``python -m mirror_host`` runs the command-line interface."""

from __future__ import annotations

from mirror_host.cli import main

raise SystemExit(main())
