"""Two ways to reach the data logs, one interface: through a broker, or straight from disk.

    BrokerLogAccess     option servers   metadata and fetch over gRPC (twinlog.rpc.client.remote)
    DirectoryLogAccess  option path      DATA_DIR/meta and DATA_DIR/logs/TOPIC-PARTITION/,
                                         read with twinlog.engine.log.LogReader; no broker needed

Data logs hold committed data only (that is the point of twinlog's design), so
a job on the same storage may scan them directly: no transaction markers to
skip, no stable offset to respect. A directory read ends at the last whole
batch that is not part of a transaction the copier is applying, as
``LogReader.end_offset`` does; what is being written is simply not seen yet.

``batches(partition, from, until)`` yields every whole batch that overlaps
[from, until); the caller cuts records outside the range. Through a broker, the
next fetch is in flight while the caller decodes the last (fetch_ahead.py). A range whose start
fell below the log start (retention) or whose end lies past the log end (a
recreated topic) is data loss: ``DataLossError`` with ``failOnDataLoss``,
else a warning and whatever remains is read.

Thread rule: one task or planning step uses an access object; close it after.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from twinlog.connectors.spark.broker import connect, retried
from twinlog.connectors.spark.errors import DataLossError, OptionError
from twinlog.connectors.spark.fetch_ahead import FetchAhead, next_fetch_offset
from twinlog.connectors.spark.options import Connection
from twinlog.engine.base.errors import OffsetOutOfRangeError, UnknownTopicOrPartitionError
from twinlog.engine.base.types import FetchResult, TopicPartition
from twinlog.engine.broker.internal_topics import is_internal
from twinlog.engine.broker.topic_registry import TopicRegistry
from twinlog.engine.log import LogReader
from twinlog.engine.records.batch_format import BatchHeader
from twinlog.engine.records.batch_reader import RecordBatch, iter_batches
from twinlog.rpc.wire.broker_api import BrokerApi

log = logging.getLogger("twinlog.spark")

Bounds = tuple[int, int]  # (log start offset, log end offset): the offsets [start, end) are stored
BatchItem = tuple[BatchHeader, bytes | memoryview]  # a validated batch: header and whole bytes


class LogAccess(Protocol):
    def topic_names(self) -> list[str]:
        """Every topic but the broker's internal ones."""
        ...

    def describe(self, topic: str) -> list[Bounds]:
        """Bounds of each partition of ``topic``; UnknownTopicOrPartitionError if there is none."""
        ...

    def batches(
        self,
        partition: TopicPartition,
        from_offset: int,
        until_offset: int,
        fail_on_data_loss: bool,
    ) -> Iterator[BatchItem]: ...

    def offset_for_timestamp(
        self, partition: TopicPartition, timestamp_ms: int, fail_on_data_loss: bool
    ) -> int | None:
        """Offset of the first record stamped at or after ``timestamp_ms``; None if none is.

        Retention may delete the batch being searched meanwhile: that is data loss, under
        the query's failOnDataLoss like any other read.
        """
        ...

    def close(self) -> None: ...


def open_access(connection: Connection, fetch_max_bytes: int) -> LogAccess:
    if connection.path is not None:
        return DirectoryLogAccess(connection.path)
    return BrokerLogAccess(connect(connection), fetch_max_bytes)


def data_loss(message: str, fail_on_data_loss: bool) -> None:
    """Raise (failOnDataLoss=true) or warn: the one place that policy lives."""
    if fail_on_data_loss:
        raise DataLossError(
            f"{message}. The data is gone (retention, or the topic was recreated); set "
            "failOnDataLoss=false to skip it and read what remains"
        )
    log.warning("%s; skipped (failOnDataLoss=false)", message)


def _first_record_at_or_after(items: Iterator[BatchItem], timestamp_ms: int) -> int | None:
    for header, batch in items:
        if header.max_timestamp_ms < timestamp_ms:
            continue
        for record in RecordBatch(batch).records():
            if record.timestamp_ms >= timestamp_ms:
                return record.offset
    return None


class BrokerLogAccess:
    def __init__(self, broker: BrokerApi, fetch_max_bytes: int) -> None:
        self.broker = broker
        self.fetch_max_bytes = fetch_max_bytes

    def close(self) -> None:
        self.broker.close()

    def topic_names(self) -> list[str]:
        return [t for t in retried(self.broker.list_topics, "list topics") if not is_internal(t)]

    def describe(self, topic: str) -> list[Bounds]:
        described = retried(lambda: self.broker.describe_topic(topic), f"describe {topic}")
        ordered = sorted(described.partitions, key=lambda p: p.partition)
        return [(p.log_start_offset, p.log_end_offset) for p in ordered]

    def batches(
        self,
        partition: TopicPartition,
        from_offset: int,
        until_offset: int,
        fail_on_data_loss: bool,
    ) -> Iterator[BatchItem]:
        fetches = FetchAhead(lambda at: self._fetch(partition, at))
        try:
            yield from self._batches(
                partition, from_offset, until_offset, fail_on_data_loss, fetches
            )
        finally:
            fetches.close()

    def _batches(
        self,
        partition: TopicPartition,
        from_offset: int,
        until_offset: int,
        fail_on_data_loss: bool,
        fetches: FetchAhead,
    ) -> Iterator[BatchItem]:
        offset = from_offset
        while offset < until_offset:
            try:
                result = fetches.get(offset)
            except OffsetOutOfRangeError as error:
                if offset < error.log_start_offset:
                    data_loss(
                        f"{partition}: offsets {offset}..{error.log_start_offset - 1} are below "
                        f"its log start {error.log_start_offset}",
                        fail_on_data_loss,
                    )
                    offset = error.log_start_offset
                    continue
                data_loss(
                    f"{partition}: its log now ends at {error.log_end_offset}, before offset "
                    f"{offset} that this query was planned to read up to {until_offset}",
                    fail_on_data_loss,
                )
                return
            if not result.records:
                data_loss(
                    f"{partition}: its log ends at {result.log_end_offset}, but this query was "
                    f"planned to read up to {until_offset}",
                    fail_on_data_loss,
                )
                return
            ahead = next_fetch_offset(result.records)
            if ahead is not None and offset < ahead < until_offset:
                fetches.ask_ahead(ahead)
            advanced = False
            for batch in iter_batches(result.records, allow_partial_tail=True):
                if batch.header.next_offset <= offset:
                    continue
                yield batch.header, batch.buffer
                offset = batch.header.next_offset
                advanced = True
                if offset >= until_offset:
                    return
            if not advanced:
                raise AssertionError(
                    f"fetch of {partition} at {offset} returned {len(result.records)} bytes "
                    "without a whole batch past the offset"
                )

    def _fetch(self, partition: TopicPartition, offset: int) -> FetchResult:
        topic, index = partition
        return retried(
            lambda: self.broker.fetch(topic, index, offset, self.fetch_max_bytes),
            f"fetch {partition} at {offset}",
        )

    def offset_for_timestamp(
        self, partition: TopicPartition, timestamp_ms: int, fail_on_data_loss: bool
    ) -> int | None:
        topic, index = partition
        # The broker answers at batch granularity (the first batch whose newest record is
        # recent enough); the exact record is found by reading that batch.
        found = retried(
            lambda: self.broker.list_offset(topic, index, timestamp_ms), f"list offset {partition}"
        )
        _, end = self.describe(topic)[index]
        if found >= end:
            return None
        return _first_record_at_or_after(
            self.batches(partition, found, end, fail_on_data_loss), timestamp_ms
        )


class DirectoryLogAccess:
    def __init__(self, data_dir: str) -> None:
        self.data_dir = Path(data_dir)
        meta = self.data_dir / "meta"
        if not meta.is_file():
            raise OptionError(
                "path",
                f"{self.data_dir} is not a twinlog data directory (it has no meta file); give "
                "the directory a broker runs with (twinlog serve --data-dir)",
            )
        # An existing meta file is only read (TopicRegistry writes one only when it is missing).
        self.registry = TopicRegistry(meta, journal_partitions=1)

    def close(self) -> None:
        pass

    def _reader(self, partition: TopicPartition) -> LogReader:
        return LogReader(self.data_dir / "logs" / str(partition))

    def topic_names(self) -> list[str]:
        return sorted(t for t in self.registry.topics if not is_internal(t))

    def describe(self, topic: str) -> list[Bounds]:
        count = self.registry.get(topic).partitions
        return [self._bounds(TopicPartition(topic, index)) for index in range(count)]

    def _bounds(self, partition: TopicPartition) -> Bounds:
        reader = self._reader(partition)
        if not reader.directory.is_dir():
            return (0, 0)
        # The end of the last whole transaction: never inside one the copier is applying.
        end = reader.end_offset()
        start = reader.log_start_offset()
        return (start, max(start, end))

    def batches(
        self,
        partition: TopicPartition,
        from_offset: int,
        until_offset: int,
        fail_on_data_loss: bool,
    ) -> Iterator[BatchItem]:
        reader = self._reader(partition)
        offset = from_offset
        while offset < until_offset:
            try:
                for header, batch in reader.iter_batches(offset, to_offset=until_offset):
                    yield header, batch
                    offset = header.next_offset
                    if offset >= until_offset:
                        return
            except OffsetOutOfRangeError:
                # Retention removed the start (or a segment vanished while it was read).
                start = reader.log_start_offset()
                if start <= offset:
                    raise
                data_loss(
                    f"{partition} in {self.data_dir}: offsets {offset}..{start - 1} are below "
                    f"its log start {start}",
                    fail_on_data_loss,
                )
                offset = start
                continue
            data_loss(
                f"{partition} in {self.data_dir}: its log ends at {offset}, but this query was "
                f"planned to read up to {until_offset}",
                fail_on_data_loss,
            )
            return

    def offset_for_timestamp(
        self, partition: TopicPartition, timestamp_ms: int, fail_on_data_loss: bool
    ) -> int | None:
        # No broker to ask: scan the batch headers (the time index is the broker's business).
        # The scan starts wherever the log starts now, so it has no offsets to lose.
        reader = self._reader(partition)
        if not reader.directory.is_dir():
            return None
        return _first_record_at_or_after(
            ((header, batch) for header, batch in reader.iter_batches()), timestamp_ms
        )


def describe_or_none(access: LogAccess, topic: str) -> list[Bounds] | None:
    try:
        return access.describe(topic)
    except UnknownTopicOrPartitionError:
        return None


__all__ = ["BrokerLogAccess", "DirectoryLogAccess", "LogAccess", "data_loss", "open_access"]
