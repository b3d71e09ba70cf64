"""``Consumer``: a vanilla reader of data logs.

    consumer = Consumer("127.0.0.1:7070", group_id="billing")
    consumer.assign([("orders", 0), ("orders", 1)])
    for record in consumer.poll(timeout_ms=1000):
        ...
    consumer.commit()

Data logs hold committed data only, so there is no transaction logic here: no
markers, no isolation level, no filtering. Each assigned partition has at most
one fetch (a long poll of ``fetch_max_wait_ms``) in flight; ``poll`` returns as
soon as any of them brings records.

Positions start at the group's committed offset when there is one, else at
``auto_offset_reset``: "latest" by default, as Kafka's consumer (only records
produced from now on), "earliest" (from the log start), or "none" (position()
and poll() raise until seek()).

A fetch that fails with a retriable error (server down, restarting) is tried
again after an exponential backoff (``retry``), per partition; while every
partition backs off, ``poll`` sleeps instead of spinning, and one warning is
logged until a fetch succeeds again.

No call waits forever (docs/timeouts.md). ``poll(timeout_ms)`` returns within about
its timeout whatever the server does: looking up the starting positions and fetching
run on the fetcher threads, and a lookup or fetch still unanswered at poll's deadline
stays outstanding (its own request deadline ends it) for the next poll to pick up.
``committed``, ``position``, ``seek_to_*`` and ``commit`` wait at most
``default_api_timeout_ms``, then raise RequestTimedOutError.

Thread rule: one thread uses a consumer (as Kafka's); ``close`` from that thread.
"""

from __future__ import annotations

import functools
import logging
import time
from collections import deque
from collections.abc import Iterable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from twinlog.engine.base.errors import (
    CorruptBatchError,
    InvalidConfigError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    TwinlogError,
)
from twinlog.engine.base.types import FetchResult, TopicPartition
from twinlog.engine.records.batch_reader import Record, RecordBatch, iter_batches
from twinlog.rpc.client.call_deadline import deadline_at
from twinlog.rpc.client.client_metrics import ConsumerMetrics
from twinlog.rpc.client.connection import ConnectionOptions, Target, connect
from twinlog.rpc.client.kafka_config import accepts_kafka_names
from twinlog.rpc.client.records import ConsumerRecord
from twinlog.rpc.client.retry import RetryPolicy, call_with_retry
from twinlog.rpc.client.timeouts import DEFAULT_API_TIMEOUT_MS, require_positive_ms

log = logging.getLogger("twinlog.client")

OFFSET_RESETS = ("earliest", "latest", "none")
FETCHER_THREADS_MAX = 16
NO_OFFSET = -1


@dataclass
class _Fetch:
    offset: int
    future: Future[FetchResult]


def as_topic_partitions(partitions: Iterable[Any]) -> list[TopicPartition]:
    return [TopicPartition(*item) for item in partitions]


class Consumer:
    @accepts_kafka_names("Consumer")  # and config=; docs/client-config.md
    def __init__(
        self,
        target: Target,
        group_id: str | None = None,
        *,
        auto_offset_reset: str = "latest",
        fetch_max_bytes: int = 1 << 20,
        fetch_max_wait_ms: int = 500,
        max_poll_records: int = 500,
        default_api_timeout_ms: int = DEFAULT_API_TIMEOUT_MS,
        retry: RetryPolicy | None = None,
        connection: ConnectionOptions | None = None,
        **connection_options: Any,
    ) -> None:
        if auto_offset_reset not in OFFSET_RESETS:
            raise InvalidConfigError(
                f"auto_offset_reset {auto_offset_reset!r} is not one of {', '.join(OFFSET_RESETS)}"
            )
        options = connection or ConnectionOptions(**connection_options)
        self.default_api_timeout_ms = require_positive_ms(
            "default_api_timeout_ms", default_api_timeout_ms
        )
        self._broker, self._owns_broker = connect(target, options)
        self.group_id = group_id
        self.auto_offset_reset = auto_offset_reset
        self.fetch_max_bytes = fetch_max_bytes
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.max_poll_records = max_poll_records
        # Without a policy of its own, a call retries for as long as its deadline allows,
        # and then says it timed out (RequestTimedOutError), as default_api_timeout_ms promises.
        self.retry = retry or RetryPolicy(timeout_ms=self.default_api_timeout_ms)
        self._assigned: list[TopicPartition] = []
        self._positions: dict[TopicPartition, int] = {}
        self._fetches: dict[TopicPartition, _Fetch] = {}
        self._buffers: dict[TopicPartition, deque[ConsumerRecord]] = {}
        self._max_bytes: dict[TopicPartition, int] = {}  # grows when a batch does not fit
        self._not_before: dict[TopicPartition, float] = {}  # monotonic; after a failed fetch
        self._failures: dict[TopicPartition, int] = {}  # consecutive retriable fetch failures
        self._unreachable = False  # a warning was logged; an info line when it ends
        self._fetchers: ThreadPoolExecutor | None = None
        # Starting positions being looked up for poll (committed offset, or the reset).
        self._lookup: Future[dict[TopicPartition, int]] | None = None
        self._closed = False
        self._metrics = ConsumerMetrics()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- assignment and positions ------------------------------------------------------

    def assign(self, partitions: Iterable[Any]) -> None:
        """Read exactly these (topic, partition) pairs from now on."""
        self._check_open()
        assigned = as_topic_partitions(partitions)
        self._assigned = list(dict.fromkeys(assigned))
        keep = set(self._assigned)
        for topic_partition in list(self._positions):
            if topic_partition not in keep:
                self._forget(topic_partition)
                self._positions.pop(topic_partition, None)
        for topic_partition in list(self._not_before):
            if topic_partition not in keep:  # a stale backoff would cut every wait to zero
                self._not_before.pop(topic_partition, None)
                self._failures.pop(topic_partition, None)
        if self._fetchers is None and self._assigned:
            self._fetchers = ThreadPoolExecutor(
                min(FETCHER_THREADS_MAX, max(1, len(self._assigned))),
                thread_name_prefix="twinlog-fetch",
            )

    def assignment(self) -> list[TopicPartition]:
        return list(self._assigned)

    def _require_assigned(self, topic_partition: Any) -> TopicPartition:
        found = TopicPartition(*topic_partition)
        if found not in self._assigned:
            raise InvalidConfigError(
                f"{found} is not assigned to this consumer; call assign() with it first"
            )
        return found

    def _forget(self, topic_partition: TopicPartition) -> None:
        """Drop buffered records and an in-flight fetch (its answer will be ignored)."""
        self._buffers.pop(topic_partition, None)
        self._metrics.forget(topic_partition)
        fetch = self._fetches.pop(topic_partition, None)
        if fetch is not None:
            fetch.future.cancel()

    def seek(self, topic_partition: Any, offset: int) -> None:
        """The next poll returns records of this partition from ``offset`` on."""
        found = self._require_assigned(topic_partition)
        if offset < 0:
            raise InvalidConfigError(f"offset {offset} is negative; offsets start at 0")
        self._forget(found)
        self._positions[found] = offset

    def _seek_to(self, partitions: Iterable[Any] | None, spec: str) -> None:
        chosen = self._assigned if partitions is None else as_topic_partitions(partitions)
        for topic_partition in chosen:
            found = self._require_assigned(topic_partition)
            offset = call_with_retry(
                self.retry,
                functools.partial(self._broker.list_offset, found.topic, found.partition, spec),
                f"seek to {spec} of {found}",
                timeout_ms=self.default_api_timeout_ms,
            )
            self.seek(found, offset)

    def seek_to_beginning(self, partitions: Iterable[Any] | None = None) -> None:
        self._seek_to(partitions, "earliest")

    def seek_to_end(self, partitions: Iterable[Any] | None = None) -> None:
        self._seek_to(partitions, "latest")

    def position(self, topic_partition: Any) -> int:
        """Offset of the next record ``poll`` will return for this partition."""
        found = self._require_assigned(topic_partition)
        if found not in self._positions:
            self._positions.update(self._look_up_positions([found]))
        return self._positions[found]

    def _look_up_positions(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """Where each partition starts: the group's committed offset, else the reset.

        Runs on the caller's thread (position()) or a fetcher thread (poll()); the whole
        lookup (a committed() call, then one list_offset per partition) is bounded by
        default_api_timeout_ms, not each of its requests.
        """
        with deadline_at(time.monotonic() + self.default_api_timeout_ms / 1000):
            return self._look_up_positions_now(partitions)

    def _look_up_positions_now(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        positions: dict[TopicPartition, int] = {}
        committed = self.committed(partitions) if self.group_id else {}
        for topic_partition in partitions:
            offset = committed.get(topic_partition)
            if offset is None:
                if self.auto_offset_reset == "none":
                    raise OffsetOutOfRangeError(
                        f"{topic_partition} has no committed offset for group {self.group_id!r} "
                        "and auto_offset_reset is 'none'; seek() first",
                        -1,
                        -1,
                    )
                offset = call_with_retry(
                    self.retry,
                    functools.partial(
                        self._broker.list_offset,
                        topic_partition.topic,
                        topic_partition.partition,
                        self.auto_offset_reset,
                    ),
                    f"looking up the {self.auto_offset_reset} offset of {topic_partition}",
                    timeout_ms=self.default_api_timeout_ms,
                )
            positions[topic_partition] = offset
        return positions

    # --- polling ------------------------------------------------------------------------

    def poll(self, timeout_ms: int = 0) -> list[ConsumerRecord]:
        """Records after the current positions (up to ``max_poll_records``); waits up to
        ``timeout_ms`` when none are there yet. Advances the positions past what it returns.
        """
        self._check_open()
        if not self._assigned:
            raise InvalidConfigError("poll() before assign(): assign partitions first")
        deadline_s = time.monotonic() + max(0, timeout_ms) / 1000
        if not self._await_positions(deadline_s):
            return []
        while True:
            self._collect()
            records = self._drain()
            if records:
                return records
            self._start_fetches()
            now_s = time.monotonic()
            wait_s = deadline_s - now_s
            if wait_s <= 0:
                return []
            if self._not_before:
                wait_s = min(wait_s, max(0.0, min(self._not_before.values()) - now_s))
            futures = [fetch.future for fetch in self._fetches.values()]
            if futures:
                wait(futures, timeout=wait_s, return_when=FIRST_COMPLETED)
            else:
                # Every partition is backing off: wait() on no futures would return at once
                # and this loop would spin until the backoff ends.
                time.sleep(wait_s)

    def _await_positions(self, deadline_s: float) -> bool:
        """True once every assigned partition has a position; waits until ``deadline_s`` at
        most for the lookup (which stays outstanding for the next poll when unanswered)."""
        assert self._fetchers is not None
        # A second round for partitions assigned while one ran, or after one that failed.
        for _ in range(2):
            missing = [tp for tp in self._assigned if tp not in self._positions]
            if not missing:
                return True
            if self._lookup is None:
                self._lookup = self._fetchers.submit(self._look_up_positions, missing)
            wait([self._lookup], timeout=max(0.0, deadline_s - time.monotonic()))
            if not self._lookup.done():
                return False
            lookup, self._lookup = self._lookup, None
            try:
                found = lookup.result()
            except TwinlogError as error:
                if not error.retriable:
                    raise
                # Unanswered (the server stalled or down): the next round asks again.
                log.warning("looking up the starting positions failed: %s; retrying", error)
                continue
            assigned = set(self._assigned)
            for topic_partition, offset in found.items():
                # setdefault: a seek() made meanwhile wins
                if topic_partition in assigned:
                    self._positions.setdefault(topic_partition, offset)
        return all(tp in self._positions for tp in self._assigned)

    def _start_fetches(self) -> None:
        assert self._fetchers is not None
        now_s = time.monotonic()
        for topic_partition in self._assigned:
            if topic_partition in self._fetches or self._buffers.get(topic_partition):
                continue
            if self._not_before.get(topic_partition, 0.0) > now_s:
                continue
            self._not_before.pop(topic_partition, None)
            offset = self._positions[topic_partition]
            max_bytes = self._max_bytes.get(topic_partition, self.fetch_max_bytes)
            future = self._fetchers.submit(
                self._metrics.timed(self._broker.fetch),
                topic_partition.topic,
                topic_partition.partition,
                offset,
                max_bytes,
                self.fetch_max_wait_ms,
                1,
            )
            self._fetches[topic_partition] = _Fetch(offset, future)

    def _collect(self) -> None:
        for topic_partition, fetch in list(self._fetches.items()):
            if not fetch.future.done():
                continue
            del self._fetches[topic_partition]
            if fetch.future.cancelled() or fetch.offset != self._positions.get(topic_partition):
                continue  # a seek happened meanwhile
            try:
                result = fetch.future.result()
            except OffsetOutOfRangeError:
                if self.auto_offset_reset == "none":
                    raise
                self._seek_to([topic_partition], self.auto_offset_reset)
                continue
            except TwinlogError as error:
                if error.retriable:  # fetched again after a growing pause
                    self._back_off(topic_partition, error)
                    continue
                raise
            self._fetched(topic_partition)
            self._buffer(topic_partition, fetch.offset, result)

    def _back_off(self, topic_partition: TopicPartition, error: TwinlogError) -> None:
        failures = self._failures[topic_partition] = self._failures.get(topic_partition, 0) + 1
        pause_s = self.retry.pause_ms(failures) / 1000
        self._not_before[topic_partition] = time.monotonic() + pause_s
        if not self._unreachable:
            self._unreachable = True
            log.warning(
                "fetching %s failed: %s: %s; retrying with backoff (up to %d ms) until it "
                "succeeds (logged once)",
                topic_partition,
                type(error).__name__,
                error,
                self.retry.backoff_max_ms,
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
                decoded = _records_of(batch, topic, partition)
            except InvalidRecordError:
                if records:
                    break  # hand out the records before it; the next fetch starts at it
                raise
            next_offset = batch.header.next_offset
            for record in decoded:
                if record.offset >= offset:
                    records.append(
                        ConsumerRecord(
                            topic,
                            partition,
                            record.offset,
                            record.key,
                            record.value,
                            record.headers,
                            record.timestamp_ms,
                        )
                    )
        if not records and next_offset > offset:
            # Whole batches without a record from ``offset`` on: compaction emptied them
            # (record offsets have gaps in a compacted log). Step over them, as Kafka's does.
            self._positions[topic_partition] = next_offset
        elif not records and result.records:
            # Only a partial batch came back: the next batch is larger than max_bytes.
            current = self._max_bytes.get(topic_partition, self.fetch_max_bytes)
            self._max_bytes[topic_partition] = current * 2
        if records:
            self._buffers[topic_partition] = records
        self._metrics.fetched(topic_partition, offset, result, records)

    def _drain(self) -> list[ConsumerRecord]:
        taken: list[ConsumerRecord] = []
        for topic_partition in self._assigned:
            buffer = self._buffers.get(topic_partition)
            while buffer and len(taken) < self.max_poll_records:
                record = buffer.popleft()
                taken.append(record)
                self._positions[topic_partition] = record.offset + 1
        return taken

    # --- group offsets ----------------------------------------------------------------------

    def _require_group(self, what: str) -> str:
        if not self.group_id:
            raise InvalidConfigError(f"{what} needs a group: pass group_id= to Consumer()")
        return self.group_id

    def commit(self, offsets: Mapping[Any, int] | None = None) -> None:
        """Store the group's offsets: the given ones, or the current positions."""
        group_id = self._require_group("commit()")
        if offsets is None:
            chosen = {tp: offset for tp, offset in self._positions.items()}
        else:
            chosen = {TopicPartition(*tp): int(offset) for tp, offset in offsets.items()}
        if chosen:
            call_with_retry(
                self.retry,
                lambda: self._broker.commit_offsets(group_id, chosen),
                "commit()",
                timeout_ms=self.default_api_timeout_ms,
            )

    def committed(self, partitions: Iterable[Any]) -> dict[TopicPartition, int | None]:
        """The group's committed offsets (None where there is none)."""
        group_id = self._require_group("committed()")
        chosen = as_topic_partitions(partitions)
        found = call_with_retry(
            self.retry,
            lambda: self._broker.fetch_offsets(group_id, chosen),
            "committed()",
            timeout_ms=self.default_api_timeout_ms,
        )
        return {tp: (None if found.get(tp, NO_OFFSET) == NO_OFFSET else found[tp]) for tp in chosen}

    # --- metrics ------------------------------------------------------------------------------

    def metrics(self) -> dict[str, dict[str, float]]:
        """kafka-python's consumer metrics (``client_metrics``): records and bytes consumed,
        fetch latency, the largest lag of an assigned partition."""
        return self._metrics.snapshot()

    # --- closing ------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise InvalidConfigError("the consumer is closed; create a new one")

    def close(self) -> None:
        """Stop fetching and release the connection. Idempotent; commits nothing."""
        if self._closed:
            return
        self._closed = True
        for fetch in self._fetches.values():
            fetch.future.cancel()
        self._fetches.clear()
        if self._lookup is not None:
            self._lookup.cancel()
            self._lookup = None
        if self._fetchers is not None:
            self._fetchers.shutdown(wait=False, cancel_futures=True)
        if self._owns_broker:
            self._broker.close()


def _records_of(batch: RecordBatch, topic: str, partition: int) -> list[Record]:
    """The batch's records; a batch whose records do not decode (written before the broker
    checked records at the door) raises InvalidRecordError naming where it is and where
    to seek to skip it."""
    try:
        return list(batch.records())
    except CorruptBatchError as error:
        header = batch.header
        raise InvalidRecordError(
            f"{topic}-{partition}: the batch at offset {header.base_offset} holds a record "
            f"that does not decode ({error}); seek to {header.next_offset} to skip its "
            f"{header.last_offset_delta + 1} offsets",
            topic=topic,
            partition=partition,
            offset=header.base_offset,
            record_index=getattr(error, "record_index", None),
            next_offset=header.next_offset,
        ) from None
