"""Where the server's ``Metadata`` answer comes from: ZooKeeper, or the server itself.

A cluster broker answers from ``ZooKeeperClusterView`` (``twinlog.engine.zookeeper``);
a single-node server answers ``StandaloneMetadata``: itself as broker 0, leader of
every partition at epoch 0, and no cluster id. The cluster client takes that as "send
everything to the address you asked", so the same client works on both
(``twinlog.rpc.client.cluster``).

Thread rule: any thread (the server's workers call it concurrently; nothing is kept).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from twinlog.engine.base.cluster_metadata import (
    STANDALONE_BROKER_ID,
    BrokerEndpoint,
    ClusterMetadata,
    PartitionMetadata,
    TopicMetadata,
)
from twinlog.engine.base.errors import UnknownTopicOrPartitionError
from twinlog.rpc.wire.broker_api import BrokerApi

STANDALONE_EPOCH = 0


class MetadataSource(Protocol):
    def metadata(self, topics: Sequence[str] | None = None) -> ClusterMetadata: ...


class StandaloneMetadata:
    """A single-node server's answer, from its broker's topics."""

    def __init__(self, broker: BrokerApi, endpoint: Callable[[], tuple[str, int]]) -> None:
        """``endpoint``: the server's (host, port), known once it is bound."""
        self.broker = broker
        self.endpoint = endpoint

    def metadata(self, topics: Sequence[str] | None = None) -> ClusterMetadata:
        host, port = self.endpoint()
        me = STANDALONE_BROKER_ID
        found = []
        for name in sorted(set(topics) if topics else self.broker.list_topics()):
            try:
                description = self.broker.describe_topic(name)
            except UnknownTopicOrPartitionError:
                continue  # deleted since the listing, or never there: left out, as in a cluster
            partitions = tuple(
                PartitionMetadata(item.partition, me, STANDALONE_EPOCH, (me,), (me,))
                for item in description.partitions
            )
            found.append(TopicMetadata(name, partitions))
        return ClusterMetadata(
            cluster_id=None,
            controller_id=me,
            brokers=(BrokerEndpoint(me, host, port),),
            topics=tuple(found),
        )
