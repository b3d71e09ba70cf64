"""The coordination calls survive protobuf, bytes on the wire included, field by field;
``attempts`` None and () stay apart."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import pytest

from twinlog.engine.base.errors import FencedLeaderEpochError, InvalidTxnStateError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.transactions.partition_calls import (
    PARTITION_GONE,
    ApplyAbort,
    ApplyCommit,
    CallEpochs,
    CountEntries,
    EntryCount,
    RegisterPartition,
    SettleOffsetsHolder,
)
from twinlog.rpc.generated.twinlog.v1 import coordination_pb2
from twinlog.rpc.replication.coordination_convert import (
    abort_from_proto,
    abort_to_proto,
    commit_from_proto,
    commit_outcomes_from_proto,
    commit_outcomes_to_proto,
    commit_to_proto,
    commits_from_proto,
    commits_to_proto,
    count_from_proto,
    count_to_proto,
    entry_count_from_proto,
    entry_count_to_proto,
    epochs_from_proto,
    epochs_to_proto,
    register_from_proto,
    register_to_proto,
    settle_from_proto,
    settle_to_proto,
)

# Values unlike every default and unlike each other, so a field the encoder forgot or
# swapped cannot pass by accident.
EPOCHS = CallEpochs(coordinator_partition=7, coordinator_epoch=11, leader_epoch=13)
TP = TopicPartition("orders", 5)
TRANSACTION_ID = (1 << 40) + 7  # ids are 64-bit
REGISTER = RegisterPartition(TRANSACTION_ID, TP, (1 << 33) + 3, 9, EPOCHS)
COUNT = CountEntries(TRANSACTION_ID, TP, EPOCHS)
ABORT = ApplyAbort(TRANSACTION_ID, TP, EPOCHS)
SETTLE = SettleOffsetsHolder((1 << 41) + 3, TRANSACTION_ID, "billing-é", TP, True)


def _commit(attempts: tuple[str, ...] | None, entry_count: int = 42) -> ApplyCommit:
    return ApplyCommit(TRANSACTION_ID, TP, attempts, entry_count, EPOCHS)


def _through_bytes(message: Any) -> Any:
    return type(message).FromString(message.SerializeToString())


def test_epochs_round_trip() -> None:
    assert epochs_from_proto(_through_bytes(epochs_to_proto(EPOCHS))) == EPOCHS


def test_register_partition_round_trips() -> None:
    decoded = register_from_proto(_through_bytes(register_to_proto(REGISTER)))
    assert decoded == REGISTER
    assert type(decoded.topic_partition) is TopicPartition
    assert type(decoded.epochs) is CallEpochs


def test_count_entries_and_its_answer_round_trip() -> None:
    decoded = count_from_proto(_through_bytes(count_to_proto(COUNT)))
    assert decoded == COUNT
    assert type(decoded.topic_partition) is TopicPartition
    for answer in (EntryCount(0), EntryCount(1_000_000_000_000), EntryCount(PARTITION_GONE)):
        assert entry_count_from_proto(_through_bytes(entry_count_to_proto(answer))) == answer


def test_apply_abort_round_trips() -> None:
    assert abort_from_proto(_through_bytes(abort_to_proto(ABORT))) == ABORT


def test_settle_offsets_holder_round_trips() -> None:
    decoded = settle_from_proto(_through_bytes(settle_to_proto(SETTLE)))
    assert decoded == SETTLE
    assert type(decoded.topic_partition) is TopicPartition


@pytest.mark.parametrize(
    "attempts",
    [None, (), ("attempt-1",), ("a", "", "é-2")],
    ids=["every-attempt", "no-attempt", "one", "several"],
)
def test_apply_commit_round_trips_with_its_attempts(attempts: tuple[str, ...] | None) -> None:
    decoded = commit_from_proto(_through_bytes(commit_to_proto(_commit(attempts))))
    assert decoded == _commit(attempts)
    assert decoded.attempts == attempts
    assert (decoded.attempts is None) == (attempts is None)
    if attempts is not None:
        assert type(decoded.attempts) is tuple


def test_a_copy_group_round_trips_in_order() -> None:
    group = [_commit(None), _commit(("a",), 3), _commit((), 0)]
    assert commits_from_proto(_through_bytes(commits_to_proto(group))) == group


def test_a_copy_groups_outcomes_round_trip_each_in_its_place() -> None:
    sent: list[BaseException | None] = [
        None,
        InvalidTxnStateError("transaction 7 is ABORTED on orders-5"),
        None,
        FencedLeaderEpochError("orders-5: leader epoch 3 is older than 4"),
    ]
    received = commit_outcomes_from_proto(_through_bytes(commit_outcomes_to_proto(sent)))
    assert [type(outcome) for outcome in received] == [type(outcome) for outcome in sent]
    assert [str(outcome) for outcome in received] == [str(outcome) for outcome in sent]
    fenced = received[3]
    assert isinstance(fenced, FencedLeaderEpochError)
    assert fenced.retriable == FencedLeaderEpochError("").retriable


def test_attempts_none_and_empty_differ_on_the_wire() -> None:
    every = commit_to_proto(_commit(None))
    none_named = commit_to_proto(_commit(()))
    assert not every.HasField("attempts")
    assert none_named.HasField("attempts")
    assert every.SerializeToString() != none_named.SerializeToString()


def test_a_plain_pair_is_accepted_as_a_topic_partition() -> None:
    request = CountEntries(1, ("t", 4), EPOCHS)  # type: ignore[arg-type]
    assert count_from_proto(count_to_proto(request)).topic_partition == TopicPartition("t", 4)


def test_zero_values_travel_as_they_are() -> None:
    # Epoch 0 and entry count 0 are real values (one node, an uncounted commit).
    zero = ApplyCommit(0, TopicPartition("t", 0), None, 0, CallEpochs(0, 0, 0))
    assert commit_from_proto(_through_bytes(commit_to_proto(zero))) == zero


def test_every_dataclass_field_has_a_wire_field() -> None:
    # A field added to partition_calls.py must be added to coordination.proto and the
    # converter.
    pairs = [
        (CallEpochs, coordination_pb2.CallEpochs),
        (RegisterPartition, coordination_pb2.RegisterPartitionRequest),
        (CountEntries, coordination_pb2.CountEntriesRequest),
        (EntryCount, coordination_pb2.CountEntriesResponse),
        (ApplyCommit, coordination_pb2.ApplyCommitRequest),
        (ApplyAbort, coordination_pb2.ApplyAbortRequest),
        (SettleOffsetsHolder, coordination_pb2.SettleOffsetsHolderRequest),
    ]
    for dataclass_type, message_type in pairs:
        names = {field.name for field in fields(dataclass_type)}
        wire = set(message_type.DESCRIPTOR.fields_by_name)
        assert names == wire, (dataclass_type.__name__, names ^ wire)
