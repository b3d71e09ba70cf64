"""Unmodified Kafka clients against a real cluster (one ZooKeeper, three ``twinlog serve
--broker-id N --kafka-listener 127.0.0.1:0`` processes; ``tests/support/cluster_support.py``):
Metadata names every broker's Kafka listener and each partition's leader, replicas and
ISR; kafka-python's idempotent producer (acks=all) and a consumer follow a partition's
leader when it is SIGKILLed, with every acknowledged record read once and nothing lost;
a transactional producer commits and aborts, and consumer groups (kafka-python and
confluent-kafka) read and commit, through brokers that lead and coordinate different
things. Every wait is bounded (``wait_for``, READ_DEADLINE_S, the clients' timeouts)."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import kafka
import kafka.errors
import pytest
from cluster_security import OPERATOR
from cluster_support import LocalCluster, running_cluster, wait_for
from kafka.admin import NewTopic

from twinlog.engine.broker.group_offsets import OFFSETS_TOPIC, offsets_partition_for
from twinlog.engine.zookeeper.cluster_view import read_cluster_metadata
from twinlog.rpc.cli.local_zookeeper import LocalZooKeeper

pytestmark = [pytest.mark.slow, pytest.mark.crash]

KAFKA_SERVING = re.compile(r"serving Kafka clients on (127\.0\.0\.1:\d+)")
CLIENT_TIMEOUT_MS = 10_000
RECORDS = 200
KILL_AFTER = 80  # records acknowledged before the leader of partition 0 is killed
SEND_INTERVAL_S = 0.01
READ_DEADLINE_S = 35.0


@pytest.fixture()
def cluster(tmp_path: Path, zookeeper: LocalZooKeeper) -> Iterator[LocalCluster]:
    with running_cluster(
        tmp_path, zookeeper, arguments=("--kafka-listener", "127.0.0.1:0")
    ) as opened:
        yield opened


def sasl(cluster: LocalCluster) -> dict[str, Any]:
    """kafka-python's settings for SASL/PLAIN as the cluster's operator (its token the
    password: the Kafka door reads the same tokens file)."""
    if cluster.token is None:
        return {}
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": OPERATOR,
        "sasl_plain_password": cluster.token,
    }


def confluent_sasl(cluster: LocalCluster) -> dict[str, Any]:
    """The same for confluent-kafka."""
    if cluster.token is None:
        return {}
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "PLAIN",
        "sasl.username": OPERATOR,
        "sasl.password": cluster.token,
    }


def kafka_addresses(cluster: LocalCluster) -> dict[int, str]:
    """Each broker's Kafka listener, from its log (it logs once it serves)."""

    def probe() -> dict[int, str] | None:
        found = {}
        for broker_id, process in cluster.brokers.items():
            match = KAFKA_SERVING.search(process.log())
            if match is None:
                return None
            found[broker_id] = match.group(1)
        return found

    return wait_for("every broker's Kafka listener", probe, timeout_s=20)


def test_metadata_names_every_broker_and_each_partitions_leader(cluster: LocalCluster) -> None:
    addresses = kafka_addresses(cluster)
    creator = kafka.KafkaAdminClient(
        bootstrap_servers=list(addresses.values()),
        request_timeout_ms=CLIENT_TIMEOUT_MS,
        **sasl(cluster),
    )
    try:  # through the Kafka listener: CreateTopics with a replication factor
        creator.create_topics([NewTopic("kmeta", num_partitions=2, replication_factor=3)])
    finally:
        creator.close()
    states = cluster.wait_for_full_isr("kmeta", 2, 3)
    for broker_id in (1, 2, 3):  # the same answer from every broker's listener
        client = kafka.KafkaAdminClient(
            bootstrap_servers=addresses[broker_id],
            request_timeout_ms=CLIENT_TIMEOUT_MS,
            **sasl(cluster),
        )
        try:
            [topic] = client.describe_topics(["kmeta"])
            described = client.describe_cluster()  # Metadata of no topic, as it is not served
        finally:
            client.close()
        brokers = {
            item["broker_id"]: f"{item['host']}:{item['port']}" for item in described["brokers"]
        }
        assert brokers == addresses
        assert described["controller_id"] in (1, 2, 3)
        assert topic["error_code"] == 0
        for item in topic["partitions"]:
            state = states[item["partition_index"]]
            assert item["error_code"] == 0
            assert item["leader_id"] == state.leader
            assert item["leader_epoch"] == state.leader_epoch
            assert sorted(item["replica_nodes"]) == [1, 2, 3]
            assert sorted(item["isr_nodes"]) == [1, 2, 3]


def test_an_idempotent_producer_and_a_consumer_follow_a_killed_leader(
    cluster: LocalCluster,
) -> None:
    addresses = kafka_addresses(cluster)
    bootstrap = list(addresses.values())
    before = cluster.create_replicated_topic("kflow", 2)[0]

    read: list[tuple[int, int, bytes]] = []
    reading_done = threading.Event()

    def consume() -> None:
        consumer = kafka.KafkaConsumer(
            bootstrap_servers=bootstrap,
            **sasl(cluster),
            request_timeout_ms=CLIENT_TIMEOUT_MS,
            retry_backoff_ms=100,
            reconnect_backoff_max_ms=1000,
        )
        try:
            partitions = [kafka.TopicPartition("kflow", 0), kafka.TopicPartition("kflow", 1)]
            consumer.assign(partitions)
            consumer.seek_to_beginning()
            deadline = time.monotonic() + READ_DEADLINE_S
            while len(read) < RECORDS and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=200).values():
                    read.extend((r.partition, r.offset, r.value) for r in records)
        finally:
            consumer.close()
            reading_done.set()

    reader = threading.Thread(target=consume, name="test-kafka-consumer")
    reader.start()
    acked: dict[int, Any] = {}
    failed: dict[int, BaseException] = {}
    producer = kafka.KafkaProducer(
        bootstrap_servers=bootstrap,
        **sasl(cluster),
        acks="all",
        enable_idempotence=True,
        linger_ms=0,
        request_timeout_ms=CLIENT_TIMEOUT_MS,
        delivery_timeout_ms=30_000,
        retry_backoff_ms=100,
        reconnect_backoff_max_ms=1000,
    )
    killed_at = 0.0
    try:
        for number in range(RECORDS):
            if number == KILL_AFTER:
                wait_for("the first records acknowledged", lambda: len(acked) >= KILL_AFTER)
                killed_at = time.monotonic()
                cluster.kill(before.leader)  # SIGKILL, mid-stream
            future = producer.send("kflow", b"v%d" % number, partition=number % 2)
            future.add_callback(lambda meta, number=number: acked.setdefault(number, meta))
            future.add_errback(lambda error, number=number: failed.setdefault(number, error))
            time.sleep(SEND_INTERVAL_S)
        producer.flush(timeout=40)
    finally:
        producer.close(timeout=5)
    after = cluster.wait_for_new_leader("kflow", 0, before, timeout_s=5)
    print(f"killed broker {before.leader}; partition 0 now led by {after.leader}")
    print(f"send phase after the kill: {time.monotonic() - killed_at:.2f} s")
    assert not failed, f"refused: {failed}"
    assert sorted(acked) == list(range(RECORDS))  # every record acknowledged

    reader.join(timeout=READ_DEADLINE_S + 10)
    assert reading_done.is_set()
    for partition in (0, 1):
        mine = [(offset, value) for p, offset, value in read if p == partition]
        sent = [b"v%d" % number for number in range(partition, RECORDS, 2)]
        assert [value for _offset, value in mine] == sent  # everything, once, in order
        assert [offset for offset, _value in mine] == list(range(len(sent)))
        assert [acked[number].offset for number in range(partition, RECORDS, 2)] == list(
            range(len(sent))
        )


def _read_all(
    cluster: LocalCluster, bootstrap: list[str], topic: str, partitions: int, count: int
) -> list[Any]:
    """Every record of ``topic`` up to ``count`` of them, within READ_DEADLINE_S."""
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=bootstrap,
        **sasl(cluster),
        isolation_level="read_committed",
        request_timeout_ms=CLIENT_TIMEOUT_MS,
    )
    found: list[Any] = []
    try:
        consumer.assign([kafka.TopicPartition(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + READ_DEADLINE_S
        while len(found) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                found.extend(records)
        # nothing more arrives (an aborted record would be here by now)
        for records in consumer.poll(timeout_ms=1000).values():
            found.extend(records)
    finally:
        consumer.close()
    return found


def test_a_transactional_producer_commits_and_aborts_through_the_cluster(
    cluster: LocalCluster,
) -> None:
    bootstrap = list(kafka_addresses(cluster).values())
    cluster.create_replicated_topic("ktxn", 2)
    producer = kafka.KafkaProducer(
        bootstrap_servers=bootstrap,
        **sasl(cluster),
        transactional_id="ktxn-writer",
        request_timeout_ms=CLIENT_TIMEOUT_MS,
        max_block_ms=30_000,
    )
    try:
        producer.init_transactions()
        for name, commit in (("first", True), ("dropped", False), ("second", True)):
            producer.begin_transaction()
            for number in range(6):
                producer.send("ktxn", b"%s-%d" % (name.encode(), number), partition=number % 2)
            if commit:
                producer.commit_transaction()
            else:
                producer.abort_transaction()
    finally:
        producer.close(timeout=5)
    found = _read_all(cluster, bootstrap, "ktxn", 2, 12)
    values = sorted(record.value for record in found)
    expected = sorted(b"%s-%d" % (name, n) for name in (b"first", b"second") for n in range(6))
    assert values == expected  # both commits, once; never the aborted transaction


def test_a_consumer_group_reads_and_commits_through_the_cluster(cluster: LocalCluster) -> None:
    bootstrap = list(kafka_addresses(cluster).values())
    cluster.create_replicated_topic("kgroup", 2)
    producer = kafka.KafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        request_timeout_ms=CLIENT_TIMEOUT_MS,
        **sasl(cluster),
    )
    try:
        for number in range(20):
            producer.send("kgroup", b"g%d" % number, partition=number % 2)
        producer.flush(timeout=20)
    finally:
        producer.close(timeout=5)
    consumer = kafka.KafkaConsumer(
        "kgroup",
        bootstrap_servers=bootstrap,
        **sasl(cluster),
        group_id="kgroup-readers",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        request_timeout_ms=CLIENT_TIMEOUT_MS,
    )
    read: list[bytes] = []
    try:
        deadline = time.monotonic() + READ_DEADLINE_S
        while len(read) < 20 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                read.extend(record.value for record in records)
        consumer.commit()
        assert sorted(consumer.assignment()) == [
            kafka.TopicPartition("kgroup", 0),
            kafka.TopicPartition("kgroup", 1),
        ]
    finally:
        consumer.close()
    assert sorted(read) == sorted(b"g%d" % number for number in range(20))
    checker = kafka.KafkaConsumer(
        bootstrap_servers=bootstrap,
        **sasl(cluster),
        group_id="kgroup-readers",
        enable_auto_commit=False,
        request_timeout_ms=CLIENT_TIMEOUT_MS,
    )
    try:
        committed = {p: checker.committed(kafka.TopicPartition("kgroup", p)) for p in (0, 1)}
    finally:
        checker.close()
    assert committed == {0: 10, 1: 10}


def test_confluent_kafka_produces_and_consumes_through_the_cluster(cluster: LocalCluster) -> None:
    bootstrap = ",".join(kafka_addresses(cluster).values())
    cluster.create_replicated_topic("krd", 2)
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            **confluent_sasl(cluster),
        }
    )
    delivered: list[Any] = []
    for number in range(20):
        producer.produce(
            "krd",
            b"c%d" % number,
            partition=number % 2,
            on_delivery=lambda error, message: delivered.append(error or message.offset()),
        )
    assert producer.flush(20) == 0
    assert sorted(delivered) == sorted(list(range(10)) * 2)  # every one, offsets 0..9 each
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "krd-readers",
            "auto.offset.reset": "earliest",
            **confluent_sasl(cluster),
        }
    )
    read: list[bytes] = []
    try:
        consumer.subscribe(["krd"])
        deadline = time.monotonic() + READ_DEADLINE_S
        while len(read) < 20 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                read.append(message.value())
    finally:
        consumer.close()
    assert sorted(read) == sorted(b"c%d" % number for number in range(20))


def _group_coordinator(cluster: LocalCluster, group: str) -> int:
    """The broker leading the group's ``__consumer_offsets`` partition."""
    assert cluster.session is not None

    def probe() -> int | None:
        found = read_cluster_metadata(cluster.session, [OFFSETS_TOPIC]).topic(OFFSETS_TOPIC)
        if found is None or not found.partitions:
            return None
        partition = offsets_partition_for(group, len(found.partitions)).partition
        state = cluster.partition_state(OFFSETS_TOPIC, partition)
        return state.leader if state is not None and state.leader > 0 else None

    return wait_for(f"the coordinator of group {group}", probe, timeout_s=20)


def _committed_through(consumer: Any, offset: int) -> bool:
    try:
        return all(consumer.committed(kafka.TopicPartition("kfollow", p)) == offset for p in (0, 1))
    except kafka.errors.KafkaError:
        return False


def test_a_consumer_group_follows_its_killed_coordinator(cluster: LocalCluster) -> None:
    addresses = kafka_addresses(cluster)
    bootstrap = list(addresses.values())
    cluster.create_replicated_topic("kfollow", 2)
    producer = kafka.KafkaProducer(
        bootstrap_servers=bootstrap,
        **sasl(cluster),
        acks="all",
        enable_idempotence=True,
        request_timeout_ms=CLIENT_TIMEOUT_MS,
        delivery_timeout_ms=30_000,
        retry_backoff_ms=100,
        reconnect_backoff_max_ms=1000,
    )
    consumer = kafka.KafkaConsumer(
        "kfollow",
        bootstrap_servers=bootstrap,
        **sasl(cluster),
        group_id="kfollow-readers",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        request_timeout_ms=CLIENT_TIMEOUT_MS,
        retry_backoff_ms=100,
        reconnect_backoff_max_ms=1000,
    )
    read: list[bytes] = []

    def read_until(count: int) -> None:
        deadline = time.monotonic() + READ_DEADLINE_S
        while len(set(read)) < count and time.monotonic() < deadline:
            batches = consumer.poll(timeout_ms=200)
            for records in batches.values():
                read.extend(record.value for record in records)
            if batches:
                try:
                    consumer.commit()
                except kafka.errors.KafkaError:
                    pass  # the coordinator moved or the group rebalanced: read again

    try:
        for number in range(20):
            producer.send("kfollow", b"f%d" % number, partition=number % 2)
        producer.flush(timeout=20)
        read_until(20)
        coordinator = _group_coordinator(cluster, "kfollow-readers")
        cluster.kill(coordinator)  # SIGKILL: the group's coordinator goes, with its members
        for number in range(20, 40):
            producer.send("kfollow", b"f%d" % number, partition=number % 2)
        producer.flush(timeout=40)
        read_until(40)
        successor = _group_coordinator(cluster, "kfollow-readers")
        # A commit refused at the moved coordinator (or after a rebalance) is made again
        # once the member has joined the new one and read to the end.
        deadline = time.monotonic() + READ_DEADLINE_S
        while not _committed_through(consumer, 20) and time.monotonic() < deadline:
            read_until(40)
            for records in consumer.poll(timeout_ms=200).values():
                read.extend(record.value for record in records)
            try:
                consumer.commit()
            except kafka.errors.KafkaError:
                pass
    finally:
        consumer.close(autocommit=False)
        producer.close(timeout=5)
    print(f"group coordinator {coordinator} killed; {successor} took over")
    assert successor != coordinator
    # everything at least once (a rebalance may give a partition back from its last commit)
    assert set(read) == {b"f%d" % number for number in range(40)}
    checker = kafka.KafkaConsumer(
        bootstrap_servers=bootstrap,
        **sasl(cluster),
        group_id="kfollow-readers",
        enable_auto_commit=False,
        request_timeout_ms=CLIENT_TIMEOUT_MS,
    )
    try:  # the offsets committed before and after the kill, at the new coordinator
        committed = {p: checker.committed(kafka.TopicPartition("kfollow", p)) for p in (0, 1)}
    finally:
        checker.close()
    assert committed == {0: 20, 1: 20}


def test_a_kip848_group_goes_on_at_its_new_coordinator(cluster: LocalCluster) -> None:
    """confluent-kafka with group.protocol=consumer (KIP-848): the group's coordinator is
    SIGKILLed; its membership is durable in __consumer_offsets, so the member goes on at
    the new coordinator with its epoch and partitions (never told they were lost or
    revoked), reads everything and commits there."""
    bootstrap = ",".join(kafka_addresses(cluster).values())
    cluster.create_replicated_topic("k848", 2)
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            **confluent_sasl(cluster),
        }
    )
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "k848-readers",
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **confluent_sasl(cluster),
        }
    )
    taken_away: list[str] = []  # revocations and losses, with what was taken
    read: list[bytes] = []

    def produce(numbers: range) -> None:
        for number in numbers:
            producer.produce("k848", b"n%d" % number, partition=number % 2)
        assert producer.flush(40) == 0

    def read_until(count: int) -> None:
        deadline = time.monotonic() + READ_DEADLINE_S
        while len(set(read)) < count and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None or message.error() is not None:
                continue
            read.append(message.value())
            try:
                consumer.commit(message, asynchronous=False)
            except confluent_kafka.KafkaException:
                pass  # the coordinator is moving: the next record's commit covers it

    try:
        consumer.subscribe(
            ["k848"],
            on_revoke=lambda _c, parts: taken_away.append(f"revoked {parts}"),
            on_lost=lambda _c, parts: taken_away.append(f"lost {parts}"),
        )
        produce(range(20))
        read_until(20)
        assert {tp.partition for tp in consumer.assignment()} == {0, 1}
        coordinator = _group_coordinator(cluster, "k848-readers")
        cluster.kill(coordinator)  # SIGKILL: the coordinator goes, its members' records stay
        produce(range(20, 40))
        read_until(40)
        successor = _group_coordinator(cluster, "k848-readers")
        deadline = time.monotonic() + READ_DEADLINE_S
        committed: list[int] = []
        while time.monotonic() < deadline:
            try:
                found = consumer.committed(
                    [confluent_kafka.TopicPartition("k848", p) for p in (0, 1)], timeout=5
                )
                committed = [tp.offset for tp in found]
            except confluent_kafka.KafkaException:
                committed = []
            if committed == [20, 20]:
                break
            read_until(40)  # a commit refused during the move is made by the next one
            time.sleep(0.2)
        taken_before_close = list(taken_away)  # close() revokes everything itself
    finally:
        consumer.close()
        producer.flush(5)
    print(f"group coordinator {coordinator} killed; {successor} took over")
    assert successor != coordinator
    assert set(read) == {b"n%d" % number for number in range(40)}
    assert taken_before_close == []  # went on with its partitions: not joined anew
    assert committed == [20, 20]
