"""Produce: each partition's batch goes to ``broker.produce`` as the client built it.

A Kafka client's batch is already twinlog's format (RecordBatch v2), so it is passed on
as it is, byte for byte, whatever its codec (none, gzip, snappy, lz4, zstd): a Fetch
returns it as written, CRC and all. The broker
validates it (CRC, records, idempotent sequences of the producer id
and epoch InitProducerId gave) and appends it, or journals it in the producer's open
transaction when its transactional bit is set: the engine knows which transaction that
is, and takes Kafka's sequences, counted per partition for the whole epoch (offsets are
known only when the transaction is applied, so such a batch is answered base offset -1).

``acks``: 0 gets no answer at all (a refusal closes the connection, as Kafka does), 1 and -1 (all) are
answered once the broker returns, which on a single node is the same moment; a cluster
broker returns once the partition's in-sync replicas hold the batch, so 1 is answered as
-1 is. Any other value is refused INVALID_REQUIRED_ACKS. A cluster broker that does not
lead the partition refuses it NOT_LEADER_OR_FOLLOWER (LEADER_NOT_AVAILABLE when nobody
does): the client refreshes its metadata and sends it to the leader.

Versions 0-2 carry message formats v0/v1, which twinlog neither stores nor converts:
each partition is answered UNSUPPORTED_VERSION (an acks=0 one: the connection is closed),
with a log line.
"""

from __future__ import annotations

import logging
from typing import Any

from kafka.protocol.producer import ProduceRequest, ProduceResponse

from twinlog.engine.base.errors import TwinlogError
from twinlog.rpc.kafka.access import require
from twinlog.rpc.kafka.cluster import LeaderHint
from twinlog.rpc.kafka.context import KafkaContext
from twinlog.rpc.kafka.error_codes import (
    CORRUPT_MESSAGE,
    INVALID_REQUIRED_ACKS,
    NONE,
    UNSUPPORTED_VERSION,
)
from twinlog.rpc.kafka.leader_hints import LeaderHints
from twinlog.rpc.policy.auth import Operation

log = logging.getLogger("twinlog.kafka")

ACKS_ALLOWED = (0, 1, -1)
UNKNOWN_OFFSET = -1
RECORD_BATCH_V2_VERSION = 3  # older versions carry message formats v0/v1 only
NO_APPEND_TIME = -1  # the batch keeps its producer's timestamps (CreateTime)
LEADER_HINT_VERSION = 10  # a "not here" partition names its leader and where (KIP-951)

TopicAnswer = ProduceResponse.TopicProduceResponse
PartitionAnswer = TopicAnswer.PartitionProduceResponse


def _append(
    context: KafkaContext, topic: str, partition: int, records: bytes | None, hints: LeaderHints
) -> Any:
    message: str | None = None
    base_offset = UNKNOWN_OFFSET
    hint: LeaderHint | None = None
    if records is None:
        error_code, message = CORRUPT_MESSAGE, "a produce request without records"
    else:
        try:
            principal = context.connection.principal
            require(context.guard, principal, Operation.WRITE, (topic,))
            # Stored as written; the broker checks its records within its decompression
            # budget (a spent budget: REQUEST_TIMED_OUT, retried).
            batch = bytes(records)
            # a producer id only from a principal that may use it (the gRPC server's rule)
            context.access.require_batch(principal, batch)
            # A transactional batch names no transaction: the engine finds its producer's
            # open one (``unnamed_transactions``), and takes Kafka's sequence numbering.
            base_offset = context.broker.produce(topic, partition, batch).base_offset
            error_code = NONE
        except TwinlogError as error:
            error_code, hint = context.partition_refusal(
                error, ProduceRequest.API_KEY, topic, partition
            )
            message = str(error)
        if message is not None:
            # The client sees only a code (and, from v8, this message): say it here too.
            log.info("Kafka produce to %s-%d refused: %s", topic, partition, message)
    return PartitionAnswer(
        index=partition,
        error_code=error_code,
        base_offset=base_offset,
        log_append_time_ms=NO_APPEND_TIME,
        log_start_offset=UNKNOWN_OFFSET,
        record_errors=[],
        error_message=message,
        current_leader=hints.current_leader(PartitionAnswer.LeaderIdAndEpoch, hint, error_code),
    )


def handle_produce(
    request: ProduceRequest, version: int, context: KafkaContext
) -> ProduceResponse | None:
    if version < RECORD_BATCH_V2_VERSION:
        reason = (
            f"Produce v{version} carries message format v0/v1, which twinlog neither stores "
            "nor converts (its batches are RecordBatch v2: a client of Kafka 0.11 or later "
            "sends v3+)"
        )
        log.info("%s from %s: answered UNSUPPORTED_VERSION", reason, context.connection.peer)
        if request.acks == 0:
            context.connection.close_after_answer = reason
            return None
        return _refuse_all(request, version, UNSUPPORTED_VERSION, reason)
    if request.acks not in ACKS_ALLOWED:
        message = f"acks={request.acks}: use 0, 1 or -1 (all)"
        return _refuse_all(request, version, INVALID_REQUIRED_ACKS, message)
    hints = LeaderHints(enabled=version >= LEADER_HINT_VERSION)
    answers = [
        TopicAnswer(
            name=topic.name,
            partition_responses=[
                _append(context, topic.name, item.index, item.records, hints)
                for item in topic.partition_data
            ],
        )
        for topic in request.topic_data
    ]
    if request.acks == 0:
        refused = [
            f"{topic.name}-{item.index}: {item.error_message}"
            for topic in answers
            for item in topic.partition_responses
            if item.error_code != NONE
        ]
        if refused:
            # As Kafka: an acks=0 producer hears of a refusal only by losing its connection
            # (it then refreshes its metadata and reconnects).
            context.connection.close_after_answer = (
                f"a produce with acks=0 was refused ({'; '.join(refused)})"
            )
        return None
    return ProduceResponse(
        version=version,
        responses=answers,
        throttle_time_ms=0,
        node_endpoints=hints.node_endpoints(ProduceResponse.NodeEndpoint),
    )


def _refuse_all(request: ProduceRequest, version: int, code: int, message: str) -> ProduceResponse:
    answers = [
        TopicAnswer(
            name=topic.name,
            partition_responses=[
                PartitionAnswer(
                    index=item.index,
                    error_code=code,
                    base_offset=UNKNOWN_OFFSET,
                    error_message=message,
                )
                for item in topic.partition_data
            ],
        )
        for topic in request.topic_data
    ]
    return ProduceResponse(version=version, responses=answers, throttle_time_ms=0)
