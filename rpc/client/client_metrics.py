"""``Producer.metrics()`` and ``Consumer.metrics()``: counters as kafka-python names them.

    producer.metrics()["producer-metrics"]["record-send-total"]
    consumer.metrics()["consumer-fetch-manager-metrics"]["records-lag-max"]

Producer (group ``producer-metrics``):

    record-send-total       records acknowledged by the broker
    record-error-total      records whose send failed for good (their futures raised)
    request-total           produce requests sent (a flush's batches to one broker in
                            one request count once; a retry counts again)
    request-latency-avg/max ms from a batch's produce request sent to its answer, per batch
    batch-size-avg/max      bytes of the record batches sent
    buffer-total-bytes      buffer_bytes_max
    buffer-available-bytes  what the buffer can still take before send() blocks

Consumer (group ``consumer-fetch-manager-metrics``):

    records-consumed-total  records fetched for poll() to return
    bytes-consumed-total    record bytes fetched
    fetch-total             fetches answered
    fetch-latency-avg/max   ms of a fetch (a long poll waits up to fetch_max_wait_ms)
    records-lag-max         the largest lag of an assigned partition at its last fetch:
                            log end offset - the position after what was fetched

Averages and maxima are over the client's life (kafka-python's are over a window).
Thread rule: any thread; one lock per object.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

from twinlog.engine.base.types import FetchResult, ProduceResult, TopicPartition
from twinlog.engine.records.batch_format import NO_PARTITION_LEADER_EPOCH, NO_TRANSACTION_ID
from twinlog.rpc.client.accumulator import ProducerBatch
from twinlog.rpc.client.produce_stream import BatchToSend, ProducePipe

Result = TypeVar("Result")


class Mean:
    """Count, average and maximum of a figure. Not thread-safe: its owner locks."""

    __slots__ = ("count", "maximum", "total")

    def __init__(self) -> None:
        self.count = 0
        self.total = 0.0
        self.maximum = 0.0

    def add(self, value: float) -> None:
        self.count += 1
        self.total += value
        self.maximum = max(self.maximum, value)

    @property
    def average(self) -> float:
        return self.total / self.count if self.count else 0.0


class ProducerMetrics:
    def __init__(self, buffer_bytes_max: int, buffered_bytes: Callable[[], int]) -> None:
        self._lock = threading.Lock()
        self._buffer_bytes_max = buffer_bytes_max
        self._buffered_bytes = buffered_bytes
        self.records_sent = 0
        self.records_failed = 0
        self.request_latency_ms = Mean()
        self.batch_size_bytes = Mean()
        self._requests_sent: Callable[[], int] = lambda: 0  # the measured pipe's count

    def watch(self, batch: ProducerBatch) -> None:
        """Count ``batch``'s records when it is acknowledged or fails (call once per batch).

        A future keeps its callbacks for as long as it lives, and every record's future
        holds its batch's result: the callback lets go of the batch once it has counted
        it, or an application holding its futures would hold every batch's bytes too."""
        held = [batch]

        def counted(done: Future[int]) -> None:
            self._batch_done(held.pop(), done)

        batch.result.add_done_callback(counted)

    def _batch_done(self, batch: ProducerBatch, done: Future[int]) -> None:
        failed = done.cancelled() or done.exception() is not None
        with self._lock:
            if failed:
                self.records_failed += batch.record_count
            else:
                self.records_sent += batch.record_count

    def measure(self, pipe: ProducePipe) -> ProducePipe:
        """``pipe``, timing each batch's request, counting its bytes, and its requests."""
        self._requests_sent = lambda: pipe.requests_sent
        return MeasuredPipe(pipe, self)

    def requested(self, size_bytes: int) -> None:
        with self._lock:
            self.batch_size_bytes.add(size_bytes)

    def answered(self, latency_ms: float) -> None:
        with self._lock:
            self.request_latency_ms.add(latency_ms)

    def snapshot(self) -> dict[str, dict[str, float]]:
        # Read before the lock: a pipe may fail a future, whose callback takes this lock,
        # while it holds its own.
        requests_sent = self._requests_sent()
        with self._lock:
            figures: dict[str, float] = {
                "record-send-total": self.records_sent,
                "record-error-total": self.records_failed,
                "request-total": requests_sent,
                "request-latency-avg": self.request_latency_ms.average,
                "request-latency-max": self.request_latency_ms.maximum,
                "batch-size-avg": self.batch_size_bytes.average,
                "batch-size-max": self.batch_size_bytes.maximum,
            }
        figures["buffer-total-bytes"] = self._buffer_bytes_max
        figures["buffer-available-bytes"] = max(0, self._buffer_bytes_max - self._buffered_bytes())
        return {"producer-metrics": figures}


class MeasuredPipe:
    """A ProducePipe that tells ProducerMetrics of every request and answer."""

    def __init__(self, pipe: ProducePipe, metrics: ProducerMetrics) -> None:
        self._pipe = pipe
        self._metrics = metrics

    def submit(
        self,
        topic: str,
        partition: int,
        batch: bytes,
        transaction_id: int = NO_TRANSACTION_ID,
        current_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    ) -> Future[ProduceResult]:
        self._metrics.requested(len(batch))
        started_s = time.monotonic()
        future = self._pipe.submit(topic, partition, batch, transaction_id, current_leader_epoch)
        future.add_done_callback(
            lambda _: self._metrics.answered((time.monotonic() - started_s) * 1000)
        )
        return future

    def submit_all(self, batches: Sequence[BatchToSend]) -> list[Future[ProduceResult]]:
        for sent in batches:
            self._metrics.requested(len(sent.batch))
        started_s = time.monotonic()
        futures = self._pipe.submit_all(batches)
        for future in futures:
            future.add_done_callback(
                lambda _: self._metrics.answered((time.monotonic() - started_s) * 1000)
            )
        return futures

    @property
    def requests_sent(self) -> int:
        return self._pipe.requests_sent

    def close(self, timeout_s: float | None = None) -> None:
        self._pipe.close(timeout_s)


class ConsumerMetrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.records_consumed = 0
        self.bytes_consumed = 0
        self.fetch_latency_ms = Mean()
        self._lags: dict[TopicPartition, int] = {}

    def timed(self, call: Callable[..., Result]) -> Callable[..., Result]:
        """``call``, its duration counted as a fetch's latency when it returns."""

        def timed_call(*arguments: Any) -> Result:
            started_s = time.monotonic()
            result = call(*arguments)
            with self._lock:
                self.fetch_latency_ms.add((time.monotonic() - started_s) * 1000)
            return result

        return timed_call

    def fetched(
        self,
        topic_partition: TopicPartition,
        offset: int,
        result: FetchResult,
        records: Sequence[Any],
    ) -> None:
        """A fetch from ``offset`` brought ``result``, of which ``records`` go to poll()."""
        position = records[-1].offset + 1 if records else offset
        with self._lock:
            self.records_consumed += len(records)
            self.bytes_consumed += len(result.records)
            self._lags[topic_partition] = max(0, result.log_end_offset - position)

    def forget(self, topic_partition: TopicPartition) -> None:
        """No longer assigned (or sought): its lag is no longer known."""
        with self._lock:
            self._lags.pop(topic_partition, None)

    def snapshot(self) -> dict[str, dict[str, float]]:
        with self._lock:
            return {
                "consumer-fetch-manager-metrics": {
                    "records-consumed-total": self.records_consumed,
                    "bytes-consumed-total": self.bytes_consumed,
                    "fetch-total": self.fetch_latency_ms.count,
                    "fetch-latency-avg": self.fetch_latency_ms.average,
                    "fetch-latency-max": self.fetch_latency_ms.maximum,
                    "records-lag-max": max(self._lags.values(), default=0),
                }
            }
