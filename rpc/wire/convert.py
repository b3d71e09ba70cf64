"""Engine value types to protobuf messages and back (no behaviour, no I/O)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from twinlog.engine.base.errors import BrokerUnavailableError
from twinlog.engine.base.types import (
    PartitionDescription,
    ProducerDescription,
    TopicDescription,
    TopicPartition,
    TransactionDescription,
    TransactionState,
)
from twinlog.engine.broker.leader_elections import ElectionOutcome, ElectionResult
from twinlog.engine.records.batch_format import NO_PARTITION_LEADER_EPOCH, NO_TRANSACTION_ID
from twinlog.rpc.generated.twinlog.v1 import admin_pb2, common_pb2, consume_pb2, produce_pb2

# ProduceRequest.transaction_id: proto3's default 0 means "not given" (no id is 0: ids
# start at 1 << 8), so a client that does not know the field sends none.
WIRE_NO_TRANSACTION_ID = 0


def wire_transaction_id(transaction_id: int) -> int:
    return WIRE_NO_TRANSACTION_ID if transaction_id == NO_TRANSACTION_ID else transaction_id


def transaction_id_of_wire(value: int) -> int:
    return NO_TRANSACTION_ID if value == WIRE_NO_TRANSACTION_ID else value


def leader_epoch_of_wire(request: produce_pb2.ProduceRequest | consume_pb2.FetchRequest) -> int:
    """A request's ``current_leader_epoch``, NO_PARTITION_LEADER_EPOCH when it sent none (a
    client from before the field, or one without metadata: not checked)."""
    if request.HasField("current_leader_epoch"):
        return request.current_leader_epoch
    return NO_PARTITION_LEADER_EPOCH


def with_leader_epoch(
    request: produce_pb2.ProduceRequest | consume_pb2.FetchRequest, current_leader_epoch: int
) -> None:
    """Set ``current_leader_epoch`` unless it is NO_PARTITION_LEADER_EPOCH (left unset)."""
    if current_leader_epoch != NO_PARTITION_LEADER_EPOCH:
        request.current_leader_epoch = current_leader_epoch


STATE_TO_PROTO: dict[TransactionState, int] = {
    TransactionState.ONGOING: admin_pb2.TRANSACTION_STATE_ONGOING,
    TransactionState.PREPARE_COMMIT: admin_pb2.TRANSACTION_STATE_PREPARE_COMMIT,
    TransactionState.PREPARE_ABORT: admin_pb2.TRANSACTION_STATE_PREPARE_ABORT,
    TransactionState.COMMITTED: admin_pb2.TRANSACTION_STATE_COMMITTED,
    TransactionState.ABORTED: admin_pb2.TRANSACTION_STATE_ABORTED,
}
STATE_FROM_PROTO: dict[int, TransactionState] = {
    value: key for key, value in STATE_TO_PROTO.items()
}


def topic_partitions_to_proto(
    partitions: Iterable[tuple[str, int]],
) -> list[common_pb2.TopicPartition]:
    return [common_pb2.TopicPartition(topic=topic, partition=p) for topic, p in partitions]


def topic_partitions_from_proto(
    partitions: Iterable[common_pb2.TopicPartition],
) -> list[TopicPartition]:
    return [TopicPartition(item.topic, item.partition) for item in partitions]


def offsets_to_proto(offsets: Mapping[TopicPartition, int]) -> list[common_pb2.PartitionOffset]:
    return [
        common_pb2.PartitionOffset(topic=topic, partition=partition, offset=offset)
        for (topic, partition), offset in offsets.items()
    ]


def offsets_from_proto(offsets: Iterable[common_pb2.PartitionOffset]) -> dict[TopicPartition, int]:
    return {TopicPartition(item.topic, item.partition): item.offset for item in offsets}


def counts_to_proto(counts: Mapping[TopicPartition, int]) -> list[produce_pb2.PartitionCount]:
    return [
        produce_pb2.PartitionCount(
            partition=common_pb2.TopicPartition(topic=topic, partition=partition), count=count
        )
        for (topic, partition), count in counts.items()
    ]


def counts_from_proto(counts: Iterable[produce_pb2.PartitionCount]) -> dict[TopicPartition, int]:
    return {
        TopicPartition(item.partition.topic, item.partition.partition): item.count
        for item in counts
    }


def topic_to_proto(description: TopicDescription) -> admin_pb2.TopicDescription:
    return admin_pb2.TopicDescription(
        name=description.name,
        partitions=[
            admin_pb2.PartitionDescription(
                partition=item.partition,
                log_start_offset=item.log_start_offset,
                log_end_offset=item.log_end_offset,
                journal_entries_pending=item.journal_entries_pending,
                journal_bytes_pending=item.journal_bytes_pending,
            )
            for item in description.partitions
        ],
        config={str(key): str(value) for key, value in description.config.items()},
        topic_id=description.topic_id,
    )


def topic_from_proto(message: admin_pb2.TopicDescription) -> TopicDescription:
    return TopicDescription(
        name=message.name,
        partitions=tuple(
            PartitionDescription(
                partition=item.partition,
                log_start_offset=item.log_start_offset,
                log_end_offset=item.log_end_offset,
                journal_entries_pending=item.journal_entries_pending,
                journal_bytes_pending=item.journal_bytes_pending,
            )
            for item in message.partitions
        ),
        config=dict(message.config),
        topic_id=message.topic_id,
    )


def transaction_to_proto(description: TransactionDescription) -> admin_pb2.TransactionDescription:
    return admin_pb2.TransactionDescription(
        transaction_id=description.transaction_id,
        transactional_id=description.transactional_id,
        producer_id=description.producer_id,
        producer_generation=description.producer_generation,
        state=STATE_TO_PROTO[description.state],  # type: ignore[arg-type]
        partitions=topic_partitions_to_proto(description.partitions),
        groups=list(description.groups),
        started_ms=description.started_ms,
        timeout_ms=description.timeout_ms,
    )


def transaction_from_proto(message: admin_pb2.TransactionDescription) -> TransactionDescription:
    return TransactionDescription(
        transaction_id=message.transaction_id,
        transactional_id=message.transactional_id,
        producer_id=message.producer_id,
        producer_generation=message.producer_generation,
        state=STATE_FROM_PROTO[message.state],
        partitions=tuple(topic_partitions_from_proto(message.partitions)),
        groups=tuple(message.groups),
        started_ms=message.started_ms,
        timeout_ms=message.timeout_ms,
    )


def producer_to_proto(description: ProducerDescription) -> admin_pb2.ProducerDescription:
    return admin_pb2.ProducerDescription(
        producer_id=description.producer_id,
        producer_generation=description.producer_generation,
        last_sequence=description.last_sequence,
        last_timestamp_ms=description.last_timestamp_ms,
        current_transaction_id=description.current_transaction_id,
    )


def producer_from_proto(message: admin_pb2.ProducerDescription) -> ProducerDescription:
    return ProducerDescription(
        producer_id=message.producer_id,
        producer_generation=message.producer_generation,
        last_sequence=message.last_sequence,
        last_timestamp_ms=message.last_timestamp_ms,
        current_transaction_id=message.current_transaction_id,
    )


_OUTCOMES = {
    ElectionOutcome.ELECTED: admin_pb2.ELECTION_OUTCOME_ELECTED,
    ElectionOutcome.NOT_NEEDED: admin_pb2.ELECTION_OUTCOME_NOT_NEEDED,
    ElectionOutcome.NOT_AVAILABLE: admin_pb2.ELECTION_OUTCOME_NOT_AVAILABLE,
    ElectionOutcome.UNKNOWN_PARTITION: admin_pb2.ELECTION_OUTCOME_UNKNOWN_PARTITION,
    ElectionOutcome.TIMED_OUT: admin_pb2.ELECTION_OUTCOME_TIMED_OUT,
}
_OUTCOMES_BACK = {value: key for key, value in _OUTCOMES.items()}


def election_to_proto(result: ElectionResult) -> admin_pb2.ElectionResult:
    return admin_pb2.ElectionResult(
        partition=common_pb2.TopicPartition(topic=result.topic, partition=result.partition),
        outcome=_OUTCOMES[result.outcome],
        leader=result.leader,
        preferred=result.preferred,
        message=result.message,
    )


def election_from_proto(message: admin_pb2.ElectionResult) -> ElectionResult:
    outcome = _OUTCOMES_BACK.get(message.outcome)
    if outcome is None:
        raise BrokerUnavailableError(
            f"the broker answered an election outcome this client does not know "
            f"({message.outcome}): upgrade the client"
        )
    return ElectionResult(
        message.partition.topic,
        message.partition.partition,
        outcome,
        message.leader,
        message.preferred,
        message.message,
    )
