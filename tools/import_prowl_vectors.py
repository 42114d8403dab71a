#!/usr/bin/env python3
"""Reformat Prowl's published test vectors into tests/vectors/prowl.json.

Run once by hand when ../shared/spec/prowl-vectors.json changes; review the diff.
The hex is protocol fact and is copied unchanged. The expected decoded form is
taken from the vector itself (its JSON ``text``, or the frame layout read with
plain ``struct``), never from mirror-host's decoder, so the test that reads the
result checks mirror-host against Prowl rather than against itself.

Usage: python3 tools/import_prowl_vectors.py [SOURCE] [DEST]
"""

from __future__ import annotations

import base64
import json
import struct
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INPUT_KINDS = {
    None: "packets",
    "payload_without_length_prefix": "payload",
    "length_header_only": "header",
    "pairing_code_text": "pairing-code",
    "qr_text": "qr",
}


# Prowl's 27 case names (docs/protocol.md §4). Top-level members that are not
# case names are ignored by Swift's decoder, so the decoded form drops them.
CASES = {
    "challenge", "authenticate", "pair", "paired", "authenticated", "list", "panes",
    "subscribe", "subscribed", "frame", "textFrame", "viewport", "acknowledge", "input",
    "history", "historyPage", "failure", "ping", "pong", "ended", "refresh", "scroll",
    "scrollResult", "scrollState", "command", "commandResult", "commandReceipt",
}  # fmt: skip


def frame_fields(payload: bytes) -> dict[str, object]:
    kind = payload[0]
    sub, seq, cols, rows = struct.unpack_from(">16sQII", payload, 1)
    out: dict[str, object] = {
        "kind": kind,
        "subscriptionID": str(uuid.UUID(bytes=sub)).upper(),
        "sequence": seq,
        "columns": cols,
        "rows": rows,
    }
    if kind == 2:
        out["truncated"] = payload[33] == 1
        out["text"] = payload[34:].decode()
    else:
        out["bytes"] = base64.b64encode(payload[33:]).decode()
    return out


def convert(vector: dict[str, object]) -> dict[str, object] | None:
    if vector.get("semantic") or str(vector["name"]).startswith("hmac_"):
        return None
    hex_text = vector.get("hex")
    if hex_text is None and vector.get("text") == "x*2049":
        hex_text = "78" * 2049  # the vector states the text instead of the hex
    if hex_text is None:
        return None
    input_is = vector.get("input_is")
    if input_is == "json_object_only":
        kind = "pane" if str(vector["name"]).startswith("pane_") else "command-request"
    else:
        kind = INPUT_KINDS[input_is]  # type: ignore[index]
    out: dict[str, object] = {
        "name": vector["name"],
        "input": kind,
        "hex": hex_text,
        "expect": vector["expect"],
    }
    if "now" in vector:
        out["now"] = vector["now"]
    if vector.get("byte_exact"):
        out["byte_exact"] = True
    if vector["expect"] == "accept":
        raw = bytes.fromhex(str(hex_text))
        payload = raw[4:] if kind == "packets" else raw
        if kind in ("packets", "payload"):
            if payload[0] == 0:
                message = json.loads(payload[1:])
                known = {k: v for k, v in message.items() if k in CASES}
                out["decoded"] = {"kind": 0, "message": known}
            else:
                out["decoded"] = frame_fields(payload)
    out["meaning"] = vector["meaning"]
    out["source"] = vector["source"]
    return out


def main() -> int:
    source = (
        Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT.parent / "shared/spec/prowl-vectors.json"
    )
    dest = Path(sys.argv[2]) if len(sys.argv) > 2 else ROOT / "tests/vectors/prowl.json"
    vectors = [v for v in map(convert, json.loads(source.read_text())) if v is not None]
    document = {
        "provenance": (
            "Reformatted from Prowl's public test vectors (prowl-vectors.json, compiled from "
            "the Swift and Kotlin sources named in each entry's 'source'). The hex is protocol "
            "fact and is unchanged; 'decoded' restates what the vector says the bytes mean. "
            "See docs/protocol.md for the rules each vector exercises."
        ),
        "format": "tests/vectors/README.md",
        "vectors": vectors,
    }
    dest.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {len(vectors)} vectors to {dest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
