"""Batches with a valid CRC around any records section, as a buggy or hostile producer could
send them: the one place tests and benchmarks build such bytes (no tests here)."""

from __future__ import annotations

from twinlog.engine.records.batch_format import (
    RECORDS_OFFSET,
    TRANSACTIONAL_MASK,
    pack_header,
)
from twinlog.engine.records.compression import CODEC_NONE, compress


def batch_around(
    section: bytes,
    record_count: int,
    *,
    last_offset_delta: int | None = None,
    codec: int = CODEC_NONE,
    section_is_compressed: bool = False,
    base_offset: int = 0,
    timestamp_ms: int = 0,
    producer_id: int = -1,
    producer_generation: int = -1,
    transactional: bool = False,
) -> bytes:
    """``section`` (compressed with ``codec`` here unless it already is) behind a header.

    ``last_offset_delta`` defaults to ``record_count - 1``; a producer id gives base
    sequence 0; ``transactional`` sets the transactional bit.
    """
    records = section if section_is_compressed else compress(codec, section)
    buffer = bytearray(RECORDS_OFFSET) + records
    pack_header(
        buffer,
        base_offset=base_offset,
        attributes=codec | (TRANSACTIONAL_MASK if transactional else 0),
        last_offset_delta=record_count - 1 if last_offset_delta is None else last_offset_delta,
        first_timestamp_ms=timestamp_ms,
        max_timestamp_ms=timestamp_ms,
        producer_id=producer_id,
        producer_generation=producer_generation,
        base_sequence=0 if producer_id != -1 else -1,
        record_count=record_count,
    )
    return bytes(buffer)
