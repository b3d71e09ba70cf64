"""DescribeProducers (KIP-664): the producers that wrote to each partition named, as
``kafka-transactions.sh describe-producers`` and admin clients ask a partition's leader
(any replica answers, as Kafka's does), onto the broker's ``describe_producers``.

Per partition, as Kafka says it: TOPIC_AUTHORIZATION_FAILED without READ on the topic
(checked first, so an unreadable topic's existence is not told), UNKNOWN_TOPIC_OR_PARTITION
for a partition no broker has, NOT_LEADER_OR_FOLLOWER (or LEADER_NOT_AVAILABLE) on a
cluster broker holding no replica of it. With an ACL file, a producer is listed only to a
principal that may describe its transactional id, as the gRPC door lists them.

twinlog keeps an open transaction's records in the journal until its commit applies them,
so none of them is below the partition's high watermark: that is the start offset told for
a producer with a transaction open (Kafka's first offset of it, below which a
read_committed consumer reads), -1 for one without. No transaction marker carries a
coordinator epoch here, so it is -1 (Kafka's value before any marker).
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import DescribeProducersRequest, DescribeProducersResponse

from twinlog.engine.base.errors import TwinlogError
from twinlog.engine.base.types import ProducerDescription
from twinlog.rpc.kafka.access import ResourceDenied, require
from twinlog.rpc.kafka.context import KafkaContext
from twinlog.rpc.kafka.error_codes import NONE, code_of
from twinlog.rpc.policy.auth import Operation

NO_OFFSET = -1
NO_COORDINATOR_EPOCH = -1
NO_OPEN_TRANSACTION = -1  # ProducerDescription.current_transaction_id without one
LOWEST_OFFSET = 0  # a start offset known to be at or below the transaction's records

Answered = DescribeProducersResponse.TopicResponse
PartitionAnswer = Answered.PartitionResponse
ProducerState = PartitionAnswer.ProducerState


def handle_describe_producers(
    request: DescribeProducersRequest, version: int, context: KafkaContext
) -> DescribeProducersResponse:
    topics: list[Any] = []
    for asked in request.topics:
        denied = _denied(context, asked.name)
        partitions = [
            _partition(context, asked.name, index, denied) for index in asked.partition_indexes
        ]
        topics.append(Answered(name=asked.name, partitions=partitions))
    return DescribeProducersResponse(version=version, throttle_time_ms=0, topics=topics)


def _denied(context: KafkaContext, topic: str) -> ResourceDenied | None:
    """The refusal of READ on ``topic`` (audited once per topic named), or None."""
    try:
        require(context.guard, context.connection.principal, Operation.READ, (topic,))
    except ResourceDenied as denial:
        return denial
    return None


def _partition(context: KafkaContext, topic: str, index: int, denied: ResourceDenied | None) -> Any:
    if denied is not None:
        return _refused(index, code_of(denied), str(denied))
    api_key = DescribeProducersRequest.API_KEY
    try:
        producers = context.broker.describe_producers(topic, index)
    except TwinlogError as error:
        return _refused(index, context.partition_code(error, api_key, topic, index), str(error))
    shown = context.access.visible(context.connection.principal, producers)
    start_offset = _open_transaction_start(context, topic, index) if _any_open(shown) else NO_OFFSET
    return PartitionAnswer(
        partition_index=index,
        error_code=NONE,
        error_message=None,
        active_producers=[_state(producer, start_offset) for producer in shown],
    )


def _any_open(producers: list[ProducerDescription]) -> bool:
    return any(p.current_transaction_id != NO_OPEN_TRANSACTION for p in producers)


def _open_transaction_start(context: KafkaContext, topic: str, index: int) -> int:
    """The high watermark: an open transaction's records all land at or above it."""
    try:
        return context.broker.list_offset(topic, index, "latest")
    except TwinlogError:
        # A follower serves no offsets to clients; 0 still says "a transaction is open".
        return LOWEST_OFFSET


def _state(producer: ProducerDescription, start_offset: int) -> Any:
    is_open = producer.current_transaction_id != NO_OPEN_TRANSACTION
    return ProducerState(
        producer_id=producer.producer_id,
        producer_epoch=producer.producer_generation,
        last_sequence=producer.last_sequence,
        last_timestamp=producer.last_timestamp_ms,
        coordinator_epoch=NO_COORDINATOR_EPOCH,
        current_txn_start_offset=start_offset if is_open else NO_OFFSET,
    )


def _refused(index: int, code: int, message: str) -> Any:
    return PartitionAnswer(
        partition_index=index, error_code=code, error_message=message, active_producers=[]
    )
