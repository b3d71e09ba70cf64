"""A copy group (several committed transactions of one partition copied together:
their MARK_APPLYING records in one journal-log write, their batches in one append, their
MARK_APPLIED records in one write) killed by a real SIGKILL at every copier and journal
failpoint, then reopened: recovery reads the APPLYING records as one copy, and every
transaction of the group is in the data log exactly once, contiguous, in the group's
order, with the range its redelivered commit answers; the transaction left out is
untouched. The worker is ``tests/support/copier_support.py`` (see its docstring)."""

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

from twinlog.copier import CommitCall
from twinlog.journal import CopyState

pytestmark = pytest.mark.crash

GROUP = (21, 22, 23)  # copied together, in this order
LEFT_OUT = 24  # journaled beside them, never committed here
BATCHES = 3  # per transaction: 9 batches in the group's one append
RECORDS = 2  # per batch


def _batches(transaction_id: int) -> list[bytes]:
    return [
        transactional_batch(transaction_id, RECORDS * i, record_count=RECORDS, value_bytes=300)
        for i in range(BATCHES)
    ]


def _prepare(data_dir: Path) -> None:
    partition = PartitionFixture(data_dir)
    partition.writer.append_plain(plain_batch(0))
    for index in range(BATCHES):  # interleaved, as producers side by side journal them
        for transaction_id in (*GROUP, LEFT_OUT):
            partition.j.append(partition.name, transaction_id, _batches(transaction_id)[index])
    partition.close()


def _run_worker(data_dir: Path, failpoint: str | None) -> int:
    return run_crash_worker(data_dir, ",".join(map(str, GROUP)), failpoint)


def _check_exactly_once(data_dir: Path) -> None:
    partition = PartitionFixture(data_dir)  # reopen: log recovery, then copier recovery
    try:
        span = RECORDS * BATCHES
        expected_ranges = [(1 + span * i, 1 + span * (i + 1)) for i in range(len(GROUP))]
        # The coordinator redelivers every commit of the group, one by one...
        for transaction_id, expected in zip(GROUP, expected_ranges, strict=True):
            assert partition.writer.apply_commit(transaction_id) == expected
        # ... or as a group again: the same ranges, nothing copied twice.
        assert partition.writer.apply_commits([CommitCall(t) for t in GROUP]) == expected_ranges
        expected = [body(plain_batch(0))]
        for transaction_id in GROUP:
            expected += [body(batch) for batch in _batches(transaction_id)]
        assert log_bodies(partition.log) == expected  # once each, contiguous, in order
        assert partition.j.transaction(partition.name, LEFT_OUT).state is CopyState.OPEN
        end = expected_ranges[-1][1]
        assert partition.writer.apply_commit(LEFT_OUT) == (end, end + span)
        assert partition.j.statistics().entry_count == 0
        partition.j.check()
    finally:
        partition.close()


GROUP_BATCHES = BATCHES * len(GROUP)
KILL_POINTS = [
    "copier.after_applying_record=crash",  # every mark of the group, nothing copied
    "copier.after_batch=crash@1",
    f"copier.after_batch=crash@{BATCHES}",  # the first transaction whole, unsynced
    f"copier.after_batch=crash@{BATCHES + 1}",  # inside the second one
    f"copier.after_batch=crash@{GROUP_BATCHES - 1}",
    f"copier.after_batch=crash@{GROUP_BATCHES}",  # every batch written, none fsynced
    "copier.after_log_fsync=crash",
    "copier.after_applied_record=crash",
    "journal.before_sync=crash@1",  # the APPLYING marks not yet committed
    "journal.after_sync=crash@1",  # the marks synced, nothing copied
    "journal.before_sync=crash@2",  # copied and fsynced, the APPLIED marks not committed
    "journal.after_sync=crash@2",  # APPLIED synced
]


@pytest.mark.parametrize("failpoint", KILL_POINTS)
def test_a_group_killed_at_a_failpoint_recovers_each_transaction_exactly_once(
    tmp_path: Path, failpoint: str
) -> None:
    _prepare(tmp_path)
    assert _run_worker(tmp_path, failpoint) == -signal.SIGKILL, f"{failpoint} never fired"
    _check_exactly_once(tmp_path)


def test_a_group_killed_twice_then_recovered(tmp_path: Path) -> None:
    _prepare(tmp_path)
    assert _run_worker(tmp_path, f"copier.after_batch=crash@{BATCHES + 2}") == -signal.SIGKILL
    # The next open resumes the group in recovery; kill it there too.
    assert _run_worker(tmp_path, "copier.after_batch=crash@1") == -signal.SIGKILL
    assert _run_worker(tmp_path, None) == 0  # recovers, then the redelivered group is a no-op
    _check_exactly_once(tmp_path)


def test_a_group_without_a_failpoint_is_copied_in_order(tmp_path: Path) -> None:
    _prepare(tmp_path)
    assert _run_worker(tmp_path, None) == 0
    _check_exactly_once(tmp_path)


# Two callers: the first copies GROUP[0] alone; the second queued behind it copies the
# rest as the next group, whose MARK_APPLYING write carries GROUP[0]'s MARK_APPLIED.
SIDE_BY_SIDE = f"{GROUP[0]}/{GROUP[1]},{GROUP[2]}"
HANDOVER_KILL_POINTS = [
    "journal.before_sync=crash@2",  # GROUP[0] copied; its APPLIED and the next APPLYING not synced
    "journal.after_sync=crash@2",  # both synced, nothing of the second group copied
    f"copier.after_batch=crash@{BATCHES + 2}",  # inside the second group's copy
    "copier.after_log_fsync=crash@2",  # the second group copied, its APPLIED not written
    "journal.before_sync=crash@3",  # the second group's APPLIED, written alone, not synced
]


@pytest.mark.parametrize("failpoint", HANDOVER_KILL_POINTS)
def test_a_group_whose_applied_marks_went_with_the_next_ones_recovers_exactly_once(
    tmp_path: Path, failpoint: str
) -> None:
    _prepare(tmp_path)
    returned = run_crash_worker(tmp_path, SIDE_BY_SIDE, failpoint)
    assert returned == -signal.SIGKILL, f"{failpoint} never fired"
    _check_exactly_once(tmp_path)


def test_two_callers_groups_without_a_failpoint(tmp_path: Path) -> None:
    _prepare(tmp_path)
    assert run_crash_worker(tmp_path, SIDE_BY_SIDE, None) == 0
    _check_exactly_once(tmp_path)
