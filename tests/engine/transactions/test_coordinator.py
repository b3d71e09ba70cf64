"""The coordinator against a real transaction journal, with a recording applier (a small fake).

The state table is tested exhaustively: a real coordinator is driven into each
state and sent each event; the outcome must be the table's (a transition with
its journal record, a no-op writing nothing, or InvalidTxnStateError naming
both the transaction and its state).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from coordinator_support import A0, B1, OFFSETS, RecordingApplier, make
from metadata_fakes import InMemoryPointer

from twinlog.engine.base.errors import (
    InvalidTxnStateError,
    ProducerFencedError,
    UnknownProducerIdError,
    UnknownTransactionError,
)
from twinlog.engine.base.types import TransactionState
from twinlog.engine.transactions.coordinator import Coordinator
from twinlog.engine.transactions.id_allocator import IdAllocator
from twinlog.engine.transactions.partition_calls import (
    CallEpochs,
    RegisterPartition,
)
from twinlog.engine.transactions.transaction_metadata import TransactionMetadata
from twinlog.engine.transactions.txn_state import TRANSITIONS, Outcome, TransactionEvent, next_state
from twinlog.journal.txn_journal import TxnJournal
from twinlog.journal.txn_records import Aborted, Committed, PrepareAbort, PrepareCommit


def journal_types(coordinator: Coordinator) -> list[str]:
    return [type(record).__name__ for _, record in coordinator.journal.replay(0)]


def test_commit_path_journals_prepare_apply_committed(tmp_path: Path) -> None:
    coordinator, applier = make(tmp_path)
    identity = coordinator.init_producer("app", 60_000)
    txn_id = coordinator.begin(identity.producer_id, identity.producer_generation)
    coordinator.add_partitions(txn_id, identity.producer_id, identity.producer_generation, [A0, B1])
    coordinator.commit(
        txn_id, identity.producer_id, identity.producer_generation, wait_for_applied=True
    )
    assert sorted(applier.calls) == [("commit", A0, txn_id), ("commit", B1, txn_id)]
    assert journal_types(coordinator) == [
        "InitProducer",
        "Begin",
        "AddPartitions",
        "PrepareCommit",
        "Committed",
    ]
    assert coordinator.list_transactions() == []
    coordinator.close()


def test_prepare_commit_is_durable_before_apply(tmp_path: Path) -> None:
    applier = RecordingApplier()
    applier.gate.clear()  # partitions are slow: the producer's answer must not wait for them
    coordinator, _ = make(tmp_path, applier)
    identity = coordinator.init_producer("app", 60_000)
    txn_id = coordinator.begin(identity.producer_id, identity.producer_generation)
    coordinator.add_partitions(txn_id, identity.producer_id, identity.producer_generation, [A0])
    coordinator.commit(txn_id, identity.producer_id, identity.producer_generation)
    assert journal_types(coordinator)[-1] == "PrepareCommit"
    assert applier.calls == []
    applier.gate.set()
    txn = coordinator.transaction(txn_id)
    if txn is not None:
        assert coordinator.wait_complete(txn, 5)
    assert applier.calls == [("commit", A0, txn_id)]
    coordinator.close()


def test_retried_begin_returns_the_same_transaction(tmp_path: Path) -> None:
    coordinator, _ = make(tmp_path)
    identity = coordinator.init_producer("app", 60_000)
    first = coordinator.begin(identity.producer_id, identity.producer_generation, request_id=7)
    again = coordinator.begin(identity.producer_id, identity.producer_generation, request_id=7)
    assert first == again
    with pytest.raises(InvalidTxnStateError, match="already has transaction"):
        coordinator.begin(identity.producer_id, identity.producer_generation, request_id=8)
    coordinator.close()


def test_fencing_bumps_generation_and_aborts_the_old_transaction(tmp_path: Path) -> None:
    coordinator, applier = make(tmp_path)
    old = coordinator.init_producer("app", 60_000)
    txn_id = coordinator.begin(old.producer_id, old.producer_generation)
    coordinator.add_partitions(txn_id, old.producer_id, old.producer_generation, [A0])
    new = coordinator.init_producer("app", 60_000)
    assert new.producer_id == old.producer_id
    assert new.producer_generation == old.producer_generation + 1
    assert applier.calls == [("abort", A0, txn_id)]
    with pytest.raises(ProducerFencedError, match="newer producer"):
        coordinator.commit(txn_id, old.producer_id, old.producer_generation)
    with pytest.raises(ProducerFencedError):
        coordinator.begin(old.producer_id, old.producer_generation)
    coordinator.begin(new.producer_id, new.producer_generation)
    coordinator.close()


def test_unknown_producer_and_transaction(tmp_path: Path) -> None:
    coordinator, _ = make(tmp_path)
    with pytest.raises(UnknownProducerIdError, match="init_transactions"):
        coordinator.begin(12345, 0)
    identity = coordinator.init_producer("app", 60_000)
    with pytest.raises(UnknownTransactionError):
        coordinator.commit(999_999, identity.producer_id, identity.producer_generation)
    coordinator.close()


def test_timeout_aborts_and_later_requests_name_the_state(tmp_path: Path) -> None:
    coordinator, applier = make(tmp_path)
    identity = coordinator.init_producer("app", 1_000)
    txn_id = coordinator.begin(identity.producer_id, identity.producer_generation)
    coordinator.add_partitions(txn_id, identity.producer_id, identity.producer_generation, [A0])
    txn = coordinator.transaction(txn_id)
    assert txn is not None
    assert coordinator.expire(now=txn.started_ms + 500) == []
    assert coordinator.expire(now=txn.started_ms + 1_001) == [txn_id]
    assert coordinator.wait_complete(txn, 5)
    assert applier.calls == [("abort", A0, txn_id)]
    with pytest.raises(InvalidTxnStateError, match=f"transaction {txn_id}: it is ABORTED"):
        coordinator.commit(txn_id, identity.producer_id, identity.producer_generation)
    with pytest.raises(InvalidTxnStateError, match="ABORTED"):
        coordinator.register_partition(
            RegisterPartition(
                txn_id, A0, identity.producer_id, identity.producer_generation, CallEpochs(0, 0, 0)
            )
        )
    coordinator.close()


def test_recovery_keeps_ongoing_open_and_completes_prepared(tmp_path: Path) -> None:
    applier = RecordingApplier()
    applier.gate.clear()  # crash with both decisions prepared but not applied
    coordinator, _ = make(tmp_path, applier)
    ids = []
    for name in ("ongoing", "committing", "aborting"):
        identity = coordinator.init_producer(name, 60_000)
        txn_id = coordinator.begin(identity.producer_id, identity.producer_generation)
        coordinator.add_partitions(txn_id, identity.producer_id, identity.producer_generation, [A0])
        ids.append((identity, txn_id))
    (_, ongoing), (committing_producer, committing), (aborting_producer, aborting) = ids
    coordinator.commit(
        committing, committing_producer.producer_id, committing_producer.producer_generation
    )
    coordinator.abort(
        aborting, aborting_producer.producer_id, aborting_producer.producer_generation
    )
    # "crash": drop the coordinator without completing (its completer is blocked on the gate)
    coordinator.abandon()

    second = RecordingApplier()
    recovered = Coordinator(
        0, TxnJournal(tmp_path / "txn" / "0"), IdAllocator(tmp_path / "ids"), second
    )
    recovered.recover()
    recovered.start()
    for txn_id in (committing, aborting):
        txn = recovered.transaction(txn_id)
        assert txn is None or recovered.wait_complete(txn, 5)
    assert sorted(second.calls) == sorted([("commit", A0, committing), ("abort", A0, aborting)])
    described = recovered.list_transactions()
    assert [(t.transaction_id, t.state) for t in described] == [(ongoing, TransactionState.ONGOING)]
    ongoing_producer = ids[0][0]
    recovered.commit(
        ongoing,
        ongoing_producer.producer_id,
        ongoing_producer.producer_generation,
        wait_for_applied=True,
    )
    assert ("commit", A0, ongoing) in second.calls
    applier.gate.set()
    recovered.close()


def test_ids_are_unique_across_restarts(tmp_path: Path) -> None:
    seen = set()
    for _ in range(3):
        coordinator, _ = make(tmp_path)
        identity = coordinator.init_producer("app", 60_000)
        for _ in range(3):
            txn_id = coordinator.begin(identity.producer_id, identity.producer_generation)
            assert txn_id not in seen
            seen.add(txn_id)
            coordinator.abort(
                txn_id, identity.producer_id, identity.producer_generation, wait_for_applied=True
            )
        coordinator.close()


def test_checkpoint_bounds_replay_and_keeps_generations(tmp_path: Path) -> None:
    coordinator, _ = make(tmp_path)
    identity = coordinator.init_producer("app", 60_000)
    for _ in range(5):
        txn_id = coordinator.begin(identity.producer_id, identity.producer_generation)
        coordinator.commit(
            txn_id, identity.producer_id, identity.producer_generation, wait_for_applied=True
        )
    open_txn = coordinator.begin(identity.producer_id, identity.producer_generation)
    checkpoint = coordinator.checkpoint()
    assert checkpoint.replay_from_offset == coordinator.transaction(open_txn).begin_offset  # type: ignore[union-attr]
    coordinator.close()

    recovered, _ = make(tmp_path)
    assert [t.transaction_id for t in recovered.list_transactions()] == [open_txn]
    again = recovered.init_producer("app", 60_000)
    assert again.producer_generation == identity.producer_generation + 1  # not reset to 0
    recovered.close()


def test_checkpoint_deletes_whole_segments_before_it_and_replay_starts_there(
    tmp_path: Path,
) -> None:
    """Segments wholly before the earliest in-flight BEGIN go; the one holding it stays; a
    restart replays only the records from the checkpoint on (recovery time grows with the
    journal since the checkpoint, not with all history)."""
    journal_dir = tmp_path / "txn" / "0"

    def open_coordinator() -> tuple[Coordinator, int]:
        coordinator = Coordinator(
            0, TxnJournal(journal_dir, segment_bytes=400), IdAllocator(tmp_path / "ids"), applier
        )
        replayed = coordinator.recover()
        coordinator.start()
        return coordinator, replayed

    applier = RecordingApplier()
    coordinator, _ = open_coordinator()
    identity = coordinator.init_producer("app", 60_000)
    pid, generation = identity.producer_id, identity.producer_generation
    for _ in range(20):
        txn_id = coordinator.begin(pid, generation)
        coordinator.add_partitions(txn_id, pid, generation, [A0])
        coordinator.commit(txn_id, pid, generation, wait_for_applied=True)
    open_txn = coordinator.begin(pid, generation)
    segments_before = sorted(journal_dir.glob("*.log"))
    assert len(segments_before) > 5  # 20 transactions of 4 records, 400-byte segments
    begin_offset = coordinator.transaction(open_txn).begin_offset  # type: ignore[union-attr]
    checkpoint = coordinator.checkpoint()
    assert checkpoint.replay_from_offset == begin_offset
    end_offset = coordinator.journal.log.log_end_offset
    segments_after = sorted(journal_dir.glob("*.log"))
    kept_bases = [int(path.stem) for path in segments_after]
    assert len(segments_after) < len(segments_before)
    assert kept_bases[0] <= begin_offset  # the segment holding the BEGIN is kept
    assert len(kept_bases) == 1 or kept_bases[1] > begin_offset  # and nothing before it
    coordinator.close()

    recovered, replayed = open_coordinator()
    try:
        assert replayed == end_offset - begin_offset  # only what follows
        assert [t.transaction_id for t in recovered.list_transactions()] == [open_txn]
        recovered.commit(open_txn, pid, generation, wait_for_applied=True)
    finally:
        recovered.close()


# --- the table, exhaustively, on a real coordinator ------------------------------------------


def _drive_to(
    coordinator: Coordinator, applier: RecordingApplier, state: TransactionState
) -> tuple[TransactionMetadata, int, int]:
    """A transaction in ``state`` (kept even once complete); returns (txn, producer id, generation)."""
    name = f"p-{state.value}-{id(applier)}"
    identity = coordinator.init_producer(name, 60_000)
    pid, gen = identity.producer_id, identity.producer_generation
    txn_id = coordinator.begin(pid, gen)
    coordinator.add_partitions(txn_id, pid, gen, [A0])
    txn = coordinator.transaction(txn_id)
    assert txn is not None
    if state is TransactionState.ONGOING:
        return txn, pid, gen
    if state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
        applier.gate.clear()
    if state in (TransactionState.PREPARE_COMMIT, TransactionState.COMMITTED):
        coordinator.commit(txn_id, pid, gen, wait_for_applied=state is TransactionState.COMMITTED)
    else:
        coordinator.abort(txn_id, pid, gen, wait_for_applied=state is TransactionState.ABORTED)
    assert txn.state is state
    return txn, pid, gen


def _fire(
    coordinator: Coordinator, event: TransactionEvent, txn: TransactionMetadata, pid: int, gen: int
) -> None:
    txn_id = txn.transaction_id
    if event is TransactionEvent.ADD_PARTITIONS:
        coordinator.add_partitions(txn_id, pid, gen, [B1])
    elif event is TransactionEvent.ADD_OFFSETS:
        registration = RegisterPartition(txn_id, OFFSETS, pid, gen, CallEpochs(0, 0, 0), "group")
        coordinator.register_partition(registration)
    elif event is TransactionEvent.SEND:
        coordinator.register_partition(RegisterPartition(txn_id, A0, pid, gen, CallEpochs(0, 0, 0)))
    elif event is TransactionEvent.COMMIT:
        coordinator.commit(txn_id, pid, gen)
    elif event is TransactionEvent.ABORT:
        coordinator.abort(txn_id, pid, gen)
    elif event is TransactionEvent.TIMEOUT:
        txn.started_ms -= 10 * txn.timeout_ms
        coordinator.expire()
    elif event in (TransactionEvent.COMPLETE_COMMIT, TransactionEvent.COMPLETE_ABORT):
        next_state(txn_id, txn.state, event)  # the completer's own check
        coordinator.complete(txn)


EXPECTED_RECORD = {
    TransactionState.PREPARE_COMMIT: PrepareCommit,
    TransactionState.PREPARE_ABORT: PrepareAbort,
    TransactionState.COMMITTED: Committed,
    TransactionState.ABORTED: Aborted,
}


@pytest.mark.parametrize(
    ("event", "state"),
    sorted(TRANSITIONS, key=lambda k: (k[0].value, k[1].value)),
    ids=lambda v: v.value,
)
def test_every_state_and_event_follows_the_table(
    tmp_path: Path, event: TransactionEvent, state: TransactionState
) -> None:
    coordinator, applier = make(tmp_path)
    txn, pid, gen = _drive_to(coordinator, applier, state)
    before = list(coordinator.journal.replay(0))
    expected = TRANSITIONS[(event, state)]
    txn_id = txn.transaction_id
    if expected is Outcome.ERROR:
        with pytest.raises(InvalidTxnStateError) as raised:
            _fire(coordinator, event, txn, pid, gen)
        assert str(txn_id) in str(raised.value) and state.value in str(raised.value)
        assert list(coordinator.journal.replay(0)) == before, "a refused event wrote to the journal"
    else:
        if event in (TransactionEvent.COMPLETE_COMMIT, TransactionEvent.COMPLETE_ABORT):
            applier.gate.set()  # let the partitions answer the completion
        _fire(coordinator, event, txn, pid, gen)
        after = [record for _, record in coordinator.journal.replay(0)][len(before) :]
        if expected is Outcome.NO_OP:
            assert after == [], f"{event.value} in {state.value} should write nothing"
        elif expected is TransactionState.ONGOING:
            assert all(type(r).__name__ in ("AddPartitions", "AddOffsets") for r in after)
        else:
            assert isinstance(after[0], EXPECTED_RECORD[expected])
    applier.gate.set()
    coordinator.close()


def test_commit_with_attempts_is_journaled_and_survives_recovery(tmp_path: Path) -> None:
    applier = RecordingApplier()
    applier.gate.clear()
    coordinator, _ = make(tmp_path, applier)
    identity = coordinator.init_producer("spark-job", 60_000)
    txn_id = coordinator.begin(identity.producer_id, identity.producer_generation)
    coordinator.add_partitions(txn_id, identity.producer_id, identity.producer_generation, [A0])
    coordinator.commit(
        txn_id, identity.producer_id, identity.producer_generation, attempts=["3.1", "0.0", "3.1"]
    )
    with pytest.raises(InvalidTxnStateError, match="same attempts"):
        coordinator.commit(
            txn_id, identity.producer_id, identity.producer_generation, attempts=["9.0"]
        )
    coordinator.abandon()  # crash before APPLY
    second = RecordingApplier()
    recovered = Coordinator(
        0, TxnJournal(tmp_path / "txn" / "0"), IdAllocator(tmp_path / "ids"), second
    )
    recovered.recover()
    recovered.start()
    txn = recovered.transaction(txn_id)
    assert txn is None or recovered.wait_complete(txn, 5)
    assert second.calls == [("commit", A0, txn_id)] and second.attempts == ("0.0", "3.1")
    applier.gate.set()
    recovered.close()


def test_a_checkpoint_publishes_the_coordinators_low_watermark(tmp_path: Path) -> None:
    """The pointer carries the smallest transaction id in flight, or the next id the
    coordinator would hand out: every id in flight then or begun later is at or above it
    (what a cluster broker purges below, CLUSTER.md §3.7)."""
    pointers = InMemoryPointer()
    coordinator = Coordinator(
        3, TxnJournal(tmp_path / "txn", pointers=pointers), IdAllocator(tmp_path / "ids"),
        RecordingApplier(), adoption_window_ms=0,  # no lost BEGIN to wait for (its own test)
    )  # fmt: skip
    coordinator.recover()
    coordinator.start()
    opened = []
    for transactional_id in ("first", "second"):
        identity = coordinator.init_producer(transactional_id, 60_000)
        transaction_id = coordinator.begin(identity.producer_id, identity.producer_generation)
        opened.append((identity, transaction_id))

    def published() -> int | None:
        coordinator.checkpoint()
        pointer = pointers.read()
        assert pointer is not None
        return pointer.low_watermark

    assert published() == opened[0][1]
    for identity, transaction_id in opened:
        coordinator.commit(
            transaction_id,
            identity.producer_id,
            identity.producer_generation,
            wait_for_applied=True,
        )
        mark = published()
        assert mark is not None and mark > transaction_id
    identity = opened[0][0]
    later = coordinator.begin(identity.producer_id, identity.producer_generation)
    assert later >= mark and later & 0xFF == 3
    coordinator.close()
