"""The Overview page's figures: brokers, partitions, open transactions, groups' lag, and
the live charts (``throughput``)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import partial

from twinlog.engine.base.types import TransactionDescription
from twinlog.rpc.client.cluster_report import ClusterReport, report_of
from twinlog.rpc.console.charts import line_chart
from twinlog.rpc.console.problems import Problem, attempt
from twinlog.rpc.console.session import ClusterSession
from twinlog.rpc.console.throughput import Sample, ThroughputHistory

GROUPS_MAX = 20  # groups asked for their lag on one page (each is a call)
INTERNAL_PREFIX = "__"


def is_internal(topic: str) -> bool:
    return topic.startswith(INTERNAL_PREFIX)


@dataclass(frozen=True)
class BrokerRow:
    broker_id: int
    address: str  # "" for a replica's broker that is not registered (down)
    live: bool
    controller: bool


@dataclass(frozen=True)
class GroupLagRow:
    group_id: str
    state: str
    members: int
    lag: int | None  # None: its offsets could not be read


@dataclass
class OverviewView:
    problems: list[Problem] = field(default_factory=list)
    standalone: bool = True
    cluster_id: str = ""
    brokers: list[BrokerRow] = field(default_factory=list)
    topics: int = 0
    partitions: int = 0
    internal_partitions: int = 0  # __txn_journal's and __consumer_offsets', on a cluster
    under_replicated: list[str] = field(default_factory=list)
    offline: list[str] = field(default_factory=list)
    open_transactions: int | None = None
    oldest_transaction_age_s: float = 0.0
    groups: list[GroupLagRow] = field(default_factory=list)
    written_chart: str = ""
    bytes_chart: str = ""  # "" without the brokers' metrics
    consumed_chart: str = ""
    lag_chart: str = ""


def build_overview(session: ClusterSession, history: ThroughputHistory) -> OverviewView:
    view = OverviewView()
    with session.bounded():
        report = attempt(lambda: report_of(session.cluster, []), "the cluster", view.problems)
        transactions = attempt(session.admin.list_transactions, "the transactions", view.problems)
        consumed, lags = _groups(session, view)
        sizes = session.log_sizes()
    topic_sizes: dict[str, int] = {}
    if sizes is not None:
        view.problems.extend(sizes.problems)
        for (topic, _), size in sizes.sizes.items():
            if not is_internal(topic):
                topic_sizes[topic] = topic_sizes.get(topic, 0) + size
    if report is not None:
        _cluster(report, view)
    if transactions is not None:
        _transactions(transactions, view)
    written = {} if report is None else _written(report)
    history.add(Sample(time.monotonic(), written, consumed, lags, topic_sizes))
    if sizes is not None:
        view.bytes_chart = line_chart(
            "bytes written per second", history.rates("sizes"), "bytes/s (log sizes)"
        )
    view.written_chart = line_chart(
        "records written per second", history.rates("written"), "records/s"
    )
    view.consumed_chart = line_chart(
        "records consumed per second", history.rates("consumed"), "records/s (groups' commits)"
    )
    view.lag_chart = line_chart("consumer lag per group", history.lag(), "records behind")
    return view


def _cluster(report: ClusterReport, view: OverviewView) -> None:
    metadata = report.metadata
    view.standalone = metadata.standalone
    view.cluster_id = metadata.cluster_id or ""
    live = {broker.broker_id: broker.address for broker in metadata.brokers}
    assigned = {
        broker_id
        for topic in metadata.topics
        for item in topic.partitions
        for broker_id in item.replicas
    }
    view.brokers = [
        BrokerRow(
            broker_id,
            live.get(broker_id, ""),
            broker_id in live,
            broker_id == metadata.controller_id,
        )
        for broker_id in sorted(set(live) | assigned)
    ]
    view.topics = sum(1 for topic in metadata.topics if not is_internal(topic.name))
    for topic in metadata.topics:
        if is_internal(topic.name):
            view.internal_partitions += len(topic.partitions)
        else:
            view.partitions += len(topic.partitions)
    for name, item in report.under_replicated():
        (view.offline if item.offline else view.under_replicated).append(f"{name}-{item.partition}")
    for address, why in sorted(report.unreachable.items()):
        view.problems.append(
            Problem(
                "unreachable",
                f"The leader at {address} did not answer ({why}); "
                "its partitions' high watermarks are left out.",
            )
        )


def _written(report: ClusterReport) -> dict[str, int]:
    written: dict[str, int] = {}
    for (topic, _), offset in report.high_watermarks.items():
        if not is_internal(topic):
            written[topic] = written.get(topic, 0) + offset
    return written


def _transactions(transactions: list[TransactionDescription], view: OverviewView) -> None:
    now_ms = time.time_ns() // 1_000_000
    view.open_transactions = len(transactions)
    ages = [item.age_ms(now_ms) for item in transactions]
    view.oldest_transaction_age_s = max(ages, default=0) / 1000


def _groups(session: ClusterSession, view: OverviewView) -> tuple[dict[str, int], dict[str, int]]:
    """Each group's lag, and what the groups have consumed per topic (their commits)."""
    consumed: dict[str, int] = {}
    lags: dict[str, int] = {}
    listings = attempt(session.admin.list_groups, "the consumer groups", view.problems)
    for listing in (listings or [])[:GROUPS_MAX]:
        rows = attempt(
            partial(session.admin.group_offsets, listing.group_id),
            f"group {listing.group_id}",
            view.problems,
        )
        lag = None if rows is None else sum(row.lag or 0 for row in rows)
        view.groups.append(GroupLagRow(listing.group_id, listing.state, listing.member_count, lag))
        if lag is not None:
            lags[listing.group_id] = lag
        for row in rows or []:
            if row.committed_offset is not None:
                consumed[row.topic] = consumed.get(row.topic, 0) + row.committed_offset
    return consumed, lags
