from twinlog.rpc.generated.twinlog.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TransactionState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TRANSACTION_STATE_UNSPECIFIED: _ClassVar[TransactionState]
    TRANSACTION_STATE_ONGOING: _ClassVar[TransactionState]
    TRANSACTION_STATE_PREPARE_COMMIT: _ClassVar[TransactionState]
    TRANSACTION_STATE_PREPARE_ABORT: _ClassVar[TransactionState]
    TRANSACTION_STATE_COMMITTED: _ClassVar[TransactionState]
    TRANSACTION_STATE_ABORTED: _ClassVar[TransactionState]

class CoordinatorKeyType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    COORDINATOR_KEY_TYPE_UNSPECIFIED: _ClassVar[CoordinatorKeyType]
    COORDINATOR_KEY_TYPE_TRANSACTION: _ClassVar[CoordinatorKeyType]
    COORDINATOR_KEY_TYPE_PRODUCER_ID: _ClassVar[CoordinatorKeyType]
    COORDINATOR_KEY_TYPE_GROUP: _ClassVar[CoordinatorKeyType]

class ElectionOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ELECTION_OUTCOME_UNSPECIFIED: _ClassVar[ElectionOutcome]
    ELECTION_OUTCOME_ELECTED: _ClassVar[ElectionOutcome]
    ELECTION_OUTCOME_NOT_NEEDED: _ClassVar[ElectionOutcome]
    ELECTION_OUTCOME_NOT_AVAILABLE: _ClassVar[ElectionOutcome]
    ELECTION_OUTCOME_UNKNOWN_PARTITION: _ClassVar[ElectionOutcome]
    ELECTION_OUTCOME_TIMED_OUT: _ClassVar[ElectionOutcome]
TRANSACTION_STATE_UNSPECIFIED: TransactionState
TRANSACTION_STATE_ONGOING: TransactionState
TRANSACTION_STATE_PREPARE_COMMIT: TransactionState
TRANSACTION_STATE_PREPARE_ABORT: TransactionState
TRANSACTION_STATE_COMMITTED: TransactionState
TRANSACTION_STATE_ABORTED: TransactionState
COORDINATOR_KEY_TYPE_UNSPECIFIED: CoordinatorKeyType
COORDINATOR_KEY_TYPE_TRANSACTION: CoordinatorKeyType
COORDINATOR_KEY_TYPE_PRODUCER_ID: CoordinatorKeyType
COORDINATOR_KEY_TYPE_GROUP: CoordinatorKeyType
ELECTION_OUTCOME_UNSPECIFIED: ElectionOutcome
ELECTION_OUTCOME_ELECTED: ElectionOutcome
ELECTION_OUTCOME_NOT_NEEDED: ElectionOutcome
ELECTION_OUTCOME_NOT_AVAILABLE: ElectionOutcome
ELECTION_OUTCOME_UNKNOWN_PARTITION: ElectionOutcome
ELECTION_OUTCOME_TIMED_OUT: ElectionOutcome

class CreateTopicRequest(_message.Message):
    __slots__ = ("name", "partitions", "config")
    class ConfigEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: int
    config: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[int] = ..., config: _Optional[_Mapping[str, str]] = ...) -> None: ...

class CreatePartitionsRequest(_message.Message):
    __slots__ = ("name", "partitions", "validate_only")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: int
    validate_only: bool
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[int] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class AlterTopicConfigRequest(_message.Message):
    __slots__ = ("name", "set", "delete", "validate_only")
    class SetEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    SET_FIELD_NUMBER: _ClassVar[int]
    DELETE_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    name: str
    set: _containers.ScalarMap[str, str]
    delete: _containers.RepeatedScalarFieldContainer[str]
    validate_only: bool
    def __init__(self, name: _Optional[str] = ..., set: _Optional[_Mapping[str, str]] = ..., delete: _Optional[_Iterable[str]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class DeleteTopicRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteTopicResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListTopicsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListTopicsResponse(_message.Message):
    __slots__ = ("names",)
    NAMES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ...) -> None: ...

class DescribeTopicRequest(_message.Message):
    __slots__ = ("name", "allow_auto_topic_creation")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ALLOW_AUTO_TOPIC_CREATION_FIELD_NUMBER: _ClassVar[int]
    name: str
    allow_auto_topic_creation: bool
    def __init__(self, name: _Optional[str] = ..., allow_auto_topic_creation: _Optional[bool] = ...) -> None: ...

class PartitionDescription(_message.Message):
    __slots__ = ("partition", "log_start_offset", "log_end_offset", "journal_entries_pending", "journal_bytes_pending")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    JOURNAL_ENTRIES_PENDING_FIELD_NUMBER: _ClassVar[int]
    JOURNAL_BYTES_PENDING_FIELD_NUMBER: _ClassVar[int]
    partition: int
    log_start_offset: int
    log_end_offset: int
    journal_entries_pending: int
    journal_bytes_pending: int
    def __init__(self, partition: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., log_end_offset: _Optional[int] = ..., journal_entries_pending: _Optional[int] = ..., journal_bytes_pending: _Optional[int] = ...) -> None: ...

class TopicDescription(_message.Message):
    __slots__ = ("name", "partitions", "config", "topic_id")
    class ConfigEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionDescription]
    config: _containers.ScalarMap[str, str]
    topic_id: str
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[PartitionDescription, _Mapping]]] = ..., config: _Optional[_Mapping[str, str]] = ..., topic_id: _Optional[str] = ...) -> None: ...

class ListTransactionsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TransactionDescription(_message.Message):
    __slots__ = ("transaction_id", "transactional_id", "producer_id", "producer_generation", "state", "partitions", "groups", "started_ms", "timeout_ms")
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_GENERATION_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    STARTED_MS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    transaction_id: int
    transactional_id: str
    producer_id: int
    producer_generation: int
    state: TransactionState
    partitions: _containers.RepeatedCompositeFieldContainer[_common_pb2.TopicPartition]
    groups: _containers.RepeatedScalarFieldContainer[str]
    started_ms: int
    timeout_ms: int
    def __init__(self, transaction_id: _Optional[int] = ..., transactional_id: _Optional[str] = ..., producer_id: _Optional[int] = ..., producer_generation: _Optional[int] = ..., state: _Optional[_Union[TransactionState, str]] = ..., partitions: _Optional[_Iterable[_Union[_common_pb2.TopicPartition, _Mapping]]] = ..., groups: _Optional[_Iterable[str]] = ..., started_ms: _Optional[int] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class ListTransactionsResponse(_message.Message):
    __slots__ = ("transactions",)
    TRANSACTIONS_FIELD_NUMBER: _ClassVar[int]
    transactions: _containers.RepeatedCompositeFieldContainer[TransactionDescription]
    def __init__(self, transactions: _Optional[_Iterable[_Union[TransactionDescription, _Mapping]]] = ...) -> None: ...

class AbortTransactionRequest(_message.Message):
    __slots__ = ("transaction_id",)
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    transaction_id: int
    def __init__(self, transaction_id: _Optional[int] = ...) -> None: ...

class AbortTransactionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeProducersRequest(_message.Message):
    __slots__ = ("topic", "partition")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ...) -> None: ...

class ProducerDescription(_message.Message):
    __slots__ = ("producer_id", "producer_generation", "last_sequence", "last_timestamp_ms", "current_transaction_id")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_GENERATION_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    LAST_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    CURRENT_TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    producer_generation: int
    last_sequence: int
    last_timestamp_ms: int
    current_transaction_id: int
    def __init__(self, producer_id: _Optional[int] = ..., producer_generation: _Optional[int] = ..., last_sequence: _Optional[int] = ..., last_timestamp_ms: _Optional[int] = ..., current_transaction_id: _Optional[int] = ...) -> None: ...

class DescribeProducersResponse(_message.Message):
    __slots__ = ("producers",)
    PRODUCERS_FIELD_NUMBER: _ClassVar[int]
    producers: _containers.RepeatedCompositeFieldContainer[ProducerDescription]
    def __init__(self, producers: _Optional[_Iterable[_Union[ProducerDescription, _Mapping]]] = ...) -> None: ...

class RecordsDeletion(_message.Message):
    __slots__ = ("partition", "before_offset")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    BEFORE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    partition: _common_pb2.TopicPartition
    before_offset: int
    def __init__(self, partition: _Optional[_Union[_common_pb2.TopicPartition, _Mapping]] = ..., before_offset: _Optional[int] = ...) -> None: ...

class DeleteRecordsRequest(_message.Message):
    __slots__ = ("partitions",)
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[RecordsDeletion]
    def __init__(self, partitions: _Optional[_Iterable[_Union[RecordsDeletion, _Mapping]]] = ...) -> None: ...

class RecordsDeleted(_message.Message):
    __slots__ = ("partition", "low_watermark", "error")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    LOW_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    partition: _common_pb2.TopicPartition
    low_watermark: int
    error: _common_pb2.Error
    def __init__(self, partition: _Optional[_Union[_common_pb2.TopicPartition, _Mapping]] = ..., low_watermark: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ...) -> None: ...

class DeleteRecordsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[RecordsDeleted]
    def __init__(self, results: _Optional[_Iterable[_Union[RecordsDeleted, _Mapping]]] = ...) -> None: ...

class MetadataRequest(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, topics: _Optional[_Iterable[str]] = ...) -> None: ...

class BrokerEndpoint(_message.Message):
    __slots__ = ("broker_id", "host", "port", "kafka_host", "kafka_port")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    KAFKA_HOST_FIELD_NUMBER: _ClassVar[int]
    KAFKA_PORT_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    host: str
    port: int
    kafka_host: str
    kafka_port: int
    def __init__(self, broker_id: _Optional[int] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., kafka_host: _Optional[str] = ..., kafka_port: _Optional[int] = ...) -> None: ...

class PartitionMetadata(_message.Message):
    __slots__ = ("partition", "leader_id", "leader_epoch", "replicas", "isr")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ISR_FIELD_NUMBER: _ClassVar[int]
    partition: int
    leader_id: int
    leader_epoch: int
    replicas: _containers.RepeatedScalarFieldContainer[int]
    isr: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, partition: _Optional[int] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ..., isr: _Optional[_Iterable[int]] = ...) -> None: ...

class TopicMetadata(_message.Message):
    __slots__ = ("name", "partitions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionMetadata]
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[PartitionMetadata, _Mapping]]] = ...) -> None: ...

class MetadataResponse(_message.Message):
    __slots__ = ("cluster_id", "controller_id", "brokers", "topics")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKERS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    controller_id: int
    brokers: _containers.RepeatedCompositeFieldContainer[BrokerEndpoint]
    topics: _containers.RepeatedCompositeFieldContainer[TopicMetadata]
    def __init__(self, cluster_id: _Optional[str] = ..., controller_id: _Optional[int] = ..., brokers: _Optional[_Iterable[_Union[BrokerEndpoint, _Mapping]]] = ..., topics: _Optional[_Iterable[_Union[TopicMetadata, _Mapping]]] = ...) -> None: ...

class FindCoordinatorRequest(_message.Message):
    __slots__ = ("key_type", "key")
    KEY_TYPE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    key_type: CoordinatorKeyType
    key: str
    def __init__(self, key_type: _Optional[_Union[CoordinatorKeyType, str]] = ..., key: _Optional[str] = ...) -> None: ...

class FindCoordinatorResponse(_message.Message):
    __slots__ = ("coordinator_partition", "coordinator")
    COORDINATOR_PARTITION_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_FIELD_NUMBER: _ClassVar[int]
    coordinator_partition: int
    coordinator: BrokerEndpoint
    def __init__(self, coordinator_partition: _Optional[int] = ..., coordinator: _Optional[_Union[BrokerEndpoint, _Mapping]] = ...) -> None: ...

class ListGroupsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GroupListing(_message.Message):
    __slots__ = ("group_id", "state", "member_count")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    MEMBER_COUNT_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    state: str
    member_count: int
    def __init__(self, group_id: _Optional[str] = ..., state: _Optional[str] = ..., member_count: _Optional[int] = ...) -> None: ...

class ListGroupsResponse(_message.Message):
    __slots__ = ("groups",)
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[GroupListing]
    def __init__(self, groups: _Optional[_Iterable[_Union[GroupListing, _Mapping]]] = ...) -> None: ...

class DescribeGroupRequest(_message.Message):
    __slots__ = ("group_id",)
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    def __init__(self, group_id: _Optional[str] = ...) -> None: ...

class GroupMemberDescription(_message.Message):
    __slots__ = ("member_id", "instance_id", "client_id", "member_epoch", "state", "subscribed_topics", "subscribed_pattern", "assigned", "revoking", "target")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBED_TOPICS_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBED_PATTERN_FIELD_NUMBER: _ClassVar[int]
    ASSIGNED_FIELD_NUMBER: _ClassVar[int]
    REVOKING_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    instance_id: str
    client_id: str
    member_epoch: int
    state: str
    subscribed_topics: _containers.RepeatedScalarFieldContainer[str]
    subscribed_pattern: str
    assigned: _containers.RepeatedCompositeFieldContainer[_common_pb2.TopicPartition]
    revoking: _containers.RepeatedCompositeFieldContainer[_common_pb2.TopicPartition]
    target: _containers.RepeatedCompositeFieldContainer[_common_pb2.TopicPartition]
    def __init__(self, member_id: _Optional[str] = ..., instance_id: _Optional[str] = ..., client_id: _Optional[str] = ..., member_epoch: _Optional[int] = ..., state: _Optional[str] = ..., subscribed_topics: _Optional[_Iterable[str]] = ..., subscribed_pattern: _Optional[str] = ..., assigned: _Optional[_Iterable[_Union[_common_pb2.TopicPartition, _Mapping]]] = ..., revoking: _Optional[_Iterable[_Union[_common_pb2.TopicPartition, _Mapping]]] = ..., target: _Optional[_Iterable[_Union[_common_pb2.TopicPartition, _Mapping]]] = ...) -> None: ...

class GroupDescription(_message.Message):
    __slots__ = ("group_id", "state", "group_epoch", "members", "committed")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    GROUP_EPOCH_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    state: str
    group_epoch: int
    members: _containers.RepeatedCompositeFieldContainer[GroupMemberDescription]
    committed: _containers.RepeatedCompositeFieldContainer[_common_pb2.PartitionOffset]
    def __init__(self, group_id: _Optional[str] = ..., state: _Optional[str] = ..., group_epoch: _Optional[int] = ..., members: _Optional[_Iterable[_Union[GroupMemberDescription, _Mapping]]] = ..., committed: _Optional[_Iterable[_Union[_common_pb2.PartitionOffset, _Mapping]]] = ...) -> None: ...

class DeleteGroupRequest(_message.Message):
    __slots__ = ("group_id",)
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    def __init__(self, group_id: _Optional[str] = ...) -> None: ...

class DeleteGroupResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DeleteGroupOffsetsRequest(_message.Message):
    __slots__ = ("group_id", "partitions")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    partitions: _containers.RepeatedCompositeFieldContainer[_common_pb2.TopicPartition]
    def __init__(self, group_id: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[_common_pb2.TopicPartition, _Mapping]]] = ...) -> None: ...

class GroupOffsetDeleted(_message.Message):
    __slots__ = ("partition", "error")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    partition: _common_pb2.TopicPartition
    error: _common_pb2.Error
    def __init__(self, partition: _Optional[_Union[_common_pb2.TopicPartition, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ...) -> None: ...

class DeleteGroupOffsetsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[GroupOffsetDeleted]
    def __init__(self, results: _Optional[_Iterable[_Union[GroupOffsetDeleted, _Mapping]]] = ...) -> None: ...

class ElectLeadersRequest(_message.Message):
    __slots__ = ("partitions", "timeout_ms")
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[_common_pb2.TopicPartition]
    timeout_ms: int
    def __init__(self, partitions: _Optional[_Iterable[_Union[_common_pb2.TopicPartition, _Mapping]]] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class ElectionResult(_message.Message):
    __slots__ = ("partition", "outcome", "leader", "preferred", "message")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    PREFERRED_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    partition: _common_pb2.TopicPartition
    outcome: ElectionOutcome
    leader: int
    preferred: int
    message: str
    def __init__(self, partition: _Optional[_Union[_common_pb2.TopicPartition, _Mapping]] = ..., outcome: _Optional[_Union[ElectionOutcome, str]] = ..., leader: _Optional[int] = ..., preferred: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class ElectLeadersResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[ElectionResult]
    def __init__(self, results: _Optional[_Iterable[_Union[ElectionResult, _Mapping]]] = ...) -> None: ...

class TopicSetting(_message.Message):
    __slots__ = ("name", "value", "set_on_topic")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    SET_ON_TOPIC_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    set_on_topic: bool
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ..., set_on_topic: _Optional[bool] = ...) -> None: ...

class TopicSettings(_message.Message):
    __slots__ = ("settings",)
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    settings: _containers.RepeatedCompositeFieldContainer[TopicSetting]
    def __init__(self, settings: _Optional[_Iterable[_Union[TopicSetting, _Mapping]]] = ...) -> None: ...

class PartitionMove(_message.Message):
    __slots__ = ("partition", "replicas")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    partition: _common_pb2.TopicPartition
    replicas: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, partition: _Optional[_Union[_common_pb2.TopicPartition, _Mapping]] = ..., replicas: _Optional[_Iterable[int]] = ...) -> None: ...

class ReassignPartitionsRequest(_message.Message):
    __slots__ = ("moves", "throttle_bytes_per_s", "timeout_ms")
    MOVES_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_BYTES_PER_S_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    moves: _containers.RepeatedCompositeFieldContainer[PartitionMove]
    throttle_bytes_per_s: int
    timeout_ms: int
    def __init__(self, moves: _Optional[_Iterable[_Union[PartitionMove, _Mapping]]] = ..., throttle_bytes_per_s: _Optional[int] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class MoveResult(_message.Message):
    __slots__ = ("partition", "error")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    partition: _common_pb2.TopicPartition
    error: _common_pb2.Error
    def __init__(self, partition: _Optional[_Union[_common_pb2.TopicPartition, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ...) -> None: ...

class ReassignPartitionsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[MoveResult]
    def __init__(self, results: _Optional[_Iterable[_Union[MoveResult, _Mapping]]] = ...) -> None: ...

class ListPartitionReassignmentsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ReplicaProgress(_message.Message):
    __slots__ = ("broker_id", "offsets_behind", "bytes_behind", "in_sync")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_BEHIND_FIELD_NUMBER: _ClassVar[int]
    BYTES_BEHIND_FIELD_NUMBER: _ClassVar[int]
    IN_SYNC_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    offsets_behind: int
    bytes_behind: int
    in_sync: bool
    def __init__(self, broker_id: _Optional[int] = ..., offsets_behind: _Optional[int] = ..., bytes_behind: _Optional[int] = ..., in_sync: _Optional[bool] = ...) -> None: ...

class PartitionReassignment(_message.Message):
    __slots__ = ("partition", "replicas", "adding", "removing", "leader", "throttle_bytes_per_s", "progress", "original")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ADDING_FIELD_NUMBER: _ClassVar[int]
    REMOVING_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_BYTES_PER_S_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    ORIGINAL_FIELD_NUMBER: _ClassVar[int]
    partition: _common_pb2.TopicPartition
    replicas: _containers.RepeatedScalarFieldContainer[int]
    adding: _containers.RepeatedScalarFieldContainer[int]
    removing: _containers.RepeatedScalarFieldContainer[int]
    leader: int
    throttle_bytes_per_s: int
    progress: _containers.RepeatedCompositeFieldContainer[ReplicaProgress]
    original: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, partition: _Optional[_Union[_common_pb2.TopicPartition, _Mapping]] = ..., replicas: _Optional[_Iterable[int]] = ..., adding: _Optional[_Iterable[int]] = ..., removing: _Optional[_Iterable[int]] = ..., leader: _Optional[int] = ..., throttle_bytes_per_s: _Optional[int] = ..., progress: _Optional[_Iterable[_Union[ReplicaProgress, _Mapping]]] = ..., original: _Optional[_Iterable[int]] = ...) -> None: ...

class ListPartitionReassignmentsResponse(_message.Message):
    __slots__ = ("reassignments",)
    REASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    reassignments: _containers.RepeatedCompositeFieldContainer[PartitionReassignment]
    def __init__(self, reassignments: _Optional[_Iterable[_Union[PartitionReassignment, _Mapping]]] = ...) -> None: ...

class ShutdownBrokerRequest(_message.Message):
    __slots__ = ("broker_id",)
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    def __init__(self, broker_id: _Optional[int] = ...) -> None: ...

class ShutdownBrokerResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SetScramCredentialRequest(_message.Message):
    __slots__ = ("user", "mechanism", "iterations", "salt", "salted_password")
    USER_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    SALT_FIELD_NUMBER: _ClassVar[int]
    SALTED_PASSWORD_FIELD_NUMBER: _ClassVar[int]
    user: str
    mechanism: str
    iterations: int
    salt: bytes
    salted_password: bytes
    def __init__(self, user: _Optional[str] = ..., mechanism: _Optional[str] = ..., iterations: _Optional[int] = ..., salt: _Optional[bytes] = ..., salted_password: _Optional[bytes] = ...) -> None: ...

class SetScramCredentialResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DeleteScramCredentialRequest(_message.Message):
    __slots__ = ("user", "mechanism")
    USER_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    user: str
    mechanism: str
    def __init__(self, user: _Optional[str] = ..., mechanism: _Optional[str] = ...) -> None: ...

class DeleteScramCredentialResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListScramUsersRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ScramUser(_message.Message):
    __slots__ = ("user", "mechanisms", "iterations")
    USER_FIELD_NUMBER: _ClassVar[int]
    MECHANISMS_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    user: str
    mechanisms: _containers.RepeatedScalarFieldContainer[str]
    iterations: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, user: _Optional[str] = ..., mechanisms: _Optional[_Iterable[str]] = ..., iterations: _Optional[_Iterable[int]] = ...) -> None: ...

class ListScramUsersResponse(_message.Message):
    __slots__ = ("users",)
    USERS_FIELD_NUMBER: _ClassVar[int]
    users: _containers.RepeatedCompositeFieldContainer[ScramUser]
    def __init__(self, users: _Optional[_Iterable[_Union[ScramUser, _Mapping]]] = ...) -> None: ...

class AclGrant(_message.Message):
    __slots__ = ("principal", "operation", "resource_type", "name", "pattern_type", "source")
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PATTERN_TYPE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    principal: str
    operation: str
    resource_type: str
    name: str
    pattern_type: str
    source: str
    def __init__(self, principal: _Optional[str] = ..., operation: _Optional[str] = ..., resource_type: _Optional[str] = ..., name: _Optional[str] = ..., pattern_type: _Optional[str] = ..., source: _Optional[str] = ...) -> None: ...

class ListAclsRequest(_message.Message):
    __slots__ = ("principal", "resource_type")
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    principal: str
    resource_type: str
    def __init__(self, principal: _Optional[str] = ..., resource_type: _Optional[str] = ...) -> None: ...

class ListAclsResponse(_message.Message):
    __slots__ = ("grants",)
    GRANTS_FIELD_NUMBER: _ClassVar[int]
    grants: _containers.RepeatedCompositeFieldContainer[AclGrant]
    def __init__(self, grants: _Optional[_Iterable[_Union[AclGrant, _Mapping]]] = ...) -> None: ...

class CreateAclsRequest(_message.Message):
    __slots__ = ("grants",)
    GRANTS_FIELD_NUMBER: _ClassVar[int]
    grants: _containers.RepeatedCompositeFieldContainer[AclGrant]
    def __init__(self, grants: _Optional[_Iterable[_Union[AclGrant, _Mapping]]] = ...) -> None: ...

class CreateAclsResponse(_message.Message):
    __slots__ = ("created",)
    CREATED_FIELD_NUMBER: _ClassVar[int]
    created: _containers.RepeatedCompositeFieldContainer[AclGrant]
    def __init__(self, created: _Optional[_Iterable[_Union[AclGrant, _Mapping]]] = ...) -> None: ...

class DeleteAclsRequest(_message.Message):
    __slots__ = ("grants",)
    GRANTS_FIELD_NUMBER: _ClassVar[int]
    grants: _containers.RepeatedCompositeFieldContainer[AclGrant]
    def __init__(self, grants: _Optional[_Iterable[_Union[AclGrant, _Mapping]]] = ...) -> None: ...

class DeleteAclsResponse(_message.Message):
    __slots__ = ("deleted",)
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: _containers.RepeatedCompositeFieldContainer[AclGrant]
    def __init__(self, deleted: _Optional[_Iterable[_Union[AclGrant, _Mapping]]] = ...) -> None: ...
