"""A rolling restart on real processes (docs/operations.md, "Rolling restart"): every
broker in turn stopped with SIGTERM (a controlled shutdown) and started again, under
idempotent produce, transactional and tailing-consumer load. Nothing acknowledged is lost
or written twice, every committed transaction is read once, no client call with retries
left fails, and the leaderships go back to their preferred replicas afterwards."""

from __future__ import annotations

import pytest
from cluster_checks import check_history, check_replicas_agree, check_transactions
from cluster_faults import BROKER_IDS, FaultCluster, wait_until
from cluster_security import OPERATOR
from cluster_workload import (
    ABORTED,
    COMMITTED,
    AckedProducer,
    BackgroundProducer,
    TailingConsumer,
    TransactionalWriter,
)

from twinlog.engine.broker.internal_topics import OFFSETS_TOPIC, TXN_JOURNAL_TOPIC
from twinlog.rpc.client import Admin

pytestmark = [pytest.mark.slow, pytest.mark.crash]

PARTITIONS = 3


def test_a_rolling_restart_fails_no_call_and_gives_the_leaders_back(
    cluster: FaultCluster, topic: str
) -> None:
    transactional = f"{topic}-txn"
    cluster.create_topic(topic)
    cluster.create_topic(transactional, partitions=PARTITIONS)
    producer = AckedProducer(cluster, topic, "rr")
    writer = TransactionalWriter(cluster, transactional, PARTITIONS, "rr")
    with TailingConsumer(cluster, topic) as consumer, BackgroundProducer(producer) as background:
        writer.start()
        try:
            wait_until(lambda: writer.committed_count() >= 3, "3 committed transactions")
            for broker_id in BROKER_IDS:
                status = cluster.brokers[broker_id].stop()
                assert status == 0, cluster.brokers[broker_id].log()[-3000:]
                cluster.restart(broker_id)  # its session closed with it: at once
                cluster.wait_in_sync(topic)
                for partition in range(PARTITIONS):
                    cluster.wait_in_sync(transactional, partition=partition)
                cluster.wait_in_sync(TXN_JOURNAL_TOPIC)
                cluster.wait_in_sync(OFFSETS_TOPIC)
                acknowledged = background.acknowledged_count()
                committed = writer.committed_count()
                wait_until(
                    lambda a=acknowledged, c=committed: (
                        background.acknowledged_count() >= a + 5
                        and writer.committed_count() >= c + 2
                    ),
                    "writes and commits go on after the restart",
                )
        finally:
            writer.stop()
    with Admin(cluster.bootstrap, **cluster.client_arguments(OPERATOR)) as admin:
        asked = [(topic, 0)] + [(transactional, p) for p in range(PARTITIONS)]
        results = admin.elect_preferred_leaders(asked, timeout_ms=20_000)
    assert all(result.succeeded for result in results), results
    for name, partition in asked:
        state = cluster.state(name, partition)
        assert state is not None and state.leader == state.replicas[0], state
    # No call with retries left failed: the transactional producer's calls all returned,
    # and the idempotent one only met retriable errors on the way (it retries them).
    assert not writer.errors, writer.errors
    assert all(txn.outcome in (COMMITTED, ABORTED) for txn in writer.transactions), [
        (txn.tag, txn.outcome, txn.error) for txn in writer.transactions if txn.error
    ]
    check_transactions(cluster, transactional, PARTITIONS, [writer])
    check_history(check_replicas_agree(cluster, topic), [producer], [consumer])
