"""``Consumer.offsets_for_times``: the first record at or after a time, per partition.

The broker answers ListOffset for a timestamp with the offset of the first record whose
timestamp is at or after it, or the log end when there is none. Kafka's answer also has
that record's timestamp (and None where there is no record), so the record is read: one
small fetch per partition that has one.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from twinlog.engine.base.types import TopicPartition
from twinlog.engine.records.batch_reader import iter_batches
from twinlog.rpc.client.retry import RetryPolicy, call_with_retry
from twinlog.rpc.wire.broker_api import BrokerApi

RECORD_READ_BYTES = 64 * 1024  # the batch holding the record; grown when one is larger


@dataclass(frozen=True)
class OffsetAndTimestamp:
    offset: int
    timestamp: int  # ms, the record's own


def offsets_for_times(
    broker: BrokerApi, timestamps: Mapping[Any, int], retry: RetryPolicy, timeout_ms: int
) -> dict[TopicPartition, OffsetAndTimestamp | None]:
    found: dict[TopicPartition, OffsetAndTimestamp | None] = {}
    for key, timestamp_ms in timestamps.items():
        topic_partition = TopicPartition(*key)
        topic, partition = topic_partition
        offset, end = (
            call_with_retry(
                retry,
                functools.partial(broker.list_offset, topic, partition, spec),
                f"offset of {topic_partition} for {spec}",
                timeout_ms=timeout_ms,
            )
            for spec in (int(timestamp_ms), "latest")
        )
        found[topic_partition] = (
            None
            if offset >= end
            else _record_at(broker, topic_partition, offset, retry, timeout_ms)
        )
    return found


def _record_at(
    broker: BrokerApi,
    topic_partition: TopicPartition,
    offset: int,
    retry: RetryPolicy,
    timeout_ms: int,
) -> OffsetAndTimestamp | None:
    max_bytes = RECORD_READ_BYTES
    for _ in range(12):  # up to 64 KiB << 11 = 128 MiB, past any batch the broker takes
        result = call_with_retry(
            retry,
            functools.partial(
                broker.fetch, topic_partition.topic, topic_partition.partition, offset, max_bytes
            ),
            f"reading {topic_partition} at {offset}",
            timeout_ms=timeout_ms,
        )
        for batch in iter_batches(result.records, allow_partial_tail=True):
            for record in batch.records():
                if record.offset >= offset:
                    return OffsetAndTimestamp(record.offset, record.timestamp_ms)
        if not result.records:
            return None
        max_bytes *= 2  # only a partial batch came back
    return None
