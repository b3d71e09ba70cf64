"""Where a partition's leader and a transaction's coordinator are: the locator the
coordination client asks (``coordination_client``).

    locator = ZooKeeperLeaderLocator(session)
    locator.partition_leader(TopicPartition("orders", 0))   # Location(broker_id, leader_epoch)
    locator.coordinator(3)                                  # leader of __txn_journal-3

Backed by the partition states in ZooKeeper, read as the clients' Metadata call reads
them (``engine/zookeeper/cluster_view.read_cluster_metadata``, one topic at a time),
and kept in a small cache: a topic is read again when its entry is older than
``max_age_s``, or when the caller asks for a refresh (after NotLeaderOrFollowerError,
BrokerUnavailableError, NotCoordinatorError or a fenced leader epoch). ``ClusterMember``'s
``PartitionRoles`` cannot stand in for it: it watches only this broker's own partitions.

A leader counts only while it is registered (live): a partition whose leader is offline,
unregistered or not chosen yet has no location (None). Coordinator N is the live leader
of ``__txn_journal-N`` (CLUSTER.md §3.5), None without one, and None while the topic
does not exist yet (a cluster broker creates it once enough brokers are live).

A partition that does not exist in the cluster (a deleted topic) is ``GONE``, only ever
from a read that succeeded. A failed read (ZooKeeper away) is logged and answers what the
cache last held, or None when a refresh was asked: the caller turns None into a
retriable error. Reads of one topic are single-flight.

Thread rule: any thread.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from twinlog.engine.base.cluster_metadata import ClusterMetadata
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.internal_topics import TXN_JOURNAL_TOPIC
from twinlog.engine.zookeeper.cluster_view import READ_TIMEOUT_MS, read_cluster_metadata
from twinlog.engine.zookeeper.session import ZooKeeperSession
from twinlog.rpc.replication.coordination_locator import GONE, Location

log = logging.getLogger("twinlog.coordination")

MAX_AGE_S = 1.0  # a leader change reaches the cache within this, even without an error


@dataclass
class _Topic:
    read_at: float  # time.monotonic() of the read that began last before it answered
    leaders: dict[int, Location | None] = field(default_factory=dict)  # {}: no such topic


class ZooKeeperLeaderLocator:
    def __init__(
        self,
        session: ZooKeeperSession,
        *,
        max_age_s: float = MAX_AGE_S,
        read_timeout_ms: int = READ_TIMEOUT_MS,
    ) -> None:
        if max_age_s < 0 or read_timeout_ms <= 0:
            raise ValueError(
                f"max_age_s must be >= 0 and read_timeout_ms > 0, got {max_age_s}, "
                f"{read_timeout_ms}"
            )
        self.session = session
        self.max_age_s = max_age_s
        self.read_timeout_ms = read_timeout_ms
        self._lock = threading.Lock()  # guards the two dicts; never held across a read
        self._topics: dict[str, _Topic] = {}
        self._reading: dict[str, threading.Lock] = {}
        # topic -> when its last failed read began: callers that asked before then take
        # that failure as theirs, instead of each waiting for a failing read of its own
        self._failed_at: dict[str, float] = {}
        self._failing = False  # a read failed last: logged once per outage

    def partition_leader(
        self, topic_partition: TopicPartition, refresh: bool = False
    ) -> Location | None:
        found = self._topic(topic_partition.topic, refresh)
        if found is None:
            return None
        if topic_partition.partition not in found.leaders:  # no such topic or partition
            return GONE
        return found.leaders[topic_partition.partition]

    def coordinator(self, coordinator_partition: int, refresh: bool = False) -> int | None:
        location = self.partition_leader(
            TopicPartition(TXN_JOURNAL_TOPIC, coordinator_partition), refresh
        )
        return None if location is None or location.gone else location.broker_id

    def _topic(self, topic: str, refresh: bool) -> _Topic | None:
        asked_at = time.monotonic()
        with self._lock:
            cached = self._topics.get(topic)
            if cached is not None and not refresh and asked_at - cached.read_at < self.max_age_s:
                return cached
            reading = self._reading.setdefault(topic, threading.Lock())
        with reading:  # one read per topic at a time; waiters take its answer
            with self._lock:
                cached = self._topics.get(topic)
                if cached is not None and cached.read_at >= asked_at:
                    return cached
                if self._failed_at.get(topic, float("-inf")) >= asked_at:
                    return None if refresh else cached
            started = time.monotonic()
            try:
                if refresh:
                    # A refresh decides a refusal or a relocation: read what the ensemble's
                    # leader holds, not what this broker's server has caught up to (another
                    # broker learnt its new role from a server that may be ahead of ours).
                    self.session.wait(self.session.client.sync_async("/"))
                metadata = read_cluster_metadata(self.session, [topic], self.read_timeout_ms)
            except Exception as error:  # ZooKeeper away, a damaged znode: say once
                if not self._failing:
                    log.warning(
                        "locating leaders of %s: the read from ZooKeeper failed: %s: %s; "
                        "using what was known until a read succeeds (logged again then)",
                        topic,
                        type(error).__name__,
                        error,
                    )
                self._failing = True
                with self._lock:
                    self._failed_at[topic] = started
                # A refresh was asked because the cache misled a call: no answer then.
                return None if refresh else cached
            if self._failing:
                log.info("locating leaders: ZooKeeper answers again")
                self._failing = False
            fresh = _leaders_of(topic, metadata, started)
            with self._lock:
                self._topics[topic] = fresh
            return fresh


def _leaders_of(topic: str, metadata: ClusterMetadata, read_at: float) -> _Topic:
    found = metadata.topic(topic)
    if found is None:
        return _Topic(read_at)
    leaders: dict[int, Location | None] = {}
    for item in found.partitions:
        live = metadata.leader(topic, item.partition) is not None
        leaders[item.partition] = Location(item.leader_id, item.leader_epoch) if live else None
    return _Topic(read_at, leaders)


__all__ = ["MAX_AGE_S", "ZooKeeperLeaderLocator"]
