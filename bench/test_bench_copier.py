"""APPLY_COMMIT throughput: journal -> data log (with the log's fsync and the journal's two
synced records), against a raw ``DataLog.append_all_as_leader`` of the same batches from memory
(goal: apply >= 0.6 of raw).

    pytest bench/test_bench_copier.py --benchmark-enable -s
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))
from copier_support import PartitionFixture, transactional_batch

from twinlog.engine.log import DataLog

TRANSACTION = 3
BATCH_COUNT = 128
BATCH_VALUE_BYTES = (1 << 20) - 200  # ~1 MiB batches: 128 MiB per transaction


def _batches() -> list[bytes]:
    # Distinct sequences, so the log holds what a real producer would send.
    return [
        transactional_batch(TRANSACTION, i, record_count=1, value_bytes=BATCH_VALUE_BYTES)
        for i in range(BATCH_COUNT)
    ]


def _journaled_partition(directory: Path, batches: list[bytes]) -> PartitionFixture:
    partition = PartitionFixture(directory)
    chunks = [batches[i::8] for i in range(8)]
    lock = threading.Lock()  # keep append order = sequence order, as one producer would

    def work(chunk: list[bytes]) -> None:
        for batch in chunk:
            with lock:
                partition.j.append(partition.name, TRANSACTION, batch)

    threads = [threading.Thread(target=work, args=(chunk,)) for chunk in chunks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return partition


def _apply(partition: PartitionFixture) -> tuple[int, int]:
    return partition.writer.apply_commit(TRANSACTION)


def _raw(data_log: DataLog, batches: list[bytes]) -> tuple[int, int]:
    return data_log.append_all_as_leader(batches)


def test_apply_commit_128_mib(benchmark) -> None:
    batches = _batches()
    opened: list[tuple[Path, PartitionFixture]] = []

    def setup() -> tuple[tuple, dict]:
        directory = Path(tempfile.mkdtemp(prefix="bench-copier-"))
        opened.append((directory, _journaled_partition(directory, batches)))
        return (opened[-1][1],), {}

    try:
        result = benchmark.pedantic(_apply, setup=setup, rounds=3, iterations=1)
        assert result == (0, BATCH_COUNT)
        assert opened[-1][1].j.statistics().entry_count == 0
    finally:
        for directory, partition in opened:
            partition.close()
            shutil.rmtree(directory, ignore_errors=True)


def test_raw_append_many_128_mib(benchmark) -> None:
    batches = _batches()
    opened: list[tuple[Path, DataLog]] = []

    def setup() -> tuple[tuple, dict]:
        directory = Path(tempfile.mkdtemp(prefix="bench-raw-log-"))
        opened.append((directory, DataLog.open(directory / "log")))
        return (opened[-1][1], batches), {}

    try:
        result = benchmark.pedantic(_raw, setup=setup, rounds=3, iterations=1)
        assert result == (0, BATCH_COUNT)
    finally:
        for directory, data_log in opened:
            data_log.close()
            shutil.rmtree(directory, ignore_errors=True)


def test_print_apply_to_raw_ratio() -> None:
    """Apply and raw runs alternate; medians of five of each are compared."""
    batches = _batches()
    apply_times, raw_times = [], []
    for _ in range(5):
        directory = Path(tempfile.mkdtemp(prefix="bench-copier-"))
        try:
            partition = _journaled_partition(directory, batches)
            began = time.perf_counter()
            assert _apply(partition) == (0, BATCH_COUNT)
            apply_times.append(time.perf_counter() - began)
            partition.close()
            data_log = DataLog.open(directory / "raw-log")
            began = time.perf_counter()
            assert _raw(data_log, batches) == (0, BATCH_COUNT)
            raw_times.append(time.perf_counter() - began)
            data_log.close()
        finally:
            shutil.rmtree(directory, ignore_errors=True)
    apply_s, raw_s = statistics.median(apply_times), statistics.median(raw_times)
    megabytes = sum(map(len, batches)) / (1 << 20)
    print(
        f"\napply {BATCH_COUNT} x 1 MiB: median {apply_s * 1000:.0f} ms ({megabytes / apply_s:.0f} MiB/s); "
        f"raw append_all_as_leader: {raw_s * 1000:.0f} ms ({megabytes / raw_s:.0f} MiB/s); "
        f"ratio raw/apply = {raw_s / apply_s:.2f} (goal >= 0.6)"
    )
