"""Keys, values and headers as text or base64: every byte comes back."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from twinlog.rpc.client.record_encoding import (
    decode_bytes,
    encode_bytes,
    escape_text,
    unescape_text,
)


@given(st.binary(max_size=64), st.booleans())
def test_escaped_text_gives_back_every_byte(data: bytes, escape_controls: bool) -> None:
    assert unescape_text(escape_text(data, escape_controls)) == data


@given(st.binary(max_size=64), st.sampled_from(["base64", "text"]))
def test_both_encodings_give_back_every_byte(data: bytes, encoding: str) -> None:
    assert decode_bytes(encode_bytes(data, encoding), encoding) == data


def test_the_escaping_rule() -> None:
    assert escape_text("café".encode()) == "café"  # valid UTF-8 stays readable
    assert escape_text(b"a\\b") == "a\\\\b"  # a backslash doubles
    assert escape_text(b"\xff\xfe") == "\\xff\\xfe"  # bytes that are not UTF-8
    assert escape_text(b"\xed\xa0\x80") == "\\xed\\xa0\\x80"  # an encoded surrogate is not
    assert escape_text(b"a\nb\x00") == "a\nb\x00"
    assert escape_text(b"a\nb\x00\x7f", escape_controls=True) == "a\\x0ab\\x00\\x7f"


def test_null_is_not_empty() -> None:
    assert encode_bytes(None, "base64") is None and encode_bytes(b"", "base64") == ""
    assert decode_bytes(None, "text") is None and decode_bytes("", "text") == b""


@pytest.mark.parametrize(
    ("text", "encoding", "problem"),
    [
        ("a\\qb", "text", "character 2 is not followed by"),
        ("tail\\", "text", "character 5 is not followed by"),
        ("\\x4", "text", "not followed by"),
        ("\udc80", "text", "lone surrogate"),
        ("!!", "base64", "is not base64"),
        ("YQ", "base64", "is not base64"),  # padding is required
        ("é", "base64", "is not base64"),
    ],
)
def test_text_that_no_bytes_encode_to_is_refused(text: str, encoding: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        decode_bytes(text, encoding)
