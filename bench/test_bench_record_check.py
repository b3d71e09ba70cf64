"""The cost of checking every record at the door of produce, against the CRC check the
door always did, on the same ~1 MiB batches, and against a whole embedded produce.

    pytest bench/test_bench_record_check.py -s -q -k ratio

prints, per codec and record size, the medians of alternating runs: CRC + header check
(``validate_batch``), the record check (``check_produced_records``: decompress under the
cap, decode every record) and ``Broker.produce`` (CRC, record check, sequence check,
append; flush policy ``interval``, so no fsync per batch).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import pytest

from twinlog.engine.broker.broker import Broker
from twinlog.engine.records.batch_builder import RecordBatchBuilder
from twinlog.engine.records.batch_format import BatchHeader, validate_batch
from twinlog.engine.records.decompression_budget import DecompressionBudget
from twinlog.engine.records.produced_records import check_produced_records

BATCH_BYTES = 1 << 20
RUNS = 31


def _batch(record_bytes: int, compression: str) -> bytes:
    builder = RecordBatchBuilder(compression)
    number = 0
    while builder.estimated_size_bytes < BATCH_BYTES:
        value = (f"order={number:08d} " * (record_bytes // 15 + 1))[:record_bytes].encode()
        builder.append(value, key=b"customer-%d" % (number % 100), timestamp_ms=1_700_000_000_000)
        number += 1
    return builder.build()


def _check(batch: bytes, header: BatchHeader, budget: DecompressionBudget) -> bool:
    """The record check alone: the header (and the CRC) were checked before, as the door
    does, and timed on their own."""
    return check_produced_records(
        batch,
        header,
        topic="bench",
        partition=0,
        records_max=1 << 30,
        decompressed_bytes_max=64 << 20,
        budget=budget,
    )


@pytest.mark.parametrize("compression", ["none", "zstd"])
@pytest.mark.parametrize("record_bytes", [100, 1024])
def test_print_record_check_ratio(tmp_path: Path, compression: str, record_bytes: int) -> None:
    batch = _batch(record_bytes, compression)
    budget = DecompressionBudget(256 << 20)
    header = validate_batch(batch)
    crc_times, check_times, produce_times = [], [], []
    with Broker.open(tmp_path / "data", log_flush_policy="interval") as broker:
        broker.create_topic("bench")
        for _ in range(RUNS):
            began = time.perf_counter()
            validate_batch(batch)
            crc_times.append(time.perf_counter() - began)
            began = time.perf_counter()
            assert _check(batch, header, budget)  # every record keyed
            check_times.append(time.perf_counter() - began)
            began = time.perf_counter()
            broker.produce("bench", 0, batch)
            produce_times.append(time.perf_counter() - began)
    crc_s, check_s, produce_s = (
        statistics.median(crc_times),
        statistics.median(check_times),
        statistics.median(produce_times),
    )
    count = header.record_count
    print(
        f"\n{compression:>4} {record_bytes:>4}-byte records ({count} per {len(batch)} bytes): "
        f"CRC {crc_s * 1e3:.2f} ms, record check {check_s * 1e3:.2f} ms "
        f"({check_s / crc_s:.2f}x the CRC), whole produce {produce_s * 1e3:.2f} ms "
        f"(record check {check_s / produce_s:.0%} of it)"
    )
