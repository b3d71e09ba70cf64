"""twinlog: a transactional log storage engine.

The repository's folders are this package's floors, lowest first; a floor imports
only the floors below it (``setup.cfg`` states the contract, a test enforces it):

    twinlog.engine.base        errors, failpoints, CRC-32C, atomic files, plain value types
    twinlog.engine.records     the record batch format: one encoder, one decoder
    twinlog.engine.log         the segmented data log: append, read, recovery, retention, compaction
    twinlog.journal            the local data journal (LMDB) and the transaction journal
    twinlog.copier             APPLY_COMMIT / APPLY_ABORT: journal -> data log, exactly once
    twinlog.engine.replication what leaders and followers decide: divergence, ISR, high watermark
    twinlog.engine.broker      the embedded broker: partitions, coordinator, group offsets
    twinlog.rpc.generated      protobuf/gRPC code generated from rpc/proto
    twinlog.rpc.wire           what client and server share: the broker API, conversions, status codes
    twinlog.rpc.client         Producer, Consumer, Admin (over gRPC, or an embedded Broker)
    twinlog.rpc.server         the gRPC server: services, authentication, ACLs, limits
    twinlog.connectors.spark   the PySpark data source
    twinlog.rpc.cli            the ``twinlog`` command (the top: it may import everything)

This file pulls the everyday names together. They are resolved on first use, so
that ``import twinlog.engine.broker`` (an embedded broker) does not load gRPC.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from twinlog.engine.base import errors
from twinlog.engine.base.errors import (
    AuthenticationError,
    AuthorizationError,
    BatchTooLargeError,
    BrokerUnavailableError,
    ClusterAuthorizationError,
    ConcurrentTransactionsError,
    ConditionalWriteLostError,
    CoordinatorLoadInProgressError,
    CorruptBatchError,
    CorruptJournalError,
    CorruptLogError,
    DataDirFormatError,
    DiskFullError,
    DuplicateSequenceError,
    FencedInstanceIdError,
    FencedLeaderEpochError,
    FencedMemberEpochError,
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidProducerGenerationError,
    InvalidRecordError,
    InvalidReplicaAssignmentError,
    InvalidRequestError,
    InvalidTxnStateError,
    LogClosedError,
    NonEmptyGroupError,
    NoReassignmentInProgressError,
    NotCoordinatorError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotEnoughResourcesError,
    NotLeaderOrFollowerError,
    OffsetMetadataTooLargeError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    PendingTransactionError,
    ProducerFencedError,
    RecordTooLargeError,
    RequestTimedOutError,
    StaleBrokerEpochError,
    StaleMemberEpochError,
    TopicExistsError,
    TransactionCompletedError,
    TransactionCoordinatorFencedError,
    TransactionDataMissingError,
    TwinlogError,
    UnknownLeaderEpochError,
    UnknownMemberIdError,
    UnknownProducerIdError,
    UnknownTopicOrPartitionError,
    UnknownTransactionError,
    UnreleasedInstanceIdError,
)

if TYPE_CHECKING:
    from twinlog.engine.base.types import TopicPartition
    from twinlog.engine.broker import Broker
    from twinlog.rpc.client import (
        Admin,
        Consumer,
        ConsumerGroupMetadata,
        ConsumerRebalanceListener,
        ConsumerRecord,
        Producer,
        RecordMetadata,
    )

__version__ = "0.2.0"

# name -> the module it lives in; imported on first use (see the docstring).
_LAZY = {
    "Broker": "twinlog.engine.broker",
    "Admin": "twinlog.rpc.client",
    "Consumer": "twinlog.rpc.client",
    "ConsumerRecord": "twinlog.rpc.client",
    "ConsumerGroupMetadata": "twinlog.rpc.client",
    "ConsumerRebalanceListener": "twinlog.rpc.client",
    "Producer": "twinlog.rpc.client",
    "RecordMetadata": "twinlog.rpc.client",
    "TopicPartition": "twinlog.engine.base.types",
}

__all__ = [
    "Admin",
    "AuthenticationError",
    "AuthorizationError",
    "BatchTooLargeError",
    "Broker",
    "BrokerUnavailableError",
    "ClusterAuthorizationError",
    "ConcurrentTransactionsError",
    "ConditionalWriteLostError",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "CoordinatorLoadInProgressError",
    "CorruptBatchError",
    "CorruptJournalError",
    "CorruptLogError",
    "DataDirFormatError",
    "DiskFullError",
    "DuplicateSequenceError",
    "FencedInstanceIdError",
    "FencedLeaderEpochError",
    "FencedMemberEpochError",
    "GroupIdNotFoundError",
    "GroupSubscribedToTopicError",
    "InvalidConfigError",
    "InvalidPartitionsError",
    "InvalidProducerGenerationError",
    "InvalidRecordError",
    "InvalidReplicaAssignmentError",
    "InvalidRequestError",
    "InvalidTxnStateError",
    "LogClosedError",
    "NoReassignmentInProgressError",
    "NonEmptyGroupError",
    "NotCoordinatorError",
    "NotEnoughReplicasAfterAppendError",
    "NotEnoughReplicasError",
    "NotEnoughResourcesError",
    "NotLeaderOrFollowerError",
    "OffsetMetadataTooLargeError",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "PendingTransactionError",
    "Producer",
    "ProducerFencedError",
    "RecordMetadata",
    "RecordTooLargeError",
    "RequestTimedOutError",
    "StaleBrokerEpochError",
    "StaleMemberEpochError",
    "TopicExistsError",
    "TopicPartition",
    "TransactionCompletedError",
    "TransactionCoordinatorFencedError",
    "TransactionDataMissingError",
    "TwinlogError",
    "UnknownLeaderEpochError",
    "UnknownMemberIdError",
    "UnknownProducerIdError",
    "UnknownTopicOrPartitionError",
    "UnknownTransactionError",
    "UnreleasedInstanceIdError",
    "__version__",
    "errors",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # once resolved, an ordinary attribute
        return value
    raise AttributeError(f"module 'twinlog' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
