"""CLI-shaped JSON results for remote commands (docs/protocol.md §6). Pure.

Every answer to a ``command`` is the public Prowl CLI envelope:
``{"ok": true, "command", "schema_version", "data"}`` or
``{"ok": false, "command", "schema_version", "error": {"code", "message"}}``.
Refusals by the mirror layer itself use command ``remote`` and the exact
messages Prowl's clients know.
"""

from __future__ import annotations

import unicodedata

from mirror_host.control.swiftjson import JSONValue

__all__ = [
    "AGENT_WHO",
    "BAD_PROFILE",
    "BAD_REQUEST",
    "BAD_TARGET",
    "CANCELLED_INPUT",
    "INPUT_UNCONFIRMED",
    "MAC_TYPING",
    "MAX_PROMPT_BYTES",
    "NOT_ALLOWED",
    "NO_AGENT",
    "NO_LONGER_OWNS",
    "PANE_GONE",
    "REQUEST_LIMIT",
    "REUSED_ID",
    "SCHEMAS",
    "SEND_REFUSED",
    "UNCONFIRMED",
    "UNSTEADY",
    "cli_error",
    "cli_success",
    "enter_uncertain",
    "for_the_apps",
    "grapheme_count",
    "input_delivered",
    "nothing_sent",
    "pane_unreadable",
    "rejected",
    "still_working",
    "unconfirmed",
    "waiting_for_answer",
    "written_without_enter",
]

MAX_PROMPT_BYTES = 65_536

NO_LONGER_OWNS = "The mirror no longer owns this pane."
NOT_ALLOWED = "Command is not allowed."
REUSED_ID = "Request ID was reused with different parameters."
BAD_TARGET = "Invalid dispatch target or prompt size."
SEND_REFUSED = (
    "Host cannot verify an empty shell command line. "
    "Use an Agent Profile or control the shell on Host."
)
BAD_PROFILE = "Choose a valid Host Profile and a prompt within the size limit."
REQUEST_LIMIT = (
    "The remote command request limit has been reached. Restart Prowl before issuing more commands."
)
BAD_REQUEST = "Invalid command request."
UNCONFIRMED = "Could not encode the command result. Check Host before retrying."
CANCELLED_INPUT = "Input was cancelled before delivery."
INPUT_UNCONFIRMED = "Input delivery is unconfirmed. Check the pane before retrying."

# What guarded delivery (commands/delivery.py and its adapters) tells a phone, on
# every source alike.
PANE_GONE = "The selected pane is gone."
NO_AGENT = "No agent is running in the selected pane."
#: Who a refusal names when the agent's own name is not known.
AGENT_WHO = "The pane's agent"
MAC_TYPING = "Someone is typing in this pane on a Mac; nothing was sent."
#: A ready-looking screen that did not look the same twice before the grace ran out.
UNSTEADY = "The pane's screen kept changing; nothing was sent. Send again in a moment."


def pane_unreadable(why: object) -> str:
    """The pane could not be read before anything was written."""
    return f"Host could not read the pane ({why}); nothing was sent."


def still_working(who: str) -> str:
    """``who`` (an agent's name, or "The pane's agent") has not finished its turn."""
    return f"{who} is still working; send again when it is idle."


def waiting_for_answer(who: str, detail: str = "") -> str:
    """A dialog holds the agent's keyboard; ``detail`` says which, if known."""
    shown = f" ({detail})" if detail else ""
    return (
        f"{who} is waiting for an answer on Host{shown}; "
        "the text would go to its dialog, so nothing was sent."
    )


def nothing_sent(why: object) -> str:
    """The target refused the text before any of it was written."""
    return f"{why}; nothing was sent."


def written_without_enter(why: str) -> str:
    """The text may sit in the pane: the Enter was withheld, for ``why``."""
    return f"The text was written but Enter was not sent: {why}. Check the pane before retrying."


def enter_uncertain(why: object) -> str:
    """Sending the Enter failed half-way."""
    return f"The text was written but Enter may not have been ({why})."


#: command name → (CLI command, schema version)
SCHEMAS = {
    "list": ("list", "prowl.cli.list.v1"),
    "profiles": ("profiles", "prowl.cli.profiles.v1"),
    "create": ("create", "prowl.cli.create.v1"),
    "agentsInput": ("agents.input", "prowl.cli.agents.input.v1"),
    "agentsDispatch": ("agents.dispatch", "prowl.cli.agents.dispatch.v1"),
    "send": ("send", "prowl.cli.send.v1"),
}


def rejected(message: str) -> JSONValue:
    """The mirror layer refused the request (``REMOTE_COMMAND_REJECTED``)."""
    return {
        "ok": False,
        "command": "remote",
        "schema_version": "prowl.remote.command.v1",
        "error": {"code": "REMOTE_COMMAND_REJECTED", "message": message},
    }


def unconfirmed(message: str = UNCONFIRMED) -> JSONValue:
    """The result is unknown (``REMOTE_COMMAND_UNCONFIRMED``)."""
    return {
        "ok": False,
        "command": "remote",
        "schema_version": "prowl.remote.command.v1",
        "error": {"code": "REMOTE_COMMAND_UNCONFIRMED", "message": message},
    }


def cli_success(command: str, data: JSONValue) -> JSONValue:
    """A successful CLI result for the remote command ``command`` (``agentsInput`` …)."""
    name, schema = SCHEMAS[command]
    return {"ok": True, "command": name, "schema_version": schema, "data": data}


def cli_error(command: str, code: str, message: str) -> JSONValue:
    """A CLI error result (``SEND_FAILED``, ``TARGET_NOT_FOUND`` …)."""
    name, schema = SCHEMAS[command]
    return {
        "ok": False,
        "command": name,
        "schema_version": schema,
        "error": {"code": code, "message": message},
    }


def input_delivered(text: str, source: str) -> dict[str, JSONValue]:
    """The ``data`` of a delivered input (``agents.input``, ``send``): what the apps
    check against what they sent (the UTF-8 byte count) before they clear it."""
    return {
        "input": {
            "source": source,
            "characters": grapheme_count(text),
            "bytes": len(text.encode("utf-8")),
            "trailing_enter_sent": True,
        }
    }


_INPUT_COMMANDS = frozenset({"agentsInput", "agentsDispatch", "send"})


def _problem(command: str, result: JSONValue) -> str | None:
    if not isinstance(result, dict) or not isinstance(result.get("ok"), bool):
        return "not an object with a boolean ok"
    for key in ("data", "error"):
        if key in result and not isinstance(result[key], dict):
            return f"{key} is not an object"
    if result["ok"] is False:
        error = result.get("error")
        if not isinstance(error, dict) or not all(
            isinstance(error.get(key), str) for key in ("code", "message")
        ):
            return "an error without a code and a message"
        return None
    if command in _INPUT_COMMANDS:
        data = result.get("data")
        sent = data.get("input") if isinstance(data, dict) else None
        if not isinstance(sent, dict):
            return "a delivered input without data.input"
        size = sent.get("bytes")
        if not isinstance(size, int) or isinstance(size, bool):
            return "data.input.bytes is not an integer"
        if not isinstance(sent.get("trailing_enter_sent"), bool):
            return "data.input.trailing_enter_sent is not a boolean"
    return None


def for_the_apps(command: str, result: JSONValue) -> tuple[JSONValue, str | None]:
    """``result`` as Prowl's apps can read it, and what was wrong with it, if anything.

    Android reads ``data``, ``error`` and ``data.input`` as JSON objects and
    **disconnects** on a ``null`` in any of them, or on a Send's success without
    an integer ``data.input.bytes`` and a boolean ``trailing_enter_sent``; iOS
    needs an error's ``code`` and ``message``. A result that breaks one of these
    (a backend's bug) is sent as ``REMOTE_COMMAND_UNCONFIRMED`` instead: "unknown"
    to the apps, which keep the draft.
    """
    problem = _problem(command, result)
    return (result, None) if problem is None else (unconfirmed(), problem)


def grapheme_count(text: str) -> int:
    """User-perceived characters, close to Swift's ``String.count``.

    Combining marks, variation selectors and characters joined by a zero-width
    joiner belong to the character before them; a pair of regional indicators
    is one flag.
    """
    count = 0
    joined = False
    regional_open = False
    for ch in text:
        code = ord(ch)
        if ch == "\u200d":
            joined = True
            continue
        if unicodedata.combining(ch) or 0xFE00 <= code <= 0xFE0F or 0x1F3FB <= code <= 0x1F3FF:
            continue
        if joined:
            joined = False
            continue
        if 0x1F1E6 <= code <= 0x1F1FF:
            if regional_open:
                regional_open = False
                continue
            regional_open = True
        else:
            regional_open = False
        count += 1
    return count
