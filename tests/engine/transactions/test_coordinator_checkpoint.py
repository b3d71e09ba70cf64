"""A coordinator recovering from its checkpoint records: the producer table they hold, the
INIT_PRODUCER records replay skips and the ones it must still apply, several parts, a crash
between the records and the pointer, and a pointer whose records are gone."""

from __future__ import annotations

from pathlib import Path

import pytest
from coordinator_support import RecordingApplier

from twinlog.engine.base import failpoints
from twinlog.engine.base.errors import CorruptJournalError, ProducerFencedError
from twinlog.engine.transactions.coordinator import Coordinator
from twinlog.engine.transactions.coordinator_replay import CoordinatorMemory
from twinlog.engine.transactions.id_allocator import LocalIdSource
from twinlog.journal.txn_checkpoint_pointer import CheckpointPointer
from twinlog.journal.txn_journal import TxnJournal
from twinlog.journal.txn_records import Begin, CheckpointPart, InitProducer, ProducerSnapshot


def open_coordinator(tmp_path: Path, part_bytes_max: int = 1 << 18) -> tuple[Coordinator, int]:
    journal = TxnJournal(tmp_path / "txn" / "0", checkpoint_part_bytes_max=part_bytes_max)
    coordinator = Coordinator(0, journal, LocalIdSource(tmp_path / "ids"), RecordingApplier())
    replayed = coordinator.recover()
    coordinator.start()
    return coordinator, replayed


def test_a_table_in_several_parts_keeps_every_generation(tmp_path: Path) -> None:
    coordinator, _ = open_coordinator(tmp_path, part_bytes_max=200)
    names = [f"producer-{n:03d}" for n in range(30)]
    for name in names:
        coordinator.init_producer(name, 60_000)
        coordinator.init_producer(name, 60_000)  # generation 1
    checkpoint = coordinator.checkpoint()
    parts = [
        record
        for offset, record in coordinator.journal.replay(checkpoint.checkpoint_offset)
        if isinstance(record, CheckpointPart)
    ]
    assert len(parts) > 3 and parts[0].parts == len(parts)
    coordinator.close()

    recovered, replayed = open_coordinator(tmp_path)
    assert replayed == len(parts)  # nothing but the checkpoint follows its replay offset
    for name in names:
        assert recovered.init_producer(name, 60_000).producer_generation == 2
    recovered.close()


def test_an_init_producer_after_the_checkpoint_still_applies(tmp_path: Path) -> None:
    coordinator, _ = open_coordinator(tmp_path)
    old = coordinator.init_producer("app", 60_000)
    coordinator.checkpoint()
    newer = coordinator.init_producer("app", 60_000)
    fresh = coordinator.init_producer("fresh", 60_000)
    coordinator.close()

    recovered, _ = open_coordinator(tmp_path)
    with pytest.raises(ProducerFencedError):
        recovered.begin(old.producer_id, old.producer_generation)
    recovered.begin(newer.producer_id, newer.producer_generation)
    recovered.begin(fresh.producer_id, fresh.producer_generation)
    recovered.close()


def test_init_producer_records_before_the_checkpoint_are_taken_from_its_table(
    tmp_path: Path,
) -> None:
    """Between replay_from_offset and the checkpoint, the table is the truth: replay skips
    those INIT_PRODUCER records (here the table says generation 5, the record 3)."""
    journal = TxnJournal(tmp_path)
    begin_offset = journal.append(Begin(0, 256, "open", 0, 0, 60_000, 0))
    journal.append(InitProducer(0, "app", 512, 3, 60_000))
    table = (ProducerSnapshot("open", 0, 0, 60_000), ProducerSnapshot("app", 512, 5, 60_000))
    journal.write_checkpoint(0, begin_offset, table)
    journal.append(InitProducer(0, "later", 768, 0, 60_000))
    journal.close()

    memory = CoordinatorMemory()
    reopened = TxnJournal(tmp_path)
    assert memory.replay(reopened) == 4  # BEGIN, INIT_PRODUCER, CHECKPOINT, INIT_PRODUCER
    assert memory.producers["app"].producer_generation == 5
    assert memory.producers["later"].producer_id == 768  # after the checkpoint: applied
    assert list(memory.transactions) == [256]  # replay started at the open BEGIN
    reopened.close()


def test_a_crash_between_the_records_and_the_pointer_keeps_the_old_checkpoint(
    tmp_path: Path, disarmed: None
) -> None:
    coordinator, _ = open_coordinator(tmp_path)
    identity = coordinator.init_producer("app", 60_000)
    first = coordinator.checkpoint()
    coordinator.init_producer("app", 60_000)
    failpoints.arm("txn_journal.before_checkpoint_pointer")
    with pytest.raises(failpoints.FailpointError):
        coordinator.checkpoint()
    assert coordinator.journal.pointers.read() == CheckpointPointer(
        first.checkpoint_offset, first.replay_from_offset
    )
    coordinator.close()

    recovered, _ = open_coordinator(tmp_path)
    assert recovered.init_producer("app", 60_000).producer_generation == 2
    assert identity.producer_generation == 0
    recovered.close()


def test_a_pointer_to_lost_records_stops_recovery(tmp_path: Path) -> None:
    coordinator, _ = open_coordinator(tmp_path)
    coordinator.init_producer("app", 60_000)
    checkpoint = coordinator.checkpoint()
    coordinator.close()
    journal_dir = tmp_path / "txn" / "0"
    TxnJournal(journal_dir).pointers.write(
        CheckpointPointer(checkpoint.checkpoint_offset + 5, checkpoint.replay_from_offset)
    )
    journal = TxnJournal(journal_dir)
    stopped = Coordinator(0, journal, LocalIdSource(tmp_path / "ids"), RecordingApplier())
    try:
        with pytest.raises(CorruptJournalError, match="The journal lost records"):
            stopped.recover()
    finally:
        journal.close()
