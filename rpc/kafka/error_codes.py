"""The Kafka listener's error codes: the one error table's (``twinlog.rpc.wire.error_table``)
and what only Kafka says.

Each engine error class's Kafka code is its row's in the one table; this module adds
Kafka's exceptions to it (a code one API says differently, an authorization refusal by the
kind of resource denied) and the codes the listener says of requests, not of engine errors
(NONE, UNSUPPORTED_VERSION, the SASL states, ...). Those are kafka-python's (``kafka.errors``,
each class's ``errno``), so no number is typed here. ``code_of`` gives the code of an error.
"""

from __future__ import annotations

import kafka.errors as kafka_errors

from twinlog.engine.base import errors
from twinlog.rpc.wire.error_table import KafkaCode, row_of

# Codes of the one table that handlers also say themselves, under Kafka's names (plain ints,
# as kafka-python's below).
UNKNOWN_SERVER_ERROR = int(KafkaCode.UNKNOWN_SERVER_ERROR)
INVALID_REQUEST = int(KafkaCode.INVALID_REQUEST)
UNKNOWN_TOPIC_OR_PARTITION = int(KafkaCode.UNKNOWN_TOPIC_OR_PARTITION)
INVALID_PRODUCER_EPOCH = int(KafkaCode.INVALID_PRODUCER_EPOCH)
PRODUCER_FENCED = int(KafkaCode.PRODUCER_FENCED)
INVALID_TXN_STATE = int(KafkaCode.INVALID_TXN_STATE)
NOT_COORDINATOR = int(KafkaCode.NOT_COORDINATOR)
NOT_LEADER_OR_FOLLOWER = int(KafkaCode.NOT_LEADER_OR_FOLLOWER)
FENCED_LEADER_EPOCH = int(KafkaCode.FENCED_LEADER_EPOCH)
REQUEST_TIMED_OUT = int(KafkaCode.REQUEST_TIMED_OUT)
CORRUPT_MESSAGE = int(KafkaCode.CORRUPT_MESSAGE)
TOPIC_ALREADY_EXISTS = int(KafkaCode.TOPIC_ALREADY_EXISTS)
UNKNOWN_MEMBER_ID = int(KafkaCode.UNKNOWN_MEMBER_ID)
ILLEGAL_GENERATION = int(KafkaCode.ILLEGAL_GENERATION)
TOPIC_AUTHORIZATION_FAILED = int(KafkaCode.TOPIC_AUTHORIZATION_FAILED)
SASL_AUTHENTICATION_FAILED = int(KafkaCode.SASL_AUTHENTICATION_FAILED)
OFFSET_METADATA_TOO_LARGE = int(KafkaCode.OFFSET_METADATA_TOO_LARGE)

# Codes no engine error class travels as.
NONE = kafka_errors.NoError.errno
UNSUPPORTED_VERSION = kafka_errors.UnsupportedVersionError.errno
INVALID_REQUIRED_ACKS = kafka_errors.InvalidRequiredAcksError.errno
FETCH_SESSION_ID_NOT_FOUND = kafka_errors.FetchSessionIdNotFoundError.errno
COORDINATOR_NOT_AVAILABLE = kafka_errors.CoordinatorNotAvailableError.errno
LEADER_NOT_AVAILABLE = kafka_errors.LeaderNotAvailableError.errno
INVALID_TOPIC_EXCEPTION = kafka_errors.InvalidTopicError.errno  # a name no topic may have
LISTENER_NOT_FOUND = kafka_errors.ListenerNotFoundError.errno
INVALID_REPLICATION_FACTOR = kafka_errors.InvalidReplicationFactorError.errno
UNSUPPORTED_COMPRESSION_TYPE = kafka_errors.UnsupportedCompressionTypeError.errno
REBALANCE_IN_PROGRESS = kafka_errors.RebalanceInProgressError.errno
INCONSISTENT_GROUP_PROTOCOL = kafka_errors.InconsistentGroupProtocolError.errno
UNSUPPORTED_SASL_MECHANISM = kafka_errors.UnsupportedSaslMechanismError.errno
ILLEGAL_SASL_STATE = kafka_errors.IllegalSaslStateError.errno
RESOURCE_NOT_FOUND = kafka_errors.ResourceNotFoundError.errno
DUPLICATE_RESOURCE = kafka_errors.DuplicateResourceError.errno
UNACCEPTABLE_CREDENTIAL = kafka_errors.UnacceptableCredentialError.errno
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = kafka_errors.TransactionalIdAuthorizationFailedError.errno
TRANSACTIONAL_ID_NOT_FOUND = kafka_errors.TransactionalIdNotFoundError.errno
# KIP-848's consumer group protocol
FENCED_MEMBER_EPOCH = kafka_errors.FencedMemberEpochError.errno
STALE_MEMBER_EPOCH = kafka_errors.StaleMemberEpochError.errno
UNSUPPORTED_ASSIGNOR = kafka_errors.UnsupportedAssignorError.errno
GROUP_MAX_SIZE_REACHED = kafka_errors.GroupMaxSizeReachedError.errno
GROUP_ID_NOT_FOUND = kafka_errors.GroupIdNotFoundError.errno
# A denied ACL check, by the kind of resource denied (twinlog.rpc.policy.auth.Resource values)
AUTHORIZATION_FAILED_CODES: dict[str, int] = {
    "topic": TOPIC_AUTHORIZATION_FAILED,
    "group": kafka_errors.GroupAuthorizationFailedError.errno,
    "transactional id": TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    "cluster": kafka_errors.ClusterAuthorizationFailedError.errno,
}


# Where one API says it differently (Kafka's own exceptions to its rule): API key, class.
PRODUCE_API_KEY = 0
OFFSET_COMMIT_API_KEY = 8
JOIN_GROUP_API_KEY = 11
CONSUMER_GROUP_HEARTBEAT_API_KEY = 68
OFFSET_FETCH_API_KEY = 9
FIND_COORDINATOR_API_KEY = 10
CREATE_TOPICS_API_KEY = 19
ALTER_CONFIGS_API_KEY = 33
INCREMENTAL_ALTER_CONFIGS_API_KEY = 44
INVALID_CONFIG = kafka_errors.InvalidConfigurationError.errno
UNSTABLE_OFFSET_COMMIT = kafka_errors.UnstableOffsetCommitError.errno
UNKNOWN_TOPIC_ID = kafka_errors.UnknownTopicIdError.errno
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
    (OFFSET_FETCH_API_KEY, errors.PendingTransactionError): UNSTABLE_OFFSET_COMMIT,
    # a topic setting the broker refuses (an unknown key, a bad value): Kafka's answer
    (CREATE_TOPICS_API_KEY, errors.InvalidConfigError): INVALID_CONFIG,
    (ALTER_CONFIGS_API_KEY, errors.InvalidConfigError): INVALID_CONFIG,
    (INCREMENTAL_ALTER_CONFIGS_API_KEY, errors.InvalidConfigError): INVALID_CONFIG,
    # a group of KIP-848's protocol refuses a classic member: Kafka's JoinGroup says so
    (JOIN_GROUP_API_KEY, errors.GroupIdNotFoundError): INCONSISTENT_GROUP_PROTOCOL,
    # KIP-848's own codes where the classic protocol says ILLEGAL_GENERATION
    (CONSUMER_GROUP_HEARTBEAT_API_KEY, errors.FencedMemberEpochError): FENCED_MEMBER_EPOCH,
    (CONSUMER_GROUP_HEARTBEAT_API_KEY, errors.NotEnoughResourcesError): GROUP_MAX_SIZE_REACHED,
    (CONSUMER_GROUP_HEARTBEAT_API_KEY, errors.InvalidConfigError): INVALID_REQUEST,
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
    row = row_of(type(error))
    if api_key is not None and (api_key, row.error) in CODE_IN_API:
        return CODE_IN_API[(api_key, row.error)]
    return int(row.kafka_code)
