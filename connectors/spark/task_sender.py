"""A write task's side: Arrow rows into record batches, produced into the job's transaction.

One ``RecordBatchBuilder`` per topic-partition fills up to ``batchBytes`` and
is then produced synchronously, tagged with the task attempt. Sequences are
numbered per (transaction, partition, attempt) from 0, as the broker checks
them, so a produce retried after a timeout is recognised and written once.

Partitioning follows Kafka's producer (``twinlog.rpc.client.partitioner``): the
partition column if given, else murmur2 of the key, else sticky: keyless rows
fill one partition's batch, then move to the next.

Thread rule: one task, one sender.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from twinlog.connectors.spark.broker import retried
from twinlog.connectors.spark.transaction import AttemptReport, TransactionTicket
from twinlog.connectors.spark.write_settings import WriteSettings
from twinlog.engine.base.errors import InvalidConfigError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.records.batch_builder import Header, RecordBatchBuilder
from twinlog.rpc.client.partitioner import partition_for_key
from twinlog.rpc.wire.broker_api import BrokerApi

if TYPE_CHECKING:
    import pyarrow


def _as_bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    return bytes(value)


class TaskSender:
    def __init__(
        self,
        broker: BrokerApi,
        settings: WriteSettings,
        ticket: TransactionTicket,
        attempt: str,
        first_partition: int,
    ) -> None:
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

    # --- rows ------------------------------------------------------------------------

    def send_arrow(self, batches: Iterable[pyarrow.RecordBatch]) -> None:
        columns = self.settings.columns
        for arrow_batch in batches:
            count = arrow_batch.num_rows
            data = {name: arrow_batch.column(name).to_pylist() for name in columns}
            values = data["value"]
            keys = data.get("key") or _nones(count)
            topics = data.get("topic") or _nones(count)
            partitions = data.get("partition") or _nones(count)
            headers = data.get("headers") or _nones(count)
            for row in range(count):
                row_headers = headers[row]
                self.send(
                    topics[row],
                    partitions[row],
                    _as_bytes(keys[row]),
                    _as_bytes(values[row]),
                    [(h["key"], h["value"]) for h in row_headers] if row_headers else None,
                )

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
        builder = self.builders.get(target)
        if builder is None:
            builder = self.builders[target] = self._new_builder(target)
        builder.append(value, key=key, headers=headers)
        self.records += 1
        if builder.estimated_size_bytes >= self.settings.batch_bytes:
            self._produce(target)
            if key is None and self.sticky.get(topic) == partition:
                self.sticky[topic] = (partition + 1) % count  # sticky: move on once sent

    def finish(self) -> AttemptReport:
        for target in list(self.builders):
            self._produce(target)
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

    def _new_builder(self, target: TopicPartition) -> RecordBatchBuilder:
        return RecordBatchBuilder(
            self.settings.compression,
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
        batch = builder.build()
        # A retry resends the same bytes and sequence: the broker acknowledges a repeat
        # without writing it twice.
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
        self.batches += 1


def _nones(count: int) -> list[None]:
    return [None] * count
