"""The coordination calls' values to protobuf messages and back (no I/O).

The one encoder and decoder between ``engine/transactions/partition_calls.py`` and
``twinlog.v1.Coordination``: the service and the client both use it, so a field added
to a dataclass is added here once. Every field travels as it is; ``ApplyCommit.attempts``
is the one optional field: absent is None (every attempt), present and empty is ``()``.
"""

from __future__ import annotations

from collections.abc import Sequence

from twinlog.engine.transactions.partition_calls import (
    ApplyAbort,
    ApplyCommit,
    CallEpochs,
    CountEntries,
    EntryCount,
    IssuedProducer,
    LookupProducer,
    RegisterPartition,
    SettleOffsetsHolder,
)
from twinlog.rpc.generated.twinlog.v1 import coordination_pb2
from twinlog.rpc.replication.convert import tp_from_proto, tp_to_proto
from twinlog.rpc.wire.errors import describe, error_from_proto


def epochs_to_proto(epochs: CallEpochs) -> coordination_pb2.CallEpochs:
    return coordination_pb2.CallEpochs(
        coordinator_partition=epochs.coordinator_partition,
        coordinator_epoch=epochs.coordinator_epoch,
        leader_epoch=epochs.leader_epoch,
    )


def epochs_from_proto(message: coordination_pb2.CallEpochs) -> CallEpochs:
    return CallEpochs(
        coordinator_partition=message.coordinator_partition,
        coordinator_epoch=message.coordinator_epoch,
        leader_epoch=message.leader_epoch,
    )


def register_to_proto(request: RegisterPartition) -> coordination_pb2.RegisterPartitionRequest:
    return coordination_pb2.RegisterPartitionRequest(
        transaction_id=request.transaction_id,
        topic_partition=tp_to_proto(request.topic_partition),
        producer_id=request.producer_id,
        producer_generation=request.producer_generation,
        epochs=epochs_to_proto(request.epochs),
        group_id=request.group_id,
    )


def register_from_proto(message: coordination_pb2.RegisterPartitionRequest) -> RegisterPartition:
    return RegisterPartition(
        transaction_id=message.transaction_id,
        topic_partition=tp_from_proto(message.topic_partition),
        producer_id=message.producer_id,
        producer_generation=message.producer_generation,
        epochs=epochs_from_proto(message.epochs),
        group_id=message.group_id,
    )


def count_to_proto(request: CountEntries) -> coordination_pb2.CountEntriesRequest:
    return coordination_pb2.CountEntriesRequest(
        transaction_id=request.transaction_id,
        topic_partition=tp_to_proto(request.topic_partition),
        epochs=epochs_to_proto(request.epochs),
    )


def count_from_proto(message: coordination_pb2.CountEntriesRequest) -> CountEntries:
    return CountEntries(
        transaction_id=message.transaction_id,
        topic_partition=tp_from_proto(message.topic_partition),
        epochs=epochs_from_proto(message.epochs),
    )


def entry_count_to_proto(answer: EntryCount) -> coordination_pb2.CountEntriesResponse:
    return coordination_pb2.CountEntriesResponse(entry_count=answer.entry_count)


def entry_count_from_proto(message: coordination_pb2.CountEntriesResponse) -> EntryCount:
    return EntryCount(entry_count=message.entry_count)


def commit_to_proto(request: ApplyCommit) -> coordination_pb2.ApplyCommitRequest:
    message = coordination_pb2.ApplyCommitRequest(
        transaction_id=request.transaction_id,
        topic_partition=tp_to_proto(request.topic_partition),
        entry_count=request.entry_count,
        epochs=epochs_to_proto(request.epochs),
    )
    if request.attempts is not None:
        # SetInParent marks the field present even with no names: () is not None.
        message.attempts.SetInParent()
        message.attempts.names.extend(request.attempts)
    return message


def commit_from_proto(message: coordination_pb2.ApplyCommitRequest) -> ApplyCommit:
    attempts = tuple(message.attempts.names) if message.HasField("attempts") else None
    return ApplyCommit(
        transaction_id=message.transaction_id,
        topic_partition=tp_from_proto(message.topic_partition),
        attempts=attempts,
        entry_count=message.entry_count,
        epochs=epochs_from_proto(message.epochs),
    )


def commits_to_proto(requests: Sequence[ApplyCommit]) -> coordination_pb2.ApplyCommitsRequest:
    return coordination_pb2.ApplyCommitsRequest(
        requests=[commit_to_proto(request) for request in requests]
    )


def commits_from_proto(message: coordination_pb2.ApplyCommitsRequest) -> list[ApplyCommit]:
    return [commit_from_proto(request) for request in message.requests]


def commit_outcomes_to_proto(
    errors: Sequence[BaseException | None],
) -> coordination_pb2.ApplyCommitsResponse:
    return coordination_pb2.ApplyCommitsResponse(
        outcomes=[
            coordination_pb2.ApplyCommitOutcome()
            if error is None
            else coordination_pb2.ApplyCommitOutcome(error=describe(error).to_proto())
            for error in errors
        ]
    )


def commit_outcomes_from_proto(
    message: coordination_pb2.ApplyCommitsResponse,
) -> list[BaseException | None]:
    return [
        error_from_proto(outcome.error) if outcome.HasField("error") else None
        for outcome in message.outcomes
    ]


def abort_to_proto(request: ApplyAbort) -> coordination_pb2.ApplyAbortRequest:
    return coordination_pb2.ApplyAbortRequest(
        transaction_id=request.transaction_id,
        topic_partition=tp_to_proto(request.topic_partition),
        epochs=epochs_to_proto(request.epochs),
    )


def abort_from_proto(message: coordination_pb2.ApplyAbortRequest) -> ApplyAbort:
    return ApplyAbort(
        transaction_id=message.transaction_id,
        topic_partition=tp_from_proto(message.topic_partition),
        epochs=epochs_from_proto(message.epochs),
    )


def settle_to_proto(request: SettleOffsetsHolder) -> coordination_pb2.SettleOffsetsHolderRequest:
    return coordination_pb2.SettleOffsetsHolderRequest(
        holder_id=request.holder_id,
        newcomer_id=request.newcomer_id,
        group_id=request.group_id,
        topic_partition=tp_to_proto(request.topic_partition),
        newcomer_is_member=request.newcomer_is_member,
    )


def settle_from_proto(message: coordination_pb2.SettleOffsetsHolderRequest) -> SettleOffsetsHolder:
    return SettleOffsetsHolder(
        holder_id=message.holder_id,
        newcomer_id=message.newcomer_id,
        group_id=message.group_id,
        topic_partition=tp_from_proto(message.topic_partition),
        newcomer_is_member=message.newcomer_is_member,
    )


def lookup_to_proto(request: LookupProducer) -> coordination_pb2.LookupProducerRequest:
    return coordination_pb2.LookupProducerRequest(
        producer_id=request.producer_id, producer_generation=request.producer_generation
    )


def lookup_from_proto(message: coordination_pb2.LookupProducerRequest) -> LookupProducer:
    return LookupProducer(message.producer_id, message.producer_generation)


def issued_to_proto(answer: IssuedProducer) -> coordination_pb2.LookupProducerResponse:
    message = coordination_pb2.LookupProducerResponse(known=answer.transactional_id is not None)
    if answer.transactional_id is not None:
        message.transactional_id = answer.transactional_id
    if answer.ongoing_transaction_id is not None:
        message.has_ongoing = True
        message.ongoing_transaction_id = answer.ongoing_transaction_id
    return message


def issued_from_proto(message: coordination_pb2.LookupProducerResponse) -> IssuedProducer:
    return IssuedProducer(
        message.transactional_id if message.known else None,
        message.ongoing_transaction_id if message.has_ongoing else None,
    )
