"""The transactional calls: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
TxnOffsetCommit, EndTxn, onto the broker's transaction coordinator.

A Kafka producer's transaction has no id of its own; the engine begins one at its first
AddPartitionsToTxn, AddOffsetsToTxn or TxnOffsetCommit (``Broker.open_transaction``) and
EndTxn ends the generation's latest (``Broker.latest_transaction``: its open one, or the
one a retried EndTxn already ended, which the coordinator answers as it did). Commit answers once the commit decision is durable (PREPARE_COMMIT, as Kafka's
EndTxn does); the partitions' data logs receive the records when the transaction is
applied, and only then does a consumer see them, all of them.

InitProducerId without a transactional id gives an idempotent producer its id and epoch;
a cluster broker coordinating no journal partition yet answers it
COORDINATOR_LOAD_IN_PROGRESS (``IDEMPOTENT_INIT_PRODUCER_RETRY``), so the client asks again.
The epoch bump of KIP-360 (an InitProducerId naming the current id and epoch) is served
as a new generation of the same transactional id; an idempotent producer gets a new id.
"""

from __future__ import annotations

import kafka.errors as kafka_errors
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)

from twinlog.engine.base.errors import TwinlogError
from twinlog.engine.base.types import TopicPartition
from twinlog.rpc.kafka.access import require
from twinlog.rpc.kafka.context import KafkaContext
from twinlog.rpc.kafka.error_codes import (
    COORDINATOR_NOT_AVAILABLE,
    IDEMPOTENT_INIT_PRODUCER_RETRY,
    INVALID_TXN_STATE,
    NONE,
    NOT_COORDINATOR,
    code_of,
)
from twinlog.rpc.kafka.offsets import commit_answers, member_of, offsets_of
from twinlog.rpc.policy.auth import Operation, Resource

NO_PRODUCER_ID = -1
BROKER_BATCH_VERSION = 4  # AddPartitionsToTxn from here is broker-to-broker (KIP-890)
CLUSTER_AUTHORIZATION_FAILED = kafka_errors.ClusterAuthorizationFailedError.errno
NO_PRODUCER_EPOCH = -1


def handle_init_producer_id(
    request: InitProducerIdRequest, version: int, context: KafkaContext
) -> InitProducerIdResponse:
    timeout_ms = request.transaction_timeout_ms if request.transactional_id else None
    try:
        identity = context.access.init_producer(
            context.connection.principal,
            request.transactional_id or None,
            timeout_ms if timeout_ms and timeout_ms > 0 else None,
        )
    except TwinlogError as error:
        error_code = code_of(error, InitProducerIdRequest.API_KEY)
        if not request.transactional_id and error_code in (
            NOT_COORDINATOR,
            COORDINATOR_NOT_AVAILABLE,
        ):
            error_code = IDEMPOTENT_INIT_PRODUCER_RETRY
        return InitProducerIdResponse(
            version=version,
            throttle_time_ms=0,
            error_code=error_code,
            producer_id=NO_PRODUCER_ID,
            producer_epoch=NO_PRODUCER_EPOCH,
        )
    return InitProducerIdResponse(
        version=version,
        throttle_time_ms=0,
        error_code=NONE,
        producer_id=identity.producer_id,
        producer_epoch=identity.producer_generation,
    )


def handle_add_partitions_to_txn(
    request: AddPartitionsToTxnRequest, version: int, context: KafkaContext
) -> AddPartitionsToTxnResponse:
    if version >= BROKER_BATCH_VERSION:
        # Kafka's brokers' verification batches (KIP-890): a client is refused them, as
        # Kafka refuses a principal without ClusterAction; twinlog's brokers never send them.
        return AddPartitionsToTxnResponse(
            version=version,
            throttle_time_ms=0,
            error_code=CLUSTER_AUTHORIZATION_FAILED,
            results_by_transaction=[],
        )
    # Versions 0-3: a client's single transaction.
    producer_id = request.v3_and_below_producer_id
    producer_generation = request.v3_and_below_producer_epoch
    wanted = [
        TopicPartition(topic.name, index)
        for topic in request.v3_and_below_topics
        for index in topic.partitions
    ]
    principal = context.connection.principal
    try:
        context.access.require_producer(principal, producer_id)
        require(context.guard, principal, Operation.WRITE, sorted({tp.topic for tp in wanted}))
        transaction_id = context.broker.open_transaction(producer_id, producer_generation)
        context.broker.add_partitions_to_transaction(
            transaction_id, producer_id, producer_generation, wanted
        )
        error_code = NONE
    except TwinlogError as error:
        error_code = code_of(error, AddPartitionsToTxnRequest.API_KEY)
    TopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
    PartitionResult = TopicResult.AddPartitionsToTxnPartitionResult
    results = [
        TopicResult(
            name=topic.name,
            results_by_partition=[
                PartitionResult(partition_index=index, partition_error_code=error_code)
                for index in topic.partitions
            ],
        )
        for topic in request.v3_and_below_topics
    ]
    return AddPartitionsToTxnResponse(
        version=version, throttle_time_ms=0, results_by_topic_v3_and_below=results
    )


def handle_add_offsets_to_txn(
    request: AddOffsetsToTxnRequest, version: int, context: KafkaContext
) -> AddOffsetsToTxnResponse:
    principal = context.connection.principal
    try:
        context.access.require_producer(principal, request.producer_id)
        require(context.guard, principal, Operation.READ, (request.group_id,), Resource.GROUP)
        context.broker.open_transaction(request.producer_id, request.producer_epoch)
        error_code = NONE
    except TwinlogError as error:
        error_code = code_of(error, AddOffsetsToTxnRequest.API_KEY)
    return AddOffsetsToTxnResponse(version=version, throttle_time_ms=0, error_code=error_code)


def handle_txn_offset_commit(
    request: TxnOffsetCommitRequest, version: int, context: KafkaContext
) -> TxnOffsetCommitResponse:
    offsets = offsets_of(request.topics)
    too_large = context.broker.metadata_too_large(offsets)
    member = member_of(request.member_id, request.generation_id, request.group_instance_id)
    principal = context.connection.principal
    try:
        context.access.require_producer(principal, request.producer_id)
        require(context.guard, principal, Operation.READ, (request.group_id,), Resource.GROUP)
        require(context.guard, principal, Operation.READ, sorted({tp.topic for tp in offsets}))
        transaction_id = context.broker.open_transaction(
            request.producer_id, request.producer_epoch
        )
        context.broker.send_offsets_to_transaction(
            transaction_id,
            request.producer_id,
            request.producer_epoch,
            request.group_id,
            {p: o for p, o in offsets.items() if p not in too_large},
            member,
        )
        error_code = NONE
    except TwinlogError as error:
        error_code = code_of(error, TxnOffsetCommitRequest.API_KEY)
    Topic = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
    Partition = Topic.TxnOffsetCommitResponsePartition
    topics = [
        Topic(
            name=name,
            partitions=[
                Partition(partition_index=index, error_code=code) for index, code in partitions
            ],
        )
        for name, partitions in commit_answers(request.topics, error_code, too_large)
    ]
    return TxnOffsetCommitResponse(version=version, throttle_time_ms=0, topics=topics)


def handle_end_txn(request: EndTxnRequest, version: int, context: KafkaContext) -> EndTxnResponse:
    producer_id, producer_generation = request.producer_id, request.producer_epoch
    broker = context.broker
    error_code = NONE
    try:
        context.access.require_producer(context.connection.principal, producer_id)
        transaction_id = broker.latest_transaction(producer_id, producer_generation)
        if transaction_id is None:
            # Nothing was ever begun: a commit of nothing is INVALID_TXN_STATE, never a
            # success for a commit that did not happen (an abort of nothing is harmless).
            if request.committed:
                error_code = INVALID_TXN_STATE
        elif request.committed:
            # The coordinator answers a retry of an end that succeeded as the first (NONE,
            # as Kafka does), and an end contrary to the one that happened INVALID_TXN_STATE.
            broker.commit_transaction(transaction_id, producer_id, producer_generation)
        else:
            broker.abort_transaction(transaction_id, producer_id, producer_generation)
    except TwinlogError as error:
        error_code = code_of(error, EndTxnRequest.API_KEY)
    return EndTxnResponse(version=version, throttle_time_ms=0, error_code=error_code)
