"""The cluster client's memory of where each transaction coordinator is: ``CoordinatorCache``.

Kept per coordinator partition N (the ``__txn_journal`` partition coordinator N leads),
as FindCoordinator last named it: every key of N then goes to the same broker, and one
answer serves them all. A key's partition never changes in a cluster's life:

    producer or transaction id   its low bits (``coordinator_partition_of``), known here
    transactional id             the partition FindCoordinator answered for it, kept
                                 (at most ``TRANSACTIONAL_IDS_MAX``)

So after ``init_producer(transactional_id)`` found coordinator N, the producer id it
returned (whose low bits are N) is routed to the same broker without asking again.

``forget(partition, address)`` drops N's broker when a call met NotCoordinatorError or
an unreachable broker there; only if N still points at that address, so that an answer
another thread found meanwhile is kept.

Thread rule: any thread; one lock.
"""

from __future__ import annotations

import threading

from twinlog.engine.broker.partition_calls import coordinator_partition_of
from twinlog.rpc.wire.broker_api import (
    NO_COORDINATOR_PARTITION,
    CoordinatorKeyType,
    FoundCoordinator,
)

TRANSACTIONAL_IDS_MAX = 4_096  # a client with more starts forgetting (and asks again)


class CoordinatorCache:
    def __init__(self, transactional_ids_max: int = TRANSACTIONAL_IDS_MAX) -> None:
        self.transactional_ids_max = transactional_ids_max
        self._lock = threading.Lock()
        self._addresses: dict[int, str] = {}  # coordinator partition -> broker address
        self._partitions: dict[str, int] = {}  # transactional id -> coordinator partition

    def partition_of(self, key_type: CoordinatorKeyType, key: str) -> int | None:
        """The key's coordinator partition, when known without asking."""
        if key_type is CoordinatorKeyType.PRODUCER_ID:
            return coordinator_partition_of(int(key))
        if key_type is CoordinatorKeyType.TRANSACTION:
            with self._lock:
                return self._partitions.get(key)
        return None

    def address_of(self, partition: int | None) -> str | None:
        if partition is None:
            return None
        with self._lock:
            return self._addresses.get(partition)

    def learn(self, key_type: CoordinatorKeyType, key: str, found: FoundCoordinator) -> None:
        partition = found.coordinator_partition
        if partition == NO_COORDINATOR_PARTITION:
            return  # nothing to keep it under
        with self._lock:
            self._addresses[partition] = found.broker.address
            if key_type is CoordinatorKeyType.TRANSACTION:
                if len(self._partitions) >= self.transactional_ids_max:
                    self._partitions.pop(next(iter(self._partitions)))  # the oldest
                self._partitions[key] = partition

    def forget(self, partition: int | None, address: str) -> None:
        if partition is None:
            return
        with self._lock:
            if self._addresses.get(partition) == address:
                del self._addresses[partition]

    def known(self) -> dict[int, str]:
        """Every coordinator partition's broker, as now known (a copy)."""
        with self._lock:
            return dict(self._addresses)
