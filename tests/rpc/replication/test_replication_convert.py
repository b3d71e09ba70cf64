"""The replica fetch's values survive protobuf, bytes on the wire included, field by field."""

from __future__ import annotations

from dataclasses import fields

import pytest

from twinlog.engine.base.types import TopicPartition
from twinlog.engine.log.leader_epochs import NO_EPOCH, EpochEnd
from twinlog.engine.replication.fetch_calls import (
    FetchedPartition,
    LogKind,
    ReplicaFetch,
    ReplicaFetchPartition,
)
from twinlog.rpc.generated.twinlog.v1 import replication_pb2
from twinlog.rpc.replication.convert import (
    fetch_from_proto,
    fetch_to_proto,
    response_from_proto,
    response_to_proto,
)

# Values unlike every default, so a field the encoder forgot cannot pass by accident.
FETCH = ReplicaFetch(
    replica_id=3,
    broker_epoch=(1 << 40) + 7,  # a zxid: wider than 32 bits
    partitions=(
        ReplicaFetchPartition(TopicPartition("orders", 0), 1_234, 5, 6),
        ReplicaFetchPartition(TopicPartition("orders", 0), 77, 5, 6, log=LogKind.JOURNAL),
        ReplicaFetchPartition(TopicPartition("__txn_journal", 7), 0, NO_EPOCH, 0),
    ),
    max_wait_ms=0,  # carried as given, not replaced by the default
    max_bytes=65_536,
)

ANSWERED = FetchedPartition(
    TopicPartition("orders", 0),
    records=b"\x00batches\xff" * 3,
    high_watermark=1_200,
    log_start_offset=10,
    log_end_offset=1_300,
)
DIVERGED = FetchedPartition(
    TopicPartition("orders", 1),
    high_watermark=5,
    log_end_offset=9,
    diverging=EpochEnd(4, 77),
    log=LogKind.JOURNAL,
)
DIVERGED_BEFORE_START = FetchedPartition(
    TopicPartition("orders", 2), diverging=EpochEnd(NO_EPOCH, 0)
)
REFUSED = FetchedPartition(
    TopicPartition("orders", 3),
    error="NotLeaderOrFollowerError",
    message="broker 2 does not lead orders-3 (leader epoch 9)",
)


def _through_bytes(
    message: replication_pb2.ReplicaFetchRequest,
) -> replication_pb2.ReplicaFetchRequest:
    return replication_pb2.ReplicaFetchRequest.FromString(message.SerializeToString())


def test_a_fetch_request_round_trips() -> None:
    decoded = fetch_from_proto(_through_bytes(fetch_to_proto(FETCH)))
    assert decoded == FETCH
    assert isinstance(decoded.partitions, tuple)
    assert all(type(item.topic_partition) is TopicPartition for item in decoded.partitions)


def test_a_plain_pair_is_accepted_as_a_topic_partition() -> None:
    fetch = ReplicaFetch(1, 2, (ReplicaFetchPartition(("t", 4), 0, 0, 0),))  # type: ignore[arg-type]
    assert fetch_from_proto(fetch_to_proto(fetch)).partitions[0].topic_partition == ("t", 4)


@pytest.mark.parametrize(
    "fetched",
    [ANSWERED, DIVERGED, DIVERGED_BEFORE_START, REFUSED, FetchedPartition(TopicPartition("e", 0))],
    ids=["records", "diverging", "diverging-before-start", "error", "empty"],
)
def test_each_kind_of_answer_round_trips(fetched: FetchedPartition) -> None:
    wire = response_to_proto([fetched]).SerializeToString()
    [decoded] = response_from_proto(replication_pb2.ReplicaFetchResponse.FromString(wire))
    assert decoded == fetched
    assert type(decoded.topic_partition) is TopicPartition
    if fetched.diverging is None:
        assert decoded.diverging is None
    else:
        assert type(decoded.diverging) is EpochEnd


def test_diverging_is_absent_on_the_wire_unless_set() -> None:
    # EpochEnd(0, 0) is a real answer; presence, not value, says "diverged".
    zero = FetchedPartition(TopicPartition("t", 0), diverging=EpochEnd(0, 0))
    response = response_to_proto([ANSWERED, zero])
    assert not response.partitions[0].HasField("diverging")
    assert response.partitions[1].HasField("diverging")
    assert response_from_proto(response)[1].diverging == EpochEnd(0, 0)


def test_a_response_keeps_the_order_of_its_partitions() -> None:
    answers = [REFUSED, ANSWERED, DIVERGED]
    assert response_from_proto(response_to_proto(answers)) == answers
    assert response_from_proto(response_to_proto([])) == []


def test_every_dataclass_field_has_a_wire_field() -> None:
    # A field added to fetch_calls.py must be added to replication.proto and convert.py.
    pairs = [
        (ReplicaFetch, replication_pb2.ReplicaFetchRequest),
        (ReplicaFetchPartition, replication_pb2.ReplicaFetchPartition),
        (FetchedPartition, replication_pb2.FetchedPartition),
    ]
    for dataclass_type, message_type in pairs:
        names = {field.name for field in fields(dataclass_type)}
        wire = set(message_type.DESCRIPTOR.fields_by_name)
        assert names == wire, (dataclass_type.__name__, names ^ wire)
