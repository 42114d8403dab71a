"""The judgments the conformance checks make beyond the frame rules. Pure.

* which pane the checks use (:func:`choose_pane`);
* history pages: what one must look like, and where a long walk jumps to
  (:func:`page_problem`, :func:`same_snapshot`, :func:`last_page_end`);
* scrolled views: whether a text frame shows the previous view moved further
  back (:func:`moved_up`), i.e. a scroll was applied again;
* what Prowl's own apps require beyond the wire rules: ``launch-profile`` beside
  any command capability (:func:`launch_profile_problem`), history answered
  before Android gives up (:func:`history_answer_problem`), an empty ``send``
  refused as a refusal where ``shell-send`` is advertised (:func:`send_refusal_problem`);
* the exit status of a run (:func:`exit_status`).

Nothing here reads a clock or touches the network.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from uuid import UUID

from mirror_host.client.conformance.report import CheckResult, Status
from mirror_host.control import HistoryPage, PaneDescriptor

__all__ = [
    "ANDROID_HISTORY_SECONDS",
    "COMMAND_CAPABILITIES",
    "MAX_HISTORY_BYTES",
    "MIN_SHIFT_EVIDENCE",
    "PAGE_LINES",
    "choose_pane",
    "exit_status",
    "history_answer_problem",
    "launch_profile_problem",
    "last_page_end",
    "moved_up",
    "page_bytes",
    "page_problem",
    "same_snapshot",
    "send_refusal_problem",
    "view_rows",
]

PAGE_LINES = 200
MAX_HISTORY_BYTES = 2 * 1024 * 1024
#: Non-blank rows two views must share before one counts as the other moved.
MIN_SHIFT_EVIDENCE = 2
#: The capabilities a host's command service advertises.
COMMAND_CAPABILITIES = ("launch-profile", "launch-shell", "agents-dispatch", "agent-input")
#: Android gives up on a history request after this long ("History timed out"),
#: then treats a late ``historyPage`` or ``HISTORY_UNAVAILABLE`` as fatal.
ANDROID_HISTORY_SECONDS = 8.0


# ---------------------------------------------------------------- panes


def choose_pane(panes: Sequence[PaneDescriptor], choice: str | None) -> PaneDescriptor | str:
    """The pane the checks use, or why there is none (a reason to skip).

    ``choice`` (``--pane``) is a 1-based index into the list or a pane id.
    Without it, the first pane not listed busy; when every pane is listed busy,
    the first one (the caller finds out whether it really is mirrored: a
    returned pane with ``busy`` set and no ``choice`` means exactly that).
    """
    if not panes:
        return "the host lists no panes (open one on the host to run the pane checks)"
    if choice is not None:
        for index, pane in enumerate(panes, start=1):
            if choice == str(index) or choice.upper() == str(pane.id).upper():
                return pane
        return f"no pane {choice!r} in the host's list"
    for pane in panes:
        if not pane.busy:
            return pane
    return panes[0]


# ---------------------------------------------------------------- history


def page_bytes(page: HistoryPage) -> int:
    """What a page adds to the snapshot's size as Prowl's clients count it (UTF-8 + 1 per line)."""
    return sum(len(line.encode()) + 1 for line in page.lines)


def page_problem(page: HistoryPage, end: int, lease: UUID) -> str | None:
    """What is wrong with ``page`` as the page asked to end at ``end``, if anything.

    A page holds the ``min(200, end)`` lines just before ``end``; it names the
    lease; its capture time is a finite number.
    """
    if page.subscription_id != lease:
        return "a page names another subscription than the lease"
    if len(page.lines) > PAGE_LINES:
        return f"a page has {len(page.lines)} lines (at most {PAGE_LINES})"
    if page.offset + len(page.lines) != end:
        return (
            f"the page at offset {page.offset} with {len(page.lines)} lines ends at "
            f"{page.offset + len(page.lines)}, not at {end} (pages must be contiguous)"
        )
    if len(page.lines) != min(PAGE_LINES, end):
        return f"a page ending at {end} has {len(page.lines)} lines, not {min(PAGE_LINES, end)}"
    if not math.isfinite(page.captured_at):
        return "capturedAt is not a finite number"
    return None


def same_snapshot(page: HistoryPage, first: HistoryPage) -> str | None:
    """Why ``page`` is not from ``first``'s snapshot (id, total, capturedAt, truncated)."""
    fields = ("history_id", "total", "captured_at", "truncated")
    changed = [f for f in fields if getattr(page, f) != getattr(first, f)]
    if not changed:
        return None
    names = {
        "history_id": "historyID",
        "total": "total",
        "captured_at": "capturedAt",
        "truncated": "truncated",
    }
    shown = ", ".join(f"{names[f]} {getattr(first, f)!r} → {getattr(page, f)!r}" for f in changed)
    return f"a later page of the same snapshot changed {shown}"


def last_page_end(offset: int) -> int:
    """Where the last page (the one at line 0) ends when pages are walked back from
    ``offset``: ``1 … 200`` for any ``offset ≥ 1``."""
    if offset < 1:
        raise ValueError("offset must be at least 1")
    return (offset - 1) % PAGE_LINES + 1


# ---------------------------------------------------------------- scrolled views


def view_rows(text: str, rows: int) -> list[str]:
    """A text frame's rows, trailing blanks trimmed, padded or cut to ``rows``."""
    lines = [line.rstrip() for line in text.split("\n")]
    if rows <= 0:
        rows = len(lines)
    return (lines + [""] * rows)[:rows]


def moved_up(before: Sequence[str], after: Sequence[str]) -> int | None:
    """By how many rows ``after`` shows the view ``before`` moved further back into
    history, or ``None`` when it does not.

    Moving the view up by ``k`` rows puts ``before``'s top rows ``k`` rows lower:
    ``after[k:] == before[:n-k]``. At least :data:`MIN_SHIFT_EVIDENCE` of those
    shared rows must hold text, so blank or repetitive screens prove nothing.
    A pane's own new output moves text the other way (up the screen), so it is
    never mistaken for this.
    """
    n = min(len(before), len(after))
    before, after = list(before[:n]), list(after[:n])
    if before == after:
        return None
    for shift in range(1, n):
        shared = before[: n - shift]
        if after[shift:] != shared:
            continue
        if sum(1 for row in set(shared) if row.strip()) >= MIN_SHIFT_EVIDENCE:
            return shift
    return None


# ---------------------------------------------------------------- Prowl's own apps


def launch_profile_problem(capabilities: Sequence[str]) -> str | None:
    """Why a host's command capabilities leave the phones unable to send, if they do."""
    advertised = [c for c in COMMAND_CAPABILITIES if c in capabilities]
    if not advertised or "launch-profile" in advertised:
        return None
    return (
        f"the host advertises {', '.join(advertised)} but not launch-profile: Prowl's iPhone "
        "and Android apps send no command at all without it (no `list`, no `agentsInput`; "
        "the composer's Send stays disabled), so a phone can watch an agent but never answer it"
    )


#: Error codes Prowl's apps read as "maybe delivered" (draft kept, a receipt
#: awaited); every other code is a refusal: nothing was typed.
UNCONFIRMED_CODES = ("REMOTE_COMMAND_UNCONFIRMED", "DISPATCH_FAILED", "SEND_FAILED")


def send_refusal_problem(body: object) -> str | None:
    """Why ``body``, the answer to an empty ``send`` on a ``shell-send`` host, is no refusal.

    The host runs shell command lines, so it answers as ``send`` (not as the
    mirror layer's ``remote``); an empty one must be refused before anything is
    typed: ``ok`` false and an ``error`` with a code and a message (iOS needs
    both) whose code the apps read as a refusal, not as "maybe delivered".
    """
    if not isinstance(body, dict) or body.get("ok") is not False:
        return f"an empty `send` was not refused: {body!r}"[:400]
    if body.get("command") != "send":
        return f"an empty `send` was answered as command {body.get('command')!r}, not 'send'"
    error = body.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    if not isinstance(code, str) or not code or not isinstance(message, str) or not message:
        return f"the refusal of an empty `send` lacks an error code and message: {error!r}"[:400]
    if code in UNCONFIRMED_CODES:
        return (
            f"an empty `send` was answered {code}, which Prowl's apps read as maybe typed: "
            "it must be refused before anything is written"
        )
    return None


def history_answer_problem(seconds: float | None, waited: float) -> str | None:
    """Why a history answer after ``seconds`` (``None``: none within ``waited``) loses Android."""
    limit = ANDROID_HISTORY_SECONDS
    if seconds is not None and seconds <= limit:
        return None
    when = f"after {seconds:.1f} s" if seconds is not None else f"not within {waited:g} s"
    return (
        f"a new history snapshot was answered {when}: Prowl's Android app gives up at "
        f'{limit:g} s ("History timed out") and then treats the late `historyPage` or '
        "`HISTORY_UNAVAILABLE` as fatal: it disconnects and reconnects. Answer within 8 s, "
        "with `HISTORY_UNAVAILABLE` if the capture takes longer"
    )


# ---------------------------------------------------------------- the run


def exit_status(results: Sequence[CheckResult]) -> int:
    """0 when nothing failed and at least one check passed, else 1."""
    failed = any(r.status is Status.FAILED for r in results)
    passed = any(r.status is Status.PASSED for r in results)
    return 0 if passed and not failed else 1
