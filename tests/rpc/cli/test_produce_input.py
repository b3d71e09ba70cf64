"""produce's input: text lines as they are, JSON lines parsed, bad lines named by number."""

from __future__ import annotations

import pytest

from twinlog.rpc.cli.produce_input import BadLineError, InputReader
from twinlog.rpc.cli.record_json import RecordInput


def test_text_lines_with_a_key_separator_and_headers() -> None:
    reader = InputReader(
        [b"k:v:w\n", b"plain\r\n", b"\\x41\n"], "text", "base64", b":", (("h", b"1"),)
    )
    assert list(reader) == [
        (1, RecordInput(b"k", b"v:w", (("h", b"1"),), None, None)),
        (2, RecordInput(None, b"plain", (("h", b"1"),), None, None)),
        (3, RecordInput(None, b"\\x41", (("h", b"1"),), None, None)),  # sent as it is
    ]


def test_only_the_line_end_is_removed_every_other_carriage_return_is_data() -> None:
    reader = InputReader([b"a\r\r\n", b"\rb\n", b"\rc\r"], "text", "base64", None, ())
    assert [record.value for _, record in reader] == [b"a\r", b"\rb", b"\rc\r"]


def test_json_lines_skip_blank_lines_and_add_headers_after_their_own() -> None:
    lines = [b'{"value": "a", "headers": [["x", null]]}\n', b"\n", b'{"value": null}\n']
    reader = InputReader(lines, "json", "text", headers=(("h", b"1"),))
    assert list(reader) == [
        (1, RecordInput(None, b"a", (("x", None), ("h", b"1")), None, None)),
        (3, RecordInput(None, None, (("h", b"1"),), None, None)),
    ]


def test_a_bad_json_line_stops_with_its_number() -> None:
    reader = InputReader([b'{"value": null}', b"{oops"], "json", "base64")
    records = iter(reader)
    assert next(records)[0] == 1
    with pytest.raises(BadLineError, match=r"^input line 2: not JSON") as error:
        next(records)
    assert error.value.line == 2


def test_bad_lines_skipped_and_counted_on_request() -> None:
    lines = [b"x", b'{"value": null}', b"[]", b'{"value": 1}']
    reader = InputReader(lines, "json", "base64", skip_bad_lines=True)
    assert [number for number, _ in reader] == [2]
    assert reader.skipped_text() == "skipped 3 bad input lines (first: 1, 3, 4): not JSON " + (
        "(Expecting value: line 1 column 1 (char 0))"
    )
