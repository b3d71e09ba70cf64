"""Data log append and read vs raw file I/O on the same bytes.

Ratios to report (raw time / log time, goal >= 0.7 for both):

* append: ``DataLog.append`` of ~1 MiB batches with an fsync each ("every_append")
  vs ``os.write`` + ``os.fsync`` of the same bytes. ``append`` checks each
  batch's CRC-32C, so the CRC-only benchmark in the same group shows how much of
  the gap is the checksum. ``append_many(validate=False)`` (the copier's path:
  no CRC, one fsync at the end) is measured against raw writes with one fsync.
* read: the whole log read sequentially with ``read(offset, 1 MiB)`` vs
  ``os.read`` of the segment file in 1 MiB chunks, both from the page cache.

Run: ``pytest bench/test_bench_log.py --benchmark-enable --benchmark-group-by=group``
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.batch_builder import RecordBatchBuilder
from engine.batch_format import LENGTH_PREFIX
from engine.crc32c import crc32c
from engine.log import DataLog, LogConfig

RECORD_BYTES = 1024
RECORDS_PER_BATCH = 1000  # ~1 MiB batches
APPEND_BATCHES = 16  # per round: 16 MiB, 16 fsyncs
READ_BATCHES = 64  # a 64 MiB log
READ_MAX_BYTES = 1 << 20
CONFIG = LogConfig(max_batch_bytes=2 << 20)


@pytest.fixture(scope="module")
def batch() -> bytes:
    builder = RecordBatchBuilder("none")
    for _ in range(RECORDS_PER_BATCH):
        builder.append(os.urandom(RECORD_BYTES), timestamp_ms=1_700_000_000_000)
    return builder.build()


class Rounds:
    """Fresh directories for each round, made in setup (outside the timing)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.count = 0
        self.last: Any = None

    def directory(self) -> Path:
        shutil.rmtree(self.root / str(self.count), ignore_errors=True)
        self.count += 1
        path = self.root / str(self.count)
        path.mkdir()
        return path


@pytest.fixture
def rounds(tmp_path: Path) -> Iterator[Rounds]:
    holder = Rounds(tmp_path)
    yield holder
    if isinstance(holder.last, DataLog):
        holder.last.close()


# --- append -----------------------------------------------------------------------------


@pytest.mark.benchmark(group="append-1MiB-batches")
@pytest.mark.parametrize(
    "validate",
    [True, False],
    ids=["crc-checked-in-log", "crc-checked-at-broker-door"],
)
def test_log_append_fsync_each(
    benchmark: Any, batch: bytes, rounds: Rounds, validate: bool
) -> None:
    """``validate=False`` is the broker's path: it checks the CRC once, before the log."""

    def setup() -> tuple[tuple[DataLog], dict[str, Any]]:
        if isinstance(rounds.last, DataLog):
            rounds.last.close()
        rounds.last = DataLog.open(rounds.directory(), CONFIG)
        return (rounds.last,), {}

    def append_all(log: DataLog) -> None:
        for _ in range(APPEND_BATCHES):
            log.append(batch, validate=validate)

    benchmark.pedantic(append_all, setup=setup, rounds=5, iterations=1, warmup_rounds=1)
    log = rounds.last
    assert log.log_end_offset == APPEND_BATCHES * RECORDS_PER_BATCH
    assert log.size_bytes() == APPEND_BATCHES * len(batch)
    assert log.read(RECORDS_PER_BATCH, 1)[8:] == batch[8:]


@pytest.mark.benchmark(group="append-1MiB-batches")
def test_raw_write_fsync_each(benchmark: Any, batch: bytes, rounds: Rounds) -> None:
    def setup() -> tuple[tuple[int], dict[str, Any]]:
        if isinstance(rounds.last, int):
            os.close(rounds.last)
        rounds.last = os.open(rounds.directory() / "raw", os.O_WRONLY | os.O_CREAT, 0o644)
        return (rounds.last,), {}

    def write_all(fd: int) -> None:
        for _ in range(APPEND_BATCHES):
            os.write(fd, batch)
            os.fsync(fd)

    benchmark.pedantic(write_all, setup=setup, rounds=5, iterations=1, warmup_rounds=1)
    assert os.fstat(rounds.last).st_size == APPEND_BATCHES * len(batch)
    os.close(rounds.last)
    rounds.last = None


@pytest.mark.benchmark(group="append-1MiB-batches")
def test_crc32c_only_same_bytes(benchmark: Any, batch: bytes) -> None:
    def crc_all() -> int:
        crc = 0
        for _ in range(APPEND_BATCHES):
            crc = crc32c(batch)
        return crc

    assert isinstance(benchmark.pedantic(crc_all, rounds=5, iterations=1), int)


@pytest.mark.benchmark(group="append-many-1MiB-batches")
def test_log_append_many_without_crc(benchmark: Any, batch: bytes, rounds: Rounds) -> None:
    def setup() -> tuple[tuple[DataLog], dict[str, Any]]:
        if isinstance(rounds.last, DataLog):
            rounds.last.close()
        rounds.last = DataLog.open(rounds.directory(), CONFIG)
        return (rounds.last,), {}

    def append_all(log: DataLog) -> tuple[int, int]:
        return log.append_many((batch for _ in range(APPEND_BATCHES)), validate=False)

    benchmark.pedantic(append_all, setup=setup, rounds=5, iterations=1, warmup_rounds=1)
    assert rounds.last.log_end_offset == APPEND_BATCHES * RECORDS_PER_BATCH


@pytest.mark.benchmark(group="append-many-1MiB-batches")
def test_raw_write_one_fsync(benchmark: Any, batch: bytes, rounds: Rounds) -> None:
    def setup() -> tuple[tuple[int], dict[str, Any]]:
        if isinstance(rounds.last, int):
            os.close(rounds.last)
        rounds.last = os.open(rounds.directory() / "raw", os.O_WRONLY | os.O_CREAT, 0o644)
        return (rounds.last,), {}

    def write_all(fd: int) -> None:
        for _ in range(APPEND_BATCHES):
            os.write(fd, batch)
        os.fsync(fd)

    benchmark.pedantic(write_all, setup=setup, rounds=5, iterations=1, warmup_rounds=1)
    assert os.fstat(rounds.last).st_size == APPEND_BATCHES * len(batch)
    os.close(rounds.last)
    rounds.last = None


# --- read -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def full_log(tmp_path_factory: pytest.TempPathFactory, batch: bytes) -> Iterator[DataLog]:
    log = DataLog.open(tmp_path_factory.mktemp("read") / "log", CONFIG)
    log.append_many(batch for _ in range(READ_BATCHES))
    yield log
    log.close()


@pytest.mark.benchmark(group="read-whole-log")
def test_log_read_sequential(benchmark: Any, full_log: DataLog) -> None:
    def read_all() -> int:
        offset, total_bytes, end = 0, 0, full_log.log_end_offset
        while offset < end:
            chunk = full_log.read(offset, READ_MAX_BYTES)
            total_bytes += len(chunk)
            # Batches are ~1 MiB, so each read returns one: the next offset is in its header.
            base_offset, _ = LENGTH_PREFIX.unpack_from(chunk)
            offset = base_offset + RECORDS_PER_BATCH
        return total_bytes

    total = benchmark.pedantic(read_all, rounds=10, iterations=1, warmup_rounds=1)
    assert total == full_log.size_bytes()


@pytest.mark.benchmark(group="read-whole-log")
def test_raw_read_sequential(benchmark: Any, full_log: DataLog) -> None:
    segment = next(full_log.directory.glob("*.log"))

    def read_file() -> int:
        fd = os.open(segment, os.O_RDONLY)
        total_bytes = 0
        try:
            while chunk := os.read(fd, READ_MAX_BYTES):
                total_bytes += len(chunk)
        finally:
            os.close(fd)
        return total_bytes

    total = benchmark.pedantic(read_file, rounds=10, iterations=1, warmup_rounds=1)
    assert total == full_log.size_bytes()
