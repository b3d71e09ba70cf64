from twinlog.rpc.generated.twinlog.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class FetchRequest(_message.Message):
    __slots__ = ("topic", "partition", "offset", "max_bytes", "max_wait_ms", "min_bytes", "current_leader_epoch")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    MIN_BYTES_FIELD_NUMBER: _ClassVar[int]
    CURRENT_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    offset: int
    max_bytes: int
    max_wait_ms: int
    min_bytes: int
    current_leader_epoch: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., offset: _Optional[int] = ..., max_bytes: _Optional[int] = ..., max_wait_ms: _Optional[int] = ..., min_bytes: _Optional[int] = ..., current_leader_epoch: _Optional[int] = ...) -> None: ...

class FetchResponse(_message.Message):
    __slots__ = ("records", "log_start_offset", "log_end_offset")
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    records: bytes
    log_start_offset: int
    log_end_offset: int
    def __init__(self, records: _Optional[bytes] = ..., log_start_offset: _Optional[int] = ..., log_end_offset: _Optional[int] = ...) -> None: ...

class ListOffsetRequest(_message.Message):
    __slots__ = ("topic", "partition", "position", "timestamp_ms")
    class Position(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        POSITION_UNSPECIFIED: _ClassVar[ListOffsetRequest.Position]
        POSITION_EARLIEST: _ClassVar[ListOffsetRequest.Position]
        POSITION_LATEST: _ClassVar[ListOffsetRequest.Position]
    POSITION_UNSPECIFIED: ListOffsetRequest.Position
    POSITION_EARLIEST: ListOffsetRequest.Position
    POSITION_LATEST: ListOffsetRequest.Position
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    position: ListOffsetRequest.Position
    timestamp_ms: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., position: _Optional[_Union[ListOffsetRequest.Position, str]] = ..., timestamp_ms: _Optional[int] = ...) -> None: ...

class ListOffsetResponse(_message.Message):
    __slots__ = ("offset",)
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    offset: int
    def __init__(self, offset: _Optional[int] = ...) -> None: ...

class CommitOffsetsRequest(_message.Message):
    __slots__ = ("group_id", "offsets", "member")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    MEMBER_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    offsets: _containers.RepeatedCompositeFieldContainer[_common_pb2.PartitionOffset]
    member: _common_pb2.GroupMember
    def __init__(self, group_id: _Optional[str] = ..., offsets: _Optional[_Iterable[_Union[_common_pb2.PartitionOffset, _Mapping]]] = ..., member: _Optional[_Union[_common_pb2.GroupMember, _Mapping]] = ...) -> None: ...

class CommitOffsetsResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class FetchOffsetsRequest(_message.Message):
    __slots__ = ("group_id", "partitions")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    partitions: _containers.RepeatedCompositeFieldContainer[_common_pb2.TopicPartition]
    def __init__(self, group_id: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[_common_pb2.TopicPartition, _Mapping]]] = ...) -> None: ...

class FetchOffsetsResponse(_message.Message):
    __slots__ = ("offsets",)
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    offsets: _containers.RepeatedCompositeFieldContainer[_common_pb2.PartitionOffset]
    def __init__(self, offsets: _Optional[_Iterable[_Union[_common_pb2.PartitionOffset, _Mapping]]] = ...) -> None: ...

class GroupHeartbeatRequest(_message.Message):
    __slots__ = ("group_id", "member_id", "member_epoch", "subscribed_topics", "subscribed_pattern", "owned", "instance_id", "client_id", "session_timeout_ms", "rebalance_timeout_ms")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBED_TOPICS_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBED_PATTERN_FIELD_NUMBER: _ClassVar[int]
    OWNED_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    REBALANCE_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    member_id: str
    member_epoch: int
    subscribed_topics: _containers.RepeatedScalarFieldContainer[str]
    subscribed_pattern: str
    owned: _containers.RepeatedCompositeFieldContainer[_common_pb2.TopicPartition]
    instance_id: str
    client_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    def __init__(self, group_id: _Optional[str] = ..., member_id: _Optional[str] = ..., member_epoch: _Optional[int] = ..., subscribed_topics: _Optional[_Iterable[str]] = ..., subscribed_pattern: _Optional[str] = ..., owned: _Optional[_Iterable[_Union[_common_pb2.TopicPartition, _Mapping]]] = ..., instance_id: _Optional[str] = ..., client_id: _Optional[str] = ..., session_timeout_ms: _Optional[int] = ..., rebalance_timeout_ms: _Optional[int] = ...) -> None: ...

class GroupHeartbeatResponse(_message.Message):
    __slots__ = ("member_id", "member_epoch", "heartbeat_interval_ms", "assigned")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    ASSIGNED_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assigned: _containers.RepeatedCompositeFieldContainer[_common_pb2.TopicPartition]
    def __init__(self, member_id: _Optional[str] = ..., member_epoch: _Optional[int] = ..., heartbeat_interval_ms: _Optional[int] = ..., assigned: _Optional[_Iterable[_Union[_common_pb2.TopicPartition, _Mapping]]] = ...) -> None: ...
