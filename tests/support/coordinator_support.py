"""A transaction coordinator on a real journal with a recording applier (a small fake of
the partition leaders): shared by the coordinator's tests and the broker's."""

from __future__ import annotations

import threading
from pathlib import Path

from twinlog.engine.base.types import TopicPartition
from twinlog.engine.transactions.coordinator import Coordinator
from twinlog.engine.transactions.id_allocator import IdAllocator
from twinlog.engine.transactions.partition_calls import (
    ApplyAbort,
    ApplyCommit,
    CountEntries,
    EntryCount,
)
from twinlog.journal.txn_journal import TxnJournal

A0 = TopicPartition("a", 0)
B1 = TopicPartition("b", 1)
OFFSETS = TopicPartition("__consumer_offsets", 0)


class RecordingApplier:
    """Records apply calls; can be held back to keep a transaction in PREPARE_*."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, TopicPartition, int]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.entries: dict[TopicPartition, int] = {}  # journaled entries per partition (else 1)
        self.journaled: dict[TopicPartition, int] = {}  # what the last apply_commit was told

    def leader_epoch(self, topic_partition: TopicPartition) -> int:
        return 0

    def count_entries(self, request: CountEntries) -> EntryCount:
        return EntryCount(self.entries.get(request.topic_partition, 1))

    def apply_commit(self, request: ApplyCommit) -> None:
        self.gate.wait()
        self.calls.append(("commit", request.topic_partition, request.transaction_id))
        self.attempts = request.attempts
        self.journaled[request.topic_partition] = request.entry_count

    def apply_abort(self, request: ApplyAbort) -> None:
        self.gate.wait()
        self.calls.append(("abort", request.topic_partition, request.transaction_id))


def make(
    tmp_path: Path,
    applier: RecordingApplier | None = None,
    adoption_window_ms: int | None = None,
) -> tuple[Coordinator, RecordingApplier]:
    applier = applier or RecordingApplier()
    coordinator = Coordinator(
        0,
        TxnJournal(tmp_path / "txn" / "0"),
        IdAllocator(tmp_path / "ids"),
        applier,
        adoption_window_ms=adoption_window_ms,
    )
    coordinator.recover()
    coordinator.start()
    return coordinator, applier
