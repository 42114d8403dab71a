"""A small Prowl-compatible client: used by the tests, the benchmarks and the probe tool."""

from __future__ import annotations
