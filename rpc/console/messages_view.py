"""The Messages page: up to ``count`` records of one partition from an offset, a time, the
beginning or the end (the last ``count``), each key, value and header value shown as
text, pretty JSON or hex (``bytes_view``).

Reads with a consumer that has no group: browsing commits nothing and moves no one's
offsets. A read stops at the partition's end as it was when the page asked, at ``count``
records, or when the page's time is up (the page says which).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from twinlog.engine.base.errors import InvalidConfigError, TwinlogError
from twinlog.engine.base.types import TopicPartition
from twinlog.rpc.client.consumer import Consumer
from twinlog.rpc.client.records import ConsumerRecord
from twinlog.rpc.console.bytes_view import ShownBytes, show_bytes
from twinlog.rpc.console.problems import Problem, attempt, problem_of
from twinlog.rpc.console.session import ClusterSession

STARTS = ("end", "beginning", "offset", "time")
COUNT_DEFAULT = 20
COUNT_MAX = 500
READ_BUDGET_S = 2.0  # of the page's budget, the part spent polling


@dataclass(frozen=True)
class RecordRow:
    offset: int
    timestamp: str  # ISO 8601, UTC
    key: ShownBytes
    value: ShownBytes
    headers: tuple[tuple[str, ShownBytes], ...]


@dataclass
class MessagesView:
    topic: str
    partition: int
    start: str
    start_value: str
    count: int
    mode: str
    partitions: int = 0
    log_start_offset: int | None = None
    log_end_offset: int | None = None
    first_offset: int | None = None
    next_offset: int | None = None
    records: list[RecordRow] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    stopped_because: str = ""


def parse_time_ms(text: str) -> int:
    """``2026-11-30T17:00[:SS]`` (UTC unless it names an offset), or milliseconds."""
    if text.strip().isdigit():
        return int(text.strip())
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidConfigError(
            f"{text!r} is not a time: write 2026-11-30T17:00:00 (UTC) or milliseconds"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def build_messages(
    session: ClusterSession,
    topic: str,
    partition: int,
    start: str,
    start_value: str,
    count: int,
    mode: str,
) -> MessagesView:
    view = MessagesView(topic, partition, start, start_value, count, mode)
    with session.bounded():
        description = attempt(
            lambda: session.admin.describe_topic(topic), f"topic {topic}", view.problems
        )
        if description is None:
            return view
        view.partitions = len(description.partitions)
        if not 0 <= partition < view.partitions:
            view.problems.append(
                Problem(
                    "not-found",
                    f"Topic {topic} has no partition {partition} (it has {view.partitions}).",
                )
            )
            return view
        try:
            _read(session, view)
        except TwinlogError as error:
            view.problems.append(problem_of(error, f"partition {topic}-{partition}"))
    return view


def _read(session: ClusterSession, view: MessagesView) -> None:
    chosen = TopicPartition(view.topic, view.partition)
    consumer = session.consumer()
    try:
        consumer.assign([chosen])
        view.log_start_offset = consumer.beginning_offsets([chosen])[chosen]
        view.log_end_offset = consumer.end_offsets([chosen])[chosen]
        offset = _start_offset(consumer, chosen, view)
        view.first_offset = view.next_offset = offset
        consumer.seek(chosen, offset)
        deadline_s = time.monotonic() + READ_BUDGET_S
        while len(view.records) < view.count:
            if view.next_offset >= view.log_end_offset:
                view.stopped_because = "the end of the partition"
                break
            if time.monotonic() >= deadline_s:
                view.stopped_because = f"the page's time ({READ_BUDGET_S:g} s of reading)"
                break
            for record in consumer.poll(timeout_ms=200):
                if len(view.records) >= view.count:
                    break
                view.records.append(_row(record, view.mode))
                view.next_offset = record.offset + 1
        else:
            view.stopped_because = f"{view.count} records"
    finally:
        consumer.close()


def _start_offset(consumer: Consumer, chosen: TopicPartition, view: MessagesView) -> int:
    assert view.log_start_offset is not None and view.log_end_offset is not None
    start, end = view.log_start_offset, view.log_end_offset
    if view.start == "beginning":
        return start
    if view.start == "end":
        return max(start, end - view.count)
    if view.start == "offset":
        try:
            wanted = int(view.start_value)
        except ValueError:
            raise InvalidConfigError(f"offset {view.start_value!r} is not a whole number") from None
        return min(max(wanted, start), end)
    found = consumer.offsets_for_times({chosen: parse_time_ms(view.start_value)})
    at = found.get(chosen)
    return end if at is None else at.offset


def _row(record: ConsumerRecord, mode: str) -> RecordRow:
    """The value in ``mode``; keys and header values as text unless hex is asked (they are
    names and ids far more often than JSON documents)."""
    timestamp = datetime.fromtimestamp(record.timestamp_ms / 1000, UTC)
    around = "hex" if mode == "hex" else "text"
    return RecordRow(
        record.offset,
        timestamp.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        show_bytes(record.key, around),
        show_bytes(record.value, mode),
        tuple((key, show_bytes(value, around)) for key, value in record.headers),
    )
