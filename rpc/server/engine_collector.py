"""The broker's figures as Prometheus metrics, read at scrape time (a custom Collector).

Gauges and the engine's histograms come from ``Broker.stats()``
(``twinlog.engine.broker.broker_stats``) when Prometheus scrapes, so nothing is
kept twice and an idle server does no work. A broker without ``stats()`` (a test
fake) exports only ``twinlog_under_replicated_partitions``. Names, types and
labels are listed in docs/operations.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from twinlog.engine.base.errors import LogClosedError
from twinlog.engine.base.latency_histogram import LatencySnapshot
from twinlog.engine.broker.broker_stats import BrokerStats

log = logging.getLogger("twinlog.server")


def histogram_family(name: str, documentation: str, labels: list[str]) -> HistogramMetricFamily:
    return HistogramMetricFamily(name, documentation, labels=labels)


def add_snapshot(
    family: HistogramMetricFamily, labels: list[str], snapshot: LatencySnapshot
) -> None:
    buckets = [
        ("+Inf" if bound == float("inf") else repr(bound), count)
        for bound, count in snapshot.cumulative()
    ]
    family.add_metric(labels, buckets, snapshot.sum_s)


def gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


class EngineCollector(Collector):
    def __init__(self, stats: Callable[[], BrokerStats] | None) -> None:
        self._stats = stats

    def describe(self) -> list[Metric]:
        return []  # the families depend on what the broker holds: nothing to declare up front

    def collect(self) -> Iterator[Metric]:
        # A single node replicates nothing, so nothing is under-replicated; a cluster
        # will count its partitions whose in-sync replicas fall short here.
        yield gauge(
            "twinlog_under_replicated_partitions",
            "Partitions with fewer in-sync replicas than configured (0 on a single node)",
            0,
        )
        if self._stats is None:
            return
        try:
            stats = self._stats()
        except LogClosedError:  # the broker is closing: the scrape still answers
            return
        except Exception:  # a damaged journal, or a bug: the scrape answers, the log says why
            log.warning("no broker figures for this scrape", exc_info=True)
            return
        yield from broker_families(stats)


def broker_families(stats: BrokerStats) -> Iterator[Metric]:
    yield gauge(
        "twinlog_open_transactions",
        "Transactions begun and not yet committed or aborted",
        stats.open_transactions,
    )
    yield gauge(
        "twinlog_oldest_open_transaction_age_seconds",
        "Age of the oldest open transaction (0 when none is open)",
        stats.oldest_open_transaction_age_s,
    )
    for name, documentation, snapshot in (
        (
            "twinlog_commit_latency_seconds",
            "From a commit request to its decision being durable (PREPARE_COMMIT fsynced)",
            stats.commit_latency,
        ),
        (
            "twinlog_apply_latency_seconds",
            "From a durable commit decision to COMMITTED: applied on every partition, readable",
            stats.apply_latency,
        ),
    ):
        family = histogram_family(name, documentation, [])
        add_snapshot(family, [], snapshot)
        yield family
    fsyncs = histogram_family(
        "twinlog_fsync_duration_seconds",
        "fsync latency by kind of file (process-wide): log_segment (data logs and "
        "transaction journals), local_journal (LMDB commit and sync)",
        ["kind"],
    )
    for kind, snapshot in sorted(stats.fsync_latency.items()):
        add_snapshot(fsyncs, [kind], snapshot)
    yield fsyncs
    yield gauge(
        "twinlog_journal_used_bytes",
        "Local data journal (LMDB): bytes of the pages up to the last one written",
        stats.journal_used_bytes,
    )
    yield gauge(
        "twinlog_journal_map_bytes",
        "Local data journal (LMDB): map size, the data file's apparent (sparse) size",
        stats.journal_map_bytes,
    )
    yield gauge(
        "twinlog_journal_entries",
        "Local data journal: batches held for transactions not yet applied or purged",
        stats.journal_entries,
    )
    yield gauge(
        "twinlog_transaction_journal_bytes",
        "Transaction journals: bytes of their segments, every coordinator",
        stats.transaction_journal_bytes,
    )
    labels = ["topic", "partition"]
    size = GaugeMetricFamily(
        "twinlog_log_size_bytes", "Data log bytes (its segments)", labels=labels
    )
    end = GaugeMetricFamily(
        "twinlog_log_end_offset", "Offset the next record appended gets", labels=labels
    )
    start = GaugeMetricFamily("twinlog_log_start_offset", "First offset still held", labels=labels)
    high_watermark = GaugeMetricFamily(
        "twinlog_high_watermark",
        "Offset below which records are committed and readable (the log end on one node, "
        "but during a deferred copy)",
        labels=labels,
    )
    for partition in stats.partitions:
        values = [partition.topic_partition.topic, str(partition.topic_partition.partition)]
        size.add_metric(values, partition.size_bytes)
        end.add_metric(values, partition.log_end_offset)
        start.add_metric(values, partition.log_start_offset)
        high_watermark.add_metric(values, partition.high_watermark)
    yield from (size, end, start, high_watermark)
    lag = GaugeMetricFamily(
        "twinlog_consumer_group_lag",
        "High watermark minus the group's committed offset, per partition",
        labels=["group", *labels],
    )
    committed = GaugeMetricFamily(
        "twinlog_consumer_group_committed_offset",
        "The group's committed offset, per partition",
        labels=["group", *labels],
    )
    for item in stats.group_lags:
        values = [item.group_id, item.topic_partition.topic, str(item.topic_partition.partition)]
        lag.add_metric(values, item.lag)
        committed.add_metric(values, item.committed_offset)
    yield from (lag, committed)
