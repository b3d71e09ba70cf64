"""Choosing a partition: Kafka's murmur2 for keyed records, sticky for keyless ones.

A keyed record goes to ``murmur2(key) & 0x7fffffff % partitions``, the same
partition the Java client picks for the same key and count. Keyless records stick
to one partition until its batch is sent, then move on (Kafka's sticky
partitioner, KIP-480): fuller batches than round robin per record.
"""

from __future__ import annotations

import random

MURMUR2_SEED = 0x9747B28C
MURMUR2_M = 0x5BD1E995
MASK_32 = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2), as a signed 32-bit int."""
    length = len(data)
    h = (MURMUR2_SEED ^ length) & MASK_32
    quads = length // 4
    for index in range(quads):
        k = int.from_bytes(data[4 * index : 4 * index + 4], "little")
        k = (k * MURMUR2_M) & MASK_32
        k ^= k >> 24
        k = (k * MURMUR2_M) & MASK_32
        h = (h * MURMUR2_M) & MASK_32
        h ^= k
    tail = data[4 * quads :]
    if len(tail) >= 3:
        h ^= tail[2] << 16
    if len(tail) >= 2:
        h ^= tail[1] << 8
    if tail:
        h ^= tail[0]
        h = (h * MURMUR2_M) & MASK_32
    h ^= h >> 13
    h = (h * MURMUR2_M) & MASK_32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % partitions


class StickyPartitioner:
    """Thread rule: the caller holds the producer's lock."""

    def __init__(self) -> None:
        self._sticky: dict[str, int] = {}
        # Its own generator: a producer's sender thread never draws from the ``random``
        # module's shared state, which the application (or Hypothesis) may manage.
        self._random = random.Random()

    def partition(self, topic: str, key: bytes | None, partitions: int) -> int:
        if key is not None:
            return partition_for_key(key, partitions)
        current = self._sticky.get(topic)
        if current is None or current >= partitions:
            current = self._sticky[topic] = self._random.randrange(partitions)  # as Kafka's
        return current

    def batch_closed(self, topic: str, partition: int, partitions: int) -> None:
        """A keyless batch on ``partition`` is full or sent: stick to the next partition."""
        if self._sticky.get(topic) == partition:
            self._sticky[topic] = (partition + 1) % partitions
