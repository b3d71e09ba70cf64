"""A write task's batches produced on a second thread, in the order they were built.

Without it a task took turns: encode a batch, wait for its produce (the broker
journals and fsyncs it), encode the next. With one batch queued ahead, the task
encodes the next batch while the broker writes the last one. One thread, one FIFO:
the batches of a partition reach the broker in sequence order, as the broker checks.

Thread rule: ``submit``, ``drain`` and ``close`` from the task's thread only.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from twinlog.engine.base.types import TopicPartition

QUEUED_BATCHES_MAX = 2  # memory: this many batches wait beside the one being sent
_DONE = None

Batch = TypeVar("Batch")  # what ``produce`` takes: the batch's bytes, or their future


class InOrderSender(Generic[Batch]):
    def __init__(self, produce: Callable[[TopicPartition, Batch], None]) -> None:
        self._produce = produce
        self._queue: queue.Queue[tuple[TopicPartition, Batch] | None] = queue.Queue(
            QUEUED_BATCHES_MAX
        )
        self._error: BaseException | None = None
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="twinlog-task-sender", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _DONE:
                return
            if self._error is not None or self._stopping.is_set():
                continue  # failed or closing: drop the rest, the attempt will not commit
            target, batch = item
            try:
                self._produce(target, batch)
            except BaseException as error:  # handed to the task's thread in submit/drain
                self._error = error

    def _raise_error(self) -> None:
        if self._error is not None:
            raise self._error

    def submit(self, target: TopicPartition, batch: Batch) -> None:
        """Queue ``batch``; blocks while ``QUEUED_BATCHES_MAX`` wait. Raises the error of
        an earlier batch's produce, if one failed."""
        self._raise_error()
        self._queue.put((target, batch))

    def drain(self) -> None:
        """Wait until every submitted batch is produced; raise the first failure."""
        if self._thread.is_alive():
            self._queue.put(_DONE)
            self._thread.join()
        self._raise_error()

    def close(self) -> None:
        """Stop without producing what is still queued (the task failed). Idempotent.
        Waits for the produce in progress, which its own retry deadline bounds."""
        if self._thread.is_alive():
            self._stopping.set()
            self._queue.put(_DONE)
            self._thread.join()
