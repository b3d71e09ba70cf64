"""Pipelined transactions: a producer begins its next transaction once the previous one is
prepared; completions stay in commit order per producer, and one completes behind an open
transaction at most; recovery rebuilds the same picture."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from coordinator_support import A0, B1, RecordingApplier, make

from twinlog.engine.base.errors import ConcurrentTransactionsError, InvalidTxnStateError
from twinlog.engine.base.types import TransactionState
from twinlog.engine.transactions import coordinator as coordinator_module
from twinlog.engine.transactions.coordinator import Coordinator
from twinlog.engine.transactions.id_allocator import IdAllocator
from twinlog.journal.txn_journal import TxnJournal


def test_begin_after_a_prepared_commit_does_not_wait_for_its_apply(tmp_path: Path) -> None:
    applier = RecordingApplier()
    applier.gate.clear()  # APPLY is held: the first transaction stays PREPARE_COMMIT
    coordinator, _ = make(tmp_path, applier)
    producer = coordinator.init_producer("app", 60_000)
    ids = producer.producer_id, producer.producer_generation
    first = coordinator.begin(*ids)
    coordinator.add_partitions(first, *ids, [A0])
    coordinator.commit(first, *ids)
    began_s = time.monotonic()
    second = coordinator.begin(*ids)
    assert time.monotonic() - began_s < 1.0  # no wait for the held apply
    prepared = coordinator.transaction(first)
    assert prepared is not None and prepared.state is TransactionState.PREPARE_COMMIT
    with pytest.raises(InvalidTxnStateError, match="already has transaction"):
        coordinator.begin(*ids)  # the second is open: one open transaction per producer
    coordinator.add_partitions(second, *ids, [A0, B1])
    coordinator.commit(second, *ids)
    applier.gate.set()
    done = coordinator.transaction(second)
    assert done is None or coordinator.wait_complete(done, 5)
    # Per partition, the copies came in commit order.
    assert [c for c in applier.calls if c[1] == A0] == [
        ("commit", A0, first),
        ("commit", A0, second),
    ]
    coordinator.close()


def test_a_third_begin_waits_for_the_first_to_complete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(coordinator_module, "COMPLETION_WAIT_MS", 300)
    applier = RecordingApplier()
    applier.gate.clear()
    coordinator, _ = make(tmp_path, applier)
    producer = coordinator.init_producer("app", 60_000)
    ids = producer.producer_id, producer.producer_generation
    for _ in range(2):
        transaction_id = coordinator.begin(*ids)
        coordinator.add_partitions(transaction_id, *ids, [A0])
        coordinator.commit(transaction_id, *ids)
    with pytest.raises(ConcurrentTransactionsError, match="still being completed"):
        coordinator.begin(*ids)  # the first is still applying: at most one behind
    threading.Timer(0.1, applier.gate.set).start()
    third = coordinator.begin(*ids)
    assert coordinator.transaction(third) is not None
    coordinator.close()


def test_a_failing_apply_holds_back_its_producers_later_transaction_only(
    tmp_path: Path,
) -> None:
    second_queued = threading.Event()
    first_of = [-1]

    class FailingUntilTheSecondIsQueued(RecordingApplier):
        def apply_commit(self, request):  # type: ignore[no-untyped-def]
            if request.transaction_id == first_of[0] and not second_queued.is_set():
                raise OSError("disk hiccup")  # retried after 10 ms, 20 ms, ...
            super().apply_commit(request)

    applier = FailingUntilTheSecondIsQueued()
    coordinator, _ = make(tmp_path, applier)
    app = coordinator.init_producer("app", 60_000)
    other = coordinator.init_producer("other", 60_000)
    app_ids = app.producer_id, app.producer_generation
    other_ids = other.producer_id, other.producer_generation
    first = first_of[0] = coordinator.begin(*app_ids)
    coordinator.add_partitions(first, *app_ids, [A0])
    coordinator.commit(first, *app_ids)  # its apply fails until the second is queued
    second = coordinator.begin(*app_ids)
    coordinator.add_partitions(second, *app_ids, [A0])
    coordinator.commit(second, *app_ids)
    time.sleep(0.05)  # the second waits in the queue while the first is retried
    second_queued.set()
    unrelated = coordinator.begin(*other_ids)
    coordinator.add_partitions(unrelated, *other_ids, [B1])
    coordinator.commit(unrelated, *other_ids)
    for transaction_id in (first, second, unrelated):
        txn = coordinator.transaction(transaction_id)
        assert txn is None or coordinator.wait_complete(txn, 5)
    on_a0 = [c[2] for c in applier.calls if c[1] == A0]
    assert on_a0 == [first, second]  # the retried first before the second, never after
    coordinator.close()


def test_recovery_rebuilds_a_prepared_transaction_behind_an_open_one(tmp_path: Path) -> None:
    applier = RecordingApplier()
    applier.gate.clear()
    coordinator, _ = make(tmp_path, applier)
    producer = coordinator.init_producer("app", 60_000)
    ids = producer.producer_id, producer.producer_generation
    first = coordinator.begin(*ids)
    coordinator.add_partitions(first, *ids, [A0])
    coordinator.commit(first, *ids)
    second = coordinator.begin(*ids)
    coordinator.add_partitions(second, *ids, [A0])
    coordinator.abandon()  # crash: the first prepared, the second open

    second_applier = RecordingApplier()
    second_applier.gate.clear()
    recovered = Coordinator(
        0, TxnJournal(tmp_path / "txn" / "0"), IdAllocator(tmp_path / "ids"), second_applier
    )
    recovered.recover()
    entry = recovered._memory.producers["app"]
    assert (entry.completing, entry.transaction_id) == (first, second)
    recovered.start()
    recovered.commit(second, *ids)
    second_applier.gate.set()
    for transaction_id in (first, second):
        txn = recovered.transaction(transaction_id)
        assert txn is None or recovered.wait_complete(txn, 5)
    assert [c[2] for c in second_applier.calls] == [first, second]
    assert (entry.completing, entry.transaction_id) == (None, None)
    applier.gate.set()
    recovered.close()
