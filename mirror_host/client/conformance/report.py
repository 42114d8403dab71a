"""Check results, selection and the report lines. Pure.

The text report is one line per check (``PASS``/``FAIL``/``SKIP``, the name and
why), then ``N passed, M failed`` as the very last line; skipped checks are
listed but counted in neither number.
"""

from __future__ import annotations

import enum
import fnmatch
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["CheckResult", "Status", "render_json", "render_text", "select", "summary"]


class Status(enum.Enum):
    """How one check ended."""

    PASSED = "pass"
    FAILED = "fail"
    SKIPPED = "skip"


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One check's outcome; ``detail`` says why (always for failures and skips)."""

    name: str
    status: Status
    detail: str
    seconds: float


def select(
    names: Sequence[str], only: Iterable[str] = (), skip: Iterable[str] = ()
) -> tuple[list[str], list[str]]:
    """``(selected, unknown patterns)``: ``only``/``skip`` are names or shell-style globs."""
    only, skip = list(only), list(skip)
    unknown = [p for p in [*only, *skip] if not fnmatch.filter(names, p)]
    chosen = [
        name
        for name in names
        if (not only or any(fnmatch.fnmatchcase(name, p) for p in only))
        and not any(fnmatch.fnmatchcase(name, p) for p in skip)
    ]
    return chosen, unknown


def summary(results: Sequence[CheckResult]) -> tuple[int, int, int]:
    """``(passed, failed, skipped)``."""
    count = dict.fromkeys(Status, 0)
    for result in results:
        count[result.status] += 1
    return count[Status.PASSED], count[Status.FAILED], count[Status.SKIPPED]


_LABEL = {Status.PASSED: "PASS", Status.FAILED: "FAIL", Status.SKIPPED: "SKIP"}


def render_line(result: CheckResult) -> str:
    """``PASS tls.policy: TLS 1.2, ECDHE-PSK-CHACHA20-POLY1305 (0.1 s)``."""
    detail = f": {result.detail}" if result.detail else ""
    return f"{_LABEL[result.status]} {result.name}{detail} ({result.seconds:.1f} s)"


def render_text(results: Sequence[CheckResult]) -> list[str]:
    """Every check's line, then ``N passed, M failed``."""
    passed, failed, _ = summary(results)
    return [*(render_line(r) for r in results), f"{passed} passed, {failed} failed"]


def render_json(target: str, results: Sequence[CheckResult]) -> str:
    """One JSON object: the target, every check and the counts."""
    passed, failed, skipped = summary(results)
    document = {
        "target": target,
        "checks": [
            {
                "name": r.name,
                "status": r.status.value,
                "detail": r.detail,
                "seconds": round(r.seconds, 3),
            }
            for r in results
        ],
        "passed": passed,
        "failed": failed,
        "skipped": skipped,
    }
    return json.dumps(document, ensure_ascii=False)
