"""A cluster's brokers, controller and partitions, with each partition's high watermark as
its leader answers it: what ``twinlog cluster describe`` prints and the console's overview
and topic pages show.

A leader that does not answer is asked nothing more (a dead or paused broker costs one
timeout, not one per partition); its partitions have no high watermark in the report, and
``unreachable`` says why.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from twinlog.engine.base.cluster_metadata import ClusterMetadata, PartitionMetadata
from twinlog.engine.base.errors import TwinlogError
from twinlog.rpc.client.broker_pool import BrokerPool
from twinlog.rpc.client.cluster import ClusterBroker


@dataclass
class ClusterReport:
    """The metadata, and what the leaders answered."""

    metadata: ClusterMetadata
    high_watermarks: dict[tuple[str, int], int] = field(default_factory=dict)
    unreachable: dict[str, str] = field(default_factory=dict)  # address -> why

    def under_replicated(self) -> list[tuple[str, PartitionMetadata]]:
        return [
            (topic.name, item)
            for topic in self.metadata.topics
            for item in topic.partitions
            if item.under_replicated or item.offline
        ]


def gather(
    metadata: ClusterMetadata,
    leader_address: Callable[[str, PartitionMetadata], str | None],
    pool: BrokerPool,
) -> ClusterReport:
    """Ask each partition's leader for its high watermark; a leader that fails once is
    asked nothing more."""
    report = ClusterReport(metadata)
    for topic in metadata.topics:
        for item in topic.partitions:
            address = leader_address(topic.name, item)
            if address is None or address in report.unreachable:
                continue
            try:
                offset = pool.get(address).list_offset(topic.name, item.partition, "latest")
            except TwinlogError as error:
                report.unreachable[address] = f"{type(error).__name__}: {error}"
                continue
            report.high_watermarks[(topic.name, item.partition)] = offset
    return report


def report_of(cluster: ClusterBroker, topics: list[str]) -> ClusterReport:
    """The report of the cluster ``cluster`` reaches (``topics`` empty: every topic)."""
    snapshot = cluster.metadata.refresh()
    metadata, answered_by = snapshot.metadata, snapshot.answered_by
    if topics:
        chosen = tuple(topic for topic in metadata.topics if topic.name in topics)
        metadata = dataclasses.replace(metadata, topics=chosen)

    def leader_address(topic: str, item: PartitionMetadata) -> str | None:
        if metadata.standalone:  # its advertised host may be 0.0.0.0: ask where we asked
            return answered_by
        return registered_leader(metadata)(topic, item)

    return gather(metadata, leader_address, cluster.pool)


def registered_leader(
    metadata: ClusterMetadata,
) -> Callable[[str, PartitionMetadata], str | None]:
    def leader_address(topic: str, item: PartitionMetadata) -> str | None:
        broker = None if item.offline else metadata.broker(item.leader_id)
        return None if broker is None else broker.address

    return leader_address
