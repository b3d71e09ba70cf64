"""A key, value or header value as the Messages page shows it: text, pretty JSON or hex.

Honest about what the bytes are: a null is shown as null (not as an empty string), bytes
that are not UTF-8 are shown with ``\\xHH`` escapes and marked binary (the same escapes
``twinlog consume`` prints), and JSON asked of bytes that are not JSON says so and shows
them as text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from twinlog.rpc.client.record_encoding import escape_text

SHOW_MODES = ("text", "json", "hex")
HEX_ROW_BYTES = 16
SHOWN_BYTES_MAX = 64 * 1024  # a larger value is cut, and the page says so
LAYOUT_BYTES = b"\t\n\r"  # shown as they are: text laid out on lines
# Everything but the C0 controls and DEL (bytes of multi-byte UTF-8 characters included).
PRINTABLE_BYTES = bytes(range(0x20, 0x7F)) + bytes(range(0x80, 0x100))


@dataclass(frozen=True)
class ShownBytes:
    """``kind``: null, empty, text, binary (not UTF-8, escaped), json or hex."""

    kind: str
    text: str
    size: int
    note: str = ""


def show_bytes(data: bytes | None, mode: str) -> ShownBytes:
    if data is None:
        return ShownBytes("null", "null", 0)
    if not data:
        return ShownBytes("empty", "", 0)
    size = len(data)
    cut = data[:SHOWN_BYTES_MAX]
    note = f"first {SHOWN_BYTES_MAX:,} of {size:,} bytes" if size > SHOWN_BYTES_MAX else ""
    if mode == "hex":
        return ShownBytes("hex", hex_dump(cut), size, note)
    if mode == "json" and len(cut) == size:
        try:
            document = json.loads(cut)
        except (json.JSONDecodeError, UnicodeDecodeError):
            note = "not JSON: shown as text"
        else:
            return ShownBytes("json", json.dumps(document, indent=2, ensure_ascii=False), size)
    return _as_text(cut, size, note)


def _as_text(data: bytes, size: int, note: str) -> ShownBytes:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        why = "not UTF-8: other bytes shown as \\xHH"
    else:
        if not data.translate(None, LAYOUT_BYTES).translate(None, PRINTABLE_BYTES):
            return ShownBytes("text", escape_text(data), size, note)
        why = "control characters shown as \\xHH"
    text = escape_text(data, escape_controls=True)
    return ShownBytes("binary", text, size, f"{note}; {why}" if note else why)


def hex_dump(data: bytes) -> str:
    """``00000000  68 65 6c 6c 6f ...  |hello|``: offset, bytes, printable ASCII."""
    lines = []
    for start in range(0, len(data), HEX_ROW_BYTES):
        row = data[start : start + HEX_ROW_BYTES]
        printable = "".join(chr(byte) if 0x20 <= byte < 0x7F else "." for byte in row)
        lines.append(f"{start:08x}  {row.hex(' '):<{HEX_ROW_BYTES * 3 - 1}}  |{printable}|")
    return "\n".join(lines)
