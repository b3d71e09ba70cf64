"""APPLY_COMMIT and APPLY_ABORT through the partition writer, on real files."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from copier_support import (
    PartitionFixture,
    body,
    log_bodies,
    plain_batch,
    transactional_batch,
)

from twinlog.engine.base import failpoints
from twinlog.engine.base.errors import (
    CorruptJournalError,
    InvalidTxnStateError,
    TransactionCompletedError,
)
from twinlog.engine.log import LogConfig
from twinlog.journal import CopyState


@pytest.fixture
def partition(tmp_path: Path):
    opened = PartitionFixture(tmp_path)
    yield opened
    opened.close()


def _batches(transaction_id: int, count: int, **kwargs) -> list[bytes]:
    return [transactional_batch(transaction_id, 2 * i, **kwargs) for i in range(count)]


def test_commit_copies_the_batches_contiguously_in_order(partition: PartitionFixture) -> None:
    a, b = _batches(1, 4), _batches(2, 3)
    for x, y in zip(a, b, strict=False):  # interleaved in the journal
        partition.j.append(partition.name, 1, x)
        partition.j.append(partition.name, 2, y)
    partition.j.append(partition.name, 1, a[3])
    partition.writer.append_plain(plain_batch(0))
    assert partition.writer.apply_commit(2) == (1, 7)  # 3 batches of 2 records after 1 plain
    assert partition.writer.apply_commit(1) == (7, 15)
    assert log_bodies(partition.log) == [body(plain_batch(0))] + [body(x) for x in b + a]
    record = partition.j.transaction(partition.name, 1)
    assert record.state is CopyState.APPLIED and record.applied_range == (7, 15)
    assert partition.j.statistics().entry_count == 0
    partition.j.check()


def test_commit_delivered_again_or_after_a_restart_applies_once(
    partition: PartitionFixture,
) -> None:
    partition.journal_transaction(5, _batches(5, 3))
    first = partition.writer.apply_commit(5)
    assert partition.writer.apply_commit(5) == first
    partition.restart()
    assert partition.writer.apply_commit(5) == first
    assert len(log_bodies(partition.log)) == 3


def test_abort_copies_nothing_deletes_entries_and_is_idempotent(
    partition: PartitionFixture,
) -> None:
    partition.journal_transaction(6, _batches(6, 3))
    partition.writer.apply_abort(6)
    partition.writer.apply_abort(6)
    partition.restart()
    partition.writer.apply_abort(6)
    assert partition.log.log_end_offset == 0
    assert partition.j.transaction(partition.name, 6).state is CopyState.ABORTED
    assert partition.j.statistics().entry_count == 0
    with pytest.raises(TransactionCompletedError):  # seed 003: a late message never lingers
        partition.j.append(partition.name, 6, transactional_batch(6, 6))
    assert partition.j.statistics().entry_count == 0


def test_crossed_decisions_raise_naming_both_states(partition: PartitionFixture) -> None:
    partition.journal_transaction(1, _batches(1, 1))
    partition.journal_transaction(2, _batches(2, 1))
    partition.writer.apply_commit(1)
    partition.writer.apply_abort(2)
    with pytest.raises(
        InvalidTxnStateError, match="APPLIED on orders-0; APPLY_ABORT would make it ABORTED"
    ):
        partition.writer.apply_abort(1)
    with pytest.raises(
        InvalidTxnStateError, match="ABORTED on orders-0; APPLY_COMMIT would make it APPLIED"
    ):
        partition.writer.apply_commit(2)
    assert len(log_bodies(partition.log)) == 1


def test_unknown_transaction_applies_as_empty_and_is_recorded(partition: PartitionFixture) -> None:
    partition.writer.append_plain(plain_batch(0))
    assert partition.writer.apply_commit(77) == (1, 1)
    record = partition.j.transaction(partition.name, 77)
    assert record.state is CopyState.APPLIED and record.entry_count == 0
    with pytest.raises(TransactionCompletedError):
        partition.j.append(partition.name, 77, transactional_batch(77, 0))
    partition.writer.apply_abort(78)
    assert partition.j.transaction(partition.name, 78).state is CopyState.ABORTED


def test_a_commit_whose_journaled_entries_are_gone_is_refused_not_applied_empty(
    partition: PartitionFixture,
) -> None:
    """The decision counted the entries; a journal holding fewer (or no record) lost them.
    Applying "what is left" would acknowledge a commit and copy less than it held."""
    for batch in _batches(5, 3):
        partition.j.append(partition.name, 5, batch)
    with pytest.raises(CorruptJournalError, match=r"held 4 entries .* now has 3"):
        partition.writer.apply_commit(5, journaled_entries=4)
    with pytest.raises(CorruptJournalError, match="no record of it"):
        partition.writer.apply_commit(6, journaled_entries=2)
    assert log_bodies(partition.log) == []  # nothing copied
    assert partition.j.transaction(partition.name, 5).state is CopyState.OPEN
    assert partition.j.transaction(partition.name, 6) is None  # nothing recorded either
    assert partition.writer.apply_commit(5, journaled_entries=3) == (0, 6)
    assert partition.writer.apply_commit(5, journaled_entries=3) == (0, 6)  # applied: as before


def test_plain_appends_never_land_inside_a_copy(partition: PartitionFixture) -> None:
    batches = _batches(3, 200, value_bytes=2000)
    partition.journal_transaction(3, batches)
    stop = threading.Event()
    plain_offsets: list[int] = []

    def produce_plain() -> None:
        tag = 0
        while not stop.is_set() or tag < 5:
            plain_offsets.append(partition.writer.append_plain(plain_batch(tag)))
            tag += 1

    producer = threading.Thread(target=produce_plain)
    producer.start()
    try:
        first, next_offset = partition.writer.apply_commit(3)
    finally:
        stop.set()
        producer.join(10)
    assert next_offset - first == 400
    assert not any(first <= offset < next_offset for offset in plain_offsets)
    bodies = log_bodies(partition.log)
    start = bodies.index(body(batches[0]))
    assert bodies[start : start + 200] == [body(b) for b in batches]


def test_copy_spanning_many_segments(tmp_path: Path) -> None:
    partition = PartitionFixture(tmp_path, log_config=LogConfig(segment_bytes=4096))
    batches = _batches(4, 30, value_bytes=500)
    partition.journal_transaction(4, batches)
    partition.writer.apply_commit(4)
    assert len(list(partition.log_directory.glob("*.log"))) > 5
    partition.restart()
    assert log_bodies(partition.log) == [body(b) for b in batches]
    partition.close()


@pytest.mark.usefixtures("disarmed")
def test_a_copy_that_fails_half_way_is_finished_before_the_next_write(
    partition: PartitionFixture,
) -> None:
    batches = _batches(9, 5)
    partition.journal_transaction(9, batches)
    failpoints.arm("copier.after_batch", "raise", on_hit=3)
    with pytest.raises(failpoints.FailpointError):
        partition.writer.apply_commit(9)
    failpoints.disarm_all()
    # append_all_as_leader rolled its batches back; the record still says APPLYING.
    assert partition.log.log_end_offset == 0
    assert partition.j.transaction(partition.name, 9).state is CopyState.APPLYING
    # A plain append must not slip in before the decided commit: the copy goes first.
    assert partition.writer.append_plain(plain_batch(1)) == 10
    assert log_bodies(partition.log) == [body(b) for b in batches] + [body(plain_batch(1))]
    assert partition.writer.apply_commit(9) == (0, 10)


def test_transaction_headers_stream_in_append_order(partition: PartitionFixture) -> None:
    partition.journal_transaction(8, _batches(8, 4))
    assert [h.base_sequence for h in partition.writer.transaction_headers(8)] == [0, 2, 4, 6]
    assert list(partition.writer.transaction_headers(999)) == []


def test_commit_with_chosen_attempts_copies_them_and_untagged_drops_the_rest(
    partition: PartitionFixture,
) -> None:
    tagged = {
        b"": [transactional_batch(12, 0)],
        b"task-1.0": [transactional_batch(12, 2), transactional_batch(12, 4)],
        b"task-1.1": [transactional_batch(12, 6)],
    }
    order = [(b"task-1.0", 0), (b"", 0), (b"task-1.1", 0), (b"task-1.0", 1)]
    for attempt, index in order:
        partition.j.append(partition.name, 12, tagged[attempt][index], attempt=attempt)
    assert partition.writer.apply_commit(12, attempts=[b"task-1.0"]) == (0, 6)
    expected = [tagged[b"task-1.0"][0], tagged[b""][0], tagged[b"task-1.0"][1]]
    assert log_bodies(partition.log) == [body(b) for b in expected]
    record = partition.j.transaction(partition.name, 12)
    assert record.attempts == (b"task-1.0",)
    assert partition.j.statistics().entry_count == 0  # the other attempt's entry is gone too
    # A redelivery, even naming other attempts, answers from the record.
    assert partition.writer.apply_commit(12, attempts=[b"task-1.1"]) == (0, 6)
    partition.j.check()


def test_a_copy_of_one_batch_writes_no_append_mark(partition: PartitionFixture) -> None:
    # A reader of the files sees one batch whole or not at all: the mark (a file
    # replaced twice per copy) is written only for a copy of two batches or more.
    mark = partition.log_directory / "append-state"
    partition.journal_transaction(1, _batches(1, 1))
    partition.writer.apply_commit(1)
    assert not mark.exists()
    partition.journal_transaction(2, _batches(2, 2))
    partition.writer.apply_commit(2)
    assert mark.exists()
