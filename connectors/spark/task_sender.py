"""A write task's side: Arrow rows into record batches, produced into the job's transaction.

One ``RecordBatchBuilder`` per topic-partition fills up to ``batchBytes``; it
is then built (compressed) on one thread and produced on another, in order,
tagged with the task attempt, while this thread encodes the next. Sequences are
numbered per (transaction, partition, attempt) from 0, as the broker checks
them, so a produce retried after a timeout is recognised and written once.

Partitioning follows Kafka's producer (``twinlog.rpc.client.partitioner``): the
partition column if given, else murmur2 of the key, else sticky: keyless rows
fill one partition's batch, then move to the next.

Thread rule: one task, one sender; a builder handed to the build thread is not
touched again.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from twinlog.connectors.spark.arrow_columns import binary_array, binary_column_of
from twinlog.connectors.spark.arrow_partitioner import partitions_for_keys
from twinlog.connectors.spark.broker import retried
from twinlog.connectors.spark.in_order_sender import InOrderSender
from twinlog.connectors.spark.transaction import AttemptReport, TransactionTicket
from twinlog.connectors.spark.worker_memory import keep_freed_memory_in_this_worker
from twinlog.connectors.spark.write_settings import WriteSettings
from twinlog.engine.base.errors import InvalidConfigError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.records.batch_builder import Header, RecordBatchBuilder
from twinlog.engine.records.binary_column import BinaryColumn
from twinlog.rpc.client.partitioner import partition_for_key
from twinlog.rpc.wire.broker_api import BrokerApi

if TYPE_CHECKING:
    import pyarrow


class TaskSender:
    def __init__(
        self,
        broker: BrokerApi,
        settings: WriteSettings,
        ticket: TransactionTicket,
        attempt: str,
        first_partition: int,
    ) -> None:
        keep_freed_memory_in_this_worker()  # a megabyte's batch at a time: see there
        self.broker = broker
        self.settings = settings
        self.ticket = ticket
        self.attempt = attempt
        self.first_partition = first_partition  # spreads keyless rows of different tasks
        self.builders: dict[TopicPartition, RecordBatchBuilder] = {}
        self.next_sequence: dict[TopicPartition, int] = {}
        self.partition_counts: dict[str, int] = {}
        self.sticky: dict[str, int] = {}
        self.records = 0
        self.batches = 0
        # Three stages, each in order: this thread encodes records, ``builds`` compresses
        # each batch (zstandard lets go of the GIL meanwhile), ``in_order`` produces it.
        self.builds = ThreadPoolExecutor(1, thread_name_prefix="twinlog-task-build")
        self.in_order: InOrderSender[Future[bytes]] = InOrderSender(self._produce_built)

    def __enter__(self) -> TaskSender:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.in_order.close()
        self.builds.shutdown(wait=True, cancel_futures=True)

    # --- rows ------------------------------------------------------------------------

    def send_arrow(self, batches: Iterable[pyarrow.RecordBatch]) -> None:
        columns = self.settings.columns
        for arrow_batch in batches:
            count = arrow_batch.num_rows
            if not count:
                continue
            value_column = arrow_batch.column("value")
            key_column = arrow_batch.column("key") if "key" in columns else None
            if self.settings.topic is not None and not {"topic", "partition", "headers"} & set(
                columns
            ):
                if key_column is None:
                    self._send_keyless(self.settings.topic, binary_column_of(value_column))
                    continue
                if not key_column.null_count:
                    self._send_keyed(self.settings.topic, value_column, binary_array(key_column))
                    continue
            values = _binary_list(value_column)
            keys = _binary_list(key_column) if key_column is not None else None
            data = {
                name: arrow_batch.column(name).to_pylist()
                for name in ("topic", "partition", "headers")
                if name in columns
            }
            row_keys: list[bytes | None] = keys if keys is not None else [None] * count
            topics = data.get("topic") or _nones(count)
            partitions = data.get("partition") or _nones(count)
            headers = data.get("headers") or _nones(count)
            for row in range(count):
                row_headers = headers[row]
                self.send(
                    topics[row],
                    partitions[row],
                    row_keys[row],
                    values[row],
                    [(h["key"], h["value"]) for h in row_headers] if row_headers else None,
                )

    def _send_keyless(self, topic: str, values: BinaryColumn) -> None:
        """Rows with a value only: whole batches at a time into the sticky partition."""
        count = self._partition_count(topic)
        start = 0
        while start < values.rows:
            partition = self._choose(topic, None, count)
            target = TopicPartition(topic, partition)
            builder = self._builder(target)
            reached = builder.append_columns(
                values, start=start, size_bytes_max=self.settings.batch_bytes
            )
            self.records += reached - start
            start = reached
            if builder.estimated_size_bytes >= self.settings.batch_bytes or start < values.rows:
                self._produce(target)
                self.sticky[topic] = (partition + 1) % count  # sticky: move on once sent

    def _send_keyed(
        self, topic: str, value_column: pyarrow.Array, key_column: pyarrow.Array
    ) -> None:
        """Rows with a key each (``key_column``: binary without nulls): grouped by the key's
        partition, in row order within each; the columns reordered so by Arrow, then each
        partition's run of rows encoded straight from their buffers."""
        import pyarrow.compute

        partitions = partitions_for_keys(key_column, self._partition_count(topic))
        order = pyarrow.compute.sort_indices(partitions)  # a stable sort: row order kept
        runs = pyarrow.compute.run_end_encode(partitions.take(order))
        values = binary_column_of(value_column.take(order))
        keys = binary_column_of(key_column.take(order))
        run_start = 0
        for partition, run_end in zip(
            runs.values.to_pylist(), runs.run_ends.to_pylist(), strict=True
        ):
            target = TopicPartition(topic, partition)
            start, run_start = run_start, run_end
            while start < run_end:
                builder = self._builder(target)
                reached = builder.append_columns(
                    values,
                    keys,
                    start=start,
                    stop=run_end,
                    size_bytes_max=self.settings.batch_bytes,
                )
                self.records += reached - start
                start = reached
                if builder.estimated_size_bytes >= self.settings.batch_bytes or start < run_end:
                    self._produce(target)

    def send(
        self,
        topic: str | None,
        partition: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: list[Header] | None,
    ) -> None:
        topic = self.settings.topic or topic
        if topic is None:
            raise InvalidConfigError(
                "format('twinlog'): a row has a null topic and no topic option is set"
            )
        count = self._partition_count(topic)
        if partition is None:
            partition = self._choose(topic, key, count)
        elif not 0 <= partition < count:
            raise InvalidConfigError(
                f"format('twinlog'): a row asks for partition {partition} of topic {topic!r}, "
                f"which has partitions 0..{count - 1}"
            )
        target = TopicPartition(topic, partition)
        builder = self._builder(target)
        builder.append(value, key=key, headers=headers)
        self.records += 1
        if builder.estimated_size_bytes >= self.settings.batch_bytes:
            self._produce(target)
            if key is None and self.sticky.get(topic) == partition:
                self.sticky[topic] = (partition + 1) % count  # sticky: move on once sent

    def finish(self) -> AttemptReport:
        """Produce what is left and wait for every produce; the attempt's report."""
        for target in list(self.builders):
            self._produce(target)
        self.in_order.drain()
        return AttemptReport(self.ticket, self.attempt, self.records, self.batches)

    # --- batches ---------------------------------------------------------------------

    def _partition_count(self, topic: str) -> int:
        count = self.partition_counts.get(topic)
        if count is None:
            described = retried(lambda: self.broker.describe_topic(topic), f"describe {topic}")
            count = self.partition_counts[topic] = len(described.partitions)
        return count

    def _choose(self, topic: str, key: bytes | None, count: int) -> int:
        if key is not None:
            return partition_for_key(key, count)
        current = self.sticky.get(topic)
        if current is None:
            current = self.sticky[topic] = self.first_partition % count
        return current

    def _builder(self, target: TopicPartition) -> RecordBatchBuilder:
        builder = self.builders.get(target)
        if builder is None:
            builder = self.builders[target] = self._new_builder(target)
        return builder

    def _new_builder(self, target: TopicPartition) -> RecordBatchBuilder:
        return RecordBatchBuilder(
            self.settings.compression,
            compression_level=self.settings.compression_level,
            producer_id=self.ticket.producer_id,
            producer_generation=self.ticket.producer_generation,
            base_sequence=self.next_sequence.get(target, 0),
            transactional=True,
        )

    def _produce(self, target: TopicPartition) -> None:
        builder = self.builders.pop(target)
        if not len(builder):
            return
        self.next_sequence[target] = builder.base_sequence + len(builder)
        # The builder is the build thread's from here on; encoding goes on meanwhile.
        self.in_order.submit(target, self.builds.submit(builder.build))
        self.batches += 1

    def _produce_built(self, target: TopicPartition, built: Future[bytes]) -> None:
        """On the in-order sender's thread. A retry resends the same bytes and sequence:
        the broker acknowledges a repeat without writing it twice."""
        batch = built.result()  # a build that failed fails the produce
        retried(
            lambda: self.broker.produce(
                target.topic,
                target.partition,
                batch,
                attempt=self.attempt,
                transaction_id=self.ticket.transaction_id,
            ),
            f"produce to {target}",
        )


def _nones(count: int) -> list[None]:
    return [None] * count


def _binary_list(column: pyarrow.Array) -> list[bytes | None]:
    """A binary or string column as bytes (strings UTF-8 encoded, by Arrow, not per row)."""
    import pyarrow

    if pyarrow.types.is_string(column.type) or pyarrow.types.is_large_string(column.type):
        column = column.cast(pyarrow.binary())
    return column.to_pylist()
