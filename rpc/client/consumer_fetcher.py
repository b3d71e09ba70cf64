"""A consumer's fetching: ``Fetcher``, as Kafka's consumer has it.

It owns the fetch requests in flight (at most one per assigned partition: a long poll of
``fetch_max_wait_ms`` on one of the fetcher threads), the records fetched and not yet
returned (a buffer per partition), their decoding from record batches into
``ConsumerRecord``s, and the backoff of partitions whose fetches fail. ``consumer.Consumer``
drives it from ``poll``: ``collect`` what came back, ``drain`` records up to
``max_poll_records``, ``start`` fetches for the partitions that have none, then ``wait``.
The positions it fetches from and advances belong to ``SubscriptionState``.

A fetch that fails with a retriable error (server down, restarting) is tried again after
an exponential backoff (``retry``), per partition; while every partition backs off,
``wait`` sleeps instead of spinning, and one warning is logged until a fetch succeeds
again. A fetch answered for an offset that is no longer the partition's position (a seek
happened meanwhile) is dropped.

Threads: the fetcher threads run the broker's ``fetch`` (and the starting-position lookups
of ``consumer_positions``) and return their answers through futures; they touch nothing
here. Every method runs on the consumer's thread.
"""

from __future__ import annotations

import functools
import logging
import time
from bisect import bisect_left
from collections import deque
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from itertools import islice, repeat
from typing import Any, ParamSpec, TypeVar, cast

from twinlog.engine.base.errors import InvalidRecordError, OffsetOutOfRangeError, TwinlogError
from twinlog.engine.base.types import FetchResult, TopicPartition
from twinlog.engine.records.batch_reader import RecordBatch, iter_batches
from twinlog.engine.records.record_decoder import RecordColumns
from twinlog.engine.records.undecodable_batch import naming_the_batch
from twinlog.rpc.client.client_metrics import ConsumerMetrics
from twinlog.rpc.client.consumer_settings import ConsumerSettings
from twinlog.rpc.client.consumer_subscription import SubscriptionState
from twinlog.rpc.client.records import ConsumerRecord
from twinlog.rpc.wire.broker_api import BrokerApi

log = logging.getLogger("twinlog.client")

FETCHER_THREADS_MAX = 16

Params = ParamSpec("Params")
Result = TypeVar("Result")


@dataclass
class _Fetch:
    offset: int
    future: Future[FetchResult]


class Fetcher:
    def __init__(
        self,
        broker: BrokerApi,
        subscriptions: SubscriptionState,
        metrics: ConsumerMetrics,
        settings: ConsumerSettings,
    ) -> None:
        self._broker = broker
        self._subscriptions = subscriptions
        self._metrics = metrics
        self._settings = settings
        self._threads: ThreadPoolExecutor | None = None  # made with the first assignment
        self._fetches: dict[TopicPartition, _Fetch] = {}
        self._buffers: dict[TopicPartition, deque[ConsumerRecord]] = {}
        self._max_bytes: dict[TopicPartition, int] = {}  # grows when a batch does not fit
        self._not_before: dict[TopicPartition, float] = {}  # monotonic; after a failed fetch
        self._failures: dict[TopicPartition, int] = {}  # consecutive retriable fetch failures
        self._unreachable = False  # a warning was logged; an info line when it ends

    # --- the fetcher threads -------------------------------------------------------------

    def ensure_threads(self, partitions: int) -> None:
        """Consumer's thread, at each assignment: the fetcher threads exist once something
        is assigned, one per partition of the first assignment, at most
        FETCHER_THREADS_MAX."""
        if self._threads is None and partitions:
            self._threads = ThreadPoolExecutor(
                min(FETCHER_THREADS_MAX, max(1, partitions)), thread_name_prefix="twinlog-fetch"
            )

    def submit(
        self, call: Callable[Params, Result], *args: Params.args, **kwargs: Params.kwargs
    ) -> Future[Result]:
        """Consumer's thread: run ``call`` on a fetcher thread (after an assignment)."""
        assert self._threads is not None
        return self._threads.submit(call, *args, **kwargs)

    # --- fetching, one poll's steps in order -------------------------------------------------

    def collect(self, reset: Callable[[TopicPartition], None]) -> None:
        """Consumer's thread: take the answered fetches into the buffers. A position out
        of the log's range is ``reset`` (auto_offset_reset; raises OffsetOutOfRangeError
        for "none"); a retriable failure backs the partition off; any other raises."""
        for topic_partition, fetch in list(self._fetches.items()):
            if not fetch.future.done():
                continue
            del self._fetches[topic_partition]
            position = self._subscriptions.position(topic_partition)
            if fetch.future.cancelled() or fetch.offset != position:
                continue  # a seek happened meanwhile
            try:
                result = fetch.future.result()
            except OffsetOutOfRangeError:
                if self._settings.auto_offset_reset == "none":
                    raise
                reset(topic_partition)
                continue
            except TwinlogError as error:
                if error.retriable:  # fetched again after a growing pause
                    self._back_off(topic_partition, error)
                    continue
                raise
            self._fetched(topic_partition)
            self._buffer(topic_partition, fetch.offset, result)

    def drain(self) -> list[ConsumerRecord]:
        """Consumer's thread: up to ``max_poll_records`` buffered records of the partitions
        not paused, advancing their positions past them."""
        taken: list[ConsumerRecord] = []
        max_poll_records = self._settings.max_poll_records
        for topic_partition in self._subscriptions.fetchable():
            buffer = self._buffers.get(topic_partition)
            if not buffer or len(taken) >= max_poll_records:
                continue
            while buffer and len(taken) < max_poll_records:
                taken.append(buffer.popleft())
            self._subscriptions.advance(topic_partition, taken[-1].offset + 1)
        return taken

    def start(self) -> None:
        """Consumer's thread: a fetch for each partition not paused that has none in flight,
        nothing buffered and no backoff running, from its position."""
        assert self._threads is not None
        now_s = time.monotonic()
        for topic_partition in self._subscriptions.fetchable():
            if topic_partition in self._fetches or self._buffers.get(topic_partition):
                continue
            if self._not_before.get(topic_partition, 0.0) > now_s:
                continue
            self._not_before.pop(topic_partition, None)
            offset = self._subscriptions.position(topic_partition)
            assert offset is not None  # poll fetches once every partition has a position
            max_bytes = self._max_bytes.get(topic_partition, self._settings.fetch_max_bytes)
            future = self._threads.submit(
                self._metrics.timed(self._broker.fetch),
                topic_partition.topic,
                topic_partition.partition,
                offset,
                max_bytes,
                self._settings.fetch_max_wait_ms,
                1,
            )
            self._fetches[topic_partition] = _Fetch(offset, future)

    def wait(self, wait_s: float) -> None:
        """Consumer's thread: wait up to ``wait_s`` for a fetch to be answered, or until
        the first backoff ends."""
        if self._not_before:
            wait_s = min(wait_s, max(0.0, min(self._not_before.values()) - time.monotonic()))
        futures = [fetch.future for fetch in self._fetches.values()]
        if futures:
            wait(futures, timeout=wait_s, return_when=FIRST_COMPLETED)
        else:
            # Every partition is backing off (or paused): wait() on no futures would
            # return at once and poll's loop would spin until the backoff ends.
            time.sleep(wait_s)

    # --- dropping ----------------------------------------------------------------------------

    def forget(self, topic_partition: TopicPartition) -> None:
        """Consumer's thread, at a seek: drop its buffered records and its fetch in flight
        (an answer already coming is ignored); its lag is no longer known."""
        self._buffers.pop(topic_partition, None)
        self._metrics.forget(topic_partition)
        fetch = self._fetches.pop(topic_partition, None)
        if fetch is not None:
            fetch.future.cancel()

    def release(self, topic_partition: TopicPartition) -> None:
        """Consumer's thread, when the partition leaves the assignment: ``forget`` it and
        its backoff (a stale backoff would cut every wait to zero)."""
        self.forget(topic_partition)
        self._not_before.pop(topic_partition, None)
        self._failures.pop(topic_partition, None)

    def close(self) -> None:
        """Consumer's thread, at close: cancel the fetches and stop the fetcher threads
        without waiting for them (a long poll ends by its own deadline)."""
        for fetch in self._fetches.values():
            fetch.future.cancel()
        self._fetches.clear()
        if self._threads is not None:
            self._threads.shutdown(wait=False, cancel_futures=True)

    # --- answers -------------------------------------------------------------------------------

    def _back_off(self, topic_partition: TopicPartition, error: TwinlogError) -> None:
        failures = self._failures[topic_partition] = self._failures.get(topic_partition, 0) + 1
        retry = self._settings.retry
        self._not_before[topic_partition] = time.monotonic() + retry.pause_ms(failures) / 1000
        if not self._unreachable:
            self._unreachable = True
            log.warning(
                "fetching %s failed: %s: %s; retrying with backoff (up to %d ms) until it "
                "succeeds (logged once)",
                topic_partition,
                type(error).__name__,
                error,
                retry.backoff_max_ms,
            )
        else:
            log.debug("fetching %s failed again: %s", topic_partition, error)

    def _fetched(self, topic_partition: TopicPartition) -> None:
        self._failures.pop(topic_partition, None)
        if self._unreachable and not self._failures:
            self._unreachable = False
            log.info("fetching works again")

    def _buffer(self, topic_partition: TopicPartition, offset: int, result: FetchResult) -> None:
        records: deque[ConsumerRecord] = deque()
        topic, partition = topic_partition
        next_offset = offset  # after the last whole batch fetched
        for batch in iter_batches(result.records, allow_partial_tail=True):
            try:
                columns = _columns_of(batch, topic, partition)
            except InvalidRecordError:
                if records:
                    break  # hand out the records before it; the next fetch starts at it
                raise
            next_offset = batch.header.next_offset
            offsets = columns.offsets
            # The first batch may start before ``offset``; offsets grow within a batch.
            skipped = bisect_left(offsets, offset) if offsets and offsets[0] < offset else 0
            # One tuple per record, built in C (a ConsumerRecord(...) call runs Python).
            records.extend(
                map(
                    _new_consumer_record,
                    islice(
                        zip(
                            repeat(topic),
                            repeat(partition),
                            offsets,
                            columns.keys,
                            columns.values,
                            columns.headers,
                            columns.timestamps_ms,
                        ),
                        skipped,
                        None,
                    ),
                )
            )
        if not records and next_offset > offset:
            # Whole batches without a record from ``offset`` on: compaction emptied them
            # (record offsets have gaps in a compacted log). Step over them, as Kafka's does.
            self._subscriptions.advance(topic_partition, next_offset)
        elif not records and result.records:
            # Only a partial batch came back: the next batch is larger than max_bytes.
            current = self._max_bytes.get(topic_partition, self._settings.fetch_max_bytes)
            self._max_bytes[topic_partition] = current * 2
        if records:
            self._buffers[topic_partition] = records
        self._metrics.fetched(topic_partition, offset, result, records)


def _columns_of(batch: RecordBatch, topic: str, partition: int) -> RecordColumns:
    """The batch's records as columns; InvalidRecordError naming the batch if they do not
    decode."""
    with naming_the_batch(topic, partition, batch.header):
        return batch.columns()


# ConsumerRecord from a tuple of its fields, in C: the NamedTuple's own __new__ is Python.
_new_consumer_record = cast(
    Callable[[tuple[Any, ...]], ConsumerRecord], functools.partial(tuple.__new__, ConsumerRecord)
)
