"""``Producer``: batched, idempotent, optionally transactional writes.

    with Producer("127.0.0.1:7070", transactional_id="orders-app") as producer:
        producer.init_transactions()
        with producer.transaction():
            producer.send("orders", b"42 EUR", key=b"customer-7")

``send`` returns a future at once; a sender thread builds one batch per
partition (``batch_bytes``, ``linger_ms``), sends it (pipelined over one gRPC
stream, at most one batch in flight per partition) and resolves the futures.
Retriable errors are retried with backoff until ``delivery_timeout_ms``; a record
not acknowledged by then fails with RequestTimedOutError, never silently.
A fatal error (ProducerFencedError, ...) ends the producer: every later call raises it
until init_transactions() starts a new generation.

No call waits forever (docs/timeouts.md): ``flush()`` and ``close()`` without a
timeout wait at most for the records' delivery deadlines; the transactional calls
and ``partitions_for`` take ``default_api_timeout_ms`` unless given ``timeout_ms``.

Sequences (the broker's duplicate check): records are numbered per partition
from 0 for an idempotent producer, per (transaction, partition) from 0 for a
transactional one. A batch keeps its bytes and sequence across retries, so the
broker drops a repeat.

The parts, wired here: the ``Accumulator`` (batches per partition), the ``Sender``
(the thread that sends them, and their sequences) and the ``TransactionManager``
(the transactional phase, whose table says which call may follow which).

Thread rule: ``send`` and ``flush`` may be called from any thread; the
transaction methods from one thread at a time; callbacks of the returned
futures run on the client's I/O thread and must not block.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import secrets
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from twinlog.engine.base.errors import (
    InvalidTxnStateError,
    NotEnoughResourcesError,
    TwinlogError,
    UnknownTopicOrPartitionError,
)
from twinlog.engine.base.types import ProducerIdentity, TopicDescription, TopicPartition
from twinlog.engine.groups.group_calls import OUTSIDE_ANY_GROUP
from twinlog.engine.records.batch_builder import Header
from twinlog.engine.records.batch_format import NO_TRANSACTION_ID, RECORDS_OFFSET
from twinlog.rpc.client.accumulator import Accumulator
from twinlog.rpc.client.client_metrics import ProducerMetrics
from twinlog.rpc.client.connection import ConnectionOptions, Target, connect
from twinlog.rpc.client.futures import BatchFuture, RecordFuture
from twinlog.rpc.client.kafka_config import accepts_kafka_names
from twinlog.rpc.client.partitioner import StickyPartitioner
from twinlog.rpc.client.producer_config import ProducerConfig
from twinlog.rpc.client.rebalance_listener import ConsumerGroupMetadata
from twinlog.rpc.client.record_fields import (
    RECORD_OVERHEAD_BYTES,
    prepare_record,
    prepare_records,
)
from twinlog.rpc.client.retry import RetryPolicy, call_with_retry
from twinlog.rpc.client.sender import Sender
from twinlog.rpc.client.timeouts import require_positive_ms, resolve_delivery_timeout_ms
from twinlog.rpc.client.transaction_manager import OPEN_PHASES, TransactionManager, TxnPhase

log = logging.getLogger("twinlog.client")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _remaining_ms(started_s: float, timeout_ms: int) -> int:
    """What is left of a call's ``timeout_ms``; at least 1, so the call is tried (and then
    times out with the message naming it) rather than skipped."""
    return max(1, timeout_ms - round((time.monotonic() - started_s) * 1000))


def _as_offsets(
    offsets: Mapping[Any, int] | Iterable[tuple[Any, int]],
) -> dict[TopicPartition, int]:
    items = offsets.items() if isinstance(offsets, Mapping) else offsets
    return {TopicPartition(*topic_partition): int(offset) for topic_partition, offset in items}


class Producer:
    @accepts_kafka_names("Producer")  # and config=; docs/client-config.md
    def __init__(
        self,
        target: Target,
        transactional_id: str | None = None,
        *,
        # The defaults, and the rules each setting is checked by: ProducerConfig's.
        compression: str = ProducerConfig.compression,
        linger_ms: int = ProducerConfig.linger_ms,
        batch_bytes: int = ProducerConfig.batch_bytes,
        batch_bytes_max: int = ProducerConfig.batch_bytes_max,
        buffer_bytes_max: int = ProducerConfig.buffer_bytes_max,
        max_block_ms: int = ProducerConfig.max_block_ms,
        delivery_timeout_ms: int | None = None,  # None: 120000, or linger + request if more
        transaction_timeout_ms: int | None = None,
        default_api_timeout_ms: int = ProducerConfig.default_api_timeout_ms,
        retry: RetryPolicy | None = None,
        connection: ConnectionOptions | None = None,
        **connection_options: Any,
    ) -> None:
        options = connection or ConnectionOptions(**connection_options)
        config = ProducerConfig(
            compression=compression,
            linger_ms=linger_ms,
            batch_bytes=batch_bytes,
            batch_bytes_max=batch_bytes_max,
            buffer_bytes_max=buffer_bytes_max,
            max_block_ms=max_block_ms,
            delivery_timeout_ms=delivery_timeout_ms,
            transaction_timeout_ms=transaction_timeout_ms,
            default_api_timeout_ms=default_api_timeout_ms,
            request_timeout_ms=options.request_timeout_ms,
        )
        delivery_timeout_ms = resolve_delivery_timeout_ms(
            config.delivery_timeout_ms, config.linger_ms, config.request_timeout_ms
        )
        self.default_api_timeout_ms = config.default_api_timeout_ms
        self._broker, self._owns_broker = connect(target, options)
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = config.transaction_timeout_ms
        self.max_block_s = config.max_block_ms / 1000
        self.delivery_timeout_ms = delivery_timeout_ms
        self.delivery_timeout_s = delivery_timeout_ms / 1000
        self.batch_bytes_max = config.batch_bytes_max
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._accumulator = Accumulator(config.compression, config.batch_bytes, config.linger_ms)
        self._buffer_bytes_max = config.buffer_bytes_max
        self._partitioner = StickyPartitioner()
        self._partition_counts: dict[str, int] = {}
        self._transactions = TransactionManager(transactional_id)
        self._request_ids = itertools.count(secrets.randbits(40) << 20)
        self._metrics = ProducerMetrics(
            config.buffer_bytes_max, lambda: self._accumulator.buffered_bytes
        )
        self._sender = Sender(
            self._broker,
            self._accumulator,
            self._transactions,
            self._changed,
            retry or RetryPolicy(timeout_ms=delivery_timeout_ms),
            self._batch_closed,
            metrics=self._metrics,
        )
        self._sender.start()

    @property
    def retry(self) -> RetryPolicy:
        """The retry policy of every call, sends included; may be replaced at any time."""
        return self._sender.retry

    @retry.setter
    def retry(self, policy: RetryPolicy) -> None:
        self._sender.retry = policy

    # --- context manager -------------------------------------------------------------------

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- sending --------------------------------------------------------------------------------

    def partitions_for(self, topic: str, timeout_ms: int | None = None) -> int:
        """The topic's partition count (asked once, then remembered); waits at most
        ``timeout_ms`` (None: default_api_timeout_ms).

        A topic that does not exist is created, as a Kafka producer's first use creates
        it, when the broker's auto.create.topics.enable is on and this producer's principal
        may CREATE it (else AuthorizationError, or UnknownTopicOrPartitionError saying the
        setting is off)."""
        count = self._partition_counts.get(topic)
        if count is None:
            description = call_with_retry(
                self.retry,
                lambda: self._describe_or_create(topic),
                f"partitions_for({topic!r})",
                timeout_ms=self._timeout_ms(timeout_ms),
            )
            count = self._partition_counts[topic] = len(description.partitions)
        return count

    def _describe_or_create(self, topic: str) -> TopicDescription:
        try:
            return self._broker.describe_topic(topic)
        except UnknownTopicOrPartitionError:
            return self._broker.auto_create_topic(topic)

    def _timeout_ms(self, timeout_ms: int | None) -> int:
        if timeout_ms is None:
            return self.default_api_timeout_ms
        return require_positive_ms("timeout_ms", timeout_ms)

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Sequence[Header] | None = None,
        timestamp_ms: int | None = None,
    ) -> RecordFuture:
        """Queue a record; the future gives its RecordMetadata once the broker has it.

        The first send to a topic, with or without ``partition``, waits (at most
        ``max_block_ms``) for the topic's partition count, creating a missing topic as
        ``partitions_for`` does. Raises TypeError for a value, key or header that is not
        bytes (or None), RecordTooLargeError for a record larger than ``batch_bytes_max``,
        and UnknownTopicOrPartitionError for a partition the topic does not have (or a
        missing topic not created); nothing is queued.
        """
        if (
            key is None
            and headers is None
            and timestamp_ms is None
            and type(value) is bytes
            and type(partition) is int
            and 0 <= partition < self._partition_counts.get(topic, 0)
            and RECORDS_OFFSET + RECORD_OVERHEAD_BYTES + len(value) <= self.batch_bytes_max
        ):
            # A bare value to a given partition of a topic already looked up while the
            # buffer has room: the common case, in fewer steps (written out here, not in a
            # method: a call is a tenth of its cost). Otherwise the general path below,
            # which looks the topic up, waits or raises.
            accumulator = self._accumulator
            with self._lock:  # the lock under self._changed: notify_all below is allowed
                if accumulator.buffered_bytes < self._buffer_bytes_max and not (
                    self._sender.closing
                ):
                    future, batch, full = accumulator.append_value(
                        topic,
                        partition,
                        value,
                        time.time_ns() // 1_000_000,
                        self._transactions.require_can_send(),
                        self.delivery_timeout_s,
                    )
                    if batch.record_count == 1:
                        self._metrics.watch(batch)
                        self._changed.notify_all()
                    elif full:
                        self._changed.notify_all()
                    return future
        record = prepare_record(value, key, headers, self.batch_bytes_max)
        for name, number in (("partition", partition), ("timestamp_ms", timestamp_ms)):
            if number is not None and (not isinstance(number, int) or isinstance(number, bool)):
                raise TypeError(f"{name} must be an int or None, not {type(number).__name__}")
        count = self._partition_count_for_send(topic, partition)
        if timestamp_ms is None:
            timestamp_ms = _now_ms()
        deadline_s = time.monotonic() + self.max_block_s
        with self._changed:
            transaction_id = self._wait_for_buffer(deadline_s, "")
            chosen = partition is None
            if partition is None:
                partition = self._partitioner.partition(topic, record.key, count)
            topic_partition = TopicPartition(topic, partition)
            future, batch, full = self._accumulator.append(
                topic_partition,
                record,
                timestamp_ms,
                transaction_id,
                time.monotonic(),
                self.delivery_timeout_s,
            )
            if batch.record_count == 1:  # a new batch: count its records when it is done
                self._metrics.watch(batch)
            if full and record.key is None and chosen:
                self._partitioner.batch_closed(topic, partition, count)
            if full or batch.record_count == 1:
                self._changed.notify_all()
        return future

    def _partition_count_for_send(self, topic: str, partition: int | None) -> int:
        """The topic's partition count, as a send waits for it: at most max_block_ms, as
        Kafka's producer waits for the topic's metadata whether or not the record names its
        partition (so a missing topic is created as ``partitions_for`` says). A partition
        the topic does not have, after one fresh look (partitions may have been added):
        UnknownTopicOrPartitionError naming the count."""
        started_s, max_block_ms = time.monotonic(), round(self.max_block_s * 1000)
        count = self.partitions_for(topic, _remaining_ms(started_s, max_block_ms))
        if partition is None or 0 <= partition < count:
            return count
        self._partition_counts.pop(topic, None)
        count = self.partitions_for(topic, _remaining_ms(started_s, max_block_ms))
        if 0 <= partition < count:
            return count
        raise UnknownTopicOrPartitionError(
            f"topic {topic!r} has {count} partition{'' if count == 1 else 's'} "
            f"(0..{count - 1}): there is no partition {partition}; send to one of those, "
            "or add partitions (twinlog topics alter --partitions)"
        )

    def send_batch(
        self,
        topic: str,
        partition: int,
        values: Sequence[bytes | None],
        keys: Sequence[bytes | None] | None = None,
        headers: Sequence[Sequence[Header] | None] | None = None,
        timestamp_ms: int | None = None,
    ) -> BatchFuture:
        """Queue many records for one partition, in order; one future for all of them.

        The same records as ``send`` called once per value (``keys[i]`` and
        ``headers[i]`` go with ``values[i]``; one timestamp for all), at a fraction of
        the cost per record: the records are checked in one pass and encoded in one
        loop per producer batch. Large calls fill several batches and wait, at most
        ``max_block_ms`` per batch, for room in the producer's buffer.

        Raises TypeError or ValueError for a malformed argument and RecordTooLargeError
        for a record larger than ``batch_bytes_max``, with nothing queued. If the buffer
        stays full for ``max_block_ms``, raises NotEnoughResourcesError saying how many
        records were queued (they are sent; in a transaction, abort it).

        Example::

            future = producer.send_batch("orders", 0, [b"a", b"b", b"c"])
            producer.flush()
            offsets = [metadata.offset for metadata in future.result()]
        """
        records = prepare_records(values, keys, headers, self.batch_bytes_max)
        if type(partition) is not int:
            raise TypeError(f"partition must be an int, not {type(partition).__name__}")
        if timestamp_ms is not None and type(timestamp_ms) is not int:
            raise TypeError(
                f"timestamp_ms must be an int or None, not {type(timestamp_ms).__name__}"
            )
        self._partition_count_for_send(topic, partition)
        if timestamp_ms is None:
            timestamp_ms = _now_ms()
        topic_partition = TopicPartition(topic, partition)
        queued = 0
        with self._changed:
            transaction_id = self._wait_for_buffer(time.monotonic() + self.max_block_s, "")
            future = BatchFuture(
                topic, partition, timestamp_ms, transaction_id != NO_TRANSACTION_ID
            )
            first_transaction_id = transaction_id
            while queued < len(records):
                if queued:  # one batch is queued: wait for room for the next one
                    transaction_id = self._wait_for_buffer(
                        time.monotonic() + self.max_block_s,
                        f"; {queued} of the batch's {len(records)} records were queued",
                    )
                    if transaction_id != first_transaction_id:
                        raise InvalidTxnStateError(
                            f"the transaction ended while send_batch was queuing its records "
                            f"({queued} of {len(records)} were queued in it); abort it, or "
                            "do not end a transaction while another thread sends to it"
                        ).classify(abortable=True)
                spans = len(future.spans)
                queued, batch, _full = self._accumulator.append_many(
                    topic_partition,
                    records,
                    queued,
                    timestamp_ms,
                    transaction_id,
                    time.monotonic(),
                    self.delivery_timeout_s,
                    future,
                )
                if future.spans[spans][1] == 0:  # a new batch: count its records when done
                    self._metrics.watch(batch)
                self._changed.notify_all()
        return future

    def _wait_for_buffer(self, deadline_s: float, queued: str) -> int:
        """Lock held. Wait until the buffer has room (at most until ``deadline_s``); return
        the transaction id of a record sent now, or raise why none can be."""
        transaction_id = self._check_can_send()
        while (
            self._accumulator.buffered_bytes >= self._buffer_bytes_max and not self._sender.closing
        ):
            remaining_s = deadline_s - time.monotonic()
            if remaining_s <= 0:
                raise NotEnoughResourcesError(
                    f"the producer buffer holds {self._accumulator.buffered_bytes} bytes "
                    f"(buffer_bytes_max={self._buffer_bytes_max}) and did not drain within "
                    f"max_block_ms={int(self.max_block_s * 1000)}{queued}; is the server "
                    "reachable?"
                )
            self._changed.wait(remaining_s)
            transaction_id = self._check_can_send()
        return transaction_id

    def _check_can_send(self) -> int:
        """Lock held. The transaction id of a record sent now, or the reason it cannot be."""
        if self._sender.closing:
            raise InvalidTxnStateError("the producer is closed; create a new one").classify(
                fatal=True
            )
        return self._transactions.require_can_send()

    def _batch_closed(self, topic_partition: TopicPartition) -> None:
        """Lock held. A batch went to the sender: keyless records move on to the next partition."""
        topic, partition = topic_partition
        count = self._partition_counts.get(topic)
        if count:
            self._partitioner.batch_closed(topic, partition, count)

    def metrics(self) -> dict[str, dict[str, float]]:
        """kafka-python's producer metrics (``client_metrics``): records sent and failed,
        request latency, batch sizes, free buffer."""
        return self._metrics.snapshot()

    def flush(self, timeout_ms: int | None = None) -> None:
        """Send everything queued and wait for the answers (their errors are in the futures).

        Waits at most ``timeout_ms``, or (None) until every queued record has succeeded or
        failed, which its delivery deadline bounds; raises RequestTimedOutError when time
        runs out first.
        """
        self._sender.flush(timeout_ms)

    def close(self, timeout_ms: int | None = None) -> None:
        """Flush, stop the sender thread and release the connection. Idempotent.

        Waits at most ``timeout_ms`` (None: until the records' delivery deadlines, which
        are bounded); records still without an answer then fail.
        """
        if self._sender.closing:
            return
        deadline_s = None if timeout_ms is None else time.monotonic() + timeout_ms / 1000
        with contextlib.suppress(TwinlogError):
            self.flush(timeout_ms)
        remaining_ms = None
        if deadline_s is not None:
            remaining_ms = max(0, round((deadline_s - time.monotonic()) * 1000))
        self._sender.close(remaining_ms)
        if self._owns_broker:
            self._broker.close()

    # --- transactions -------------------------------------------------------------------------

    def _require_transactional(self, what: str) -> ProducerIdentity:
        with self._lock:
            return self._transactions.require_transactional(what)

    def _fenced_guard(self, error: TwinlogError) -> TwinlogError:
        """A fatal error (fenced, ...) ends the generation, an abortable one the transaction."""
        with self._lock:
            self._transactions.call_failed(error)
        return error

    def init_transactions(self, timeout_ms: int | None = None) -> ProducerIdentity:
        """Register the transactional id (fencing older producers with the same id).

        Waits at most ``timeout_ms`` (None: default_api_timeout_ms); then raises
        RequestTimedOutError, and may be called again.
        """
        self._transactions.require_transactional_id("init_transactions()")
        transactional_id = self.transactional_id
        identity = call_with_retry(
            self.retry,
            lambda: self._broker.init_producer(transactional_id, self.transaction_timeout_ms),
            "init_transactions()",
            timeout_ms=self._timeout_ms(timeout_ms),
        )
        with self._lock:
            self._transactions.initialised(identity)
        return identity

    def begin_transaction(self) -> int:
        """Start a transaction; return its id. Sends then belong to it until commit/abort."""
        identity = self._require_transactional("begin_transaction()")
        with self._lock:
            self._transactions.require_transition(TxnPhase.IN_TRANSACTION, "begin_transaction()")
        request_id = next(self._request_ids)
        try:
            transaction_id = call_with_retry(
                self.retry,
                lambda: self._broker.begin_transaction(
                    identity.producer_id, identity.producer_generation, request_id
                ),
                "begin_transaction()",
                timeout_ms=self.default_api_timeout_ms,
            )
        except TwinlogError as error:
            raise self._fenced_guard(error) from None
        with self._lock:
            self._transactions.began(transaction_id)
            self._sender.restart_sequences()  # transactional sequences restart per transaction
        return transaction_id

    @property
    def transaction_id(self) -> int | None:
        """Id of the open transaction, or None."""
        transaction_id = self._transactions.transaction_id
        return transaction_id if transaction_id != NO_TRANSACTION_ID else None

    def send_offsets_to_transaction(
        self,
        offsets: Mapping[Any, int] | Iterable[tuple[Any, int]],
        group: ConsumerGroupMetadata | str,
    ) -> None:
        """Commit a group's consumed offsets with this transaction (consume-process-produce).

        ``group``: the consumer's ``group_metadata()`` (KIP-447: the group's coordinator
        refuses the offsets of a member from an older generation, StaleMemberEpochError or
        UnknownMemberIdError, both abortable: abort, poll again); or a group id alone, for
        a consumer that is not a member (``assign()``), accepted while the group has none.
        """
        what = "send_offsets_to_transaction()"
        if isinstance(group, str):
            group_id, member = group, OUTSIDE_ANY_GROUP
        else:
            group_id, member = group.group_id, group.member()
        identity = self._require_transactional(what)
        with self._lock:
            self._transactions.require_phase(
                what, (TxnPhase.IN_TRANSACTION,), "begin a transaction"
            )
            transaction_id = self._transactions.transaction_id
        as_offsets = _as_offsets(offsets)
        try:
            call_with_retry(
                self.retry,
                lambda: self._broker.send_offsets_to_transaction(
                    transaction_id,
                    identity.producer_id,
                    identity.producer_generation,
                    group_id,
                    as_offsets,
                    member,
                ),
                "send_offsets_to_transaction()",
                timeout_ms=self.default_api_timeout_ms,
            )
        except TwinlogError as error:
            raise self._fenced_guard(error) from None

    def commit_transaction(
        self, wait_for_applied: bool = False, timeout_ms: int | None = None
    ) -> None:
        """Flush, then commit. Returns once the commit is durable (guaranteed to be applied);
        with ``wait_for_applied``, once its records are readable.

        If a send of this transaction failed, raises that error: call abort_transaction().
        Waits at most ``timeout_ms`` (None: default_api_timeout_ms) for both; then raises
        RequestTimedOutError: the transaction is still open (or its commit's outcome is
        unknown), and commit_transaction() or abort_transaction() may be called again.
        """
        what = "commit_transaction()"
        started_s = time.monotonic()
        timeout_ms = self._timeout_ms(timeout_ms)
        identity = self._require_transactional(what)
        with self._lock:
            self._transactions.require_phase(what, OPEN_PHASES, "begin a transaction first")
        self._sender.flush(timeout_ms, what)
        with self._lock:
            self._transactions.require_no_failure()
            transaction_id = self._transactions.transaction_id
            batches_written = dict(self._transactions.batches_written)
        try:
            call_with_retry(
                self.retry,
                lambda: self._broker.commit_transaction(
                    transaction_id,
                    identity.producer_id,
                    identity.producer_generation,
                    wait_for_applied,
                    batches_written=batches_written or None,
                ),
                what,
                timeout_ms=_remaining_ms(started_s, timeout_ms),
            )
        except TwinlogError as error:
            raise self._fenced_guard(error) from None
        with self._lock:
            self._transactions.ended()

    def abort_transaction(self, timeout_ms: int | None = None) -> None:
        """Drop queued records, let in-flight sends finish, abort. Nothing of it is ever read.

        Waits at most ``timeout_ms`` (None: default_api_timeout_ms); then raises
        RequestTimedOutError, and may be called again.
        """
        what = "abort_transaction()"
        started_s = time.monotonic()
        timeout_ms = self._timeout_ms(timeout_ms)
        identity = self._require_transactional(what)
        with self._lock:
            self._transactions.require_phase(what, OPEN_PHASES, "there is no transaction to abort")
            transaction_id = self._transactions.transaction_id
        self._sender.drop_unsent(
            InvalidTxnStateError(
                f"transaction {transaction_id} was aborted before this record was sent"
            )
        )
        self._sender.flush(timeout_ms, what)  # wait for the batches in flight
        try:
            call_with_retry(
                self.retry,
                lambda: self._broker.abort_transaction(
                    transaction_id, identity.producer_id, identity.producer_generation
                ),
                what,
                timeout_ms=_remaining_ms(started_s, timeout_ms),
            )
        except TwinlogError as error:
            raise self._fenced_guard(error) from None
        with self._lock:
            self._transactions.ended()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Producer]:
        """Begin; commit when the block ends. Abort (then re-raise) if the block raises, or if
        the commit finds a failed send of this transaction."""
        self.begin_transaction()
        try:
            yield self
        except BaseException:
            self._abort_after_failure()
            raise
        try:
            self.commit_transaction()
        except TwinlogError:
            with self._lock:
                needs_abort = self._transactions.needs_abort()
            if needs_abort:
                self._abort_after_failure()
            raise

    def _abort_after_failure(self) -> None:
        with self._lock:
            is_open = self._transactions.has_open_transaction()
        if is_open:
            try:
                self.abort_transaction()
            except TwinlogError:
                log.exception("abort after a failed transaction failed too")
