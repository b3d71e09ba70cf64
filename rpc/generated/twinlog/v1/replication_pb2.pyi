from twinlog.rpc.generated.twinlog.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ReplicatedLog(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REPLICATED_LOG_DATA: _ClassVar[ReplicatedLog]
    REPLICATED_LOG_JOURNAL: _ClassVar[ReplicatedLog]
REPLICATED_LOG_DATA: ReplicatedLog
REPLICATED_LOG_JOURNAL: ReplicatedLog

class ReplicaFetchPartition(_message.Message):
    __slots__ = ("topic_partition", "log", "fetch_offset", "last_fetched_epoch", "current_leader_epoch", "max_bytes")
    TOPIC_PARTITION_FIELD_NUMBER: _ClassVar[int]
    LOG_FIELD_NUMBER: _ClassVar[int]
    FETCH_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_FETCHED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    CURRENT_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    topic_partition: _common_pb2.TopicPartition
    log: ReplicatedLog
    fetch_offset: int
    last_fetched_epoch: int
    current_leader_epoch: int
    max_bytes: int
    def __init__(self, topic_partition: _Optional[_Union[_common_pb2.TopicPartition, _Mapping]] = ..., log: _Optional[_Union[ReplicatedLog, str]] = ..., fetch_offset: _Optional[int] = ..., last_fetched_epoch: _Optional[int] = ..., current_leader_epoch: _Optional[int] = ..., max_bytes: _Optional[int] = ...) -> None: ...

class ReplicaFetchRequest(_message.Message):
    __slots__ = ("replica_id", "broker_epoch", "partitions", "max_wait_ms", "max_bytes")
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    MAX_WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    replica_id: int
    broker_epoch: int
    partitions: _containers.RepeatedCompositeFieldContainer[ReplicaFetchPartition]
    max_wait_ms: int
    max_bytes: int
    def __init__(self, replica_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[ReplicaFetchPartition, _Mapping]]] = ..., max_wait_ms: _Optional[int] = ..., max_bytes: _Optional[int] = ...) -> None: ...

class EpochEnd(_message.Message):
    __slots__ = ("epoch", "end_offset")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    end_offset: int
    def __init__(self, epoch: _Optional[int] = ..., end_offset: _Optional[int] = ...) -> None: ...

class FetchedPartition(_message.Message):
    __slots__ = ("topic_partition", "log", "records", "high_watermark", "log_start_offset", "log_end_offset", "diverging", "error", "message")
    TOPIC_PARTITION_FIELD_NUMBER: _ClassVar[int]
    LOG_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    DIVERGING_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    topic_partition: _common_pb2.TopicPartition
    log: ReplicatedLog
    records: bytes
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    diverging: EpochEnd
    error: str
    message: str
    def __init__(self, topic_partition: _Optional[_Union[_common_pb2.TopicPartition, _Mapping]] = ..., log: _Optional[_Union[ReplicatedLog, str]] = ..., records: _Optional[bytes] = ..., high_watermark: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., log_end_offset: _Optional[int] = ..., diverging: _Optional[_Union[EpochEnd, _Mapping]] = ..., error: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class ReplicaFetchResponse(_message.Message):
    __slots__ = ("partitions",)
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[FetchedPartition]
    def __init__(self, partitions: _Optional[_Iterable[_Union[FetchedPartition, _Mapping]]] = ...) -> None: ...
