from twinlog.rpc.generated.twinlog.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CallEpochs(_message.Message):
    __slots__ = ("coordinator_partition", "coordinator_epoch", "leader_epoch")
    COORDINATOR_PARTITION_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    coordinator_partition: int
    coordinator_epoch: int
    leader_epoch: int
    def __init__(self, coordinator_partition: _Optional[int] = ..., coordinator_epoch: _Optional[int] = ..., leader_epoch: _Optional[int] = ...) -> None: ...

class RegisterPartitionRequest(_message.Message):
    __slots__ = ("transaction_id", "topic_partition", "producer_id", "producer_generation", "epochs", "group_id")
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_PARTITION_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_GENERATION_FIELD_NUMBER: _ClassVar[int]
    EPOCHS_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    transaction_id: int
    topic_partition: _common_pb2.TopicPartition
    producer_id: int
    producer_generation: int
    epochs: CallEpochs
    group_id: str
    def __init__(self, transaction_id: _Optional[int] = ..., topic_partition: _Optional[_Union[_common_pb2.TopicPartition, _Mapping]] = ..., producer_id: _Optional[int] = ..., producer_generation: _Optional[int] = ..., epochs: _Optional[_Union[CallEpochs, _Mapping]] = ..., group_id: _Optional[str] = ...) -> None: ...

class RegisterPartitionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CountEntriesRequest(_message.Message):
    __slots__ = ("transaction_id", "topic_partition", "epochs")
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_PARTITION_FIELD_NUMBER: _ClassVar[int]
    EPOCHS_FIELD_NUMBER: _ClassVar[int]
    transaction_id: int
    topic_partition: _common_pb2.TopicPartition
    epochs: CallEpochs
    def __init__(self, transaction_id: _Optional[int] = ..., topic_partition: _Optional[_Union[_common_pb2.TopicPartition, _Mapping]] = ..., epochs: _Optional[_Union[CallEpochs, _Mapping]] = ...) -> None: ...

class CountEntriesResponse(_message.Message):
    __slots__ = ("entry_count",)
    ENTRY_COUNT_FIELD_NUMBER: _ClassVar[int]
    entry_count: int
    def __init__(self, entry_count: _Optional[int] = ...) -> None: ...

class AttemptNames(_message.Message):
    __slots__ = ("names",)
    NAMES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ...) -> None: ...

class ApplyCommitRequest(_message.Message):
    __slots__ = ("transaction_id", "topic_partition", "attempts", "entry_count", "epochs")
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_PARTITION_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    ENTRY_COUNT_FIELD_NUMBER: _ClassVar[int]
    EPOCHS_FIELD_NUMBER: _ClassVar[int]
    transaction_id: int
    topic_partition: _common_pb2.TopicPartition
    attempts: AttemptNames
    entry_count: int
    epochs: CallEpochs
    def __init__(self, transaction_id: _Optional[int] = ..., topic_partition: _Optional[_Union[_common_pb2.TopicPartition, _Mapping]] = ..., attempts: _Optional[_Union[AttemptNames, _Mapping]] = ..., entry_count: _Optional[int] = ..., epochs: _Optional[_Union[CallEpochs, _Mapping]] = ...) -> None: ...

class ApplyCommitResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ApplyCommitsRequest(_message.Message):
    __slots__ = ("requests",)
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    requests: _containers.RepeatedCompositeFieldContainer[ApplyCommitRequest]
    def __init__(self, requests: _Optional[_Iterable[_Union[ApplyCommitRequest, _Mapping]]] = ...) -> None: ...

class ApplyCommitOutcome(_message.Message):
    __slots__ = ("error",)
    ERROR_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.Error
    def __init__(self, error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ...) -> None: ...

class ApplyCommitsResponse(_message.Message):
    __slots__ = ("outcomes",)
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    outcomes: _containers.RepeatedCompositeFieldContainer[ApplyCommitOutcome]
    def __init__(self, outcomes: _Optional[_Iterable[_Union[ApplyCommitOutcome, _Mapping]]] = ...) -> None: ...

class ApplyAbortRequest(_message.Message):
    __slots__ = ("transaction_id", "topic_partition", "epochs")
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_PARTITION_FIELD_NUMBER: _ClassVar[int]
    EPOCHS_FIELD_NUMBER: _ClassVar[int]
    transaction_id: int
    topic_partition: _common_pb2.TopicPartition
    epochs: CallEpochs
    def __init__(self, transaction_id: _Optional[int] = ..., topic_partition: _Optional[_Union[_common_pb2.TopicPartition, _Mapping]] = ..., epochs: _Optional[_Union[CallEpochs, _Mapping]] = ...) -> None: ...

class ApplyAbortResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SettleOffsetsHolderRequest(_message.Message):
    __slots__ = ("holder_id", "newcomer_id", "group_id", "topic_partition", "newcomer_is_member")
    HOLDER_ID_FIELD_NUMBER: _ClassVar[int]
    NEWCOMER_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_PARTITION_FIELD_NUMBER: _ClassVar[int]
    NEWCOMER_IS_MEMBER_FIELD_NUMBER: _ClassVar[int]
    holder_id: int
    newcomer_id: int
    group_id: str
    topic_partition: _common_pb2.TopicPartition
    newcomer_is_member: bool
    def __init__(self, holder_id: _Optional[int] = ..., newcomer_id: _Optional[int] = ..., group_id: _Optional[str] = ..., topic_partition: _Optional[_Union[_common_pb2.TopicPartition, _Mapping]] = ..., newcomer_is_member: _Optional[bool] = ...) -> None: ...

class SettleOffsetsHolderResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class LookupProducerRequest(_message.Message):
    __slots__ = ("producer_id", "producer_generation")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_GENERATION_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    producer_generation: int
    def __init__(self, producer_id: _Optional[int] = ..., producer_generation: _Optional[int] = ...) -> None: ...

class LookupProducerResponse(_message.Message):
    __slots__ = ("known", "transactional_id", "has_ongoing", "ongoing_transaction_id")
    KNOWN_FIELD_NUMBER: _ClassVar[int]
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    HAS_ONGOING_FIELD_NUMBER: _ClassVar[int]
    ONGOING_TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    known: bool
    transactional_id: str
    has_ongoing: bool
    ongoing_transaction_id: int
    def __init__(self, known: _Optional[bool] = ..., transactional_id: _Optional[str] = ..., has_ongoing: _Optional[bool] = ..., ongoing_transaction_id: _Optional[int] = ...) -> None: ...
