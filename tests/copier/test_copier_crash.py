"""Real SIGKILLs at every copier and journal failpoint of APPLY_COMMIT, then reopen:
the transaction is in the data log exactly once, contiguous, and nothing else moved.

The worker is ``tests/support/copier_support.py`` run as a script (see its docstring).
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from copier_support import (
    PartitionFixture,
    body,
    log_bodies,
    plain_batch,
    run_crash_worker,
    transactional_batch,
)

from twinlog.journal import CopyState

pytestmark = pytest.mark.crash

COMMITTED, OTHER = 10, 11
BATCHES = 5


def _batches(transaction_id: int, count: int) -> list[bytes]:
    return [
        transactional_batch(transaction_id, 3 * i, record_count=3, value_bytes=700)
        for i in range(count)
    ]


def _prepare(data_dir: Path) -> None:
    partition = PartitionFixture(data_dir)
    partition.writer.append_plain(plain_batch(0))
    for ours, other in zip(_batches(COMMITTED, BATCHES), _batches(OTHER, BATCHES), strict=True):
        partition.j.append(partition.name, COMMITTED, ours)
        partition.j.append(partition.name, OTHER, other)
    partition.close()


def _run_worker(data_dir: Path, failpoint: str | None, attempts: tuple[str, ...] = ()) -> int:
    return run_crash_worker(data_dir, str(COMMITTED), failpoint, attempts)


def _check_exactly_once(data_dir: Path) -> None:
    partition = PartitionFixture(data_dir)  # reopen: log recovery, then copier recovery
    try:
        first, next_offset = partition.writer.apply_commit(COMMITTED)  # the coordinator redelivers
        expected = [body(plain_batch(0))] + [body(b) for b in _batches(COMMITTED, BATCHES)]
        assert log_bodies(partition.log) == expected  # once, contiguous, in order
        assert (first, next_offset) == (1, 1 + 3 * BATCHES)
        # The other transaction was not touched and still applies after it.
        assert partition.j.transaction(partition.name, OTHER).state is CopyState.OPEN
        assert partition.writer.apply_commit(OTHER) == (next_offset, next_offset + 3 * BATCHES)
        assert partition.j.statistics().entry_count == 0
        partition.j.check()
    finally:
        partition.close()


KILL_POINTS = [
    "copier.after_applying_record=crash",
    "copier.after_batch=crash@1",
    "copier.after_batch=crash@3",
    f"copier.after_batch=crash@{BATCHES}",  # every batch written, none fsynced
    "copier.after_log_fsync=crash",
    "copier.after_applied_record=crash",
    "journal.before_sync=crash@1",  # APPLYING not yet committed
    "journal.after_sync=crash@1",  # APPLYING synced, nothing copied
    "journal.before_sync=crash@2",  # copied and fsynced, APPLIED not committed
    "journal.after_sync=crash@2",  # APPLIED synced
]


@pytest.mark.parametrize("failpoint", KILL_POINTS)
def test_kill_at_failpoint_then_recover_applies_exactly_once(
    tmp_path: Path, failpoint: str
) -> None:
    _prepare(tmp_path)
    assert _run_worker(tmp_path, failpoint) == -signal.SIGKILL, f"{failpoint} never fired"
    _check_exactly_once(tmp_path)


@pytest.mark.parametrize("second", ["copier.after_batch=crash@2", "copier.after_log_fsync=crash"])
def test_kill_again_during_recovery(tmp_path: Path, second: str) -> None:
    _prepare(tmp_path)
    assert _run_worker(tmp_path, "copier.after_batch=crash@3") == -signal.SIGKILL
    # The next open resumes the copy in recovery; kill it there too.
    assert _run_worker(tmp_path, second) == -signal.SIGKILL
    assert _run_worker(tmp_path, None) == 0  # recovers, then the redelivered commit is a no-op
    _check_exactly_once(tmp_path)


def test_worker_without_failpoint_applies(tmp_path: Path) -> None:
    _prepare(tmp_path)
    assert _run_worker(tmp_path, None) == 0
    _check_exactly_once(tmp_path)


@pytest.mark.parametrize(
    "failpoint", ["copier.after_batch=crash@2", "copier.after_log_fsync=crash"]
)
def test_kill_during_a_commit_of_chosen_attempts(tmp_path: Path, failpoint: str) -> None:
    partition = PartitionFixture(tmp_path)
    good = _batches(COMMITTED, 3)
    zombie = [
        transactional_batch(COMMITTED, 3 * i, record_count=3, value_bytes=11) for i in range(3)
    ]
    for ours, theirs in zip(good, zombie, strict=True):
        partition.j.append(partition.name, COMMITTED, theirs, attempt=b"task-0.0")
        partition.j.append(partition.name, COMMITTED, ours, attempt=b"task-0.1")
    partition.close()
    assert _run_worker(tmp_path, failpoint, ("task-0.1",)) == -signal.SIGKILL
    partition = PartitionFixture(tmp_path)  # recovery must keep the choice made before the crash
    try:
        assert partition.writer.apply_commit(COMMITTED) == (0, 9)
        assert log_bodies(partition.log) == [body(b) for b in good]
        assert partition.j.statistics().entry_count == 0
    finally:
        partition.close()
