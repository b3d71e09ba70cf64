"""Data log append and read vs raw file I/O on the same bytes.

Ratios to report (raw time / log time, goal >= 0.7 for both):

* append: ``DataLog.append_as_leader`` of ~1 MiB batches with an fsync each
  ("every_append") vs ``os.write`` + ``os.fsync`` of the same bytes. It checks each
  batch's CRC-32C, so the CRC-only benchmark in the same group shows how much of
  the gap is the checksum. ``append_all_as_leader(validate=False)`` (the copier's path:
  no CRC, one fsync at the end) is measured against raw writes with one fsync.
* read: the whole log read sequentially with ``read(offset, 1 MiB)`` vs
  ``os.read`` of the segment file in 1 MiB chunks, both from the page cache.

* cold read: the same, from a log another process wrote and this one has just
  opened. ``read`` CRC-checks bytes the first time this process serves them
  (recovery trusts what lies before the recovery point), so this is the first
  pass over a log after a restart.

Run: ``pytest bench/test_bench_log.py --benchmark-enable --benchmark-group-by=group``

``test_print_log_ratios`` prints the ratios (alternating runs, medians):
``pytest bench/test_bench_log.py -s -q -k ratios``
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from twinlog.engine.base.crc32c import IMPLEMENTATION, USING_C_EXTENSION, crc32c
from twinlog.engine.log import DataLog, LogConfig
from twinlog.engine.records.batch_builder import RecordBatchBuilder
from twinlog.engine.records.batch_format import LENGTH_PREFIX

RECORD_BYTES = 1024
RECORDS_PER_BATCH = 1000  # ~1 MiB batches
APPEND_BATCHES = 16  # per round: 16 MiB, 16 fsyncs
READ_BATCHES = 64  # a 64 MiB log
READ_MAX_BYTES = 1 << 20
CONFIG = LogConfig(batch_bytes_max=2 << 20)


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
            log.append_as_leader(batch, validate=validate)

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
        return log.append_all_as_leader((batch for _ in range(APPEND_BATCHES)), validate=False)

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
    log.append_all_as_leader(batch for _ in range(READ_BATCHES))
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
    total = benchmark.pedantic(
        _read_file, args=(segment,), rounds=10, iterations=1, warmup_rounds=1
    )
    assert total == full_log.size_bytes()


# --- ratios ----------------------------------------------------------------------------

RATIO_ROUNDS = 7
REPOSITORY = Path(__file__).resolve().parent.parent

# Writes a READ_BATCHES-batch log in another process, then closes it cleanly: the
# recovery point then covers every byte, so the reader's open checks none of them.
WRITE_LOG_ELSEWHERE = """
import os, sys
from twinlog.engine.records.batch_builder import RecordBatchBuilder
from twinlog.engine.log import DataLog, LogConfig
builder = RecordBatchBuilder("none")
for _ in range({records}):
    builder.append(os.urandom({record_bytes}), timestamp_ms=1_700_000_000_000)
batch = builder.build()
with DataLog.open(sys.argv[1], LogConfig(batch_bytes_max={batch_bytes_max})) as log:
    log.append_all_as_leader(batch for _ in range({batches}))
"""


def _timed(action: Callable[[], object]) -> float:
    began = time.perf_counter()
    action()
    return time.perf_counter() - began


def _read_log(log: DataLog) -> int:
    offset, total_bytes, end = 0, 0, log.log_end_offset
    while offset < end:
        chunk = log.read(offset, READ_MAX_BYTES)
        total_bytes += len(chunk)
        base_offset, _ = LENGTH_PREFIX.unpack_from(chunk)  # one ~1 MiB batch per read
        offset = base_offset + RECORDS_PER_BATCH
    return total_bytes


def _read_file(path: Path) -> int:
    fd = os.open(path, os.O_RDONLY)
    total_bytes = 0
    try:
        while chunk := os.read(fd, READ_MAX_BYTES):
            total_bytes += len(chunk)
    finally:
        os.close(fd)
    return total_bytes


def _line(what: str, raw_s: float, log_s: float, megabytes: float) -> str:
    return (
        f"{what}: log median {log_s * 1000:.1f} ms ({megabytes / log_s:.0f} MiB/s); raw "
        f"{raw_s * 1000:.1f} ms ({megabytes / raw_s:.0f} MiB/s); ratio raw/log = "
        f"{raw_s / log_s:.2f} (goal >= 0.7)"
    )


def test_print_log_ratios(batch: bytes) -> None:
    """Log and raw runs alternate; medians of each are compared."""
    print(f"\ncrc32c in use: {IMPLEMENTATION} (crcmod C extension: {USING_C_EXTENSION})")
    root = Path(tempfile.mkdtemp(prefix="bench-log-"))
    try:
        # Append: fsync per ~1 MiB batch, log (CRC checked in the log, or at the broker's
        # door before it) vs os.write + os.fsync of the same bytes.
        times: dict[str, list[float]] = {"raw": [], "checked": [], "unchecked": []}
        for number in range(RATIO_ROUNDS):
            for kind in times:
                directory = root / f"append-{number}-{kind}"
                directory.mkdir()
                if kind == "raw":
                    fd = os.open(directory / "raw", os.O_WRONLY | os.O_CREAT, 0o644)

                    def write_all(fd: int = fd) -> None:
                        for _ in range(APPEND_BATCHES):
                            os.write(fd, batch)
                            os.fsync(fd)

                    times[kind].append(_timed(write_all))
                    os.close(fd)
                else:
                    with DataLog.open(directory, CONFIG) as log:
                        validate = kind == "checked"

                        def append_all(log: DataLog = log, validate: bool = validate) -> None:
                            for _ in range(APPEND_BATCHES):
                                log.append_as_leader(batch, validate=validate)

                        times[kind].append(_timed(append_all))
                        assert log.log_end_offset == APPEND_BATCHES * RECORDS_PER_BATCH
                shutil.rmtree(directory)
        raw_s = statistics.median(times["raw"])
        megabytes = APPEND_BATCHES * len(batch) / (1 << 20)
        for kind, what in [
            ("checked", "append + fsync per 1 MiB batch, CRC checked in the log"),
            ("unchecked", "append + fsync per 1 MiB batch, CRC checked at the broker door"),
        ]:
            print(_line(what, raw_s, statistics.median(times[kind]), megabytes))

        # Read: the whole log from the page cache, read(offset, 1 MiB) vs os.read.
        directory = root / "read"
        script = WRITE_LOG_ELSEWHERE.format(
            records=RECORDS_PER_BATCH,
            record_bytes=RECORD_BYTES,
            batch_bytes_max=CONFIG.batch_bytes_max,
            batches=READ_BATCHES,
        )
        subprocess.run([sys.executable, "-c", script, str(directory)], cwd=REPOSITORY, check=True)
        (segment,) = directory.glob("*.log")
        size_bytes = segment.stat().st_size
        megabytes = size_bytes / (1 << 20)
        warm = DataLog.open(directory, CONFIG)
        try:
            assert _read_log(warm) == size_bytes  # checks every batch once: warm from here
            times = {"raw": [], "warm": [], "cold": [], "open": []}
            for _ in range(RATIO_ROUNDS):
                times["raw"].append(_timed(lambda: _read_file(segment)))
                times["warm"].append(_timed(lambda: _read_log(warm)))
                began = time.perf_counter()
                with DataLog.open(directory, CONFIG) as cold:
                    opened = time.perf_counter()
                    assert cold.recovery_report.batches_checked == 0
                    assert _read_log(cold) == size_bytes
                    times["cold"].append(time.perf_counter() - opened)
                times["open"].append(opened - began)
        finally:
            warm.close()
        crc_s = statistics.median(
            _timed(lambda: crc32c(segment.read_bytes())) for _ in range(RATIO_ROUNDS)
        )
        raw_s = statistics.median(times["raw"])
        print(
            _line(
                "sequential read, batches checked before",
                raw_s,
                statistics.median(times["warm"]),
                megabytes,
            )
        )
        print(
            _line(
                "sequential read right after open, CRC-checked on first read",
                raw_s,
                statistics.median(times["cold"]),
                megabytes,
            )
            + f"; open {statistics.median(times['open']) * 1000:.1f} ms, read + CRC of the "
            f"file {crc_s * 1000:.1f} ms"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
