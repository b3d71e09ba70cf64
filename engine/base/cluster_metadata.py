"""Who leads what in a cluster, as plain values: ``ClusterMetadata`` (Kafka's Metadata).

    ClusterMetadata(cluster_id, controller_id, brokers, topics)
      brokers    BrokerEndpoint(broker_id, host, port[, kafka_host, kafka_port]) of every
                 live broker (the Kafka pair: its Kafka listener, when it has one)
      topics     TopicMetadata(name, partitions)
                   PartitionMetadata(partition, leader_id, leader_epoch, replicas, isr)

A cluster broker reads it from ZooKeeper (``twinlog.engine.zookeeper.cluster_view``); a
single-node server answers itself as broker 0 leading every partition, with no cluster
id, so that one client works on both (``standalone``). The gRPC Administration service
carries it as ``Metadata`` (``twinlog.rpc.wire.cluster_convert``); the cluster client
routes each partition's calls by it (``twinlog.rpc.client.cluster``).

No behaviour and no I/O here: the floors below ZooKeeper (and the embedded broker) may
import it without kazoo.
"""

from __future__ import annotations

from dataclasses import dataclass

NO_LEADER = -1  # a partition offline, or not given a leader yet (Kafka's LeaderAndIsr.NoLeader)
NO_CONTROLLER = -1  # no controller elected at the moment of the read
STANDALONE_BROKER_ID = 0  # the id a single-node server answers for itself


@dataclass(frozen=True)
class BrokerEndpoint:
    """A live broker and the address it advertised (``--advertised-host`` or ``--host``)."""

    broker_id: int
    host: str
    port: int
    kafka_host: str = ""  # "" and 0: the broker has no Kafka listener
    kafka_port: int = 0

    @property
    def address(self) -> str:
        """``host:port`` as gRPC takes it (an IPv6 host in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def kafka_address(self) -> tuple[str, int] | None:
        """(host, port) of the broker's Kafka listener; None when it has none."""
        return (self.kafka_host, self.kafka_port) if self.kafka_port else None


@dataclass(frozen=True)
class PartitionMetadata:
    partition: int
    leader_id: int  # NO_LEADER: offline, or its state is not written yet
    leader_epoch: int  # +1 at every leader change; -1 when no state is written yet
    replicas: tuple[int, ...]  # broker ids in assignment order
    isr: tuple[int, ...]  # the in-sync replicas as written in ZooKeeper

    @property
    def offline(self) -> bool:
        return self.leader_id == NO_LEADER

    @property
    def under_replicated(self) -> bool:
        """Fewer in-sync replicas than replicas (kafka-topics --under-replicated-partitions)."""
        return len(self.isr) < len(self.replicas)


@dataclass(frozen=True)
class TopicMetadata:
    name: str
    partitions: tuple[PartitionMetadata, ...]  # by partition number

    def partition(self, number: int) -> PartitionMetadata | None:
        for item in self.partitions:
            if item.partition == number:
                return item
        return None


@dataclass(frozen=True)
class ClusterMetadata:
    cluster_id: str | None  # None: a single-node server, not a cluster
    controller_id: int  # NO_CONTROLLER while none is elected
    brokers: tuple[BrokerEndpoint, ...]  # live brokers, by id
    topics: tuple[TopicMetadata, ...]  # the topics asked for that exist, by name

    @property
    def standalone(self) -> bool:
        """A single-node server's answer: every call goes to the server that gave it."""
        return self.cluster_id is None

    def broker(self, broker_id: int) -> BrokerEndpoint | None:
        for item in self.brokers:
            if item.broker_id == broker_id:
                return item
        return None

    def topic(self, name: str) -> TopicMetadata | None:
        for item in self.topics:
            if item.name == name:
                return item
        return None

    def partition(self, topic: str, partition: int) -> PartitionMetadata | None:
        found = self.topic(topic)
        return None if found is None else found.partition(partition)

    def leader(self, topic: str, partition: int) -> BrokerEndpoint | None:
        """The live leader of a partition; None when unknown, offline or not registered."""
        found = self.partition(topic, partition)
        if found is None or found.offline:
            return None
        return self.broker(found.leader_id)
