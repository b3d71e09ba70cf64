"""consume --format text: kafka-console-consumer.sh's columns, names and defaults."""

from __future__ import annotations

import pytest

from twinlog.rpc.cli.text_output import TextLayout, apply_property
from twinlog.rpc.client import ConsumerRecord


def record(key: bytes | None, value: bytes | None, headers: tuple = ()) -> ConsumerRecord:
    return ConsumerRecord("t", 1, 42, key, value, headers, 1_700_000_000_000)


def test_the_value_alone_by_default() -> None:
    assert TextLayout().render(record(b"k", b"v")) == "v"


def test_every_column_in_kafkas_order() -> None:
    layout = TextLayout(
        print_timestamp=True,
        print_partition=True,
        print_offset=True,
        print_headers=True,
        print_key=True,
    )
    line = layout.render(record(b"k", b"v", (("a", b"1"), ("a", None))))
    assert line == "CreateTime:1700000000000\tPartition:1\tOffset:42\ta:1,a:null\tk\tv"


def test_nulls_empties_and_separators() -> None:
    layout = TextLayout(print_key=True, print_headers=True, null_literal="<null>")
    layout.key_separator, layout.headers_separator = " | ", ";"
    assert layout.render(record(None, b"")) == "NO_HEADERS | <null> | "
    assert layout.render(record(b"", None, (("x", b""), ("y", b"2")))) == "x:;y:2 |  | <null>"


def test_one_record_is_one_line() -> None:
    assert TextLayout().render(record(None, b"a\nb\\\xff")) == "a\\x0ab\\\\\\xff"
    assert TextLayout(encoding="base64").render(record(None, b"\xff")) == "/w=="


def test_kafka_property_names() -> None:
    layout = TextLayout()
    for assignment in [
        ("print.key", "true"),
        ("print.timestamp", "TRUE"),
        ("key.separator", ","),
        ("null.literal", "-"),
        ("print.value", "false"),
    ]:
        apply_property(layout, assignment)
    assert layout.render(record(None, b"v")) == "CreateTime:1700000000000,-"
    with pytest.raises(ValueError, match=r"unknown --property 'print\.keys'"):
        apply_property(layout, ("print.keys", "true"))
    with pytest.raises(ValueError, match="takes true or false"):
        apply_property(layout, ("print.key", "yes"))
