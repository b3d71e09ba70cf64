"""One record per JSON line: consume's output is produce's input, exactly."""

from __future__ import annotations

import json

import pytest

from twinlog.rpc.cli.record_json import RecordInput, record_from_json, record_to_json
from twinlog.rpc.client import ConsumerRecord

RECORD = ConsumerRecord(
    topic="t",
    partition=2,
    offset=7,
    key=None,
    value=b"",
    headers=(("h", b"\x00\xff"), ("h", None), ("h", b"2"), ("a", b"")),
    timestamp_ms=1_700_000_000_000,
)


@pytest.mark.parametrize("encoding", ["base64", "text"])
def test_a_record_round_trips_through_its_json_line(encoding: str) -> None:
    line = record_to_json(RECORD, encoding)
    parsed = record_from_json(line.encode(), encoding)
    assert parsed == RecordInput(
        key=None,
        value=b"",
        headers=RECORD.headers,
        partition=2,
        timestamp_ms=1_700_000_000_000,
    )


def test_headers_are_pairs_in_order_with_duplicates_and_nulls() -> None:
    document = json.loads(record_to_json(RECORD, "base64"))
    assert document["headers"] == [["h", "AP8="], ["h", None], ["h", "Mg=="], ["a", ""]]
    assert document["key"] is None and document["value"] == ""
    text = json.loads(record_to_json(RECORD, "text"))
    assert text["headers"][0] == ["h", "\x00\\xff"]


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (b"{", "not JSON"),
        (b"[1]", "expected a JSON object, not list"),
        (b'{"key": "YQ=="}', 'no "value"'),
        (b'{"value": null, "vlaue": 1}', "unknown field 'vlaue' \\(did you mean 'value'\\?\\)"),
        (b'{"value": 5}', '"value" must be a string or null'),
        (b'{"value": "!!"}', '"value": .* is not base64'),
        (b'{"value": null, "partition": -1}', '"partition" must be a whole number >= 0'),
        (b'{"value": null, "partition": true}', '"partition" must be a whole number'),
        (b'{"value": null, "headers": {"a": "b"}}', "must be a list of \\[key, value\\] pairs"),
        (b'{"value": null, "headers": [["a"]]}', '"headers" item 0 must be a \\[key, value\\]'),
        (b'{"value": null, "headers": [[1, null]]}', "with a string key"),
    ],
)
def test_a_bad_line_names_its_problem(line: bytes, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        record_from_json(line, "base64")


def test_topic_and_offset_from_consume_are_ignored() -> None:
    parsed = record_from_json(b'{"topic": "x", "offset": 9, "value": "YQ=="}', "base64")
    assert parsed == RecordInput(None, b"a", (), None, None)
