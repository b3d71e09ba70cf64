from twinlog.rpc.generated.twinlog.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Empty(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class InitProducerRequest(_message.Message):
    __slots__ = ("transactional_id", "transaction_timeout_ms")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    transaction_timeout_ms: int
    def __init__(self, transactional_id: _Optional[str] = ..., transaction_timeout_ms: _Optional[int] = ...) -> None: ...

class InitProducerResponse(_message.Message):
    __slots__ = ("producer_id", "producer_generation")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_GENERATION_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    producer_generation: int
    def __init__(self, producer_id: _Optional[int] = ..., producer_generation: _Optional[int] = ...) -> None: ...

class ProduceRequest(_message.Message):
    __slots__ = ("topic", "partition", "batch", "correlation_id", "attempt", "transaction_id", "current_leader_epoch", "more")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    CURRENT_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    batch: bytes
    correlation_id: int
    attempt: str
    transaction_id: int
    current_leader_epoch: int
    more: _containers.RepeatedCompositeFieldContainer[ProduceRequest]
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., batch: _Optional[bytes] = ..., correlation_id: _Optional[int] = ..., attempt: _Optional[str] = ..., transaction_id: _Optional[int] = ..., current_leader_epoch: _Optional[int] = ..., more: _Optional[_Iterable[_Union[ProduceRequest, _Mapping]]] = ...) -> None: ...

class ProduceResponse(_message.Message):
    __slots__ = ("base_offset", "duplicate", "correlation_id", "error", "more")
    BASE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    base_offset: int
    duplicate: bool
    correlation_id: int
    error: _common_pb2.Error
    more: _containers.RepeatedCompositeFieldContainer[ProduceResponse]
    def __init__(self, base_offset: _Optional[int] = ..., duplicate: _Optional[bool] = ..., correlation_id: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ..., more: _Optional[_Iterable[_Union[ProduceResponse, _Mapping]]] = ...) -> None: ...

class TransactionRef(_message.Message):
    __slots__ = ("transaction_id", "producer_id", "producer_generation")
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_GENERATION_FIELD_NUMBER: _ClassVar[int]
    transaction_id: int
    producer_id: int
    producer_generation: int
    def __init__(self, transaction_id: _Optional[int] = ..., producer_id: _Optional[int] = ..., producer_generation: _Optional[int] = ...) -> None: ...

class BeginTransactionRequest(_message.Message):
    __slots__ = ("producer_id", "producer_generation", "request_id")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_GENERATION_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    producer_generation: int
    request_id: int
    def __init__(self, producer_id: _Optional[int] = ..., producer_generation: _Optional[int] = ..., request_id: _Optional[int] = ...) -> None: ...

class BeginTransactionResponse(_message.Message):
    __slots__ = ("transaction_id",)
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    transaction_id: int
    def __init__(self, transaction_id: _Optional[int] = ...) -> None: ...

class AddPartitionsToTransactionRequest(_message.Message):
    __slots__ = ("transaction", "partitions")
    TRANSACTION_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    transaction: TransactionRef
    partitions: _containers.RepeatedCompositeFieldContainer[_common_pb2.TopicPartition]
    def __init__(self, transaction: _Optional[_Union[TransactionRef, _Mapping]] = ..., partitions: _Optional[_Iterable[_Union[_common_pb2.TopicPartition, _Mapping]]] = ...) -> None: ...

class SendOffsetsToTransactionRequest(_message.Message):
    __slots__ = ("transaction", "group_id", "offsets", "member")
    TRANSACTION_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    MEMBER_FIELD_NUMBER: _ClassVar[int]
    transaction: TransactionRef
    group_id: str
    offsets: _containers.RepeatedCompositeFieldContainer[_common_pb2.PartitionOffset]
    member: _common_pb2.GroupMember
    def __init__(self, transaction: _Optional[_Union[TransactionRef, _Mapping]] = ..., group_id: _Optional[str] = ..., offsets: _Optional[_Iterable[_Union[_common_pb2.PartitionOffset, _Mapping]]] = ..., member: _Optional[_Union[_common_pb2.GroupMember, _Mapping]] = ...) -> None: ...

class EndTransactionRequest(_message.Message):
    __slots__ = ("transaction", "wait_for_applied", "select_attempts", "attempts", "batches_written")
    TRANSACTION_FIELD_NUMBER: _ClassVar[int]
    WAIT_FOR_APPLIED_FIELD_NUMBER: _ClassVar[int]
    SELECT_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    BATCHES_WRITTEN_FIELD_NUMBER: _ClassVar[int]
    transaction: TransactionRef
    wait_for_applied: bool
    select_attempts: bool
    attempts: _containers.RepeatedScalarFieldContainer[str]
    batches_written: _containers.RepeatedCompositeFieldContainer[PartitionCount]
    def __init__(self, transaction: _Optional[_Union[TransactionRef, _Mapping]] = ..., wait_for_applied: _Optional[bool] = ..., select_attempts: _Optional[bool] = ..., attempts: _Optional[_Iterable[str]] = ..., batches_written: _Optional[_Iterable[_Union[PartitionCount, _Mapping]]] = ...) -> None: ...

class PartitionCount(_message.Message):
    __slots__ = ("partition", "count")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    partition: _common_pb2.TopicPartition
    count: int
    def __init__(self, partition: _Optional[_Union[_common_pb2.TopicPartition, _Mapping]] = ..., count: _Optional[int] = ...) -> None: ...
