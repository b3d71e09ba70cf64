"""F17, the client's side: a producer cut from the transaction coordinator's broker while
the brokers still reach it (the client proxy held: each broker advertises one address to
clients and another to brokers, as Kafka's separate listeners). Nothing fails over (the
coordinator keeps its leadership and its ZooKeeper session); the commit the producer
asked for is answered by nobody, so its outcome is unknown to it: with both directions
cut the request never arrived, with only the answers cut (one-way) it was carried out.
Once the link heals, a new producer of the same transactional id fences the old one, the
coordinator settles the unknown transaction (aborts it if it was never prepared), and
every transaction ends whole or not at all."""

from __future__ import annotations

import pytest
from cluster_checks import check_replicas_agree, check_transactions
from cluster_faults import FaultCluster, holds_throughout
from cluster_workload import COMMITTED, UNKNOWN, TransactionalWriter
from tcp_proxy import BOTH, DOWN

from twinlog.engine.broker.internal_topics import TXN_JOURNAL_TOPIC

pytestmark = [pytest.mark.slow, pytest.mark.crash]

PARTITIONS = 3
API_TIMEOUT_MS = 8_000  # the commit gives up after this: long enough for two attempts


@pytest.mark.parametrize("direction", [BOTH, DOWN])
def test_f17_a_producer_cut_from_the_coordinator_only_ends_all_or_nothing(
    cluster: FaultCluster, topic: str, direction: str
) -> None:
    cluster.create_topic(topic, PARTITIONS)
    coordinator = cluster.coordinator()
    link = cluster.brokers[coordinator.leader].client_link
    writer = TransactionalWriter(
        cluster, topic, PARTITIONS, f"f17{direction}", api_timeout_ms=API_TIMEOUT_MS
    )
    assert writer.run_one().outcome == COMMITTED  # it knows the coordinator
    cut = writer.run_one(before_commit=lambda: link.hold(direction))
    assert cut.outcome == UNKNOWN, cut.error  # nobody answered the commit
    holds_throughout(
        lambda: cluster.coordinator().leader_epoch == coordinator.leader_epoch,
        "the coordinator keeps its leadership (brokers and ZooKeeper still reach it)",
        1.0,
    )
    link.release()
    for _ in range(2):  # a new producer of the same id: it fences the old one
        assert writer.run_one().outcome == COMMITTED
    writer.stop()
    read = check_transactions(cluster, topic, PARTITIONS, [writer])
    if direction == DOWN:  # the commit arrived: only its answer was lost
        values = {value for records in read.values() for _, value in records}
        assert set(cut.all_values()) <= values, "a lost answer, not a lost commit"
    check_replicas_agree(cluster, TXN_JOURNAL_TOPIC)
