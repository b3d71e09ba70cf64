"""A cluster broker's replication settings, as its partitions use them (CLUSTER.md §3.9).

Defaults are Kafka's where Kafka has one: ``min_insync_replicas`` 2 (with replication
factor 3: one replica may fail while writes go on), ``lag_time_max_ms`` 30 s (above the
ZooKeeper session timeout, so the controller notices a dead broker before its leader
drops it: KIP-537), ``ack_timeout_ms`` 30 s (a produce waits at most this for the in-sync
replicas). ``replica_fsync`` (default on, twinlog's promise 5): a follower fsyncs what it
fetched before its next fetch acknowledges it; off is Kafka's page-cache model.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from twinlog.engine.base.long_poll import LongPoll


@dataclass(frozen=True)
class ReplicationSettings:
    broker_id: int
    min_insync_replicas: int = 2
    lag_time_max_ms: int = 30_000
    ack_timeout_ms: int = 30_000
    replica_fsync: bool = True
    # The broker's one purgatory: a partition wakes its key (its TopicPartition) after its
    # log, high watermark or role moved, and its consumers' and followers' long polls
    # waiting there read again.
    long_poll: LongPoll = field(default_factory=LongPoll, compare=False)
