"""Driver-side planning: from options and the logs' current bounds to concrete offsets.

Offsets are resolved once, here, when Spark plans the query (the planning
worker calls ``DataSourceReader.partitions()``); tasks only receive concrete
``OffsetRange``s. So every task of a query reads one snapshot: records
committed while the query runs are not half-seen.

Checks, per partition, after the starting and ending specs are resolved:

    start < log start          data loss (failOnDataLoss) or start at the log start
    start > log end            error: nothing there yet (a typo, or the wrong topic)
    end > log end              error (batch): the query cannot read the future
    start > end                error, as Kafka's "beginning offset is after the ending offset"
"""

from __future__ import annotations

from collections.abc import Mapping

from twinlog.connectors.spark.errors import OptionError
from twinlog.connectors.spark.log_access import Bounds, LogAccess, data_loss, describe_or_none
from twinlog.connectors.spark.offsets import (
    EARLIEST,
    LATEST,
    OffsetSpec,
    SpecKind,
    check_names_partitions,
)
from twinlog.connectors.spark.ranges import OffsetRange, ranges_between, split_for_min_partitions
from twinlog.connectors.spark.read_settings import ReadSettings
from twinlog.connectors.spark.subscription import Subscription
from twinlog.engine.base.types import TopicPartition


def current_bounds(access: LogAccess, subscription: Subscription) -> dict[TopicPartition, Bounds]:
    """(log start, log end) of every partition the subscription covers, now."""
    if subscription.kind == "subscribePattern":
        names = access.topic_names()
    elif subscription.kind == "subscribe":
        names = list(subscription.topics)
    else:
        names = sorted({p.topic for p in subscription.assigned})
    described = {name: describe_or_none(access, name) for name in names}
    existing = {name: len(bounds) for name, bounds in described.items() if bounds is not None}
    partitions = subscription.resolve(existing)
    found: dict[TopicPartition, Bounds] = {}
    for partition in partitions:
        topic_bounds = described[partition.topic]
        assert topic_bounds is not None
        found[partition] = topic_bounds[partition.partition]
    return found


def resolve(
    spec: OffsetSpec,
    bounds: Mapping[TopicPartition, Bounds],
    access: LogAccess,
    timestamp_strategy: str,
    starting: bool,
    fail_on_data_loss: bool,
) -> dict[TopicPartition, int]:
    """Concrete offsets for ``spec`` (earliest/latest/-2/-1/timestamps looked up now)."""
    check_names_partitions(spec, bounds)
    resolved: dict[TopicPartition, int] = {}
    for partition, (log_start, log_end) in bounds.items():
        if spec.kind is SpecKind.EARLIEST:
            resolved[partition] = log_start
        elif spec.kind is SpecKind.LATEST:
            resolved[partition] = log_end
        elif spec.kind is SpecKind.OFFSETS:
            wanted = spec.per_partition[partition]
            resolved[partition] = {EARLIEST: log_start, LATEST: log_end}.get(wanted, wanted)
        else:
            if spec.kind is SpecKind.TIMESTAMP:
                stamp = spec.timestamp_ms
            else:
                stamp = spec.per_partition[partition]
            found = access.offset_for_timestamp(partition, stamp, fail_on_data_loss)
            if found is None and starting and timestamp_strategy == "error":
                raise OptionError(
                    spec.option,
                    f"{partition} has no record stamped at or after {stamp} ms; pick an earlier "
                    "timestamp, or set startingOffsetsByTimestampStrategy=latest to start at "
                    "the end",
                )
            resolved[partition] = log_end if found is None else found
    return resolved


def checked_start(
    partition: TopicPartition,
    start: int,
    bounds: Bounds,
    option: str,
    fail_on_data_loss: bool,
) -> int:
    log_start, log_end = bounds
    if start < log_start:
        data_loss(
            f"{partition}: the starting offset {start} is below its log start {log_start}",
            fail_on_data_loss,
        )
        return log_start
    if start > log_end:
        raise OptionError(
            option,
            f"starts {partition} at offset {start}, but its log ends at {log_end} (offsets "
            f"{log_start}..{log_end - 1} exist)",
        )
    return start


def plan_batch(settings: ReadSettings, access: LogAccess) -> list[OffsetRange]:
    """The offset ranges of a batch query, one snapshot of every partition."""
    assert settings.ending is not None
    bounds = current_bounds(access, settings.subscription)
    strategy, fail_on_loss = settings.timestamp_strategy, settings.fail_on_data_loss
    start = resolve(settings.starting, bounds, access, strategy, True, fail_on_loss)
    end = resolve(settings.ending, bounds, access, strategy, False, fail_on_loss)
    for partition, (log_start, log_end) in bounds.items():
        if start[partition] > log_end:
            raise OptionError(
                settings.starting.option,
                f"starts {partition} at offset {start[partition]}, but its log ends at {log_end} "
                f"(offsets {log_start}..{log_end - 1} exist)",
            )
        if end[partition] > log_end:
            raise OptionError(
                settings.ending.option,
                f"ends {partition} at offset {end[partition]}, past its log end {log_end}",
            )
        if start[partition] > end[partition]:
            raise OptionError(
                settings.starting.option,
                f"{partition}: the starting offset {start[partition]} is after the ending "
                f"offset {end[partition]}",
            )
        start[partition] = checked_start(
            partition,
            start[partition],
            (log_start, log_end),
            settings.starting.option,
            settings.fail_on_data_loss,
        )
        end[partition] = max(end[partition], start[partition])  # all of it fell below the start
    return split_for_min_partitions(ranges_between(start, end), settings.min_partitions)
