"""The ``servers`` option as a real cluster's bootstrap list, through real PySpark.

One local ZooKeeper and three ``twinlog serve --broker-id N --zookeeper ...`` processes
(the ``FaultCluster`` rig of ``tests/system/cluster``), a topic of three partitions with
replication factor 3. A DataFrame is written with the exactly-once batch write (one
transaction: begun at its coordinator, produced to each partition's leader by the tasks,
committed by the driver's commit worker) and read back with the batch read, both given
all three brokers' addresses; every row is there exactly once. Then the broker leading
one of the partitions is SIGKILLed, and once ZooKeeper names a new leader the same read
gives the same rows at the same offsets: each task's client follows the leaders.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from cluster_faults import EXPIRY_S, FaultCluster

from twinlog.rpc.cli.local_zookeeper import LocalZooKeeper

pytest.register_assert_rewrite("spark_support")  # before the import below, or pytest warns
from spark_support import spark_marks, unique  # noqa: E402

pytest_plugins = ["spark_support"]
pytestmark = [*spark_marks, pytest.mark.crash]

PARTITIONS = 3
ROWS = 1500
TICK_TIME_MS = 500  # sessions of 1..10 s; the rig's brokers use 4 s
# One request of the connector's clients; far below its default (120 s), so a hang fails
# in seconds, and far above what a loopback cluster needs.
REQUEST_TIMEOUT_MS = "15000"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultCluster]:
    scratch = tmp_path_factory.mktemp("spark-cluster")
    with LocalZooKeeper(scratch / "zookeeper", tick_time_ms=TICK_TIME_MS) as zookeeper:
        started = FaultCluster(scratch / "brokers", zookeeper.connect_string, uuid.uuid4().hex)
        try:
            started.start()
            yield started
        finally:
            started.close()


def _read(spark: Any, servers: str, token: str, topic: str) -> list[tuple[int, int, str]]:
    """(partition, offset, value) of every row the batch read gives, sorted."""
    rows = (
        spark.read.format("twinlog")
        .option("servers", servers)
        .option("token", token)
        .option("subscribe", topic)
        .option("requestTimeoutMs", REQUEST_TIMEOUT_MS)
        .load()
        .select("partition", "offset", "value")
        .collect()
    )
    return sorted((r.partition, r.offset, bytes(r.value).decode()) for r in rows)


def test_write_and_read_through_the_bootstrap_list_and_across_a_leader_kill(
    spark: Any, cluster: FaultCluster
) -> None:
    started_s = time.monotonic()
    try:
        topic = unique("on-cluster")
        cluster.create_topic(topic, PARTITIONS)  # replication factor 3, every replica in sync
        servers = cluster.bootstrap
        assert len(servers.split(",")) == 3
        token = cluster.token()  # the operator's: the cluster requires tokens and ACLs
        assert token is not None

        frame = spark.range(0, ROWS, 1, 2).selectExpr(
            "CONCAT('v', CAST(id AS STRING)) AS value",
            f"CAST(id % {PARTITIONS} AS INT) AS partition",
        )
        (
            frame.write.format("twinlog")
            .mode("append")
            .option("servers", servers)
            .option("token", token)
            .option("topic", topic)
            .option("batchBytes", "2048")  # several batches per partition and task
            .option("requestTimeoutMs", REQUEST_TIMEOUT_MS)
            .save()
        )
        written_s = time.monotonic()

        rows = _read(spark, servers, token, topic)
        values = [value for _, _, value in rows]
        assert len(values) == ROWS, f"{len(values)} rows read, {ROWS} written"
        assert sorted(values) == sorted(f"v{n}" for n in range(ROWS))
        for partition, offset, value in rows:
            assert partition == int(value[1:]) % PARTITIONS, (partition, offset, value)
        for partition in range(PARTITIONS):  # each partition's offsets are 0, 1, 2, ...
            offsets = [offset for p, offset, _ in rows if p == partition]
            assert offsets == list(range(ROWS // PARTITIONS)), partition
        read_s = time.monotonic()

        leaders = {p: cluster.wait_in_sync(topic, partition=p).leader for p in range(PARTITIONS)}
        # Broker 1 when it leads a partition: then its address, the first of the bootstrap
        # list, is dead for every later client too.
        victim_partition = next((p for p, b in leaders.items() if b == 1), 0)
        victim = leaders[victim_partition]
        cluster.brokers[victim].kill()
        successor = cluster.wait_state(
            topic,
            lambda s: s.leader not in (-1, victim),
            f"a leader other than broker {victim}",
            EXPIRY_S,
            victim_partition,
        )
        assert successor.leader != victim
        failed_over_s = time.monotonic()

        assert _read(spark, servers, token, topic) == rows
        print(
            f"write {written_s - started_s:.1f} s, read {read_s - written_s:.1f} s, "
            f"failover of partition {victim_partition} from broker {victim} to "
            f"{successor.leader} {failed_over_s - read_s:.1f} s, read after it "
            f"{time.monotonic() - failed_over_s:.1f} s"
        )
    except BaseException:
        print(cluster.dump_logs())
        raise
