"""Streaming read: ``spark.readStream.format("twinlog")``, micro-batches over offset JSON.

An offset is the JSON of ``offsets.py``, ``{"orders": {"0": 1500, "1": 1498}}``:
for each partition, the next offset to read. Spark keeps it in the query's
checkpoint (offset log); the source commits nothing to the broker, so a
restarted query resumes exactly where its checkpoint says.

    initialOffset()             startingOffsets (default latest) resolved once, for a
                                query with no checkpoint
    latestOffset(start, limit)  the logs' ends now, capped by the target of
                                trigger(availableNow=True) once that is prepared (kept
                                for reportLatestOffset); then capped by
                                maxOffsetsPerTrigger (ReadMaxRows, shared by backlog)
                                unless Spark asks for everything (ReadAllAvailable)
    partitions(start, end)      OffsetRanges between the two (minPartitions applies)
    read(range)                 as a batch read's task (reader.read_range)

Partitions that appear later (new topics matching subscribePattern, partitions
added) are read from their log start, as Kafka's source does.

Thread rule: Spark drives one reader per query from one thread of a long-lived
Python worker on the driver; tasks get pickled copies and only call read().
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from twinlog.connectors.spark.log_access import Bounds, LogAccess, data_loss, open_access
from twinlog.connectors.spark.offsets import offsets_from_json, offsets_to_json
from twinlog.connectors.spark.planning import checked_start, current_bounds, resolve
from twinlog.connectors.spark.ranges import ranges_between, rate_limit, split_for_min_partitions
from twinlog.connectors.spark.read_settings import ReadSettings
from twinlog.connectors.spark.reader import read_range
from twinlog.engine.base.types import TopicPartition

if TYPE_CHECKING:
    import pyarrow

log = logging.getLogger("twinlog.spark")

Offsets = dict[TopicPartition, int]


class TwinlogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, settings: ReadSettings, schema: StructType) -> None:
        self.settings = settings
        self.schema = schema
        self._access: LogAccess | None = None  # opened on first use, on the driver only
        self._available_now_target: Offsets | None = None
        self._latest_seen: Offsets | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_access"] = None  # a connection does not travel to tasks
        return state

    def _bounds(self) -> dict[TopicPartition, Bounds]:
        if self._access is None:
            self._access = open_access(self.settings.connection, self.settings.fetch_max_bytes)
        return current_bounds(self._access, self.settings.subscription)

    # --- offsets (driver) ------------------------------------------------------------

    def initialOffset(self) -> dict:
        bounds = self._bounds()
        assert self._access is not None
        settings = self.settings
        start = resolve(
            settings.starting,
            bounds,
            self._access,
            settings.timestamp_strategy,
            True,
            settings.fail_on_data_loss,
        )
        for partition, offset in start.items():
            start[partition] = checked_start(
                partition,
                offset,
                bounds[partition],
                settings.starting.option,
                settings.fail_on_data_loss,
            )
        log.info("stream starts at %s", offsets_to_json(start))
        return offsets_to_json(start)

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now_target = {p: end for p, (_, end) in self._bounds().items()}
        log.info(
            "trigger(availableNow): reading up to %s", offsets_to_json(self._available_now_target)
        )

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.settings.max_offsets_per_trigger is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.settings.max_offsets_per_trigger)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = offsets_from_json(start)
        bounds = self._bounds()
        latest = {p: end for p, (_, end) in bounds.items()}
        if self._available_now_target is not None:
            target = self._available_now_target
            latest = {p: min(end, target[p]) for p, end in latest.items() if p in target}
        for partition, end in latest.items():
            known = begin.get(partition)
            if known is None:
                begin[partition] = bounds[partition][0]  # a new partition: from its start
            elif end < known:
                data_loss(
                    f"{partition}: its log end went back from {known} to {end} (was the topic "
                    "recreated?)",
                    self.settings.fail_on_data_loss,
                )
                latest[partition] = known  # stay put rather than read twice
        # What reportLatestOffset tells Spark (its progress shows it next to the batch's end,
        # so users see the backlog): the logs' ends, not what this micro-batch is limited to.
        self._latest_seen = dict(latest)
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(begin, latest, limit.max_rows)
        # Partitions that vanished (a deleted topic) keep their last offset.
        return offsets_to_json({**begin, **latest})

    def reportLatestOffset(self) -> dict | None:
        return None if self._latest_seen is None else offsets_to_json(self._latest_seen)

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        begin = offsets_from_json(start)
        finish = offsets_from_json(end)
        new = [p for p in finish if p not in begin]
        if new:  # partitions that appeared since ``start``: from their log start
            bounds = self._bounds()
            for partition in new:
                begin[partition] = bounds.get(partition, (0, 0))[0]
        # A range below the log start (retention) is data loss; read_range applies the policy.
        ranges = ranges_between(begin, finish)
        return list(split_for_min_partitions(ranges, self.settings.min_partitions))

    def commit(self, end: dict) -> None:
        """Nothing to do: the offsets live in Spark's checkpoint, not in the broker."""

    def stop(self) -> None:
        if self._access is not None:
            self._access.close()
            self._access = None

    # --- data (tasks) ----------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[pyarrow.RecordBatch]:
        return read_range(self.settings, self.schema, partition)
