"""Batch build + CRC of 1 KiB records into ~1 MiB batches vs crcmod's raw CRC-32C.

The ratio to report is raw_crc_time / build_time (goal >= 0.5): the builder
must cost no more than about one extra CRC pass over the bytes. The raw CRC
hashes what the build hashes: for zstd that is the compressed batch, so the
zstd ratio mostly measures compression. Run:

    pytest bench/test_bench_batch.py --benchmark-enable --benchmark-group-by=param:compression

``test_print_batch_build_ratio`` prints the ratios (alternating runs, medians):

    pytest bench/test_bench_batch.py -s -q -k ratio
"""

from __future__ import annotations

import os
import statistics
import time

import crcmod.predefined
import pytest

from twinlog.engine.base.crc32c import IMPLEMENTATION, USING_C_EXTENSION, crc32c
from twinlog.engine.records.batch_builder import RecordBatchBuilder
from twinlog.engine.records.batch_format import ATTRIBUTES_OFFSET
from twinlog.engine.records.batch_reader import RecordBatch

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


def _hashed_bytes(compression: str) -> memoryview:
    """The bytes the builder hashes for ``compression``: attributes to the end of its batch
    (for zstd, the compressed records section)."""
    return memoryview(_build(_values(compressible=True), compression))[ATTRIBUTES_OFFSET:]


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_raw_crc32c_same_bytes(benchmark, compression: str) -> None:
    result = benchmark(crc32c, _hashed_bytes(compression))
    assert isinstance(result, int)


def test_print_batch_build_ratio() -> None:
    """Build and raw CRC runs alternate; medians of each are compared, per codec."""
    raw_crc32c = crcmod.predefined.mkCrcFun("crc-32c")  # crcmod itself, no wrapper
    values = _values(compressible=True)
    print(f"\ncrc32c in use: {IMPLEMENTATION} (crcmod C extension: {USING_C_EXTENSION})")
    for compression in ("none", "zstd"):
        hashed = _hashed_bytes(compression)
        build_times, raw_times = [], []
        for _ in range(31):
            began = time.perf_counter()
            batch = _build(values, compression)
            build_times.append(time.perf_counter() - began)
            began = time.perf_counter()
            raw_crc32c(hashed)
            raw_times.append(time.perf_counter() - began)
        assert RecordBatch(batch).header.record_count == RECORDS_PER_BATCH
        build_s, raw_s = statistics.median(build_times), statistics.median(raw_times)
        megabytes = sum(map(len, values)) / (1 << 20)
        print(
            f"batch build+CRC {compression}, {RECORDS_PER_BATCH} records of {len(values[0])} B: "
            f"median {build_s * 1000:.2f} ms ({megabytes / build_s:.0f} MiB/s of records); "
            f"raw crcmod CRC-32C of the {len(hashed)} hashed bytes: {raw_s * 1000:.2f} ms; "
            f"ratio raw/build = {raw_s / build_s:.2f} (goal >= 0.5)"
        )
