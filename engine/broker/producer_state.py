"""Idempotent producers: per partition, the last sequences each producer wrote.

A batch carries (producer id, generation, base sequence); its records take
sequences base .. base + count - 1. For each producer a partition keeps the
last ``DEDUPLICATION_WINDOW`` batches it accepted (as Kafka keeps five), so:

    case                                         answer
    producer id -1                               not idempotent: accept, no check
    unknown producer, or a newer generation      accept base 0 (sequences restart);
                                                 another base: OutOfOrderSequenceError
    older generation than known                  ProducerFencedError
    base == last sequence + 1                    accept
    same (base, count) as a remembered batch     duplicate: acknowledge with its offset, write nothing
    base <= last sequence, not remembered        DuplicateSequenceError (too old to answer exactly)
    base > last sequence + 1                     OutOfOrderSequenceError (a gap: a batch was lost)

Plain batches are checked against this table before they are appended to the
data log, and the table is rebuilt after a restart from the data log itself
(``observe`` every batch header after the newest snapshot, ``producer_snapshots``), so
a retry that crosses a broker crash is still recognised.

Transactional batches use ``SequenceTracker`` with the same rules per
(transaction, partition): the journal, not the data log, holds them.

Thread rule: guarded by the caller (the partition's writer lock).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection
from dataclasses import dataclass, field

from twinlog.engine.base.errors import (
    DuplicateSequenceError,
    OutOfOrderSequenceError,
    ProducerFencedError,
)
from twinlog.engine.records.batch_format import NO_PRODUCER_ID, BatchHeader

DEDUPLICATION_WINDOW = 5
FIRST_SEQUENCES = (0,)  # a producer's sequences start at 0 on each partition


@dataclass(frozen=True)
class SequenceCheck:
    """Outcome of checking a batch: write it, or acknowledge a duplicate with its old offset."""

    duplicate: bool
    base_offset: int = -1


ACCEPT = SequenceCheck(duplicate=False)


@dataclass
class ProducerSequences:
    producer_generation: int
    # (base sequence, record count, base offset) of the last batches, newest last
    recent: deque[tuple[int, int, int]] = field(
        default_factory=lambda: deque(maxlen=DEDUPLICATION_WINDOW)
    )
    last_timestamp_ms: int = -1

    @property
    def last_sequence(self) -> int:
        if not self.recent:
            return -1
        base, count, _ = self.recent[-1]
        return base + count - 1


class SequenceTracker:
    """The table above for one partition (or one transaction's partition)."""

    def __init__(self) -> None:
        self.producers: dict[int, ProducerSequences] = {}

    def check(
        self,
        header: BatchHeader,
        where: str,
        first_sequences: Collection[int] | None = FIRST_SEQUENCES,
    ) -> SequenceCheck:
        """Decide about a batch before writing it; raises for fenced, gap or stale duplicates.

        ``first_sequences``: what the producer's first batch here may carry (None: any).
        A Kafka producer's transaction counts on from the producer's earlier transactions
        on the partition, which this transaction's table does not hold: the partition
        passes 0 and the sequence that follows them when it knows it, None when not."""
        producer_id = header.producer_id
        if producer_id == NO_PRODUCER_ID or header.base_sequence < 0:
            return ACCEPT
        known = self.producers.get(producer_id)
        if known is None or header.producer_generation > known.producer_generation:
            if first_sequences is None or header.base_sequence in first_sequences:
                return ACCEPT
            base = header.base_sequence
            expected = " or ".join(str(sequence) for sequence in sorted(first_sequences))
            below = [sequence for sequence in first_sequences if sequence < base]
            missing = f"batches {max(below)}..{base - 1}" if below else "the batches before it"
            raise OutOfOrderSequenceError(
                f"producer {producer_id} generation {header.producer_generation} sent sequence "
                f"{base} as its first batch to {where}; it starts at {expected} there, so "
                f"{missing} never arrived. The producer must not skip failed batches; "
                "reinitialise it"
            )
        if header.producer_generation < known.producer_generation:
            raise ProducerFencedError(
                f"producer {producer_id} generation {header.producer_generation} is older than "
                f"generation {known.producer_generation} that wrote to {where}; close this producer"
            )
        base = header.base_sequence
        if base == known.last_sequence + 1:
            return ACCEPT
        for recent_base, recent_count, recent_offset in known.recent:
            if recent_base == base and recent_count == header.record_count:
                return SequenceCheck(duplicate=True, base_offset=recent_offset)
        if base <= known.last_sequence:
            raise DuplicateSequenceError(
                f"producer {producer_id} sent sequence {base} to {where}, already written (last "
                f"is {known.last_sequence}) and too old to answer with its offset; it was not "
                "written again"
            )
        raise OutOfOrderSequenceError(
            f"producer {producer_id} sent sequence {base} to {where}, expected "
            f"{known.last_sequence + 1}: batches {known.last_sequence + 1}..{base - 1} are missing. "
            "The producer must not skip failed batches; reinitialise it"
        )

    def observe(self, header: BatchHeader, base_offset: int) -> None:
        """Record a batch that was written (or found in the log at recovery)."""
        producer_id = header.producer_id
        if producer_id == NO_PRODUCER_ID or header.base_sequence < 0:
            return
        known = self.producers.get(producer_id)
        if known is None or header.producer_generation > known.producer_generation:
            known = self.producers[producer_id] = ProducerSequences(header.producer_generation)
        # last_offset_delta + 1, not record_count: log compaction drops records from a
        # batch but keeps its offsets (and so its sequences), and this table may be
        # rebuilt from a compacted log. For a producer's batch the two are equal.
        known.recent.append((header.base_sequence, header.last_offset_delta + 1, base_offset))
        known.last_timestamp_ms = max(known.last_timestamp_ms, header.max_timestamp_ms)
