"""Which old segments retention deletes: whole segments, oldest first, never the active one.

As in Kafka, two rules each pick a run of the oldest segments, and the
longer run is deleted:

* by age: a segment goes when its newest batch timestamp (its largest max
  timestamp; the file's mtime if no batch has one) is more than
  ``retention_ms`` before now. The run stops at the first younger segment, so
  an out-of-order timestamp never makes a hole in the log.
* by size: the oldest segments go while the log, without them, still holds at
  least ``retention_bytes``.

The log's owner may bound both (``count_segments_below``): the broker keeps
every segment holding a batch of a copy not yet recorded as APPLIED, which
the copier's recovery must find in the log to finish the commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from twinlog.engine.log.config import UNLIMITED, LogConfig


class RetainedSegment(Protocol):
    size_bytes: int

    def largest_timestamp_ms(self) -> int: ...


def count_segments_to_delete(
    sealed_segments: Sequence[RetainedSegment], log_bytes: int, now_ms: int, config: LogConfig
) -> int:
    """How many of the oldest ``sealed_segments`` (the active one excluded) to delete."""
    by_age = 0
    if config.retention_ms != UNLIMITED:
        for segment in sealed_segments:
            if now_ms - segment.largest_timestamp_ms() <= config.retention_ms:
                break
            by_age += 1
    by_size = 0
    if config.retention_bytes != UNLIMITED:
        excess_bytes = log_bytes - config.retention_bytes
        for segment in sealed_segments:
            if excess_bytes - segment.size_bytes < 0:
                break
            excess_bytes -= segment.size_bytes
            by_size += 1
    return max(by_age, by_size)


def count_segments_below(next_base_offsets: Sequence[int], protected_from_offset: int) -> int:
    """How many of the oldest segments hold only offsets below ``protected_from_offset``.

    ``next_base_offsets[n]`` is where segment ``n`` ends: the base offset of the one
    after it.
    """
    count = 0
    for end_offset in next_base_offsets:
        if end_offset > protected_from_offset:
            break
        count += 1
    return count
