"""Group commit, map growth and failures of the journal's single writer thread, written
through a partition's journal log as the broker does."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from copier_support import transactional_batch

from twinlog.engine.base import failpoints
from twinlog.engine.base.errors import DiskFullError, TransactionCompletedError
from twinlog.journal import JournalConfig, JournalLogs, LocalJournal
from twinlog.journal.local_ops import Operation
from twinlog.journal.local_tables import Tables

P0 = "orders-0"
WAIT_S = 10.0


def _open(tmp_path: Path, config: JournalConfig | None = None) -> JournalLogs:
    opened = JournalLogs(LocalJournal.open(tmp_path / "journal", config))
    opened.open_partition(P0, tmp_path / "logs" / P0)
    return opened


def _run_threads(count: int, work: Callable[[int], object]) -> list[object]:
    """Run work(i) in ``count`` threads; return results or raised exceptions, by i."""
    results: list[object] = [None] * count

    def run(index: int) -> None:
        try:
            results[index] = work(index)
        except Exception as error:
            results[index] = error

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S)
        assert not thread.is_alive()
    return results


class _Blocker(Operation):
    """Holds the writer thread inside a group until released (to queue a known group)."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def check(self, tables: Tables) -> None:
        self.started.set()
        assert self.release.wait(WAIT_S)

    def apply(self, tables: Tables) -> None:
        return None


def _wait_for_queue(journal: JournalLogs, length: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while journal.local._writer._queue.qsize() < length:
        assert time.monotonic() < deadline, "requests did not queue up"
        time.sleep(0.001)


def test_sixteen_writers_share_syncs(tmp_path: Path) -> None:
    appends_per_thread = 25
    with _open(tmp_path) as journal:
        batch_of = {t: transactional_batch(t, 0, value_bytes=1000) for t in range(16)}

        def work(thread: int) -> list[int]:
            return [journal.append(P0, thread, batch_of[thread]) for _ in range(appends_per_thread)]

        results = _run_threads(16, work)
        sequences = sorted(s for result in results for s in result)  # type: ignore[attr-defined]
        stats = journal.statistics()
        appends = 16 * appends_per_thread
        assert sequences == list(range(appends))
        assert stats.requests_committed == appends
        # Each group is one write transaction and one sync; with 16 callers
        # waiting on each sync, groups must hold several appends on average.
        assert stats.groups_committed < appends / 2, stats
        journal.check()


def test_a_refused_entry_fails_only_its_caller_in_the_same_group(tmp_path: Path) -> None:
    with _open(tmp_path) as journal:
        journal.mark_aborted(P0, 99)
        blocker = _Blocker()
        holder = threading.Thread(target=journal.local._writer.submit, args=(blocker,))
        holder.start()
        assert blocker.started.wait(WAIT_S)
        groups_before = journal.statistics().groups_committed

        def work(index: int) -> int:
            transaction_id = 99 if index % 4 == 0 else index  # every 4th is late: refused
            return journal.append(P0, transaction_id, transactional_batch(transaction_id, 0))

        callers: list[object] = []
        runner = threading.Thread(target=lambda: callers.extend(_run_threads(12, work)))
        runner.start()
        _wait_for_queue(journal, 12)
        blocker.release.set()
        runner.join(WAIT_S)
        holder.join(WAIT_S)
        refused = [r for i, r in enumerate(callers) if i % 4 == 0]
        accepted = [r for i, r in enumerate(callers) if i % 4 != 0]
        assert all(isinstance(r, TransactionCompletedError) for r in refused), refused
        # Every caller's record got a journal offset (1..12, after the abort's 0); the
        # refused ones are no-ops that LMDB still counts as applied.
        assert len(set(accepted)) == 9 and set(accepted) <= set(range(1, 13)), accepted
        assert journal.local.partition_row(P0).next_offset == 13
        # The blocker's group, then ONE group for all twelve callers.
        assert journal.statistics().groups_committed == groups_before + 2
        assert journal.transaction(P0, 99).entry_count == 0
        journal.check()


@pytest.mark.usefixtures("disarmed")
def test_a_failing_sync_fails_the_whole_group_and_writes_nothing(tmp_path: Path) -> None:
    with _open(tmp_path) as journal:
        journal.append(P0, 1, transactional_batch(1, 0))
        failpoints.arm("journal.before_sync", "raise")
        with pytest.raises(failpoints.FailpointError):
            journal.append(P0, 1, transactional_batch(1, 2))
        assert journal.transaction(P0, 1).entry_count == 1
        # The failed record was cut from the journal log: its offset is used again.
        assert journal.append(P0, 1, transactional_batch(1, 2)) == 1
        assert journal.journal_log(P0).log_end_offset == 2
        journal.check()


def test_map_grows_when_full_and_keeps_every_entry(tmp_path: Path) -> None:
    config = JournalConfig(map_size_bytes=64 * 1024, entry_batches="lmdb")  # batches fill the map
    batch = transactional_batch(1, 0, record_count=4, value_bytes=16 * 1024)  # ~64 KiB
    with _open(tmp_path, config) as journal:
        _run_threads(8, lambda i: [journal.append(P0, 1, batch) for _ in range(8)])
        stats = journal.statistics()
        assert stats.map_resizes >= 3 and stats.map_size_bytes >= 64 * len(batch)
        assert stats.pending_by_partition == {P0: (64, 64 * len(batch))}
        assert all(bytes(b) == batch for b in journal.iter_batches(P0, journal.sequences(P0, 1)))
        journal.check()
    with _open(tmp_path, config) as journal:  # the grown map is kept
        assert len(journal.sequences(P0, 1)) == 64


def test_readers_stream_safely_while_the_map_grows(tmp_path: Path) -> None:
    config = JournalConfig(
        map_size_bytes=256 * 1024, read_chunk_bytes=64 * 1024, entry_batches="lmdb"
    )
    batch = transactional_batch(1, 0, record_count=1, value_bytes=32 * 1024)
    with _open(tmp_path, config) as journal:
        for _ in range(6):
            journal.append(P0, 1, batch)
        sequences = journal.sequences(P0, 1)
        resizes_before = journal.statistics().map_resizes
        stop = threading.Event()

        def grow() -> None:
            while not stop.is_set():
                journal.append(P0, 2, transactional_batch(2, 0, value_bytes=64 * 1024))

        grower = threading.Thread(target=grow)
        grower.start()
        try:
            deadline = time.monotonic() + WAIT_S
            while journal.statistics().map_resizes < resizes_before + 3:
                for view in journal.iter_batches(P0, sequences):
                    assert view == batch  # compares the bytes under the view, in the map
                assert time.monotonic() < deadline
        finally:
            stop.set()
            grower.join(WAIT_S)
        journal.check()


def test_a_full_map_at_its_limit_raises_disk_full_and_writes_nothing(tmp_path: Path) -> None:
    config = JournalConfig(
        map_size_bytes=128 * 1024, map_size_bytes_max=256 * 1024, entry_batches="lmdb"
    )
    batch = transactional_batch(1, 0, value_bytes=40 * 1024)
    with _open(tmp_path, config) as journal:
        written = 0
        with pytest.raises(DiskFullError, match="map_size_bytes_max"):
            for _ in range(20):
                journal.append(P0, 1, batch)
                written += 1
        assert 0 < written < 20
        assert journal.transaction(P0, 1).entry_count == written
        journal.mark_aborted(P0, 1)  # a delete may use the headroom past the limit
        # LMDB reuses pages freed by write transaction N from transaction N + 2 on
        # (the last snapshot must stay readable): one small write, then room again.
        journal.mark_aborted(P0, 3)
        journal.append(P0, 2, transactional_batch(2, 0, value_bytes=40 * 1024))
        journal.check()
