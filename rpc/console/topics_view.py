"""The Topics pages' figures: the list (partitions, replication factor, records held) and
one topic (each partition's leader, replicas, ISR, high watermark, log start and end,
pending journal entries; its settings).

"Records held" is the log end minus the log start of each partition (a compacted topic
holds fewer). The client's answers have no byte size per partition: sizes come from the
brokers' ``twinlog_log_size_bytes`` metric when the console is given their endpoints
(``--metrics``), and show as ``-`` otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import partial

from twinlog.engine.base.cluster_metadata import PartitionMetadata
from twinlog.engine.base.types import PartitionDescription
from twinlog.rpc.client.cluster_report import report_of
from twinlog.rpc.console.overview_view import is_internal
from twinlog.rpc.console.problems import Problem, attempt
from twinlog.rpc.console.session import ClusterSession


@dataclass(frozen=True)
class TopicRow:
    name: str
    partitions: int
    replication_factor: int
    records: int | None  # None: not read (no time left, or not permitted)
    journal_bytes_pending: int | None
    internal: bool
    size_bytes: int | None = None  # from the brokers' metrics (None: not given, or no answer)


@dataclass
class TopicsView:
    rows: list[TopicRow] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    internal_hidden: int = 0
    sizes_known: bool = False  # the console was given the brokers' metrics


@dataclass(frozen=True)
class PartitionRow:
    partition: int
    leader: str
    replicas: str
    isr: str
    high_watermark: int | None
    log_start_offset: int | None
    log_end_offset: int | None
    journal_entries_pending: int | None
    flags: str  # "offline", "under-replicated" or ""
    size_bytes: int | None = None


@dataclass
class TopicView:
    name: str
    topic_id: str = ""
    partitions: list[PartitionRow] = field(default_factory=list)
    settings: list[tuple[str, str, bool]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    sizes_known: bool = False


def build_topics(session: ClusterSession, show_internal: bool) -> TopicsView:
    view = TopicsView()
    with session.bounded():
        report = attempt(lambda: report_of(session.cluster, []), "the topics", view.problems)
        if report is None:
            return view
        for topic in report.metadata.topics:
            if is_internal(topic.name) and not show_internal:
                view.internal_hidden += 1
                continue
            description = attempt(
                partial(session.admin.describe_topic, topic.name),
                f"topic {topic.name}",
                view.problems,
            )
            records = journal = None
            if description is not None:
                records = sum(p.log_end_offset - p.log_start_offset for p in description.partitions)
                journal = sum(p.journal_bytes_pending for p in description.partitions)
            view.rows.append(
                TopicRow(
                    topic.name,
                    len(topic.partitions),
                    max((len(item.replicas) for item in topic.partitions), default=0),
                    records,
                    journal,
                    is_internal(topic.name),
                )
            )
        sizes = session.log_sizes()
    if sizes is not None:
        view.sizes_known = True
        view.problems.extend(sizes.problems)
        view.rows = [replace(row, size_bytes=sizes.of_topic(row.name)) for row in view.rows]
    return view


def build_topic(session: ClusterSession, name: str) -> TopicView:
    view = TopicView(name)
    with session.bounded():
        description = attempt(
            lambda: session.admin.describe_topic(name), f"topic {name}", view.problems
        )
        report = attempt(lambda: report_of(session.cluster, [name]), f"topic {name}", view.problems)
        settings = attempt(
            lambda: session.admin.topic_settings(name), f"the settings of {name}", view.problems
        )
        sizes = session.log_sizes()
    view.settings = sorted(settings or [])
    if sizes is not None:
        view.sizes_known = True
        view.problems.extend(sizes.problems)
    logs: dict[int, PartitionDescription] = {}
    if description is not None:
        view.topic_id = description.topic_id
        logs = {item.partition: item for item in description.partitions}
    placed: dict[int, PartitionMetadata] = {}
    high_watermarks: dict[int, int] = {}
    if report is not None:
        found = report.metadata.topic(name)
        placed = {item.partition: item for item in found.partitions} if found else {}
        high_watermarks = {p: hw for (t, p), hw in report.high_watermarks.items() if t == name}
    for number in sorted(set(logs) | set(placed)):
        log, place = logs.get(number), placed.get(number)
        view.partitions.append(
            PartitionRow(
                number,
                _leader(place),
                _ids(place.replicas) if place else "?",
                _ids(place.isr) if place else "?",
                high_watermarks.get(number),
                log.log_start_offset if log else None,
                log.log_end_offset if log else None,
                log.journal_entries_pending if log else None,
                _flags(place),
                None if sizes is None else sizes.sizes.get((name, number)),
            )
        )
    return view


def _ids(ids: tuple[int, ...]) -> str:
    return ", ".join(str(broker_id) for broker_id in ids) or "-"


def _leader(place: PartitionMetadata | None) -> str:
    if place is None:
        return "?"
    return "none" if place.offline else str(place.leader_id)


def _flags(place: PartitionMetadata | None) -> str:
    if place is None:
        return ""
    return "offline" if place.offline else "under-replicated" if place.under_replicated else ""


def create_topic(
    session: ClusterSession, name: str, partitions: int, replication_factor: int | None
) -> None:
    with session.bounded():
        session.admin.create_topic(name, partitions, replication_factor=replication_factor)


def delete_topic(session: ClusterSession, name: str) -> None:
    with session.bounded():
        session.admin.delete_topic(name)
