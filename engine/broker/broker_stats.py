"""What a broker can tell an operator, read on demand: a plain snapshot, no metrics library.

``Broker.stats()`` returns a ``BrokerStats``; a server turns it into Prometheus
metrics at scrape time (``twinlog.rpc.server.metrics``), an embedding program may
log it. Reading it costs a walk over the partitions, the open transactions and
the local journal's tables: call it every few seconds, not per request.

Consumer lag of a group on a partition is the partition's log end offset minus
the group's committed offset there (Kafka's definition); a group that committed
no offset for a partition has no lag figure for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from twinlog.engine.base import fsync_latency
from twinlog.engine.base.errors import LogClosedError
from twinlog.engine.base.latency_histogram import LatencySnapshot
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.partition import Partition
from twinlog.engine.transactions.coordinator import Coordinator
from twinlog.engine.transactions.transaction_metadata import now_ms
from twinlog.engine.transactions.transaction_timings import TransactionTimings
from twinlog.journal import JournalLogs


@dataclass(frozen=True)
class PartitionStats:
    topic_partition: TopicPartition
    log_start_offset: int
    log_end_offset: int
    size_bytes: int  # its data log's segments
    high_watermark: int  # what consumers may read: below it (<= log_end_offset)


@dataclass(frozen=True)
class GroupLag:
    group_id: str
    topic_partition: TopicPartition
    committed_offset: int
    lag: int  # high watermark - committed offset, never below 0 (what the group can read)


@dataclass(frozen=True)
class BrokerStats:
    open_transactions: int  # begun and not yet COMMITTED or ABORTED
    oldest_open_transaction_age_s: float  # 0 when none is open
    commit_latency: LatencySnapshot  # commit request -> PREPARE_COMMIT durable
    apply_latency: LatencySnapshot  # PREPARE_COMMIT durable -> COMMITTED (readable)
    journal_used_bytes: int  # LMDB pages up to the last one written
    journal_map_bytes: int  # LMDB map size (the data file's apparent size)
    journal_entries: int
    transaction_journal_bytes: int  # every coordinator's journal segments
    partitions: tuple[PartitionStats, ...]
    group_lags: tuple[GroupLag, ...]
    fsync_latency: Mapping[str, LatencySnapshot]  # by kind (``fsync_latency.BY_KIND``)


def open_transaction_figures(started_ms: Iterable[int], now: int) -> tuple[int, float]:
    """(how many, age in seconds of the oldest) of in-flight transactions, by their starts."""
    started = list(started_ms)
    if not started:
        return 0, 0.0
    return len(started), max(0, now - min(started)) / 1000


def group_lags(
    committed: Mapping[tuple[str, TopicPartition], int], end_offsets: Mapping[TopicPartition, int]
) -> tuple[GroupLag, ...]:
    """Lag of every committed (group, partition) whose partition still exists."""
    found = []
    for (group_id, topic_partition), offset in sorted(committed.items()):
        end = end_offsets.get(topic_partition)
        if end is None or offset < 0:
            continue
        found.append(GroupLag(group_id, topic_partition, offset, max(0, end - offset)))
    return tuple(found)


def _of(partition: Partition) -> PartitionStats | None:
    """None for a partition whose topic was deleted while the figures were read."""
    log = partition.log
    try:
        return PartitionStats(
            partition.topic_partition,
            log.log_start_offset,
            log.log_end_offset,
            log.size_bytes(),
            partition.high_watermark.value,
        )
    except LogClosedError:
        return None


def collect_stats(
    coordinators: Iterable[Coordinator],
    partitions: Iterable[Partition],
    journal: JournalLogs,
    committed_offsets: Mapping[tuple[str, TopicPartition], int],
    timings: TransactionTimings,
) -> BrokerStats:
    coordinators = list(coordinators)
    started_ms = [started for c in coordinators for started in c.in_flight_started_ms()]
    open_count, oldest_age_s = open_transaction_figures(started_ms, now_ms())
    partition_stats = tuple(
        found for p in sorted(partitions, key=lambda p: p.topic_partition) if (found := _of(p))
    )
    journal_figures = journal.usage()
    return BrokerStats(
        open_transactions=open_count,
        oldest_open_transaction_age_s=oldest_age_s,
        commit_latency=timings.commit.snapshot(),  # one, shared by the broker's coordinators
        apply_latency=timings.apply.snapshot(),
        journal_used_bytes=journal_figures.size_bytes,
        journal_map_bytes=journal_figures.map_size_bytes,
        journal_entries=journal_figures.entry_count,
        transaction_journal_bytes=sum(c.journal.log.size_bytes() for c in coordinators),
        partitions=partition_stats,
        group_lags=group_lags(
            committed_offsets, {p.topic_partition: p.high_watermark for p in partition_stats}
        ),
        fsync_latency={kind: h.snapshot() for kind, h in fsync_latency.BY_KIND.items()},
    )
