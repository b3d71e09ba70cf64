"""MARK_APPLIED left for the partition's next copy group (``twinlog.copier.marks_left``):
a copy is answered once durable, its APPLIED record rides in the next group's APPLYING
write, or is written by the broker's round, a purge, a close; lost, recovery records it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from copier_support import PartitionFixture, body, log_bodies, plain_batch, transactional_batch

from twinlog.copier.marks_left import MarksLeft
from twinlog.journal import CopyState

Writes = list[tuple[list[int], list[int]]]


@pytest.fixture()
def marks_left() -> MarksLeft:
    return MarksLeft()


@pytest.fixture()
def partition(tmp_path: Path, marks_left: MarksLeft) -> Any:
    opened = PartitionFixture(tmp_path, marks_left=marks_left)
    yield opened
    opened.close()


def _journal(partition: PartitionFixture, *transaction_ids: int) -> None:
    for transaction_id in transaction_ids:
        partition.j.append(partition.name, transaction_id, transactional_batch(transaction_id))


def _record_writes(partition: PartitionFixture) -> Writes:
    """Each journal-log write of marks: (APPLIED transactions, APPLYING transactions)."""
    writes: Writes = []
    journal = partition.j
    then_applying, applied_all = journal.mark_applied_then_applying, journal.mark_applied_all

    def recorded_then_applying(name: str, applied: Any, applying: Any) -> Any:
        writes.append(([t for t, *_ in applied], [t for t, *_ in applying]))
        return then_applying(name, applied, applying)

    def recorded_applied_all(name: str, applied: Any) -> Any:
        writes.append(([t for t, *_ in applied], []))
        return applied_all(name, applied)

    journal.mark_applied_then_applying = recorded_then_applying  # type: ignore[method-assign]
    journal.mark_applied_all = recorded_applied_all  # type: ignore[method-assign]
    return writes


def _state(partition: PartitionFixture, transaction_id: int) -> CopyState | None:
    row = partition.j.transaction(partition.name, transaction_id)
    return None if row is None else row.state


def test_a_copy_is_answered_before_its_applied_record_which_rides_with_the_next_group(
    partition: PartitionFixture, marks_left: MarksLeft
) -> None:
    _journal(partition, 1, 2)
    writes = _record_writes(partition)
    assert partition.writer.apply_commit(1) == (0, 2)
    # Answered: the copy is in the data log; MARK_APPLIED is left, and listed.
    assert log_bodies(partition.log) == [body(transactional_batch(1))]
    assert _state(partition, 1) is CopyState.APPLYING
    assert len(marks_left) == 1
    assert partition.writer.apply_commit(2) == (2, 4)
    # One write per group: transaction 1's APPLIED went with transaction 2's APPLYING.
    assert writes == [([], [1]), ([1], [2])]
    assert _state(partition, 1) is CopyState.APPLIED
    assert _state(partition, 2) is CopyState.APPLYING
    assert len(marks_left) == 1  # now transaction 2's


def test_the_brokers_round_writes_marks_left_past_the_delay_only(
    partition: PartitionFixture, marks_left: MarksLeft
) -> None:
    _journal(partition, 1)
    writes = _record_writes(partition)
    partition.writer.apply_commit(1)
    assert marks_left.write_due(delay_ms=60_000) == 0  # not due yet: still waits for a group
    assert _state(partition, 1) is CopyState.APPLYING
    assert marks_left.write_due(delay_ms=0) == 1
    assert writes == [([], [1]), ([1], [])]
    row = partition.j.transaction(partition.name, 1)
    assert row is not None and row.state is CopyState.APPLIED and row.applied_range == (0, 2)
    assert len(marks_left) == 0
    assert marks_left.write_all() == 0  # nothing left: no write
    assert len(writes) == 2


def test_marks_left_at_a_crash_are_recorded_by_recovery_from_the_whole_copy(
    partition: PartitionFixture, marks_left: MarksLeft
) -> None:
    _journal(partition, 1, 2)
    assert partition.writer.apply_commit(1) == (0, 2)
    copied = log_bodies(partition.log)
    partition.restart()  # the process ends with MARK_APPLIED unwritten
    assert log_bodies(partition.log) == copied  # nothing copied twice
    row = partition.j.transaction(partition.name, 1)
    assert row is not None and row.state is CopyState.APPLIED and row.applied_range == (0, 2)
    assert partition.writer.apply_commit(2) == (2, 4)


def test_a_retried_apply_of_a_transaction_whose_mark_is_left_answers_from_the_record(
    partition: PartitionFixture,
) -> None:
    _journal(partition, 1)
    assert partition.writer.apply_commit(1) == (0, 2)
    copied = log_bodies(partition.log)
    assert partition.writer.apply_commit(1) == (0, 2)  # the mark is written first, then read
    assert log_bodies(partition.log) == copied
    assert _state(partition, 1) is CopyState.APPLIED


def test_any_other_write_writes_the_marks_left_first(
    partition: PartitionFixture, marks_left: MarksLeft
) -> None:
    _journal(partition, 1)
    partition.writer.apply_commit(1)
    partition.writer.append_plain(plain_batch(9))
    assert _state(partition, 1) is CopyState.APPLIED
    assert len(marks_left) == 0


def test_a_promotion_drops_an_earlier_terms_marks_and_recovery_records_them(
    partition: PartitionFixture, marks_left: MarksLeft
) -> None:
    _journal(partition, 1, 2)
    partition.writer.apply_commit(1)
    partition.writer.recover_before_next_write()
    assert len(marks_left) == 0  # the earlier term's record is no longer this writer's
    assert partition.writer.apply_commit(2) == (2, 4)
    # Recovery, the new term's first step, recorded APPLIED from the whole copy.
    row = partition.j.transaction(partition.name, 1)
    assert row is not None and row.state is CopyState.APPLIED and row.applied_range == (0, 2)
