"""The member records of ``__consumer_offsets``: encoders and decoders, and the fold of a
partition's records into the members a new coordinator restores (latest record per key,
a null value deleting the member, an epoch record in the same batch)."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from twinlog.engine.base.errors import CorruptJournalError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.group_member_records import (
    decode_member_key,
    decode_member_value,
    encode_member_key,
    encode_member_value,
)
from twinlog.engine.broker.group_offsets import (
    GroupOffsets,
    build_group_change_batch,
    build_offsets_batch,
    pending_offsets,
)
from twinlog.engine.groups.durable_member import DurableMember, GroupChange, StoredGroup
from twinlog.engine.groups.group_calls import PROTOCOL_CLASSIC, PROTOCOL_CONSUMER
from twinlog.engine.groups.member_assignment import MemberAssignment, MemberState
from twinlog.engine.records.batch_reader import Record, iter_batches

P0, P1, P2 = (TopicPartition("orders", i) for i in range(3))
LATER0 = TopicPartition("later", 0)


def member(member_id: str = "m-1", **changes: object) -> DurableMember:
    fields: dict[str, object] = {
        "member_id": member_id,
        "instance_id": "host-7",
        "client_id": "ingest",
        "subscribed_topics": ("later", "orders"),
        "subscribed_pattern": "orders|later",
        "session_timeout_ms": 10_000,
        "rebalance_timeout_ms": 20_000,
        "assignment": MemberAssignment(
            MemberState.UNREVOKED_PARTITIONS,
            5,
            MappingProxyType({P0: 3, LATER0: 5}),
            MappingProxyType({P2: 4}),
        ),
        "previous_member_epoch": 3,
        "left_static": True,
        "target": frozenset({P0, P1, LATER0}),
    }
    fields.update(changes)
    return DurableMember(**fields)  # type: ignore[arg-type]


def records(*batches: bytes) -> list[Record]:
    return [r for b in batches for one in iter_batches(b) for r in one.records()]


def restored(*batches: bytes) -> tuple[GroupOffsets, list[StoredGroup]]:
    offsets = GroupOffsets(1)
    found: list[StoredGroup] = []
    offsets.restore_with(found.extend)
    offsets.replace_partition(0, records(*batches), [])
    return offsets, found


def test_a_member_round_trips_with_every_field() -> None:
    original = member()
    assert decode_member_key(encode_member_key("g", "m-1")) == ("g", "m-1")
    assert decode_member_value("m-1", encode_member_value(original)) == original
    plain = member(
        instance_id=None,
        subscribed_pattern=None,
        subscribed_topics=(),
        assignment=MemberAssignment(),
        previous_member_epoch=-1,
        left_static=False,
        target=frozenset(),
    )
    assert decode_member_value("m-1", encode_member_value(plain)) == plain


def test_a_kafka_member_is_written_as_version_2_with_its_protocol_twinlogs_as_version_1() -> None:
    own = encode_member_value(member())
    assert own[:2] == b"\x00\x01"  # a broker of the earlier release reads it
    for protocol in (PROTOCOL_CONSUMER, PROTOCOL_CLASSIC):
        kafkas = member(protocol=protocol)
        value = encode_member_value(kafkas)
        assert value[:2] == b"\x00\x02"
        assert value[2:].startswith(own[2:])  # version 1's fields, then the protocol
        assert decode_member_value("m-1", value) == kafkas
    unknown = b"\x00\x02" + own[2:] + b"\x00\x03mqt"
    with pytest.raises(CorruptJournalError, match="protocol 'mqt'"):
        decode_member_value("m-1", unknown)
    with pytest.raises(CorruptJournalError, match="member 'm-1'"):
        decode_member_value("m-1", b"\x00\x02" + own[2:])  # version 2 without it


@pytest.mark.parametrize(
    "damage",
    [
        lambda v: v[:-1],  # cut short
        lambda v: v + b"\x00",  # a byte after the end
        lambda v: b"\x00\x09" + v[2:],  # an unknown version
        lambda v: v[:2] + b"\x7f\xff" + v[4:],  # a string longer than the value
    ],
)
def test_a_damaged_member_value_is_a_corrupt_journal_error(damage: object) -> None:
    value = encode_member_value(member())
    with pytest.raises(CorruptJournalError, match="member 'm-1'"):
        decode_member_value("m-1", damage(value))  # type: ignore[operator]


def test_a_value_that_breaks_an_assignment_invariant_is_corrupt() -> None:
    """A revoking partition in a stable member: what no coordinator writes."""
    value = bytearray(encode_member_value(member()))
    state_at = value.index(b"\x00\x00\x27\x10\x00\x00\x4e\x20") + 8  # after the timeouts
    value[state_at] = 0  # stable
    with pytest.raises(CorruptJournalError, match="revoking"):
        decode_member_value("m-1", bytes(value))


def test_a_damaged_member_key_is_a_corrupt_journal_error() -> None:
    with pytest.raises(CorruptJournalError, match="member key"):
        decode_member_key(encode_member_key("g", "m-1")[:-2])


def test_the_fold_keeps_the_latest_record_of_each_member_and_drops_the_removed() -> None:
    first = build_group_change_batch(GroupChange("g", 4, (member("a"), member("b"), member("c"))))
    second = build_group_change_batch(
        GroupChange("g", 5, (member("a", client_id="newer"),), removed=("b",))
    )
    offsets, found = restored(
        first, build_offsets_batch("g", {P0: 11}), second, build_offsets_batch("h", {P1: 2})
    )
    assert found == [StoredGroup("g", 5, (member("a", client_id="newer"), member("c")))]
    assert offsets.group_epoch("g") == 5  # the epoch record of the same batch
    assert offsets.fetch("g", [P0]) == {P0: 11}  # offsets fold as before


def test_a_change_without_a_new_epoch_writes_no_epoch_record() -> None:
    batch = build_group_change_batch(GroupChange("g", None, (member("a"),)))
    assert [decode_member_key(r.key or b"") for r in records(batch)] == [("g", "a")]


def test_a_group_whose_members_all_left_restores_nothing() -> None:
    _, found = restored(
        build_group_change_batch(GroupChange("g", 1, (member("a"),))),
        build_group_change_batch(GroupChange("g", 2, removed=("a",))),
    )
    assert found == []


def test_records_without_members_load_as_before() -> None:
    """A partition written before member records existed: nothing to restore."""
    offsets, found = restored(build_offsets_batch("g", {P0: 3}))
    assert found == []
    assert offsets.fetch("g", [P0]) == {P0: 3}


def test_member_records_are_not_read_as_a_transaction_s_offsets() -> None:
    batch = build_group_change_batch(GroupChange("g", 1, (member("a"),)))
    assert pending_offsets([batch], transaction_id=9) == set()


def test_appended_member_records_fold_into_no_offsets() -> None:
    """The membership that wrote them keeps them: the live view skips them."""
    offsets = GroupOffsets(1)
    offsets.observe(records(build_group_change_batch(GroupChange("g", 3, (member("a"),)))))
    assert offsets.group_epoch("g") == 3
    assert offsets.offsets_of("g") == {}
