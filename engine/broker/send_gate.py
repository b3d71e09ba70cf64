"""A partition's gate for transactional sends, closed while its topic is deleted, or
while this broker's copy is dropped (a reassignment moved the partition away).

An open transaction's batches wait in the local data journal under the
partition's name until the transaction ends. Deleting the topic aborts the
open transactions that touch it; the gate makes that set final: once closed,
no send can journal another batch here, and closing waits for the sends
already past it, so the aborts that follow find and remove what they journaled.

Thread rule: any thread; one condition variable.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from twinlog.engine.base.errors import TwinlogError, UnknownTopicOrPartitionError


class SendGate:
    def __init__(self, where: str) -> None:
        self._where = where
        self._condition = threading.Condition()
        self._in_flight = 0
        self._refusal: Callable[[], TwinlogError] | None = None  # set: closed

    def _deleted(self) -> TwinlogError:
        return UnknownTopicOrPartitionError(
            f"{self._where} is being deleted (its topic's open transactions are "
            "aborted); nothing was journaled. Abort the transaction, and create the "
            "topic again if it is still wanted"
        )

    @contextmanager
    def send(self) -> Iterator[None]:
        """Hold the gate open for one send; raises the closer's error if closed
        (UnknownTopicOrPartitionError for a deletion)."""
        with self._condition:
            if self._refusal is not None:
                raise self._refusal()
            self._in_flight += 1
        try:
            yield
        finally:
            with self._condition:
                self._in_flight -= 1
                if self._in_flight == 0:
                    self._condition.notify_all()

    def close(self, refusal: Callable[[], TwinlogError] | None = None) -> None:
        """Refuse new sends with ``refusal()`` (default: the topic is being deleted);
        return once the sends in flight have finished."""
        with self._condition:
            self._refusal = refusal or self._deleted
            self._condition.wait_for(lambda: self._in_flight == 0)

    def reopen(self) -> None:
        """Undo ``close`` (the deletion was refused)."""
        with self._condition:
            self._refusal = None
