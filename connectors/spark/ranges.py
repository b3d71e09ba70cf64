"""Offset ranges: what one Spark task reads, and how ranges are split and rate-limited.

An ``OffsetRange`` is [from_offset, until_offset) of one topic-partition; it is
the ``InputPartition`` a task receives, pickled. Both rules below follow
Spark's Kafka source, so a job tuned for Kafka behaves the same here:

    minPartitions         when there are fewer ranges than minPartitions, each
                          range is cut into parts in proportion to its share of
                          all offsets (at least one part, halves rounded up),
                          evenly (KafkaOffsetRangeCalculator)
    maxOffsetsPerTrigger  a micro-batch takes at most this many offsets; each
                          partition gets a share in proportion to its backlog
                          (KafkaMicroBatchStream.rateLimit)
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from pyspark.sql.datasource import InputPartition

from twinlog.engine.base.types import TopicPartition


class OffsetRange(InputPartition):
    """[from_offset, until_offset) of one partition. Picklable; read by one task."""

    def __init__(self, topic: str, partition: int, from_offset: int, until_offset: int) -> None:
        assert 0 <= from_offset <= until_offset, (from_offset, until_offset)
        self.topic = topic
        self.partition = partition
        self.from_offset = from_offset
        self.until_offset = until_offset

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def size(self) -> int:
        return self.until_offset - self.from_offset

    def __repr__(self) -> str:
        return (
            f"OffsetRange({self.topic}-{self.partition} [{self.from_offset}, {self.until_offset}))"
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OffsetRange) and (
            self.topic,
            self.partition,
            self.from_offset,
            self.until_offset,
        ) == (other.topic, other.partition, other.from_offset, other.until_offset)

    def __hash__(self) -> int:
        return hash((self.topic, self.partition, self.from_offset, self.until_offset))


def ranges_between(
    start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int]
) -> list[OffsetRange]:
    """A range per partition with offsets to read, in topic-partition order."""
    return [
        OffsetRange(p.topic, p.partition, start[p], end[p])
        for p in sorted(end)
        if p in start and end[p] > start[p]
    ]


def _part_count(size: int, total: int, min_partitions: int) -> int:
    # Java's Math.round, as Spark's Kafka source uses: halves round up. Python's round()
    # rounds halves to even, which cut [5, 5] with minPartitions=5 into 2 + 2 = 4 tasks.
    return max(math.floor(size / total * min_partitions + 0.5), 1)


def split_for_min_partitions(
    ranges: list[OffsetRange], min_partitions: int | None
) -> list[OffsetRange]:
    """Spark's KafkaOffsetRangeCalculator.getRanges: about ``min_partitions`` ranges.

    Ranges whose share is one part stay whole and are taken out of the sums, so the
    large ranges share what is left of ``min_partitions`` among themselves; each
    large range is cut into near-equal parts (the last ones take the remainder).
    Empty ranges are dropped.
    """
    ranges = [r for r in ranges if r.size > 0]
    if min_partitions is None or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    whole = {r for r in ranges if _part_count(r.size, total, min_partitions) == 1}
    split_total = total - sum(r.size for r in whole)
    split_min_partitions = max(min_partitions - len(whole), 1)
    split: list[OffsetRange] = []
    for offset_range in ranges:
        if offset_range in whole:
            parts = 1
        else:
            parts = _part_count(offset_range.size, split_total, split_min_partitions)
        remaining = offset_range.size
        low = offset_range.from_offset
        for part in range(parts):
            this_part = remaining // (parts - part)
            remaining -= this_part
            high = min(low + this_part, offset_range.until_offset)
            if high > low:  # a range smaller than its part count leaves some parts empty
                split.append(OffsetRange(offset_range.topic, offset_range.partition, low, high))
            low = high
    return split


def rate_limit(
    start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], max_offsets: int
) -> dict[TopicPartition, int]:
    """End offsets that take at most ``max_offsets`` offsets past ``start`` in all, by backlog.

    A partition whose share rounds below one offset still gets one (ceil), as Kafka does,
    so a busy partition can never starve a quiet one forever.
    """
    backlog = {p: max(0, latest[p] - start.get(p, latest[p])) for p in latest}
    total = sum(backlog.values())
    if total <= max_offsets:
        return dict(latest)
    limited = {}
    for partition, end in latest.items():
        begin = start.get(partition, end)
        share = max_offsets * backlog[partition] / total
        step = math.ceil(share) if share < 1 else math.floor(share)
        limited[partition] = min(end, begin + step)
    return limited
