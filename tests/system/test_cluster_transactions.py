"""Transactions on a replicated topic, with real processes: one ZooKeeper (PySpark's jars,
127.0.0.1) and three ``twinlog serve --broker-id N --zookeeper ...``. A transactional
``Producer`` on the bootstrap list finds its coordinator (the leader of ``__txn_journal-0``)
and writes to each partition's leader, which registers with that coordinator over gRPC;
journal logs and data logs are replicated to the followers.

1. A follower is SIGKILLed in the middle and comes back: every committed transaction is
   read once, in order, an aborted one never, and the three replicas end with
   byte-identical data logs *and* journal logs.
2. Transactions span three partitions led by different brokers, and the broker that is
   the coordinator is SIGKILLed in the middle of the stream: the producer follows the
   coordinator to its new broker (FindCoordinator, NotCoordinatorError), the new
   coordinator replays the replicated journal and redoes what was prepared, and a
   consumer reads every committed record exactly once, each transaction whole.

The partition side of a leader failover (J1-J6, F3, F5, F6) is tested in
``tests/engine/broker/test_replicated_journal.py``; the coordinator side in one process
in ``tests/engine/broker/test_coordinator_failover.py``."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_support import LocalCluster, running_cluster, wait_for
from log_support import read_all

from twinlog.engine.broker.internal_topics import TXN_JOURNAL_TOPIC
from twinlog.engine.log import DataLog
from twinlog.engine.records.batch_reader import iter_batches
from twinlog.engine.zookeeper.checkpoint_pointer import ZooKeeperCheckpointPointer
from twinlog.journal.journal_logs import JOURNAL_LOG_DIRECTORY
from twinlog.rpc.cli.local_zookeeper import LocalZooKeeper
from twinlog.rpc.client.consumer import Consumer
from twinlog.rpc.client.producer import Producer

pytestmark = [pytest.mark.slow, pytest.mark.crash]

TOPIC = "payments"
# A follower dead for 5 s leaves the ISR, so commits wait at most that long for it.
SETTINGS = ("replica_lag_time_max_ms=5000", "replica_ack_timeout_ms=15000", "journal_partitions=1")
# Checkpoints (and with them the published low watermarks and the leaders' journal purges)
# every 300 ms: a watermark above a transaction still in flight would purge its entries,
# and its commit would then miss records. (Not for the test comparing whole journal logs
# after a stop: a PURGE written just before it may not have reached every follower.)
PURGING_SETTINGS = (*SETTINGS, "checkpoint_interval_ms=300")


@pytest.fixture()
def cluster(tmp_path: Path, zookeeper: LocalZooKeeper) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path, zookeeper, settings=SETTINGS) as opened:
        yield opened


@pytest.fixture()
def purging_cluster(tmp_path: Path, zookeeper: LocalZooKeeper) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path, zookeeper, settings=PURGING_SETTINGS) as opened:
        yield opened


def _logs(data_dir: Path) -> tuple[bytes, bytes]:
    """The whole data log and journal log (past any high watermark)."""
    directory = data_dir / "logs" / f"{TOPIC}-0"
    with (
        DataLog.open(directory) as data,
        DataLog.open(directory / JOURNAL_LOG_DIRECTORY) as journal,
    ):
        return read_all(data), read_all(journal)


def test_transactions_survive_a_follower_kill_and_replicas_agree(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    brokers = cluster.brokers
    admin = cluster.remote(1)
    admin.create_topic(TOPIC, 1, {"replication.factor": "3"})
    admin.close()
    first = cluster.wait_for_full_isr(TOPIC, partitions=1, replicas=3)[0]
    leader = brokers[first.leader]
    follower_id = next(b for b in (1, 2, 3) if b != first.leader)
    producer = Producer(
        cluster.bootstrap,
        transactional_id="payments-loader",
        request_timeout_ms=30_000,
        **cluster.client_arguments(),
    )
    producer.init_transactions()
    committed: list[bytes] = []

    def commit(number: int, records: int = 3) -> None:
        with producer.transaction():
            values = [b"t%d-r%d" % (number, r) for r in range(records)]
            for value in values:
                producer.send(TOPIC, value, partition=0)
        committed.extend(values)

    for number in range(5):
        commit(number)
    producer.begin_transaction()
    producer.send(TOPIC, b"aborted", partition=0)
    producer.flush()
    producer.abort_transaction()

    brokers[follower_id].kill()  # SIGKILL a follower mid-stream
    for number in range(5, 10):  # the ISR shrinks to two (min ISR 2): commits go on
        commit(number)
    brokers[follower_id].start()  # back: catches both logs up and rejoins the ISR
    cluster.wait_for_full_isr(TOPIC, partitions=1, replicas=3, timeout_s=60)
    for number in range(10, 13):
        commit(number)
    producer.close()

    consumer = Consumer(leader.address, **cluster.client_arguments())
    consumer.assign([(TOPIC, 0)])
    consumer.seek_to_beginning()
    received: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(received) < len(committed) and time.monotonic() < deadline:
        received += [record.value for record in consumer.poll(timeout_ms=500)]
    consumer.close()
    assert received == committed  # once each, in order; the aborted one never

    for broker_id in (1, 2, 3):
        assert brokers[broker_id].stop(signal.SIGTERM) == 0
    logs = [_logs(tmp_path / f"b{broker_id}") for broker_id in (1, 2, 3)]
    assert logs[0][0] == logs[1][0] == logs[2][0], "the replicas' data logs differ"
    # The brokers stop one after another, and a controlled shutdown moves leadership: the
    # partition's next leader may still append to the journal log (the APPLIED marks of
    # the last copies, which complete after their records are readable) once a replica
    # has stopped. So the replicas agree on a common prefix, each shorter one a prefix of
    # the longest, as the nemesis's divergence check says up to the high watermark.
    journals = sorted((log[1] for log in logs), key=len)
    assert all(journals[-1].startswith(j) for j in journals), "the replicas' journal logs differ"
    assert len(journals[0]) > 0
    values = [r.value for b in iter_batches(logs[0][0]) for r in b.records()]
    assert values == committed


PARTITIONS = 3


def _leaders(cluster: LocalCluster, topic: str, partitions: int) -> dict[int, int]:
    states = {p: cluster.partition_state(topic, p) for p in range(partitions)}
    return {p: s.leader for p, s in states.items() if s is not None}


def test_the_coordinator_broker_dies_mid_stream_and_every_commit_is_read_once(
    purging_cluster: LocalCluster,
) -> None:
    cluster = purging_cluster
    admin = cluster.remote(1)
    admin.create_topic("ledger", PARTITIONS, {"replication.factor": "3"})
    admin.close()
    cluster.wait_for_full_isr("ledger", partitions=PARTITIONS, replicas=3)
    cluster.wait_for_full_isr(TXN_JOURNAL_TOPIC, partitions=1, replicas=3)
    producer = Producer(
        cluster.bootstrap,
        transactional_id="ledger-writer",
        request_timeout_ms=60_000,
        **cluster.client_arguments(),
    )
    producer.init_transactions()
    committed: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    failed: list[str] = []
    stop = threading.Event()
    transactions = 0

    def write() -> None:
        nonlocal transactions
        deadline = time.monotonic() + 120
        while not stop.is_set() and time.monotonic() < deadline:
            number = transactions
            values = {p: b"t%d-p%d" % (number, p) for p in range(PARTITIONS)}
            try:
                with producer.transaction():
                    for partition, value in values.items():
                        producer.send("ledger", value, partition=partition)
            except Exception as error:  # recorded: the test fails on any
                failed.append(f"transaction {number}: {type(error).__name__}: {error}")
                return
            for partition, value in values.items():
                committed[partition].append(value)
            transactions += 1

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    wait_for("five transactions", lambda: transactions >= 5 or failed, timeout_s=60)
    coordinator = cluster.partition_state(TXN_JOURNAL_TOPIC, 0)
    assert coordinator is not None
    leaders = _leaders(cluster, "ledger", PARTITIONS)
    cluster.kill(coordinator.leader)  # SIGKILL the coordinator in the middle of the stream
    killed_at = transactions
    cluster.wait_for_new_leader(TXN_JOURNAL_TOPIC, 0, coordinator, timeout_s=60)
    wait_for(
        "five transactions at the new coordinator",
        lambda: transactions >= killed_at + 5 or failed,
        timeout_s=90,
    )
    stop.set()
    writer.join(90)
    assert not failed, failed
    producer.close()
    # the cluster's partitions were led by more than one broker: the commits crossed brokers
    assert any(leader != coordinator.leader for leader in leaders.values()), leaders

    consumer = Consumer(cluster.bootstrap, **cluster.client_arguments())
    consumer.assign([("ledger", p) for p in range(PARTITIONS)])
    consumer.seek_to_beginning()
    received: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    expected = sum(len(values) for values in committed.values())
    deadline = time.monotonic() + 60
    while sum(len(v) for v in received.values()) < expected and time.monotonic() < deadline:
        for record in consumer.poll(timeout_ms=500):
            received[record.partition].append(record.value)
    consumer.close()
    assert received == committed  # once each, in order, every transaction whole
    # the coordinators published low watermarks the leaders purged below
    pointer = ZooKeeperCheckpointPointer(cluster.session, 0).read()
    assert pointer is not None and pointer.low_watermark is not None
