"""The replica fetch's values to protobuf messages and back (no behaviour, no I/O).

The one encoder and decoder between ``engine/replication/fetch_calls.py`` and
``twinlog.v1.Replication``: the leader's service and the follower's fetcher both use it,
so a field added to a dataclass is added here once. Every field travels as it is
(``max_wait_ms=0`` stays 0); ``diverging`` is the one optional field.
"""

from __future__ import annotations

from collections.abc import Iterable

from twinlog.engine.base.types import TopicPartition
from twinlog.engine.log.leader_epochs import EpochEnd
from twinlog.engine.replication.fetch_calls import (
    FetchedPartition,
    LogKind,
    ReplicaFetch,
    ReplicaFetchPartition,
)
from twinlog.rpc.generated.twinlog.v1 import common_pb2, replication_pb2


def tp_to_proto(tp: TopicPartition) -> common_pb2.TopicPartition:
    topic, partition = tp  # a plain (topic, partition) pair is accepted too
    return common_pb2.TopicPartition(topic=topic, partition=partition)


def tp_from_proto(message: common_pb2.TopicPartition) -> TopicPartition:
    return TopicPartition(message.topic, message.partition)


_LOG_TO_PROTO = {
    LogKind.DATA: replication_pb2.REPLICATED_LOG_DATA,
    LogKind.JOURNAL: replication_pb2.REPLICATED_LOG_JOURNAL,
}
_LOG_FROM_PROTO: dict[int, LogKind] = {value: key for key, value in _LOG_TO_PROTO.items()}


def _log_from_proto(value: int) -> LogKind:
    try:
        return _LOG_FROM_PROTO[value]
    except KeyError:
        # A newer broker's log kind: refused per partition by the caller's lookup, never
        # taken for the data log.
        raise ValueError(f"unknown replicated log {value}") from None


def fetch_to_proto(fetch: ReplicaFetch) -> replication_pb2.ReplicaFetchRequest:
    return replication_pb2.ReplicaFetchRequest(
        replica_id=fetch.replica_id,
        broker_epoch=fetch.broker_epoch,
        partitions=[
            replication_pb2.ReplicaFetchPartition(
                topic_partition=tp_to_proto(item.topic_partition),
                fetch_offset=item.fetch_offset,
                last_fetched_epoch=item.last_fetched_epoch,
                current_leader_epoch=item.current_leader_epoch,
                log=_LOG_TO_PROTO[item.log],
                max_bytes=item.max_bytes,
            )
            for item in fetch.partitions
        ],
        max_wait_ms=fetch.max_wait_ms,
        max_bytes=fetch.max_bytes,
    )


def fetch_from_proto(message: replication_pb2.ReplicaFetchRequest) -> ReplicaFetch:
    return ReplicaFetch(
        replica_id=message.replica_id,
        broker_epoch=message.broker_epoch,
        partitions=tuple(
            ReplicaFetchPartition(
                topic_partition=tp_from_proto(item.topic_partition),
                fetch_offset=item.fetch_offset,
                last_fetched_epoch=item.last_fetched_epoch,
                current_leader_epoch=item.current_leader_epoch,
                log=_log_from_proto(item.log),
                max_bytes=max(item.max_bytes, 0),
            )
            for item in message.partitions
        ),
        max_wait_ms=message.max_wait_ms,
        max_bytes=message.max_bytes,
    )


def fetched_to_proto(fetched: FetchedPartition) -> replication_pb2.FetchedPartition:
    message = replication_pb2.FetchedPartition(
        topic_partition=tp_to_proto(fetched.topic_partition),
        records=bytes(fetched.records),
        high_watermark=fetched.high_watermark,
        log_start_offset=fetched.log_start_offset,
        log_end_offset=fetched.log_end_offset,
        error=fetched.error,
        message=fetched.message,
        log=_LOG_TO_PROTO[fetched.log],
    )
    if fetched.diverging is not None:
        epoch, end_offset = fetched.diverging
        message.diverging.CopyFrom(replication_pb2.EpochEnd(epoch=epoch, end_offset=end_offset))
    return message


def fetched_from_proto(message: replication_pb2.FetchedPartition) -> FetchedPartition:
    diverging = (
        EpochEnd(message.diverging.epoch, message.diverging.end_offset)
        if message.HasField("diverging")
        else None
    )
    return FetchedPartition(
        topic_partition=tp_from_proto(message.topic_partition),
        records=message.records,
        high_watermark=message.high_watermark,
        log_start_offset=message.log_start_offset,
        log_end_offset=message.log_end_offset,
        diverging=diverging,
        error=message.error,
        message=message.message,
        log=_log_from_proto(message.log),
    )


def response_to_proto(
    fetched: Iterable[FetchedPartition],
) -> replication_pb2.ReplicaFetchResponse:
    return replication_pb2.ReplicaFetchResponse(
        partitions=[fetched_to_proto(item) for item in fetched]
    )


def response_from_proto(message: replication_pb2.ReplicaFetchResponse) -> list[FetchedPartition]:
    return [fetched_from_proto(item) for item in message.partitions]
