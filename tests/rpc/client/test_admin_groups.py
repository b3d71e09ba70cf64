"""``Admin``'s consumer group tools (kafka-consumer-groups.sh's) against a real broker behind
a real gRPC server on loopback: list, describe with lag, delete, and offset resets.

Members are made with the broker's own heartbeat call (member epoch 0 joins, -1 leaves).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from twinlog.engine.base.errors import (
    GroupIdNotFoundError,
    InvalidConfigError,
    NonEmptyGroupError,
)
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.broker import Broker
from twinlog.engine.groups.group_calls import JOIN_EPOCH, LEAVE_EPOCH, GroupHeartbeat
from twinlog.engine.records.batch_builder import RecordBatchBuilder
from twinlog.rpc.client import Admin
from twinlog.rpc.client.group_offsets import OffsetReset, PartitionLag, ResetTo
from twinlog.rpc.server.config import ServerConfig
from twinlog.rpc.server.server import RpcServer

GROUP = "billing"
TOPIC = "orders"
# Partition 0 holds records 0..9 at 10:00:00, 10:00:01, ... 10:00:09 (UTC); partition 1
# holds 4 records; partition 2 none.
START = datetime(2026, 11, 26, 10, 0, 0, tzinfo=UTC)
START_MS = int(START.timestamp() * 1000)
RECORDS = {0: 10, 1: 4, 2: 0}


@pytest.fixture()
def served(tmp_path: Path) -> Iterator[tuple[Broker, Admin]]:
    """The broker (to make members with) and an Admin reaching it over gRPC."""
    with Broker.open(tmp_path / "data") as broker:
        server = RpcServer(broker, ServerConfig(port=0))
        server.start()
        try:
            broker.create_topic(TOPIC, len(RECORDS))
            for partition, count in RECORDS.items():
                # One batch per record: a timestamp finds a batch's first offset.
                for index in range(count):
                    builder = RecordBatchBuilder()
                    builder.append(b"%d" % index, timestamp_ms=START_MS + 1000 * index)
                    broker.produce(TOPIC, partition, builder.build())
            with Admin(f"127.0.0.1:{server.port}", default_api_timeout_ms=5_000) as admin:
                yield broker, admin
        finally:
            server.stop(grace_ms=0)


def join(broker: Broker, member_id: str, client_id: str = "biller-1") -> tuple[TopicPartition, ...]:
    answer = broker.group_heartbeat(
        GroupHeartbeat(
            GROUP, member_id, JOIN_EPOCH, subscribed_topics=(TOPIC,), client_id=client_id
        )
    )
    return answer.assigned


def leave(broker: Broker, member_id: str) -> None:
    broker.group_heartbeat(GroupHeartbeat(GROUP, member_id, LEAVE_EPOCH))


def commit(broker: Broker, offsets: dict[int, int]) -> None:
    broker.commit_offsets(GROUP, {TopicPartition(TOPIC, p): o for p, o in offsets.items()})


def committed(broker: Broker) -> dict[int, int]:
    found = broker.fetch_offsets(GROUP, [TopicPartition(TOPIC, p) for p in RECORDS])
    return {tp.partition: offset for tp, offset in found.items()}


def test_list_and_describe_show_state_members_and_lag(served: tuple[Broker, Admin]) -> None:
    broker, admin = served
    commit(broker, {0: 3, 1: 4})
    assert [(g.group_id, g.state, g.member_count) for g in admin.list_groups()] == [
        (GROUP, "empty", 0)
    ]
    assigned = join(broker, "member-a")
    assert len(assigned) == 3  # the only member gets every partition

    listing = admin.list_groups()
    assert [(g.group_id, g.member_count) for g in listing] == [(GROUP, 1)]
    description = admin.describe_group(GROUP)
    assert description.state in ("stable", "reconciling")
    assert [(m.member_id, m.client_id) for m in description.members] == [("member-a", "biller-1")]
    assert admin.group_offsets(GROUP) == [
        PartitionLag(TOPIC, 0, 3, 10, 7, "member-a", "biller-1"),
        PartitionLag(TOPIC, 1, 4, 4, 0, "member-a", "biller-1"),
        PartitionLag(TOPIC, 2, None, 0, None, "member-a", "biller-1"),  # owned, never committed
    ]


def test_lag_of_a_group_without_members_has_no_owners(served: tuple[Broker, Admin]) -> None:
    broker, admin = served
    commit(broker, {1: 1})
    assert admin.group_offsets(GROUP) == [PartitionLag(TOPIC, 1, 1, 4, 3, None, None)]


def test_an_unknown_group_is_group_id_not_found(served: tuple[Broker, Admin]) -> None:
    _broker, admin = served
    with pytest.raises(GroupIdNotFoundError, match="nobody"):
        admin.describe_group("nobody")
    with pytest.raises(GroupIdNotFoundError):
        admin.group_offsets("nobody")
    with pytest.raises(GroupIdNotFoundError):
        admin.delete_group("nobody")


def test_delete_is_refused_while_a_member_is_in_and_done_once_it_leaves(
    served: tuple[Broker, Admin],
) -> None:
    broker, admin = served
    commit(broker, {0: 5})
    join(broker, "member-a")
    with pytest.raises(NonEmptyGroupError):
        admin.delete_group(GROUP)
    assert committed(broker)[0] == 5  # nothing deleted
    leave(broker, "member-a")
    admin.delete_group(GROUP)
    assert admin.list_groups() == []
    assert committed(broker) == {0: -1, 1: -1, 2: -1}
    with pytest.raises(GroupIdNotFoundError):
        admin.describe_group(GROUP)


def reset(admin: Admin, to: ResetTo, dry_run: bool = False) -> dict[int, tuple[int | None, int]]:
    rows = admin.reset_group_offsets(GROUP, TOPIC, to, dry_run=dry_run)
    assert all(row.topic == TOPIC for row in rows)
    return {row.partition: (row.previous_offset, row.new_offset) for row in rows}


def test_reset_to_earliest_latest_and_an_offset_clamped(served: tuple[Broker, Admin]) -> None:
    broker, admin = served
    commit(broker, {0: 3, 1: 2})
    assert reset(admin, ResetTo.earliest()) == {0: (3, 0), 1: (2, 0), 2: (None, 0)}
    assert committed(broker) == {0: 0, 1: 0, 2: 0}
    assert reset(admin, ResetTo.latest()) == {0: (0, 10), 1: (0, 4), 2: (0, 0)}
    assert committed(broker) == {0: 10, 1: 4, 2: 0}
    # 7 is past the end of partitions 1 and 2: their log end; -5 is before every start.
    assert reset(admin, ResetTo.offset(7)) == {0: (10, 7), 1: (4, 4), 2: (0, 0)}
    assert reset(admin, ResetTo.offset(-5)) == {0: (7, 0), 1: (4, 0), 2: (0, 0)}
    assert committed(broker) == {0: 0, 1: 0, 2: 0}


def test_reset_to_a_datetime_finds_the_first_record_at_or_after_it(
    served: tuple[Broker, Admin],
) -> None:
    broker, admin = served
    at_3_5_s = START + timedelta(seconds=3, milliseconds=500)
    # The first record at or after 10:00:03.5 is offset 4 (10:00:04) in both partitions
    # that have one; partition 2 has none: its log end.
    assert reset(admin, ResetTo.timestamp(at_3_5_s)) == {0: (None, 4), 1: (None, 4), 2: (None, 0)}
    assert committed(broker) == {0: 4, 1: 4, 2: 0}
    # The same instant written with another offset, and as milliseconds.
    plus_one = at_3_5_s.astimezone(timezone(timedelta(hours=1)))
    assert reset(admin, ResetTo.timestamp(plus_one))[0] == (4, 4)
    naive_utc = datetime(2026, 11, 26, 10, 0, 1)  # naive: UTC
    assert reset(admin, ResetTo.timestamp(naive_utc))[0] == (4, 1)
    assert reset(admin, ResetTo.timestamp(START_MS - 60_000))[0] == (1, 0)
    assert reset(admin, ResetTo.timestamp(START_MS + 3_600_000))[0] == (0, 10)  # after all


def test_shift_by_moves_from_the_committed_offset_clamped(served: tuple[Broker, Admin]) -> None:
    broker, admin = served
    commit(broker, {0: 5, 1: 3, 2: 0})
    assert reset(admin, ResetTo.shift_by(2)) == {0: (5, 7), 1: (3, 4), 2: (0, 0)}
    assert reset(admin, ResetTo.shift_by(-6)) == {0: (7, 1), 1: (4, 0), 2: (0, 0)}
    assert committed(broker) == {0: 1, 1: 0, 2: 0}


def test_shift_by_without_a_committed_offset_is_refused_naming_it(
    served: tuple[Broker, Admin],
) -> None:
    broker, admin = served
    commit(broker, {0: 5})
    with pytest.raises(InvalidConfigError, match="orders-1, orders-2"):
        admin.reset_group_offsets(GROUP, TOPIC, ResetTo.shift_by(1))
    assert committed(broker) == {0: 5, 1: -1, 2: -1}  # nothing committed, not even orders-0
    # Only the partition that has one: fine.
    rows = admin.reset_group_offsets(GROUP, [(TOPIC, 0)], ResetTo.shift_by(1))
    assert rows == [OffsetReset(TOPIC, 0, 5, 6)]


def test_a_dry_run_commits_nothing(served: tuple[Broker, Admin]) -> None:
    broker, admin = served
    commit(broker, {0: 5})
    assert reset(admin, ResetTo.earliest(), dry_run=True) == {0: (5, 0), 1: (None, 0), 2: (None, 0)}
    assert committed(broker) == {0: 5, 1: -1, 2: -1}


def test_a_reset_is_refused_while_the_group_has_members(served: tuple[Broker, Admin]) -> None:
    broker, admin = served
    commit(broker, {0: 5})
    join(broker, "member-a")
    with pytest.raises(NonEmptyGroupError, match="not reset, nothing committed"):
        admin.reset_group_offsets(GROUP, [(TOPIC, 0), (TOPIC, 1)], ResetTo.earliest())
    assert committed(broker) == {0: 5, 1: -1, 2: -1}
    # A dry run asks nothing of the group: it shows what a reset would do.
    assert admin.reset_group_offsets(GROUP, [(TOPIC, 0)], ResetTo.earliest(), dry_run=True) == [
        OffsetReset(TOPIC, 0, 5, 0)
    ]
    leave(broker, "member-a")
    admin.reset_group_offsets(GROUP, [(TOPIC, 0)], ResetTo.earliest())
    assert committed(broker)[0] == 0


def test_a_reset_of_a_new_group_creates_it(served: tuple[Broker, Admin]) -> None:
    broker, admin = served
    assert admin.reset_group_offsets(GROUP, [(TOPIC, 1), (TOPIC, 1)], ResetTo.latest()) == [
        OffsetReset(TOPIC, 1, None, 4)  # a partition named twice is reset once
    ]
    assert [g.group_id for g in admin.list_groups()] == [GROUP]
    assert committed(broker) == {0: -1, 1: 4, 2: -1}


def test_reset_targets_are_checked() -> None:
    with pytest.raises(InvalidConfigError):
        ResetTo("rewind")
    with pytest.raises(InvalidConfigError):
        ResetTo.offset("5")  # type: ignore[arg-type]
