"""Run mirror-host as a per-user service: a systemd user unit or a launchd agent."""

from __future__ import annotations
