"""One record as one JSON object per line, both ways: ``consume --format json`` writes it,
``produce --format json`` reads it, so the one pipes into the other and copies a topic.

    {"topic": "orders", "partition": 0, "offset": 7, "timestamp_ms": 1767225600000,
     "key": "azE=", "value": null, "headers": [["trace", "AQI="], ["trace", null]]}

``key``, ``value`` and header values go through ``record_encoding`` (base64 by
default, or escaped text); JSON ``null`` is a null key, value or header value. Header
keys are UTF-8 text in the record format, so they are plain JSON strings. Headers are
a list of pairs: order and duplicate keys are kept, as the record holds them.

On input only ``value`` is required; ``topic`` and ``offset`` (written by consume) are
accepted and ignored: the topic is the command's, the offset the log's.
"""

from __future__ import annotations

import difflib
import json
from typing import Any, NamedTuple

from twinlog.rpc.client import ConsumerRecord
from twinlog.rpc.client.record_encoding import decode_bytes, encode_bytes

Header = tuple[str, bytes | None]
INPUT_FIELDS = ("key", "value", "headers", "partition", "timestamp_ms")
IGNORED_FIELDS = ("topic", "offset")


class RecordInput(NamedTuple):
    """What one input line asks to send; None fields take the command's defaults."""

    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]
    partition: int | None
    timestamp_ms: int | None


def record_to_json(record: ConsumerRecord, encoding: str) -> str:
    return json.dumps(
        {
            "topic": record.topic,
            "partition": record.partition,
            "offset": record.offset,
            "timestamp_ms": record.timestamp_ms,
            "key": encode_bytes(record.key, encoding),
            "value": encode_bytes(record.value, encoding),
            "headers": [[key, encode_bytes(value, encoding)] for key, value in record.headers],
        },
        ensure_ascii=False,
    )


def _optional_int(document: dict[str, Any], name: str) -> int | None:
    number = document.get(name)
    if number is None:
        return None
    if not isinstance(number, int) or isinstance(number, bool) or number < 0:
        raise ValueError(f'"{name}" must be a whole number >= 0 or null, not {number!r}')
    return number


def _optional_bytes(document: dict[str, Any], name: str, encoding: str) -> bytes | None:
    text = document.get(name)
    if text is not None and not isinstance(text, str):
        raise ValueError(f'"{name}" must be a string or null, not {type(text).__name__}')
    try:
        return decode_bytes(text, encoding)
    except ValueError as error:
        raise ValueError(f'"{name}": {error}') from None


def _headers(document: dict[str, Any], encoding: str) -> tuple[Header, ...]:
    pairs = document.get("headers") or []
    if not isinstance(pairs, list):
        raise ValueError('"headers" must be a list of [key, value] pairs')
    headers = []
    for index, pair in enumerate(pairs):
        if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
            raise ValueError(
                f'"headers" item {index} must be a [key, value] pair with a string key, '
                f"not {pair!r}"
            )
        value = _optional_bytes({"header value": pair[1]}, "header value", encoding)
        headers.append((pair[0], value))
    return tuple(headers)


def record_from_json(line: bytes, encoding: str) -> RecordInput:
    """Parse one input line; ValueError with a message that names the problem."""
    try:
        document = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"not JSON ({error})") from None
    if not isinstance(document, dict):
        raise ValueError(f"expected a JSON object, not {type(document).__name__}")
    unknown = sorted(set(document) - set(INPUT_FIELDS) - set(IGNORED_FIELDS))
    if unknown:
        nearest = difflib.get_close_matches(unknown[0], INPUT_FIELDS, n=1)
        hint = f" (did you mean {nearest[0]!r}?)" if nearest else ""
        raise ValueError(
            f"unknown field {unknown[0]!r}{hint}; a record has {', '.join(INPUT_FIELDS)}"
        )
    if "value" not in document:
        raise ValueError('no "value" (write "value": null for a null value)')
    return RecordInput(
        key=_optional_bytes(document, "key", encoding),
        value=_optional_bytes(document, "value", encoding),
        headers=_headers(document, encoding),
        partition=_optional_int(document, "partition"),
        timestamp_ms=_optional_int(document, "timestamp_ms"),
    )
