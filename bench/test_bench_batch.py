"""Batch build + CRC of 1 KiB records into ~1 MiB batches vs crcmod's raw CRC-32C.

The ratio to report is raw_crc_time / build_time (goal >= 0.5): the builder
must cost no more than about one extra CRC pass over the bytes. Run:

    pytest bench/test_bench_batch.py --benchmark-enable --benchmark-group-by=param:compression
"""

from __future__ import annotations

import os

import pytest

from engine.batch_builder import RecordBatchBuilder
from engine.batch_reader import RecordBatch
from engine.crc32c import crc32c

RECORD_BYTES = 1024
RECORDS_PER_BATCH = 1000  # ~1 MiB batches


def _values(compressible: bool) -> list[bytes]:
    if compressible:
        # Log-like records: a repeated text template with a varying number.
        return [(f"order={i:08d} " * 64)[:RECORD_BYTES].encode() for i in range(RECORDS_PER_BATCH)]
    return [os.urandom(RECORD_BYTES) for _ in range(RECORDS_PER_BATCH)]


def _build(values: list[bytes], compression: str) -> bytes:
    builder = RecordBatchBuilder(compression)
    for value in values:
        builder.append(value, timestamp_ms=1_700_000_000_000)
    return builder.build()


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_batch_build_with_crc(benchmark, compression: str) -> None:
    values = _values(compressible=True)
    batch = benchmark(_build, values, compression)
    assert RecordBatch(batch).header.record_count == RECORDS_PER_BATCH


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_raw_crc32c_same_bytes(benchmark, compression: str) -> None:
    # The same bytes the builder hashes: the uncompressed batch.
    batch = _build(_values(compressible=True), "none")
    result = benchmark(crc32c, batch)
    assert isinstance(result, int)
