"""Bytes as JSON strings and text lines, reversibly: base64, or escaped UTF-8 text.

Keys, values and header values are bytes; a JSON document and a terminal hold text.
Two encodings (``--encoding``):

``base64``
    RFC 4648 base64 with padding: any bytes, decoded strictly.
``text``
    The bytes as UTF-8 text where they are valid UTF-8, with one escaping rule: a
    backslash is written ``\\\\`` and every byte that is not part of valid UTF-8 is
    written ``\\xHH`` (two hex digits). With ``escape_controls`` (text output, one
    record per line) the control characters (bytes 0x00-0x1f and 0x7f) are written
    ``\\xHH`` too. Decoding accepts exactly ``\\\\`` and ``\\xHH`` after a backslash,
    so ``unescape_text(escape_text(b)) == b`` for all bytes ``b``.

A null key or value is not bytes at all: JSON ``null``, never an empty string.
"""

from __future__ import annotations

import base64
import binascii
import re

ENCODINGS = ("base64", "text")

_SURROGATE_ESCAPE_FIRST = 0xDC80  # surrogateescape maps byte 0x80 + n to U+DC80 + n
_SURROGATE_ESCAPE_LAST = 0xDCFF
_BYTE_ESCAPES = {
    code: f"\\x{code - 0xDC00:02x}"
    for code in range(_SURROGATE_ESCAPE_FIRST, _SURROGATE_ESCAPE_LAST + 1)
}
_BYTE_ESCAPES[ord("\\")] = "\\\\"
_CONTROL_ESCAPES = {code: f"\\x{code:02x}" for code in [*range(0x20), 0x7F]}
_WITH_CONTROLS = {**_BYTE_ESCAPES, **_CONTROL_ESCAPES}
_ESCAPE = re.compile(r"\\(\\|x[0-9a-fA-F]{2})?")


def escape_text(data: bytes, escape_controls: bool = False) -> str:
    """``data`` as text under the escaping rule above."""
    text = data.decode("utf-8", errors="surrogateescape")
    return text.translate(_WITH_CONTROLS if escape_controls else _BYTE_ESCAPES)


def unescape_text(text: str) -> bytes:
    """The bytes that ``escape_text`` wrote as ``text``; ValueError if it is not such text."""
    if "\\" not in text:
        return _utf8(text)
    pieces: list[bytes] = []
    position = 0
    for match in _ESCAPE.finditer(text):
        pieces.append(_utf8(text[position : match.start()]))
        escape = match.group(1)
        if escape is None:
            raise ValueError(
                f"a backslash at character {match.start() + 1} is not followed by \\ or xHH "
                "(write a backslash as \\\\)"
            )
        pieces.append(b"\\" if escape == "\\" else bytes([int(escape[1:], 16)]))
        position = match.end()
    pieces.append(_utf8(text[position:]))
    return b"".join(pieces)


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as error:  # a lone surrogate (\udc80 in JSON, say)
        raise ValueError(
            f"character {error.start + 1} is a lone surrogate; write a byte that is not "
            "UTF-8 as \\xHH"
        ) from None


def encode_bytes(data: bytes | None, encoding: str, escape_controls: bool = False) -> str | None:
    """``data`` as a string in ``encoding`` (None stays None)."""
    if data is None:
        return None
    if encoding == "base64":
        return base64.b64encode(data).decode("ascii")
    return escape_text(data, escape_controls)


def decode_bytes(text: str | None, encoding: str) -> bytes | None:
    """The bytes ``encode_bytes`` wrote as ``text``; ValueError naming the problem."""
    if text is None:
        return None
    if encoding == "base64":
        try:
            return base64.b64decode(text.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError):
            raise ValueError(f"{_shorten(text)!r} is not base64 (use --encoding text?)") from None
    return unescape_text(text)


def _shorten(text: str, length_max: int = 40) -> str:
    return text if len(text) <= length_max else text[: length_max - 3] + "..."
