"""The copier's recovery table: total and unambiguous, and each row does what it says
on real files (the data log's tail built by hand in every shape)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from copier_support import (
    PartitionFixture,
    body,
    log_bodies,
    plain_batch,
    transactional_batch,
)

from twinlog.copier.recovery_table import (
    RECOVERY_TABLE,
    Action,
    Case,
    ChainState,
    CopyRecordState,
    TailState,
    all_cases,
    describe_table,
    lookup,
)
from twinlog.copier.tail import classify_tail
from twinlog.engine.base.errors import CorruptJournalError
from twinlog.engine.records.batch_format import read_header
from twinlog.journal import CopyState

TXN = 21


def test_every_combination_matches_exactly_one_row() -> None:
    cases = all_cases()
    assert len(cases) == len(CopyRecordState) * len(ChainState) * len(TailState)
    used = set()
    for case in cases:
        matching = [row.name for row in RECOVERY_TABLE if row.condition(case)]
        assert len(matching) == 1, f"{case} matches {matching}"
        used.add(matching[0])
        assert lookup(case).name == matching[0]
    assert used == {row.name for row in RECOVERY_TABLE}, "a row no case reaches"
    assert "torn copy" in describe_table()


def test_only_applying_records_lead_to_an_action() -> None:
    for case in all_cases():
        if case.record is not CopyRecordState.APPLYING:
            assert lookup(case).action is Action.NOTHING


# --- classify_tail on synthetic headers --------------------------------------------


def _headers(batches: list[bytes], start_offset: int):
    headers, offset = [], start_offset
    for batch in batches:
        header = read_header(batch)._replace(base_offset=offset)
        headers.append(header)
        offset = header.next_offset
    return headers


@pytest.mark.parametrize(
    ("in_log", "expected"),
    [
        (0, (TailState.EMPTY, 0)),
        (1, (TailState.PREFIX, 1)),
        (2, (TailState.PREFIX, 2)),
        (3, (TailState.WHOLE, 3)),
    ],
)
def test_classify_prefixes(in_log: int, expected) -> None:
    ours = [transactional_batch(TXN, 2 * i) for i in range(3)]
    log = _headers(ours[:in_log], 10)
    end = log[-1].next_offset if log else 10
    assert classify_tail(10, 0, end, iter(log), iter(_headers(ours, 0))) == expected


def test_classify_foreign_beyond_and_below_start() -> None:
    ours = [transactional_batch(TXN, 2 * i) for i in range(2)]
    other = _headers([plain_batch(1)], 10)
    assert classify_tail(10, 0, 11, iter(other), iter(_headers(ours, 0)))[0] is TailState.FOREIGN
    longer = _headers([*ours, transactional_batch(TXN, 4)], 10)
    assert classify_tail(10, 0, 16, iter(longer), iter(_headers(ours, 0)))[0] is TailState.FOREIGN
    assert classify_tail(10, 0, 7, iter(()), iter(_headers(ours, 0)))[0] is TailState.BEYOND
    assert classify_tail(10, 12, 14, iter(()), iter(_headers(ours, 0)))[0] is TailState.FOREIGN


# --- each row on real files --------------------------------------------------------


@pytest.fixture
def partition(tmp_path: Path):
    opened = PartitionFixture(tmp_path)
    opened.writer.append_plain(plain_batch(0))
    yield opened
    opened.close()


def _journal(partition: PartitionFixture, count: int = 3) -> list[bytes]:
    batches = [transactional_batch(TXN, 2 * i, value_bytes=300) for i in range(count)]
    partition.journal_transaction(TXN, batches)
    return batches


def _recover_and_check(
    partition: PartitionFixture,
    batches: list[bytes],
    row: str,
    before: list[bytes],
    reopen: bool = True,
) -> None:
    """Reopen (copier recovery runs), check the row taken and the exactly-once result."""
    if reopen:
        partition.close()
        partition.open(recover=False)
    outcomes = partition.writer.recover()
    assert [o.row.name for o in outcomes] == [row]
    assert log_bodies(partition.log) == before + [body(b) for b in batches]
    record = partition.j.transaction(partition.name, TXN)
    assert record.state is CopyState.APPLIED
    assert record.applied_range == (len(before), len(before) + 2 * len(batches))
    assert partition.writer.apply_commit(TXN) == record.applied_range  # a redelivery
    assert partition.j.statistics().entry_count == 0
    partition.j.check()


def test_row_nothing_copied(partition: PartitionFixture) -> None:
    batches = _journal(partition)
    partition.j.mark_applying(partition.name, TXN, partition.log.log_end_offset)
    _recover_and_check(partition, batches, "nothing copied", [body(plain_batch(0))])


def test_row_prefix_of_whole_batches_resumes_after_it(partition: PartitionFixture) -> None:
    # J6: the prefix stays (a reader may have seen it); only the rest is appended.
    batches = _journal(partition)
    partition.j.mark_applying(partition.name, TXN, partition.log.log_end_offset)
    partition.log.append_all_as_leader(batches[:2])
    partition.close()
    partition.open(recover=False)
    prefix_end = partition.log.log_end_offset
    cuts: list[int] = []
    truncate_to = partition.log.truncate_to
    partition.log.truncate_to = lambda offset: cuts.append(offset) or truncate_to(offset)  # type: ignore[method-assign]
    assert partition.writer.inspect(partition.j.transaction(partition.name, TXN)).tail is (
        TailState.PREFIX
    )
    _recover_and_check(
        partition, batches, "prefix of whole batches", [body(plain_batch(0))], reopen=False
    )
    assert cuts == [] and prefix_end == 1 + 4  # nothing cut; the plain batch, then two of ours


def test_row_torn_copy_cut_inside_a_batch(partition: PartitionFixture) -> None:
    batches = _journal(partition)
    partition.j.mark_applying(partition.name, TXN, partition.log.log_end_offset)
    partition.log.append_all_as_leader(batches)
    partition.log.close()
    segment = next(partition.log_directory.glob("*.log"))
    with open(segment, "r+b") as file:  # the page cache lost the end of the last batch
        file.truncate(segment.stat().st_size - 100)
    (segment.parent / "recovery-point").unlink()  # a crash leaves none past the copy
    _recover_and_check(partition, batches, "torn copy", [body(plain_batch(0))])


def test_row_whole_copy(partition: PartitionFixture) -> None:
    batches = _journal(partition)
    partition.j.mark_applying(partition.name, TXN, partition.log.log_end_offset)
    partition.log.append_all_as_leader(batches)
    _recover_and_check(partition, batches, "whole copy", [body(plain_batch(0))])


def test_row_log_lost_its_tail(partition: PartitionFixture) -> None:
    batches = _journal(partition)
    # The start was recorded past plain batches the log then lost (not fsynced).
    partition.j.mark_applying(partition.name, TXN, partition.log.log_end_offset + 5)
    _recover_and_check(partition, batches, "log lost its tail", [body(plain_batch(0))])


def test_row_log_lost_its_tail_with_part_of_the_copy(partition: PartitionFixture) -> None:
    batches = _journal(partition)
    partition.writer.append_plain(plain_batch(1))
    partition.j.mark_applying(partition.name, TXN, partition.log.log_end_offset)
    partition.log.append_all_as_leader(batches[:1])
    partition.log.truncate_to(1)  # the log came back shorter than the start
    _recover_and_check(partition, batches, "log lost its tail", [body(plain_batch(0))])


def test_row_foreign_tail_refuses(partition: PartitionFixture) -> None:
    _journal(partition)
    partition.j.mark_applying(partition.name, TXN, partition.log.log_end_offset)
    partition.log.append_as_leader(plain_batch(9))  # behind the writer's back
    partition.close()
    partition.open(recover=False)
    with pytest.raises(CorruptJournalError, match="log tail foreign"):
        partition.writer.recover()
    with pytest.raises(CorruptJournalError):  # and every write refuses too, until resolved
        partition.writer.append_plain(plain_batch(10))


def test_row_damaged_chain_refuses(partition: PartitionFixture) -> None:
    _journal(partition)
    partition.j.mark_applying(partition.name, TXN, partition.log.log_end_offset)
    journal = partition.j.local
    with journal._env.begin(write=True) as txn:  # lose the middle entry (journal offset 1)
        assert txn.delete(bytes(4) + (1).to_bytes(8, "big"), db=journal._databases[b"entries"])
    partition.close()
    partition.open(recover=False)
    with pytest.raises(CorruptJournalError, match="chain broken"):
        partition.writer.recover()
    assert partition.log.log_end_offset == 1  # nothing was copied


def test_row_not_applying_records_are_left_alone(partition: PartitionFixture) -> None:
    _journal(partition)
    partition.writer.apply_abort(99)
    partition.close()
    partition.open(recover=False)
    assert partition.writer.recover() == []
    assert partition.j.transaction(partition.name, TXN).state is CopyState.OPEN
    assert partition.writer.inspect(partition.j.transaction(partition.name, TXN)) == Case(
        CopyRecordState.OPEN, ChainState.INTACT, TailState.EMPTY
    )
    assert partition.log.log_end_offset == 1


def test_every_row_has_a_test_on_real_files() -> None:
    """Each row of the table is exercised by a ``test_row_<its name>...`` test in this module
    (a row added without one fails here)."""
    tests = [name for name, value in globals().items() if name.startswith("test_row_")]
    for row in RECOVERY_TABLE:
        prefix = "test_row_" + row.name.replace(" ", "_")
        assert any(name.startswith(prefix) for name in tests), f"no {prefix}* test"
    assert len(list(itertools.product(CopyRecordState, ChainState, TailState))) == 60


def test_recovery_keeps_the_commits_choice_of_attempts(partition: PartitionFixture) -> None:
    chosen = [transactional_batch(TXN, 2 * i) for i in range(3)]
    for i, batch in enumerate(chosen):
        partition.j.append(partition.name, TXN, batch, attempt=b"good")
        partition.j.append(
            partition.name, TXN, transactional_batch(TXN, 2 * i, value_bytes=33), attempt=b"zombie"
        )
    partition.j.mark_applying(partition.name, TXN, partition.log.log_end_offset, [b"good"])
    partition.log.append_all_as_leader(chosen[:2])  # a part of the copy of the chosen attempt
    _recover_and_check(partition, chosen, "prefix of whole batches", [body(plain_batch(0))])
