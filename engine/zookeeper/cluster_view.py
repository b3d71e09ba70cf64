"""The cluster's metadata as clients see it, read from ZooKeeper on demand: read only.

    view = ZooKeeperClusterView(session)
    view.metadata(["orders"])   # ClusterMetadata: brokers, controller, leaders, ISRs

Read on every call rather than cached behind watches: clients ask for metadata rarely
(at start, and after a NotLeaderOrFollowerError or a broker that went away), and right
after a leader change is exactly when a watch-fed cache may still hold the old leader.
The reads are pipelined: three round trips whatever the number of topics (the cluster
id, the controller and the listings; then every broker and topic znode; then every
partition state), about a millisecond each on one machine.

Every read is bounded by ``timeout_ms`` as a whole: past it, ZooKeeperUnavailableError
(retriable; the client asks another broker). A znode that vanishes between the listing
and the read (a broker leaving, a topic being deleted) is left out, not an error.

Thread rule: any thread (kazoo's client is thread-safe; nothing is kept here).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from kazoo.exceptions import NoNodeError

from twinlog.engine.base.cluster_metadata import (
    NO_CONTROLLER,
    NO_LEADER,
    BrokerEndpoint,
    ClusterMetadata,
    PartitionMetadata,
    TopicMetadata,
)
from twinlog.engine.zookeeper import znodes
from twinlog.engine.zookeeper.partition_state import PartitionState
from twinlog.engine.zookeeper.session import ZooKeeperSession, ZooKeeperUnavailableError

READ_TIMEOUT_MS = 5_000  # the whole read; below a client's request timeout (30 s default)
NO_EPOCH = -1  # a partition whose state the controller has not written yet


class ZooKeeperClusterView:
    """``metadata(topics)`` for the Administration service's ``Metadata`` call."""

    def __init__(self, session: ZooKeeperSession, timeout_ms: int = READ_TIMEOUT_MS) -> None:
        self.session = session
        self.timeout_ms = timeout_ms

    def metadata(self, topics: Sequence[str] | None = None) -> ClusterMetadata:
        return read_cluster_metadata(self.session, topics, self.timeout_ms)


class _Reads:
    """Waits for kazoo's asynchronous answers within one deadline for them all."""

    def __init__(self, session: ZooKeeperSession, timeout_ms: int) -> None:
        self.session = session
        self.timeout_ms = timeout_ms
        self.deadline_s = time.monotonic() + timeout_ms / 1000

    def wait(self, pending: Any) -> Any:
        """The answer, or None when the znode does not exist."""
        remaining_s = self.deadline_s - time.monotonic()
        if remaining_s <= 0:
            raise ZooKeeperUnavailableError(
                f"reading the cluster's metadata from ZooKeeper at {self.session.connect} took "
                f"more than {self.timeout_ms} ms; retry, or ask another broker"
            )
        with self.session.translated_errors():
            try:
                return pending.get(timeout=remaining_s)
            except NoNodeError:
                return None


def read_cluster_metadata(
    session: ZooKeeperSession,
    topics: Sequence[str] | None = None,
    timeout_ms: int = READ_TIMEOUT_MS,
) -> ClusterMetadata:
    """Brokers, controller and the partitions of ``topics`` (None or empty: every topic).

    A topic asked for that does not exist is left out; a partition whose state the
    controller has not written yet has no leader (``NO_LEADER``, epoch -1).
    """
    client = session.client
    reads = _Reads(session, timeout_ms)
    # Round trip 1: what names the rest.
    cluster_id_read = client.get_async(znodes.CLUSTER_ID)
    controller_read = client.get_async(znodes.CONTROLLER)
    broker_ids_read = client.get_children_async(znodes.BROKER_IDS)
    topics_read = None if topics else client.get_children_async(znodes.TOPICS)
    cluster_id = _cluster_id(reads.wait(cluster_id_read))
    controller_id = _controller_id(reads.wait(controller_read))
    broker_ids = sorted(
        int(child) for child in reads.wait(broker_ids_read) or () if child.isdigit()
    )
    names = sorted(set(topics) if topics else reads.wait(topics_read) or ())
    # Round trip 2: every broker's registration and every topic's partition count.
    broker_reads = {
        broker_id: client.get_async(znodes.broker_path(broker_id)) for broker_id in broker_ids
    }
    topic_reads = {name: client.get_async(znodes.topic_path(name)) for name in names}
    brokers = []
    for broker_id, pending in broker_reads.items():
        answer = reads.wait(pending)
        if answer is not None:  # gone since the listing: its session ended
            brokers.append(_endpoint(broker_id, answer[0]))
    partition_counts: dict[str, int] = {}
    for name, pending in topic_reads.items():
        answer = reads.wait(pending)
        if answer is not None:
            value = znodes.decode(znodes.topic_path(name), answer[0], ("partitions",))
            partition_counts[name] = int(value["partitions"])
    # Round trip 3: every partition's state.
    state_reads = {
        (name, partition): client.get_async(znodes.partition_state_path(name, partition))
        for name, count in partition_counts.items()
        for partition in range(count)
    }
    found: dict[str, list[PartitionMetadata]] = {name: [] for name in partition_counts}
    for (name, partition), pending in state_reads.items():
        answer = reads.wait(pending)
        found[name].append(_partition(name, partition, answer))
    return ClusterMetadata(
        cluster_id=cluster_id,
        controller_id=controller_id,
        brokers=tuple(brokers),
        topics=tuple(TopicMetadata(name, tuple(items)) for name, items in found.items()),
    )


def _cluster_id(answer: tuple[bytes, Any] | None) -> str:
    if answer is None:
        return ""  # no broker has joined yet; still a cluster, never a single node
    value = znodes.decode(znodes.CLUSTER_ID, answer[0], ("cluster_id",))
    return str(value["cluster_id"])


def _controller_id(answer: tuple[bytes, Any] | None) -> int:
    if answer is None:
        return NO_CONTROLLER
    value = znodes.decode(znodes.CONTROLLER, answer[0], ("broker_id",))
    return int(value["broker_id"])


def _endpoint(broker_id: int, data: bytes) -> BrokerEndpoint:
    value = znodes.decode(znodes.broker_path(broker_id), data, ("host", "port"))
    return BrokerEndpoint(
        broker_id,
        str(value["host"]),
        int(value["port"]),
        str(value.get("kafka_host", "")),
        int(value.get("kafka_port", 0)),
    )


def _partition(name: str, partition: int, answer: tuple[bytes, Any] | None) -> PartitionMetadata:
    if answer is None:
        return PartitionMetadata(partition, NO_LEADER, NO_EPOCH, (), ())
    data, stat = answer
    state = PartitionState.decode(znodes.partition_state_path(name, partition), data, stat.version)
    return PartitionMetadata(
        partition, state.leader, state.leader_epoch, state.replicas, state.isr_ids
    )
