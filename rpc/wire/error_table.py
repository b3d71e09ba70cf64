"""The one error table: each engine error class, the gRPC status code it travels as and
the Kafka error code the Kafka listener answers with.

Both doors look errors up in it: the gRPC server (``twinlog.rpc.wire.errors.describe``,
whose class name the client turns back into the class with ``ERROR_CLASSES_BY_NAME``) and
the Kafka listener (``twinlog.rpc.kafka.error_codes.code_of``, which adds only Kafka's
exceptions by API and by denied resource). ``status_of`` and ``kafka_code_of`` are the two
lookups by class; a class missing from the table takes the row of its nearest listed base
class. ``tests/rpc/wire/test_error_table.py`` fails when an engine error class has no row.

The Kafka codes are written out here, under Kafka's names, because importing kafka-python
(``kafka.errors``) loads its whole client, which the gRPC client and server do not need;
the test holds every number equal to kafka-python's ``errno`` of the same code.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import grpc

from twinlog.engine.base import errors
from twinlog.engine.base.errors import TwinlogError

Code = grpc.StatusCode


class KafkaCode(IntEnum):
    """The Kafka error codes of the table, under Kafka's names (its protocol's error table)."""

    UNKNOWN_SERVER_ERROR = -1
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    MESSAGE_TOO_LARGE = 10
    OFFSET_METADATA_TOO_LARGE = 12
    COORDINATOR_LOAD_IN_PROGRESS = 14
    NOT_COORDINATOR = 16
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    ILLEGAL_GENERATION = 22
    UNKNOWN_MEMBER_ID = 25
    TOPIC_AUTHORIZATION_FAILED = 29
    CLUSTER_AUTHORIZATION_FAILED = 31
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_ASSIGNMENT = 39
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    CONCURRENT_TRANSACTIONS = 51
    KAFKA_STORAGE_ERROR = 56
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    FENCED_INSTANCE_ID = 82
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    PRODUCER_FENCED = 90
    UNRELEASED_INSTANCE_ID = 111


@dataclass(frozen=True)
class ErrorRow:
    """One error class and how each door says it.

    ``status``: the gRPC status code it travels as (its class name, flags and attributes
    follow in the trailing metadata). ``kafka_code``: the code a Kafka client acts on as
    twinlog's client acts on the class's flags (retriable codes for retriable errors,
    fencing for fencing, ...).
    """

    error: type[TwinlogError]
    status: grpc.StatusCode
    kafka_code: KafkaCode


# Every engine error class, once.
ERROR_TABLE: tuple[ErrorRow, ...] = (
    ErrorRow(errors.TwinlogError, Code.INTERNAL, KafkaCode.UNKNOWN_SERVER_ERROR),
    # bytes
    ErrorRow(errors.CorruptBatchError, Code.INVALID_ARGUMENT, KafkaCode.CORRUPT_MESSAGE),
    ErrorRow(errors.InvalidRecordError, Code.INVALID_ARGUMENT, KafkaCode.INVALID_RECORD),
    ErrorRow(errors.CorruptLogError, Code.DATA_LOSS, KafkaCode.KAFKA_STORAGE_ERROR),
    ErrorRow(errors.CorruptJournalError, Code.DATA_LOSS, KafkaCode.KAFKA_STORAGE_ERROR),
    ErrorRow(errors.DataDirFormatError, Code.FAILED_PRECONDITION, KafkaCode.KAFKA_STORAGE_ERROR),
    ErrorRow(errors.BatchTooLargeError, Code.INVALID_ARGUMENT, KafkaCode.RECORD_LIST_TOO_LARGE),
    ErrorRow(errors.RecordTooLargeError, Code.INVALID_ARGUMENT, KafkaCode.MESSAGE_TOO_LARGE),
    # offsets and topics
    ErrorRow(errors.OffsetOutOfRangeError, Code.OUT_OF_RANGE, KafkaCode.OFFSET_OUT_OF_RANGE),
    ErrorRow(
        errors.UnknownTopicOrPartitionError, Code.NOT_FOUND, KafkaCode.UNKNOWN_TOPIC_OR_PARTITION
    ),
    ErrorRow(errors.TopicExistsError, Code.ALREADY_EXISTS, KafkaCode.TOPIC_ALREADY_EXISTS),
    ErrorRow(errors.InvalidConfigError, Code.INVALID_ARGUMENT, KafkaCode.INVALID_REQUEST),
    ErrorRow(errors.InvalidRequestError, Code.INVALID_ARGUMENT, KafkaCode.INVALID_REQUEST),
    ErrorRow(errors.InvalidPartitionsError, Code.INVALID_ARGUMENT, KafkaCode.INVALID_PARTITIONS),
    ErrorRow(
        errors.InvalidReplicaAssignmentError,
        Code.INVALID_ARGUMENT,
        KafkaCode.INVALID_REPLICATION_ASSIGNMENT,
    ),
    ErrorRow(
        errors.NoReassignmentInProgressError,
        Code.FAILED_PRECONDITION,
        KafkaCode.NO_REASSIGNMENT_IN_PROGRESS,
    ),
    ErrorRow(errors.LogClosedError, Code.UNAVAILABLE, KafkaCode.KAFKA_STORAGE_ERROR),
    # producers and transactions (twinlog.rpc.kafka.error_codes.CODE_IN_API: by API)
    ErrorRow(errors.ProducerFencedError, Code.FAILED_PRECONDITION, KafkaCode.PRODUCER_FENCED),
    ErrorRow(errors.InvalidTxnStateError, Code.FAILED_PRECONDITION, KafkaCode.INVALID_TXN_STATE),
    ErrorRow(
        errors.TransactionCompletedError, Code.FAILED_PRECONDITION, KafkaCode.INVALID_TXN_STATE
    ),
    ErrorRow(
        errors.TransactionDataMissingError, Code.FAILED_PRECONDITION, KafkaCode.INVALID_TXN_STATE
    ),
    ErrorRow(errors.UnknownTransactionError, Code.NOT_FOUND, KafkaCode.INVALID_TXN_STATE),
    ErrorRow(
        errors.UnknownProducerIdError, Code.FAILED_PRECONDITION, KafkaCode.UNKNOWN_PRODUCER_ID
    ),
    ErrorRow(
        errors.InvalidProducerGenerationError,
        Code.INVALID_ARGUMENT,
        KafkaCode.INVALID_PRODUCER_EPOCH,
    ),
    ErrorRow(
        errors.OutOfOrderSequenceError,
        Code.FAILED_PRECONDITION,
        KafkaCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
    ),
    ErrorRow(
        errors.DuplicateSequenceError, Code.ALREADY_EXISTS, KafkaCode.DUPLICATE_SEQUENCE_NUMBER
    ),
    ErrorRow(errors.PendingTransactionError, Code.UNAVAILABLE, KafkaCode.CONCURRENT_TRANSACTIONS),
    ErrorRow(errors.ConcurrentTransactionsError, Code.ABORTED, KafkaCode.CONCURRENT_TRANSACTIONS),
    # consumer group membership
    ErrorRow(errors.UnknownMemberIdError, Code.FAILED_PRECONDITION, KafkaCode.UNKNOWN_MEMBER_ID),
    ErrorRow(errors.FencedMemberEpochError, Code.FAILED_PRECONDITION, KafkaCode.ILLEGAL_GENERATION),
    ErrorRow(errors.StaleMemberEpochError, Code.FAILED_PRECONDITION, KafkaCode.ILLEGAL_GENERATION),
    ErrorRow(errors.FencedInstanceIdError, Code.FAILED_PRECONDITION, KafkaCode.FENCED_INSTANCE_ID),
    ErrorRow(
        errors.UnreleasedInstanceIdError,
        Code.FAILED_PRECONDITION,
        KafkaCode.UNRELEASED_INSTANCE_ID,
    ),
    ErrorRow(errors.GroupIdNotFoundError, Code.NOT_FOUND, KafkaCode.GROUP_ID_NOT_FOUND),
    ErrorRow(errors.NonEmptyGroupError, Code.FAILED_PRECONDITION, KafkaCode.NON_EMPTY_GROUP),
    ErrorRow(
        errors.GroupSubscribedToTopicError,
        Code.FAILED_PRECONDITION,
        KafkaCode.GROUP_SUBSCRIBED_TO_TOPIC,
    ),
    ErrorRow(
        errors.OffsetMetadataTooLargeError,
        Code.INVALID_ARGUMENT,
        KafkaCode.OFFSET_METADATA_TOO_LARGE,
    ),
    # epochs between coordinators and partition leaders
    ErrorRow(
        errors.TransactionCoordinatorFencedError,
        Code.FAILED_PRECONDITION,
        KafkaCode.NOT_COORDINATOR,
    ),
    ErrorRow(
        errors.FencedLeaderEpochError, Code.FAILED_PRECONDITION, KafkaCode.FENCED_LEADER_EPOCH
    ),
    ErrorRow(errors.UnknownLeaderEpochError, Code.UNAVAILABLE, KafkaCode.UNKNOWN_LEADER_EPOCH),
    # replication
    ErrorRow(errors.NotLeaderOrFollowerError, Code.UNAVAILABLE, KafkaCode.NOT_LEADER_OR_FOLLOWER),
    ErrorRow(errors.NotEnoughReplicasError, Code.UNAVAILABLE, KafkaCode.NOT_ENOUGH_REPLICAS),
    ErrorRow(errors.NotCoordinatorError, Code.UNAVAILABLE, KafkaCode.NOT_COORDINATOR),
    ErrorRow(
        errors.CoordinatorLoadInProgressError,
        Code.UNAVAILABLE,
        KafkaCode.COORDINATOR_LOAD_IN_PROGRESS,
    ),
    ErrorRow(
        errors.NotEnoughReplicasAfterAppendError,
        Code.UNAVAILABLE,
        KafkaCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ),
    # resources: retriable at both doors
    ErrorRow(errors.DiskFullError, Code.RESOURCE_EXHAUSTED, KafkaCode.KAFKA_STORAGE_ERROR),
    ErrorRow(errors.NotEnoughResourcesError, Code.RESOURCE_EXHAUSTED, KafkaCode.REQUEST_TIMED_OUT),
    # access and transport
    ErrorRow(
        errors.AuthenticationError, Code.UNAUTHENTICATED, KafkaCode.SASL_AUTHENTICATION_FAILED
    ),
    # twinlog.rpc.kafka.error_codes names the group and transactional id refusals
    ErrorRow(
        errors.AuthorizationError, Code.PERMISSION_DENIED, KafkaCode.TOPIC_AUTHORIZATION_FAILED
    ),
    ErrorRow(
        errors.ClusterAuthorizationError,
        Code.PERMISSION_DENIED,
        KafkaCode.CLUSTER_AUTHORIZATION_FAILED,
    ),
    # only between brokers; Kafka's STALE_BROKER_EPOCH is not retriable to its clients
    ErrorRow(
        errors.StaleBrokerEpochError, Code.FAILED_PRECONDITION, KafkaCode.NOT_LEADER_OR_FOLLOWER
    ),
    ErrorRow(errors.BrokerUnavailableError, Code.UNAVAILABLE, KafkaCode.NOT_LEADER_OR_FOLLOWER),
    ErrorRow(errors.RequestTimedOutError, Code.DEADLINE_EXCEEDED, KafkaCode.REQUEST_TIMED_OUT),
    # the cluster's metadata store
    ErrorRow(errors.ConditionalWriteLostError, Code.ABORTED, KafkaCode.NOT_CONTROLLER),
)

# The lookups, each derived from the table.
ROW_OF_ERROR: dict[type[TwinlogError], ErrorRow] = {row.error: row for row in ERROR_TABLE}
# The way back, for the gRPC client: the class a server named in the trailing metadata.
ERROR_CLASSES_BY_NAME: dict[str, type[TwinlogError]] = {
    row.error.__name__: row.error for row in ERROR_TABLE
}


def row_of(error_class: type[TwinlogError]) -> ErrorRow:
    """The row of an error class; a class not in the table has its nearest listed base's."""
    for cls in error_class.__mro__:
        row = ROW_OF_ERROR.get(cls)
        if row is not None:
            return row
    return ROW_OF_ERROR[TwinlogError]


def status_of(error_class: type[TwinlogError]) -> grpc.StatusCode:
    """The gRPC status code an error class travels as."""
    return row_of(error_class).status


def kafka_code_of(error_class: type[TwinlogError]) -> KafkaCode:
    """The Kafka error code of an error class, in any API that has no exception of its own."""
    return row_of(error_class).kafka_code
