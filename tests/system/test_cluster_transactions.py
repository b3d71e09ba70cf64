"""Transactions on a replicated topic, with real processes: one ZooKeeper (PySpark's jars,
127.0.0.1) and three ``twinlog serve --broker-id N --zookeeper ...``. A transactional
``Producer`` writes to the partition's leader (whose coordinator decides); its journal log
and data log are replicated to the two followers over gRPC. A follower is SIGKILLed in the
middle and comes back: every committed transaction is read once, in order, an aborted one
never, and the three replicas end with byte-identical data logs *and* journal logs.

Leader failover with a transaction in flight needs the coordinator on another broker than
the partition's leader (transactions across brokers: the next issue); its partition side
(J1-J6, F3, F5, F6) is tested in ``tests/engine/broker/test_replicated_journal.py``."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_support import LocalCluster, running_cluster, running_zookeeper
from log_support import read_all

from twinlog.engine.log import DataLog
from twinlog.engine.records.batch_reader import iter_batches
from twinlog.engine.zookeeper.local_server import LocalZooKeeper
from twinlog.journal.journal_logs import JOURNAL_LOG_DIRECTORY
from twinlog.rpc.client.consumer import Consumer
from twinlog.rpc.client.producer import Producer

pytestmark = [pytest.mark.slow, pytest.mark.crash]

TOPIC = "payments"
# A follower dead for 5 s leaves the ISR, so commits wait at most that long for it.
SETTINGS = ("replica_lag_time_max_ms=5000", "replica_ack_timeout_ms=15000", "journal_partitions=1")


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalZooKeeper]:
    with running_zookeeper(tmp_path_factory.mktemp("zookeeper")) as server:
        yield server


@pytest.fixture()
def cluster(tmp_path: Path, zookeeper: LocalZooKeeper) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path, zookeeper, settings=SETTINGS) as opened:
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
        leader.address, transactional_id="payments-loader", request_timeout_ms=30_000
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

    consumer = Consumer(leader.address)
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
    assert logs[0][1] == logs[1][1] == logs[2][1], "the replicas' journal logs differ"
    values = [r.value for b in iter_batches(logs[0][0]) for r in b.records()]
    assert values == committed
