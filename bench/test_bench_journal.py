"""Local data journal: appends of 64 KiB batches with group commit and sync, against raw
LMDB puts of the same values in write transactions of the same size (goal: >= 0.7).

    pytest bench/test_bench_journal.py --benchmark-enable -s

The ratio and the latency figures are printed by the plain tests at the end
(they time with perf_counter, best of three, so they run without --benchmark-enable).
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import lmdb
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))
from copier_support import transactional_batch

from twinlog.journal import JournalConfig, JournalLogs, LocalJournal

WRITERS = 16
APPENDS_PER_WRITER = 64
BATCH_VALUE_BYTES = 64 * 1024 - 200  # the whole batch is ~64 KiB
PARTITION = "bench-0"
CONFIG = JournalConfig(map_size_bytes=1 << 30)


def _open_journal(directory: Path, config: JournalConfig) -> JournalLogs:
    """LMDB in directory/journal, the partition's journal log in directory/logs/PARTITION: an
    append is a journal-log record (fsynced by the writer) applied to LMDB, as in the broker."""
    journal = JournalLogs(LocalJournal.open(directory / "journal", config))
    journal.open_partition(PARTITION, directory / "logs" / PARTITION)
    return journal


def _batches() -> dict[int, bytes]:
    return {
        w: transactional_batch(w, 0, record_count=1, value_bytes=BATCH_VALUE_BYTES)
        for w in range(WRITERS)
    }


def _append_concurrently(
    journal: JournalLogs, batches: dict[int, bytes], writers: int, appends: int
) -> list[float]:
    """``writers`` threads, ``appends`` each; returns every append's latency in seconds."""
    latencies: list[float] = []
    lock = threading.Lock()
    start = threading.Barrier(writers)

    def work(writer: int) -> None:
        mine = []
        batch = batches[writer]
        start.wait()
        for _ in range(appends):
            began = time.perf_counter()
            journal.append(PARTITION, writer, batch)
            mine.append(time.perf_counter() - began)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies


def _raw_lmdb_puts(
    directory: Path, values: list[bytes], group_size: int, sync_commit: bool = True
) -> None:
    """The same values, put by one thread in write transactions of ``group_size``, synced."""
    env = lmdb.open(
        str(directory),
        map_size=1 << 30,
        max_dbs=2,
        sync=sync_commit,
        metasync=True,
        readahead=False,
        meminit=False,
    )
    db = env.open_db(b"entries")
    try:
        for first in range(0, len(values), group_size):
            with env.begin(write=True) as txn:
                for sequence in range(first, min(first + group_size, len(values))):
                    txn.put(sequence.to_bytes(12, "big"), values[sequence], db=db)
            if not sync_commit:
                env.sync(True)
    finally:
        env.close()


class _Fresh:
    """A new empty directory per round (made in setup, outside the timing)."""

    def __init__(self) -> None:
        self.directory: Path | None = None

    def make(self) -> Path:
        self.clean()
        self.directory = Path(tempfile.mkdtemp(prefix="bench-journal-"))
        return self.directory

    def clean(self) -> None:
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)


_measured_group_size: list[float] = []


def test_journal_append_16_writers_group_commit(benchmark) -> None:
    batches = _batches()
    fresh = _Fresh()
    opened: list[JournalLogs] = []

    def setup() -> tuple[tuple, dict]:
        journal = _open_journal(fresh.make(), CONFIG)
        opened.append(journal)
        return (journal, batches, WRITERS, APPENDS_PER_WRITER), {}

    benchmark.pedantic(_append_concurrently, setup=setup, rounds=3, iterations=1)
    try:
        stats = opened[-1].statistics()
        assert stats.requests_committed == WRITERS * APPENDS_PER_WRITER
        assert stats.entry_count == WRITERS * APPENDS_PER_WRITER
        _measured_group_size.append(stats.requests_committed / stats.groups_committed)
        benchmark.extra_info["mean_group_size"] = _measured_group_size[-1]
    finally:
        for journal in opened:
            journal.close()
        fresh.clean()


def test_raw_lmdb_puts_in_groups_of_the_same_size(benchmark) -> None:
    group_size = round(_measured_group_size[-1]) if _measured_group_size else WRITERS
    values = [bytes(35) + batch for batch in _batches().values()] * APPENDS_PER_WRITER
    fresh = _Fresh()

    def setup() -> tuple[tuple, dict]:
        return (fresh.make(), values, group_size), {}

    benchmark.pedantic(_raw_lmdb_puts, setup=setup, rounds=3, iterations=1)
    try:
        env = lmdb.open(str(fresh.directory), max_dbs=2)
        with env.begin() as txn:
            assert txn.stat(env.open_db(b"entries", txn=txn))["entries"] == len(values)
        env.close()
    finally:
        fresh.clean()
    benchmark.extra_info["group_size"] = group_size


# --- plain figures (printed) ----------------------------------------------------------


@pytest.mark.parametrize("sync_mode", ["journal_log", "commit", "env_sync"])
def test_print_journal_to_raw_ratio(sync_mode: str) -> None:
    """Journal and raw runs alternate (the disk's background writeback hits both alike);
    the medians of five of each are compared."""
    batches = _batches()
    total = WRITERS * APPENDS_PER_WRITER
    values = [bytes(35) + batch for batch in batches.values()] * APPENDS_PER_WRITER
    journal_times, raw_times, group_sizes = [], [], []
    for _ in range(5):
        directory = Path(tempfile.mkdtemp(prefix="bench-journal-"))
        try:
            journal = _open_journal(directory, CONFIG.replace(sync_mode=sync_mode))
            began = time.perf_counter()
            _append_concurrently(journal, batches, WRITERS, APPENDS_PER_WRITER)
            journal_times.append(time.perf_counter() - began)
            stats = journal.statistics()
            assert stats.entry_count == total
            group_sizes.append(stats.requests_committed / stats.groups_committed)
            journal.close()
            began = time.perf_counter()
            # The raw run syncs like the journal's mode: LMDB's commit, or one env.sync. In
            # "journal_log" mode the journal log's fsync stands for LMDB's, so the raw run
            # is the same durable LMDB commit the journal used to do on its own.
            raw_synced = sync_mode in ("commit", "journal_log")
            _raw_lmdb_puts(directory / "raw", values, round(group_sizes[-1]), raw_synced)
            raw_times.append(time.perf_counter() - began)
        finally:
            shutil.rmtree(directory, ignore_errors=True)
    journal_s, raw_s = statistics.median(journal_times), statistics.median(raw_times)
    megabytes = total * len(batches[0]) / (1 << 20)
    print(
        f"\njournal append ({sync_mode}), {WRITERS} writers x {APPENDS_PER_WRITER} x 64 KiB: median "
        f"{journal_s * 1000:.0f} ms ({megabytes / journal_s:.0f} MiB/s, mean group "
        f"{statistics.mean(group_sizes):.1f}); raw LMDB puts in txns of the same size: "
        f"{raw_s * 1000:.0f} ms ({megabytes / raw_s:.0f} MiB/s); ratio raw/journal = "
        f"{raw_s / journal_s:.2f} (goal >= 0.7)"
    )


@pytest.mark.parametrize("writers", [1, 16])
def test_print_append_latency(writers: int) -> None:
    batches = _batches()
    directory = Path(tempfile.mkdtemp(prefix="bench-latency-"))
    try:
        with _open_journal(directory, CONFIG) as journal:
            _append_concurrently(journal, batches, writers, 8)  # warm up
            latencies = sorted(
                _append_concurrently(journal, batches, writers, max(64, 1024 // writers))
            )
            stats = journal.statistics()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    p50 = latencies[len(latencies) // 2] * 1000
    p99 = latencies[int(len(latencies) * 0.99)] * 1000
    print(
        f"\njournal append latency, {writers} writer(s), 64 KiB: p50 {p50:.2f} ms, p99 {p99:.2f} ms "
        f"({len(latencies)} appends, mean group {stats.requests_committed / stats.groups_committed:.1f})"
    )
    assert p50 <= p99
