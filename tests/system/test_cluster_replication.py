"""A real cluster: one ZooKeeper (PySpark's jars, 127.0.0.1) and three ``twinlog serve
--broker-id N --zookeeper ...`` processes. A topic of replication factor 3 is written with
acks=all; its leader is SIGKILLed (F1): a new leader is elected from the ISR, nothing
acknowledged is lost, an idempotent retry is not written twice, the killed broker comes
back, catches up and rejoins the ISR, and the three replicas end byte-identical."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from broker_support import batch
from cluster_support import (
    SESSION_TIMEOUT_MS,
    LocalCluster,
    wait_for,
)
from log_support import read_all

from twinlog.engine.base.errors import TwinlogError
from twinlog.engine.base.types import ProducerIdentity
from twinlog.engine.log import DataLog
from twinlog.engine.records.batch_reader import iter_batches
from twinlog.engine.zookeeper.partition_state import PartitionState
from twinlog.rpc.client.cluster import ClusterBroker

pytestmark = [pytest.mark.slow, pytest.mark.crash]

TOPIC = "orders"


def produce_until_acknowledged(
    cluster: LocalCluster, payload: bytes, timeout_s: float = 40.0
) -> int:
    """Send to whoever leads now, retrying retriable errors as a client does."""
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        state = cluster.partition_state(TOPIC, 0)
        if state is not None and state.leader > 0 and cluster.brokers[state.leader].process:
            process = cluster.brokers[state.leader].process
            if process is not None and process.poll() is None:
                remote = cluster.remote(state.leader)
                try:
                    return remote.produce(TOPIC, 0, payload).base_offset
                except TwinlogError as error:
                    if not error.retriable:
                        raise
                    last = error
                finally:
                    remote.close()
        time.sleep(0.2)
    raise AssertionError(f"not acknowledged within {timeout_s} s; last error: {last!r}")


def test_leader_killed_during_acks_all_produce_loses_nothing(cluster: LocalCluster) -> None:
    admin = cluster.remote(1)
    admin.create_topic(TOPIC, 1, {"replication.factor": "3"})
    admin.close()
    # any broker that coordinates a journal partition gives the id (the client finds one)
    with ClusterBroker(cluster.bootstrap, cluster.client_options(60_000)) as client:
        identity: ProducerIdentity = client.init_producer()
    first = wait_for("a leader with a full ISR", lambda: _full(cluster.partition_state(TOPIC, 0)))
    acknowledged = []
    for number in range(20):
        payload = batch([b"v%d" % number], identity, sequence=number)
        acknowledged.append((number, produce_until_acknowledged(cluster, payload)))

    cluster.brokers[first.leader].kill()  # SIGKILL: F1
    second = wait_for(
        "a new leader",
        lambda: (
            (s := cluster.partition_state(TOPIC, 0)) and s.leader not in (-1, first.leader) and s
        ),
        timeout_s=SESSION_TIMEOUT_MS / 1000 + 20,
    )
    assert second.leader_epoch > first.leader_epoch
    assert first.leader not in second.isr_ids  # the controller dropped the dead broker

    # The producer did not hear back for batch 19 (say): its retry must not be written twice.
    retried = batch([b"v19"], identity, sequence=19)
    assert produce_until_acknowledged(cluster, retried) == acknowledged[-1][1]
    for number in range(20, 30):
        payload = batch([b"v%d" % number], identity, sequence=number)
        acknowledged.append((number, produce_until_acknowledged(cluster, payload)))

    cluster.brokers[first.leader].start()  # back: truncates by epoch, catches up, rejoins
    wait_for(
        "the restarted broker back in the ISR", lambda: _full(cluster.partition_state(TOPIC, 0)), 40
    )

    for process in cluster.brokers.values():
        assert process.stop(signal.SIGTERM) == 0
    logs = [_log_bytes(cluster.root / f"b{broker_id}") for broker_id in (1, 2, 3)]
    assert logs[0] == logs[1] == logs[2], "the replicas differ"
    values = _values(cluster.root / "b1")
    assert values == [b"v%d" % number for number in range(30)]  # once each, in order


def _full(state: PartitionState | None) -> PartitionState | None:
    return state if state is not None and state.leader > 0 and len(state.isr) == 3 else None


def _log_bytes(data_dir: Path) -> bytes:
    """The whole data log (past any high watermark: replicas must agree byte for byte)."""
    with DataLog.open(data_dir / "logs" / f"{TOPIC}-0") as log:
        return read_all(log)


def _values(data_dir: Path) -> list[bytes | None]:
    return [record.value for one in iter_batches(_log_bytes(data_dir)) for record in one.records()]
