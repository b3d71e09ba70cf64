"""Per-record futures that share their batch's completion (Kafka's FutureRecordMetadata).

A producer may send hundreds of thousands of records a second; a
``concurrent.futures.Future`` per record (a lock and a condition each, resolved one
by one) would cost more than encoding the record. A ``RecordFuture`` is a small
object pointing at its batch's single ``BatchResult`` plus its place in the batch.

Thread rule: any thread may wait on or inspect a RecordFuture; callbacks run on the
thread that completes the batch (the client's I/O thread) and must not block.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future

from twinlog.rpc.client.records import RecordMetadata

BatchResult = Future  # resolved with the batch's base offset (-1 when unknown), or an error


class RecordFuture:
    __slots__ = ("_batch", "offset_delta", "partition", "timestamp_ms", "topic", "transactional")

    def __init__(
        self,
        batch: Future[int],
        topic: str,
        partition: int,
        offset_delta: int,
        timestamp_ms: int,
        transactional: bool = False,
    ) -> None:
        self._batch = batch
        self.topic = topic
        self.partition = partition
        self.offset_delta = offset_delta
        self.timestamp_ms = timestamp_ms
        self.transactional = transactional  # its offset is known only after apply

    def __repr__(self) -> str:
        state = "done" if self._batch.done() else "pending"
        return f"<RecordFuture {self.topic}-{self.partition} #{self.offset_delta} {state}>"

    def _metadata(self, base_offset: int) -> RecordMetadata:
        offset = base_offset + self.offset_delta if base_offset >= 0 else -1
        pending = self.transactional and offset < 0
        return RecordMetadata(self.topic, self.partition, offset, self.timestamp_ms, pending)

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """Where the record went; raises the send's error, or TimeoutError."""
        return self._metadata(self._batch.result(timeout))

    def exception(self, timeout: float | None = None) -> BaseException | None:
        return self._batch.exception(timeout)

    def done(self) -> bool:
        return self._batch.done()

    def add_done_callback(self, callback: Callable[[RecordFuture], object]) -> None:
        self._batch.add_done_callback(lambda _: callback(self))
