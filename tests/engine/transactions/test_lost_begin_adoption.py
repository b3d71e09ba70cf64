"""A BEGIN answered before it was durable and lost with its coordinator's journal tail (a
crash, or a leadership moved from a live coordinator) is taken back by the next
coordinator when the transaction first reaches it: the producer's sends and commit go on.
Only an id that can be such a BEGIN is taken back (this coordinator's, above its journal,
below what it hands out, newer than the producer's last transaction, within the window),
and until the window passes the published low watermark stays at or below it."""

from __future__ import annotations

from pathlib import Path

import pytest
from coordinator_support import A0, B1, RecordingApplier, make

from twinlog.engine.base.errors import InvalidTxnStateError, UnknownTransactionError
from twinlog.engine.base.types import ProducerIdentity, TransactionState
from twinlog.engine.transactions.coordinator import Coordinator
from twinlog.engine.transactions.id_allocator import IdAllocator
from twinlog.engine.transactions.partition_calls import (
    PARTITION_BITS,
    CallEpochs,
    RegisterPartition,
)


def lost_begin(tmp_path: Path) -> tuple[ProducerIdentity, int, int]:
    """A producer with one committed transaction, then an id its coordinator handed out
    (as a BEGIN answered) whose record never reached the journal; the coordinator is gone.
    (producer, committed id, lost id)."""
    coordinator, _ = make(tmp_path)
    identity = coordinator.init_producer("app", 60_000)
    committed = coordinator.begin(identity.producer_id, identity.producer_generation)
    coordinator.commit(
        committed, identity.producer_id, identity.producer_generation, wait_for_applied=True
    )
    coordinator.close()
    # The id source is the journal's neighbour: the next BEGIN's id, taken as begin takes
    # it, its record lost (never written here).
    lost = (IdAllocator(tmp_path / "ids").next("transaction_id") << PARTITION_BITS) | 0
    return identity, committed, lost


def register(coordinator: Coordinator, identity: ProducerIdentity, transaction_id: int) -> None:
    coordinator.register_partition(
        RegisterPartition(
            transaction_id,
            A0,
            identity.producer_id,
            identity.producer_generation,
            CallEpochs(0, 0, 0),
        )
    )


def test_the_next_coordinator_takes_a_lost_begin_back_and_commits_it(tmp_path: Path) -> None:
    identity, _, lost = lost_begin(tmp_path)
    coordinator, applier = make(tmp_path)  # the next coordinator: a fresh, higher block
    assert coordinator.published_low_watermark() <= lost  # nothing of it may be purged
    register(coordinator, identity, lost)  # the partition's first batch of it
    coordinator.add_partitions(lost, identity.producer_id, identity.producer_generation, [B1])
    txn = coordinator.transaction(lost)
    assert txn is not None and txn.state is TransactionState.ONGOING
    coordinator.commit(lost, identity.producer_id, identity.producer_generation, True)
    assert ("commit", A0, lost) in applier.calls and ("commit", B1, lost) in applier.calls
    # The producer's next transaction gets a new id, above the adopted one.
    after = coordinator.begin(identity.producer_id, identity.producer_generation)
    assert after > lost
    coordinator.close()
    recovered, _ = make(tmp_path, RecordingApplier())  # the adoption was journaled
    with pytest.raises(InvalidTxnStateError, match="COMMITTED"):
        recovered.abort(lost, identity.producer_id, identity.producer_generation)
    recovered.close()


def test_an_id_that_cannot_be_a_lost_begin_stays_unknown(tmp_path: Path) -> None:
    identity, _, lost = lost_begin(tmp_path)
    coordinator, _ = make(tmp_path)
    not_ours = lost | 1  # another coordinator partition's
    not_handed_out = coordinator.begin(identity.producer_id, identity.producer_generation) + (
        1000 << PARTITION_BITS
    )
    for refused in (not_ours, not_handed_out):
        with pytest.raises(UnknownTransactionError, match="not known"):
            register(coordinator, identity, refused)
    coordinator.close()


def test_an_old_transaction_of_the_producer_is_not_begun_again(tmp_path: Path) -> None:
    identity, _, lost = lost_begin(tmp_path)
    coordinator, _ = make(tmp_path)
    open_one = coordinator.begin(identity.producer_id, identity.producer_generation)
    # The lost one is older than the transaction the producer has open: not its BEGIN.
    with pytest.raises(UnknownTransactionError):
        register(coordinator, identity, lost)
    coordinator.abort(open_one, identity.producer_id, identity.producer_generation, True)
    with pytest.raises(UnknownTransactionError):  # and older than its last one now
        register(coordinator, identity, lost)
    coordinator.close()


def test_after_the_window_a_lost_begin_is_unknown_and_the_watermark_moves_on(
    tmp_path: Path,
) -> None:
    identity, _, lost = lost_begin(tmp_path)
    coordinator, _ = make(tmp_path, adoption_window_ms=0)  # a window that has passed
    assert coordinator.published_low_watermark() > lost
    with pytest.raises(UnknownTransactionError, match="not known"):
        register(coordinator, identity, lost)
    coordinator.close()


def test_a_journal_whose_tail_was_cut_at_open_takes_nothing_back(tmp_path: Path) -> None:
    # A torn or damaged tail may have held durable records: the lost BEGIN's batches may be
    # journaled, and an adoption would commit without them.
    identity, _, lost = lost_begin(tmp_path)
    [segment] = sorted((tmp_path / "txn" / "0").glob("*.log"))[-1:]
    with segment.open("ab") as tail:
        tail.write(b"\x00\x00\x00\x00\x00\x00\x00\x07torn")
    coordinator, _ = make(tmp_path)
    assert coordinator.journal.cut_at_open
    with pytest.raises(UnknownTransactionError, match="not known"):
        register(coordinator, identity, lost)
    coordinator.close()
