"""Offsets of the logs, as a consumer looks them up: ``list_offset`` (one partition's
earliest or latest offset, or its offset for a time; ``Consumer.beginning_offsets``,
``end_offsets``, ``seek_to_*`` and ``consumer_positions`` call it) and ``offsets_for_times``
(``Consumer.offsets_for_times``: the first record at or after a time, per partition).

Functions of the consumer's broker, run on the thread that calls them; each lookup retries
within ``timeout_ms``, and ``list_offsets`` and ``offsets_for_times`` end all of theirs
within it.

The broker answers ListOffset for a timestamp with the offset of the first record whose
timestamp is at or after it, or the log end when there is none. Kafka's answer also has
that record's timestamp (and None where there is no record), so the record is read: one
small fetch per partition that has one.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from twinlog.engine.base.types import TopicPartition
from twinlog.engine.records.batch_reader import iter_batches
from twinlog.rpc.client.call_deadline import deadline_at
from twinlog.rpc.client.retry import RetryPolicy, call_with_retry
from twinlog.rpc.wire.broker_api import BrokerApi

RECORD_READ_BYTES = 64 * 1024  # the batch holding the record; grown when one is larger


@dataclass(frozen=True)
class OffsetAndTimestamp:
    offset: int
    timestamp: int  # ms, the record's own


def list_offset(
    broker: BrokerApi,
    topic_partition: TopicPartition,
    spec: str | int,
    retry: RetryPolicy,
    timeout_ms: int,
    what: str,
) -> int:
    """The partition's offset for ``spec`` ("earliest", "latest", or a timestamp in ms);
    ``what`` names the lookup in a timeout's error."""
    return call_with_retry(
        retry,
        functools.partial(
            broker.list_offset, topic_partition.topic, topic_partition.partition, spec
        ),
        what,
        timeout_ms=timeout_ms,
    )


def list_offsets(
    broker: BrokerApi,
    partitions: list[TopicPartition],
    spec: str,
    retry: RetryPolicy,
    timeout_ms: int,
) -> dict[TopicPartition, int]:
    """Each partition's offset for ``spec``; all of them within ``timeout_ms``."""
    with deadline_at(time.monotonic() + timeout_ms / 1000):
        return {
            tp: list_offset(broker, tp, spec, retry, timeout_ms, f"{spec} offset of {tp}")
            for tp in partitions
        }


def offsets_for_times(
    broker: BrokerApi, timestamps: Mapping[Any, int], retry: RetryPolicy, timeout_ms: int
) -> dict[TopicPartition, OffsetAndTimestamp | None]:
    """For each partition, the first record at or after its time, all of them within
    ``timeout_ms``."""
    with deadline_at(time.monotonic() + timeout_ms / 1000):
        return _offsets_for_times(broker, timestamps, retry, timeout_ms)


def _offsets_for_times(
    broker: BrokerApi, timestamps: Mapping[Any, int], retry: RetryPolicy, timeout_ms: int
) -> dict[TopicPartition, OffsetAndTimestamp | None]:
    found: dict[TopicPartition, OffsetAndTimestamp | None] = {}
    for key, timestamp_ms in timestamps.items():
        topic_partition = TopicPartition(*key)
        offset, end = (
            list_offset(
                broker,
                topic_partition,
                spec,
                retry,
                timeout_ms,
                f"offset of {topic_partition} for {spec}",
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
