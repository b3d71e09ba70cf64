"""The one table from twinlog's errors to Kafka's error codes.

The codes are kafka-python's (``kafka.errors``, each class's ``errno``), so no number is
typed here. A class missing from the table falls back to its nearest listed base class,
then to UNKNOWN_SERVER_ERROR; ``tests/rpc/kafka/test_error_codes.py`` fails when an
engine error class has no row.
"""

from __future__ import annotations

import kafka.errors as kafka_errors

from twinlog.engine.base import errors

NONE = kafka_errors.NoError.errno
UNKNOWN_SERVER_ERROR = kafka_errors.UnknownError.errno
UNSUPPORTED_VERSION = kafka_errors.UnsupportedVersionError.errno
INVALID_REQUEST = kafka_errors.InvalidRequestError.errno
INVALID_REQUIRED_ACKS = kafka_errors.InvalidRequiredAcksError.errno
UNKNOWN_TOPIC_OR_PARTITION = kafka_errors.UnknownTopicOrPartitionError.errno
OFFSET_OUT_OF_RANGE = kafka_errors.OffsetOutOfRangeError.errno
FETCH_SESSION_ID_NOT_FOUND = kafka_errors.FetchSessionIdNotFoundError.errno
INVALID_PRODUCER_EPOCH = kafka_errors.InvalidProducerEpochError.errno
PRODUCER_FENCED = kafka_errors.ProducerFencedError.errno
INVALID_TXN_STATE = kafka_errors.InvalidTxnStateError.errno
COORDINATOR_NOT_AVAILABLE = kafka_errors.CoordinatorNotAvailableError.errno
NOT_COORDINATOR = kafka_errors.NotCoordinatorError.errno
NOT_LEADER_OR_FOLLOWER = kafka_errors.NotLeaderForPartitionError.errno
LEADER_NOT_AVAILABLE = kafka_errors.LeaderNotAvailableError.errno
LISTENER_NOT_FOUND = kafka_errors.ListenerNotFoundError.errno
REQUEST_TIMED_OUT = kafka_errors.RequestTimedOutError.errno
CORRUPT_MESSAGE = kafka_errors.CorruptRecordError.errno
INVALID_REPLICATION_FACTOR = kafka_errors.InvalidReplicationFactorError.errno
TOPIC_ALREADY_EXISTS = kafka_errors.TopicAlreadyExistsError.errno
UNSUPPORTED_COMPRESSION_TYPE = kafka_errors.UnsupportedCompressionTypeError.errno
UNKNOWN_MEMBER_ID = kafka_errors.UnknownMemberIdError.errno
ILLEGAL_GENERATION = kafka_errors.IllegalGenerationError.errno
REBALANCE_IN_PROGRESS = kafka_errors.RebalanceInProgressError.errno
INCONSISTENT_GROUP_PROTOCOL = kafka_errors.InconsistentGroupProtocolError.errno
TOPIC_AUTHORIZATION_FAILED = kafka_errors.TopicAuthorizationFailedError.errno
SASL_AUTHENTICATION_FAILED = kafka_errors.SaslAuthenticationFailedError.errno
UNSUPPORTED_SASL_MECHANISM = kafka_errors.UnsupportedSaslMechanismError.errno
ILLEGAL_SASL_STATE = kafka_errors.IllegalSaslStateError.errno
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = kafka_errors.TransactionalIdAuthorizationFailedError.errno
# A denied ACL check, by the kind of resource denied (twinlog.rpc.server.auth.Resource values)
AUTHORIZATION_FAILED_CODES: dict[str, int] = {
    "topic": TOPIC_AUTHORIZATION_FAILED,
    "group": kafka_errors.GroupAuthorizationFailedError.errno,
    "transactional id": TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}

# Every engine error class, with the code a Kafka client acts on as twinlog's client acts
# on the class's flags (retriable codes for retriable errors, fencing for fencing, ...).
CODE_OF_ERROR: dict[type[errors.TwinlogError], int] = {
    errors.TwinlogError: UNKNOWN_SERVER_ERROR,
    # bytes
    errors.CorruptBatchError: CORRUPT_MESSAGE,
    errors.InvalidRecordError: kafka_errors.InvalidRecordError.errno,
    errors.CorruptLogError: kafka_errors.KafkaStorageError.errno,
    errors.CorruptJournalError: kafka_errors.KafkaStorageError.errno,
    errors.DataDirFormatError: kafka_errors.KafkaStorageError.errno,
    errors.BatchTooLargeError: kafka_errors.RecordListTooLargeError.errno,
    errors.RecordTooLargeError: kafka_errors.MessageSizeTooLargeError.errno,
    # offsets and topics
    errors.OffsetOutOfRangeError: OFFSET_OUT_OF_RANGE,
    errors.UnknownTopicOrPartitionError: UNKNOWN_TOPIC_OR_PARTITION,
    errors.TopicExistsError: TOPIC_ALREADY_EXISTS,
    errors.InvalidConfigError: INVALID_REQUEST,
    errors.LogClosedError: kafka_errors.KafkaStorageError.errno,
    # producers and transactions (and CODE_IN_API below)
    errors.ProducerFencedError: PRODUCER_FENCED,
    errors.InvalidTxnStateError: INVALID_TXN_STATE,
    errors.TransactionCompletedError: INVALID_TXN_STATE,
    errors.TransactionDataMissingError: INVALID_TXN_STATE,
    errors.UnknownTransactionError: INVALID_TXN_STATE,
    errors.UnknownProducerIdError: kafka_errors.UnknownProducerIdError.errno,
    errors.InvalidProducerGenerationError: INVALID_PRODUCER_EPOCH,
    errors.OutOfOrderSequenceError: kafka_errors.OutOfOrderSequenceNumberError.errno,
    errors.DuplicateSequenceError: kafka_errors.DuplicateSequenceNumberError.errno,
    errors.PendingTransactionError: kafka_errors.ConcurrentTransactionsError.errno,
    errors.ConcurrentTransactionsError: kafka_errors.ConcurrentTransactionsError.errno,
    # consumer group membership
    errors.UnknownMemberIdError: UNKNOWN_MEMBER_ID,
    errors.FencedMemberEpochError: ILLEGAL_GENERATION,
    errors.StaleMemberEpochError: ILLEGAL_GENERATION,
    errors.FencedInstanceIdError: kafka_errors.FencedInstanceIdError.errno,
    errors.GroupIdNotFoundError: kafka_errors.GroupIdNotFoundError.errno,
    errors.NonEmptyGroupError: kafka_errors.NonEmptyGroupError.errno,
    # epochs between coordinators and partition leaders
    errors.TransactionCoordinatorFencedError: NOT_COORDINATOR,
    errors.FencedLeaderEpochError: kafka_errors.FencedLeaderEpochError.errno,
    errors.UnknownLeaderEpochError: kafka_errors.UnknownLeaderEpochError.errno,
    # replication
    errors.NotLeaderOrFollowerError: NOT_LEADER_OR_FOLLOWER,
    errors.NotEnoughReplicasError: kafka_errors.NotEnoughReplicasError.errno,
    errors.NotCoordinatorError: NOT_COORDINATOR,
    errors.CoordinatorLoadInProgressError: kafka_errors.CoordinatorLoadInProgressError.errno,
    errors.NotEnoughReplicasAfterAppendError: kafka_errors.NotEnoughReplicasAfterAppendError.errno,
    # resources: retriable on both sides
    errors.DiskFullError: kafka_errors.KafkaStorageError.errno,
    errors.NotEnoughResourcesError: REQUEST_TIMED_OUT,
    # access and transport
    errors.AuthenticationError: SASL_AUTHENTICATION_FAILED,
    errors.AuthorizationError: TOPIC_AUTHORIZATION_FAILED,
    errors.ClusterAuthorizationError: kafka_errors.ClusterAuthorizationFailedError.errno,
    # only between brokers; Kafka's STALE_BROKER_EPOCH is not retriable to its clients
    errors.StaleBrokerEpochError: NOT_LEADER_OR_FOLLOWER,
    errors.BrokerUnavailableError: NOT_LEADER_OR_FOLLOWER,
    errors.RequestTimedOutError: REQUEST_TIMED_OUT,
    # the cluster's metadata store
    errors.ConditionalWriteLostError: kafka_errors.NotControllerError.errno,
}


# Where one API says it differently (Kafka's own exceptions to its rule): API key, class.
PRODUCE_API_KEY = 0
OFFSET_FETCH_API_KEY = 9
FIND_COORDINATOR_API_KEY = 10
# InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit: a producer
# id its caller may not use is denied on its transactional id
TRANSACTIONAL_API_KEYS = (22, 24, 25, 26, 28)
CODE_IN_API: dict[tuple[int, type[errors.TwinlogError]], int] = {
    # a fenced producer's batch: PRODUCER_FENCED belongs to the transactional calls
    (PRODUCE_API_KEY, errors.ProducerFencedError): INVALID_PRODUCER_EPOCH,
    # no live leader of the key's coordinator partition yet: FindCoordinator says it as
    # Kafka's does (the client asks again after a pause)
    (FIND_COORDINATOR_API_KEY, errors.NotCoordinatorError): COORDINATOR_NOT_AVAILABLE,
    # an offset held by a transaction not complete yet: the client retries
    (OFFSET_FETCH_API_KEY, errors.PendingTransactionError): (
        kafka_errors.UnstableOffsetCommitError.errno
    ),
    **{
        (api_key, errors.AuthorizationError): TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        for api_key in TRANSACTIONAL_API_KEYS
    },
}


# An idempotent producer's InitProducerId (no transactional id) refused because this
# broker coordinates no transaction journal partition (yet): Kafka clients answer
# NOT_COORDINATOR by looking up the coordinator of a null key, which no broker serves, so
# it is said as a retriable load in progress; the client asks again (any broker).
IDEMPOTENT_INIT_PRODUCER_RETRY = kafka_errors.CoordinatorLoadInProgressError.errno


def code_of(error: BaseException, api_key: int | None = None) -> int:
    """The Kafka error code for ``error`` in an answer of ``api_key``; anything not
    twinlog's is UNKNOWN_SERVER_ERROR."""
    if not isinstance(error, errors.TwinlogError):
        return UNKNOWN_SERVER_ERROR
    denied_resource = getattr(error, "resource", None)  # access.ResourceDenied
    if (
        isinstance(error, errors.AuthorizationError)
        and denied_resource in AUTHORIZATION_FAILED_CODES
    ):
        return AUTHORIZATION_FAILED_CODES[denied_resource]
    for cls in type(error).__mro__:
        if api_key is not None and (api_key, cls) in CODE_IN_API:
            return CODE_IN_API[(api_key, cls)]
        code = CODE_OF_ERROR.get(cls)
        if code is not None:
            return code
    return UNKNOWN_SERVER_ERROR
