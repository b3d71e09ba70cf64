"""Partition reassignments to and from their protobuf messages (``admin.proto``)."""

from __future__ import annotations

from collections.abc import Iterable

from twinlog.engine.broker.reassignments import (
    MoveResult,
    PartitionMove,
    Reassignment,
    ReplicaProgress,
)
from twinlog.rpc.generated.twinlog.v1 import admin_pb2, common_pb2
from twinlog.rpc.wire.errors import describe, error_from_proto


def moves_to_proto(moves: Iterable[PartitionMove]) -> list[admin_pb2.PartitionMove]:
    return [
        admin_pb2.PartitionMove(
            partition=common_pb2.TopicPartition(topic=m.topic, partition=m.partition),
            replicas=list(m.replicas),
        )
        for m in moves
    ]


def moves_from_proto(messages: Iterable[admin_pb2.PartitionMove]) -> list[PartitionMove]:
    return [
        PartitionMove(m.partition.topic, m.partition.partition, tuple(m.replicas)) for m in messages
    ]


def move_result_to_proto(result: MoveResult) -> admin_pb2.MoveResult:
    message = admin_pb2.MoveResult(
        partition=common_pb2.TopicPartition(topic=result.topic, partition=result.partition)
    )
    if result.error is not None:
        message.error.CopyFrom(describe(result.error).to_proto())
    return message


def move_result_from_proto(message: admin_pb2.MoveResult) -> MoveResult:
    error = error_from_proto(message.error) if message.HasField("error") else None
    return MoveResult(message.partition.topic, message.partition.partition, error)


def reassignment_to_proto(reassignment: Reassignment) -> admin_pb2.PartitionReassignment:
    r = reassignment
    return admin_pb2.PartitionReassignment(
        partition=common_pb2.TopicPartition(topic=r.topic, partition=r.partition),
        replicas=list(r.replicas),
        adding=list(r.adding),
        removing=list(r.removing),
        original=list(r.original),
        leader=r.leader,
        throttle_bytes_per_s=r.throttle_bytes_per_s,
        progress=[
            admin_pb2.ReplicaProgress(
                broker_id=p.broker_id,
                offsets_behind=p.offsets_behind,
                bytes_behind=p.bytes_behind,
                in_sync=p.in_sync,
            )
            for p in r.progress
        ],
    )


def reassignment_from_proto(message: admin_pb2.PartitionReassignment) -> Reassignment:
    return Reassignment(
        message.partition.topic,
        message.partition.partition,
        tuple(message.replicas),
        tuple(message.adding),
        tuple(message.removing),
        tuple(message.original),
        message.leader,
        message.throttle_bytes_per_s,
        tuple(
            ReplicaProgress(p.broker_id, p.offsets_behind, p.bytes_behind, p.in_sync)
            for p in message.progress
        ),
    )
