"""A partition opened outside a broker, as a single node's sole member leads it."""

from __future__ import annotations

from pathlib import Path

from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.membership import SOLE_BROKER_EPOCH, SOLE_BROKER_ID
from twinlog.engine.broker.partition import Partition
from twinlog.engine.broker.partition_role import PartitionRole, Role
from twinlog.engine.log import LogConfig
from twinlog.engine.replication.replication_settings import ReplicationSettings
from twinlog.engine.transactions.transaction_metadata import now_ms
from twinlog.journal import JournalLogs


def led_partition(
    topic_partition: TopicPartition, directory: Path, config: LogConfig, journal: JournalLogs
) -> Partition:
    """Open the partition, lead it alone (ISR {the sole broker}) at the epoch its log last
    recorded, and finish a copy a crash left half-done, as the sole member does at open."""
    partition = Partition(
        topic_partition,
        directory,
        config,
        journal,
        ReplicationSettings(SOLE_BROKER_ID, min_insync_replicas=1),
    )
    try:
        partition.take_role(
            PartitionRole(Role.LEADER, SOLE_BROKER_ID, max(partition.epochs.leader_epoch, 0)),
            (SOLE_BROKER_ID,),
            {SOLE_BROKER_ID: SOLE_BROKER_EPOCH},
            now_ms(),
        )
        partition.finish_copies()
    except BaseException:
        partition.close()
        raise
    return partition
