"""Kafka consumers in groups (subscribe): the classic protocol's JoinGroup, SyncGroup,
Heartbeat and LeaveGroup onto twinlog's coordinator, which shares the partitions out;
commits from members are fenced by their generation."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import confluent_kafka
import kafka
import kafka.errors
import pytest
from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient
from kafka.structs import OffsetAndMetadata

from twinlog.engine.base.errors import GroupIdNotFoundError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.broker import Broker
from twinlog.rpc.client import Producer
from twinlog.rpc.kafka.listener import KafkaListener
from twinlog.rpc.kafka.settings import KafkaListenerSettings

CLIENT_TIMEOUT_MS = 10_000


def group_consumer(bootstrap: str, group: str, topic: str) -> kafka.KafkaConsumer:
    return kafka.KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        request_timeout_ms=CLIENT_TIMEOUT_MS,
        session_timeout_ms=6_000,
        heartbeat_interval_ms=200,
    )


def poll_until(consumers: list[Any], done: Any, timeout_s: float = 20) -> dict[int, list[Any]]:
    """Polls every consumer in turn until ``done(found)``; records by consumer index."""
    found: dict[int, list[Any]] = {index: [] for index in range(len(consumers))}
    deadline = time.monotonic() + timeout_s
    while not done(found) and time.monotonic() < deadline:
        for index, consumer in enumerate(consumers):
            for batch in consumer.poll(timeout_ms=100).values():
                found[index].extend(batch)
    return found


def test_two_kafka_python_members_share_a_topic_then_one_takes_all(kafka_server: Any) -> None:
    topic = kafka_server.topic(partitions=4)
    group = f"{topic}-group"
    with Producer(kafka_server.broker) as producer:
        for number in range(40):
            producer.send(topic, f"{number}".encode(), partition=number % 4)
    first = group_consumer(kafka_server.bootstrap, group, topic)
    second = group_consumer(kafka_server.bootstrap, group, topic)
    try:
        found = poll_until(
            [first, second],
            lambda found: (
                sum(map(len, found.values())) >= 40
                and first.assignment()
                and second.assignment()
                and len(first.assignment() | second.assignment()) == 4
            ),
        )
        # Every record (one moved before any commit is read again by its new owner, as in
        # Kafka: at least once)
        assert {int(r.value) for records in found.values() for r in records} == set(range(40))
        assert first.assignment() and second.assignment()
        assert not first.assignment() & second.assignment()
        poll_until([first], lambda _: all(first.position(tp) == 10 for tp in first.assignment()))
        first.commit()  # as a member, in its generation
        committed = {tp: first.committed(tp) for tp in first.assignment()}
        assert set(committed.values()) == {10}
        second.close()  # LeaveGroup: its partitions go to the first member
        poll_until([first], lambda _: len(first.assignment()) == 4)
        assert len(first.assignment()) == 4
    finally:
        first.close()
        second.close()
    description = kafka_server.broker.describe_group(group)
    assert description.members == ()  # both left
    assert {p: o for p, o in description.committed} == {
        TopicPartition(tp.topic, tp.partition): 10 for tp in committed
    }


def test_a_stale_member_commit_is_refused(kafka_server: Any) -> None:
    topic = kafka_server.topic(partitions=1)
    group = f"{topic}-group"
    consumer = group_consumer(kafka_server.bootstrap, group, topic)
    try:
        poll_until([consumer], lambda _: bool(consumer.assignment()))
        assert consumer.assignment()
        tool = kafka.KafkaConsumer(
            bootstrap_servers=kafka_server.bootstrap,
            group_id=group,
            enable_auto_commit=False,
            request_timeout_ms=CLIENT_TIMEOUT_MS,
        )
        try:  # a commit from outside the group while it has members: refused
            partition = kafka.TopicPartition(topic, 0)
            tool.assign([partition])
            try:
                tool.commit({partition: OffsetAndMetadata(3, "", -1)})
                refused = False
            except kafka.errors.KafkaError:
                refused = True
            assert refused
        finally:
            tool.close()
    finally:
        consumer.close()


def test_confluent_members_share_a_topic(kafka_server: Any) -> None:
    topic = kafka_server.topic(partitions=2)
    group = f"{topic}-group"
    with Producer(kafka_server.broker) as producer:
        for number in range(20):
            producer.send(topic, f"{number}".encode(), partition=number % 2)
    consumers = [
        confluent_kafka.Consumer(
            {
                "bootstrap.servers": kafka_server.bootstrap,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "socket.timeout.ms": CLIENT_TIMEOUT_MS,
                "session.timeout.ms": 6_000,
                "heartbeat.interval.ms": 200,
            }
        )
        for _ in range(2)
    ]
    values: list[int] = []
    try:
        for consumer in consumers:
            consumer.subscribe([topic])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (
            len(set(values)) == 20 and all(c.assignment() for c in consumers)
        ):
            for consumer in consumers:
                message = consumer.poll(0.1)
                if message is not None and message.error() is None:
                    values.append(int(message.value()))
        assert set(values) == set(range(20))
        assignments = [{(tp.topic, tp.partition) for tp in c.assignment()} for c in consumers]
        assert all(assignments) and not assignments[0] & assignments[1]
    finally:
        for consumer in consumers:
            consumer.close()


def test_a_member_joining_takes_over_from_committed_offsets(kafka_server: Any) -> None:
    """The first member commits on revocation (kafka-python's auto-commit before it joins
    again), so the partitions the second member takes over start where it stopped: no
    record is read twice."""
    topic = kafka_server.topic(partitions=4)
    group = f"{topic}-group"
    with Producer(kafka_server.broker) as producer:
        for number in range(40):
            producer.send(topic, f"{number}".encode(), partition=number % 4)

    def member() -> kafka.KafkaConsumer:
        return kafka.KafkaConsumer(
            topic,
            bootstrap_servers=kafka_server.bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=True,
            auto_commit_interval_ms=100,
            request_timeout_ms=CLIENT_TIMEOUT_MS,
            session_timeout_ms=6_000,
            heartbeat_interval_ms=200,
        )

    seen: list[tuple[int, int]] = []

    def poll(consumer: kafka.KafkaConsumer) -> None:
        for batch in consumer.poll(timeout_ms=100, max_records=5).values():
            seen.extend((record.partition, record.offset) for record in batch)

    first = member()
    second = None
    try:
        deadline = time.monotonic() + 15
        while len(seen) < 20 and time.monotonic() < deadline:
            poll(first)
        assert len(first.assignment()) == 4
        second = member()
        while time.monotonic() < deadline and not (
            len(set(seen)) == 40 and first.assignment() and second.assignment()
        ):
            poll(first)
            poll(second)
    finally:
        first.close()
        if second is not None:
            second.close()
    assert len(set(seen)) == 40
    assert len(seen) == 40  # nothing read twice


def test_admin_clients_list_and_describe_groups(kafka_server: Any) -> None:
    topic = kafka_server.topic(partitions=2)
    group = f"{topic}-listed"
    consumer = group_consumer(kafka_server.bootstrap, group, topic)
    admin = KafkaAdminClient(
        bootstrap_servers=kafka_server.bootstrap, request_timeout_ms=CLIENT_TIMEOUT_MS
    )
    try:
        poll_until([consumer], lambda _: len(consumer.assignment()) == 2)
        listed = admin.list_groups()
        assert group in {entry["group_id"] for entry in listed}
        described = admin.describe_groups([group])[group]
        assert described["group_state"] == "Stable"
        assert len(described["members"]) == 1
        refusals = admin.delete_groups([group])  # while it has a member
        assert refusals == {group: kafka.errors.NonEmptyGroupError.__name__}
    finally:
        admin.close()
        consumer.close()
    confluent_admin = AdminClient({"bootstrap.servers": kafka_server.bootstrap})
    result = confluent_admin.list_consumer_groups(request_timeout=10).result(timeout=15)
    assert group in {item.group_id for item in result.valid}
    futures = confluent_admin.describe_consumer_groups([group], request_timeout=10)
    description = futures[group].result(timeout=15)
    assert description.members == []  # the consumer left when it closed
    deleted = confluent_admin.delete_consumer_groups([group], request_timeout=10)
    deleted[group].result(timeout=15)
    with pytest.raises(GroupIdNotFoundError):
        kafka_server.broker.describe_group(group)


def test_a_member_goes_on_through_a_restarted_listener(tmp_path: Path) -> None:
    """A classic member's state is kept with the coordinator's member, not in the listener:
    after a restart of the listener the member keeps its id and generation (no rejoin),
    reads on and commits in its generation."""
    settings = KafkaListenerSettings(frame_bytes_max=4 << 20, fetch_wait_slice_ms=50)
    with Broker.open(tmp_path / "data") as broker:
        broker.create_topic("orders", partitions=2)
        with Producer(broker) as producer:
            for number in range(4):
                producer.send("orders", f"{number}".encode(), partition=number % 2)
        first = KafkaListener(broker, "127.0.0.1", 0, settings)
        first.start()
        port = first.port
        second = None
        consumer = group_consumer(f"127.0.0.1:{port}", "billing", "orders")
        try:
            poll_until([consumer], lambda found: len(found[0]) >= 4)
            (before,) = broker.describe_group("billing").members
            first.stop(grace_ms=2_000)
            second = KafkaListener(broker, "127.0.0.1", port, settings)
            second.start()
            with Producer(broker) as producer:
                for number in range(4, 8):
                    producer.send("orders", f"{number}".encode(), partition=number % 2)
            found = poll_until([consumer], lambda found: len(found[0]) >= 4)
            assert sorted(int(r.value) for r in found[0]) == [4, 5, 6, 7]
            consumer.commit()  # in the generation it joined with before the restart
            (after,) = broker.describe_group("billing").members
            assert after.member_id == before.member_id  # never asked to join again
            assert after.member_epoch == before.member_epoch
            committed = dict(broker.describe_group("billing").committed)
            assert committed == {TopicPartition("orders", 0): 4, TopicPartition("orders", 1): 4}
        finally:
            consumer.close()
            if second is not None:
                second.stop(grace_ms=2_000)
