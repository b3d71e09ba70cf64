"""Per-partition sequence numbers of a producer's batches (the broker's duplicate check).

Records are numbered per partition from 0: for an idempotent producer over its whole
producer id, for a transactional one within each transaction. A batch takes its
numbers once, when it is first built, and keeps them across retries, so the broker
drops a repeat.

Thread rule: every method is called with the producer's lock held.
"""

from __future__ import annotations

from twinlog.engine.base.types import TopicPartition


class SequenceNumbers:
    def __init__(self) -> None:
        self._next: dict[TopicPartition, int] = {}

    def take(self, topic_partition: TopicPartition, record_count: int) -> int:
        """The base sequence of a new batch of ``record_count`` records."""
        base_sequence = self._next.get(topic_partition, 0)
        self._next[topic_partition] = base_sequence + record_count
        return base_sequence

    def give_back(
        self, topic_partition: TopicPartition, base_sequence: int, record_count: int
    ) -> None:
        """A batch was refused before it was written: its numbers can be used again.

        Only the latest batch's: an earlier one's would leave a gap behind a later batch.
        """
        if self._next.get(topic_partition) == base_sequence + record_count:
            self._next[topic_partition] = base_sequence

    def restart(self) -> None:
        """Number from 0 again: a new transaction, or a new producer id."""
        self._next.clear()
