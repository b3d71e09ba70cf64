"""ACLs administered at run time on a real three-broker secure cluster (tokens, client TLS,
broker certificates, a ZooKeeper credential, Kafka listeners over SASL_SSL): a grant
added through one broker is applied by every broker (each says so in its audit log, and
a Kafka producer of the grantee reaches every partition's leader), survives a broker's
restart, and deleted through a Kafka admin client it is refused again everywhere."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import kafka
import kafka.errors
import pytest
from cluster_support import wait_for
from kafka.admin import (
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    ResourcePatternFilter,
    ResourceType,
)
from secure_cluster import SecureCluster, running_secure_cluster

from twinlog.rpc.cli.local_zookeeper import LocalZooKeeper
from twinlog.rpc.client import AclEntry, Admin

pytestmark = pytest.mark.slow

TOPIC = "shared-orders"
PARTITIONS = 3
GRANT = AclEntry("mallory", "write", "topic", TOPIC)  # mallory: a token, no grant in the file
APPLIED_WITHIN_S = 2.0  # the watch fires in milliseconds; each check is a gRPC call too


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, zookeeper: LocalZooKeeper
) -> Iterator[SecureCluster]:
    with running_secure_cluster(
        tmp_path_factory.mktemp("acls"), zookeeper, acl_extra="admin alter cluster:*\n"
    ) as opened:
        with Admin(opened.bootstrap, connection=opened.options("admin")) as admin:
            admin.create_topic(TOPIC, PARTITIONS, {"replication.factor": "3"})
        wait_all_in_sync(opened)
        yield opened


def wait_all_in_sync(cluster: SecureCluster) -> None:
    for partition in range(PARTITIONS):
        wait_for(
            f"{TOPIC}-{partition} with 3 in sync",
            lambda p=partition: (
                (s := cluster.partition_state(TOPIC, p)) is not None
                and s.leader > 0
                and len(s.isr) == 3
            ),
        )


def grants_on(cluster: SecureCluster, broker_id: int) -> list[AclEntry]:
    """The stored grants broker ``broker_id`` applies (asked of it alone)."""
    address = cluster.brokers[broker_id].address
    with Admin(address, connection=cluster.options("admin")) as admin:
        return [e for e in admin.list_acls(resource_type="topic") if e.source == "store"]


def until(check: Callable[[], bool], what: str, timeout_s: float = 10.0) -> float:
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < timeout_s, what
        time.sleep(0.02)
    return time.monotonic() - start


def mallory_produces(cluster: SecureCluster) -> bool:
    """Does a kafka-python producer as mallory get a record to every partition's leader?"""
    producer = kafka.KafkaProducer(
        acks="all",
        max_block_ms=10_000,
        request_timeout_ms=20_000,
        **cluster.kafka_python("mallory"),
    )
    try:
        for partition in range(PARTITIONS):
            producer.send(TOPIC, b"by mallory", partition=partition).get(timeout=30)
        return True
    except kafka.errors.TopicAuthorizationFailedError:
        return False
    finally:
        producer.close(timeout=10)


def test_a_grant_added_through_one_broker_is_every_brokers_and_survives_a_restart(
    cluster: SecureCluster,
) -> None:
    leaders = {cluster.partition_state(TOPIC, p).leader for p in range(PARTITIONS)}  # type: ignore[union-attr]
    assert len(leaders) > 1, leaders
    assert not mallory_produces(cluster)
    with Admin(cluster.brokers[1].address, connection=cluster.options("admin")) as admin:
        assert admin.create_acls([GRANT]) == [GRANT]
    added_at = time.monotonic()
    applied_after_s = {}
    for broker_id in (1, 2, 3):
        until(lambda b=broker_id: grants_on(cluster, b) == [GRANT], f"broker {broker_id}")
        applied_after_s[broker_id] = time.monotonic() - added_at
    print(f"applied after (s, each asked in turn): {applied_after_s}")
    assert max(applied_after_s.values()) < APPLIED_WITHIN_S, applied_after_s
    applied = 'acl.applied store="ZooKeeper znode config/acls'
    added = 'added="mallory write topic:shared-orders (literal)"'
    for broker_id in (2, 3):  # each broker audits applying the change it did not make
        until(
            lambda b=broker_id: any(
                applied in line and added in line for line in cluster.brokers[b].log().splitlines()
            ),
            f"broker {broker_id}'s acl.applied line",
        )
    assert mallory_produces(cluster)

    restarted = cluster.brokers[2]
    assert restarted.stop() == 0
    restarted.start()
    assert grants_on(cluster, 2) == [GRANT]  # read from ZooKeeper before it served
    wait_all_in_sync(cluster)
    assert mallory_produces(cluster)


def test_a_grant_deleted_through_a_kafka_client_is_refused_everywhere(
    cluster: SecureCluster,
) -> None:
    with Admin(cluster.bootstrap, connection=cluster.options("admin")) as admin:  # any broker
        admin.create_acls([GRANT])
        assert GRANT in admin.list_acls(principal="mallory")
    until(lambda: all(grants_on(cluster, b) == [GRANT] for b in (1, 2, 3)), "granted")
    settings: dict[str, Any] = cluster.kafka_python("admin")
    client = KafkaAdminClient(**settings)
    try:
        mallorys = ACLFilter(
            principal="User:mallory",
            host="*",
            operation=ACLOperation.ANY,
            permission_type=ACLPermissionType.ANY,
            resource_pattern=ResourcePatternFilter(
                ResourceType.TOPIC, TOPIC, ACLResourcePatternType.LITERAL
            ),
        )
        described, _ = client.describe_acls(mallorys)
        assert [(a.principal, a.operation) for a in described] == [
            ("User:mallory", ACLOperation.WRITE)
        ]
        [(_, deleted, error)] = client.delete_acls([mallorys])
        assert error is kafka.errors.NoError and len(deleted) == 1
    finally:
        client.close()
    until(lambda: all(grants_on(cluster, b) == [] for b in (1, 2, 3)), "revoked")
    assert not mallory_produces(cluster)
