"""Records sections for the record decoder's tests: batches around any section, the
pinned damaged sections, and a Hypothesis strategy of good sections, maybe damaged.
Shared by the one-decoder tests and the compiled-twin differential tests."""

from __future__ import annotations

import pytest
from batch_support import batch_around
from hypothesis import strategies as st

from twinlog.engine.records.batch_builder import encode_record
from twinlog.engine.records.batch_format import BatchHeader, read_header
from twinlog.engine.records.compression import CODEC_BY_NAME
from twinlog.engine.records.varint import encode_varint

FIRST_TIMESTAMP_MS = 1_700_000_000_000


def batch_of(
    section: bytes, record_count: int, last_offset_delta: int, codec: str = "none"
) -> bytes:
    """A batch (valid CRC) around any records section, as a buggy producer could send."""
    return batch_around(
        section,
        record_count,
        last_offset_delta=last_offset_delta,
        codec=CODEC_BY_NAME[codec],
        base_offset=100,
        timestamp_ms=FIRST_TIMESTAMP_MS,
    )


def header_of(record_count: int, last_offset_delta: int) -> BatchHeader:
    return read_header(batch_of(b"", record_count, last_offset_delta))


# (records section, record count, last offset delta, a part of the refusal's message)
DAMAGED = [
    pytest.param(b"\x7f", 1, 0, "record 0 says -64 bytes", id="negative-length"),
    pytest.param(
        encode_varint(4) + b"\x00" * 4, 1, 0, "record 0 says 4 bytes", id="shorter-than-a-record"
    ),
    pytest.param(
        encode_record(0, 0, b"k", b"v", None)[:-1],
        1,
        0,
        "record 0 says 8 bytes, but 7 remain",
        id="cut-short",
    ),
    pytest.param(b"", 1, 0, "record 0 runs past the end", id="missing-record"),
    pytest.param(
        encode_record(0, 0, b"k", b"v", None) + b"\x02",
        1,
        0,
        "1 bytes left after its 1 records: record 1 would start at byte 9",
        id="trailing-bytes",
    ),
    pytest.param(
        encode_record(3, 0, b"k", b"v", None), 1, 2, "offset delta 3, expected 0..2", id="offset"
    ),
    pytest.param(
        encode_record(0, 0, b"k", b"v", None) + encode_record(0, 0, b"k", b"v", None),
        2,
        1,
        "offset delta 0, expected 1..1",
        id="offset-repeated",
    ),
    pytest.param(
        encode_record(1, 0, b"k", b"v", None) + encode_record(0, 0, b"k", b"v", None),
        2,
        1,
        "offset delta 0, expected 2..1",
        id="offset-descending",
    ),
    pytest.param(
        encode_varint(8) + b"\x00\x00\x00\x05k\x02v\x00", 1, 0, "key length -3", id="key-length"
    ),
    pytest.param(
        encode_varint(8) + b"\x00\x00\x00\x02k\x0ev\x00",
        1,
        0,
        "value length 7, but 2 bytes of it remain",
        id="value-length",
    ),
    pytest.param(
        encode_varint(7) + b"\x00\x00\x00\x01\x01\x00\x00",
        1,
        0,
        "says it ends at byte 8, but its fields end at byte 7",
        id="record-longer-than-fields",
    ),
    pytest.param(
        encode_varint(8) + b"\x00\x00\x00\x01\x01\x02\x01\x00",
        1,
        0,
        "has a header with a null key",
        id="null-header-key",
    ),
    pytest.param(
        encode_varint(9) + b"\x00\x00\x00\x01\x01\x02\x02\xff\x01",
        1,
        0,
        "header key that is not UTF-8",
        id="header-key-not-utf8",
    ),
    pytest.param(
        encode_varint(8) + b"\x00\x00\x00\x01\x01\x0a\x01\x01",
        1,
        0,
        "says 5 headers",
        id="too-many-headers",
    ),
    pytest.param(
        encode_varint(15) + b"\x00" + b"\xff" * 10 + b"\x01\x01\x01\x00",
        1,
        0,
        "holds a bad varint",
        id="varint-too-long",
    ),
]


headers_strategy = st.lists(
    st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=2
)
records_strategy = st.lists(
    st.tuples(
        st.none() | st.binary(max_size=8), st.none() | st.binary(max_size=200), headers_strategy
    ),
    min_size=1,
    max_size=8,
)


@st.composite
def damaged_sections(draw: st.DrawFn) -> tuple[bytes, int, int]:
    """(records section, record count, last offset delta): a good one, then maybe damaged."""
    records = draw(records_strategy)
    section = bytearray(
        b"".join(
            encode_record(delta, delta * 3, key, value, headers)
            for delta, (key, value, headers) in enumerate(records)
        )
    )
    record_count = last_offset_delta = len(records)
    last_offset_delta -= 1
    for _ in range(draw(st.integers(0, 3))):
        damage = draw(st.sampled_from(["byte", "cut", "insert", "count", "delta"]))
        spot = draw(st.integers(0, max(len(section) - 1, 0)))
        if damage == "byte" and section:
            section[spot] = draw(st.integers(0, 255))
        elif damage == "cut":
            del section[spot:]
        elif damage == "insert":
            section[spot:spot] = draw(st.binary(min_size=1, max_size=4))
        elif damage == "count":
            record_count = draw(st.integers(0, last_offset_delta + 1))
        elif damage == "delta":
            last_offset_delta = draw(st.integers(max(record_count - 1, 0), record_count + 2))
    return bytes(section), record_count, last_offset_delta
