"""The cluster client's memory of where each coordinator is: ``CoordinatorCache``.

Kept per coordinator partition, as FindCoordinator last named it: every key of a
partition then goes to the same broker, and one answer serves them all. Two numberings,
kept apart (partition 3 of one is not partition 3 of the other):

    transaction coordinators   N: the ``__txn_journal`` partition coordinator N leads
    group coordinators         N: the ``__consumer_offsets`` partition whose leader
                               keeps the group's offsets

A key's partition never changes in a cluster's life:

    producer or transaction id   its low bits (``coordinator_partition_of``), known here
    transactional id             the partition FindCoordinator answered for it, kept
                                 (at most ``TRANSACTIONAL_IDS_MAX``)
    group id                     likewise (at most ``GROUP_IDS_MAX``)

So after ``init_producer(transactional_id)`` found coordinator N, the producer id it
returned (whose low bits are N) is routed to the same broker without asking again.

``forget(key_type, partition, address)`` drops a partition's broker when a call met
NotCoordinatorError or an unreachable broker there; only if it still points at that
address, so that an answer another thread found meanwhile is kept.

Thread rule: any thread; one lock.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from twinlog.engine.transactions.partition_calls import coordinator_partition_of
from twinlog.rpc.wire.broker_api import (
    NO_COORDINATOR_PARTITION,
    CoordinatorKeyType,
    FoundCoordinator,
)

TRANSACTIONAL_IDS_MAX = 4_096  # a client with more starts forgetting (and asks again)
GROUP_IDS_MAX = 4_096


@dataclass
class _Numbering:
    """The coordinators of one numbering: each partition's broker, and the partitions of
    the keys that had to be asked for (the oldest forgotten past ``keys_max``)."""

    keys_max: int
    addresses: dict[int, str] = field(default_factory=dict)  # partition -> broker address
    partitions: dict[str, int] = field(default_factory=dict)  # key -> partition


class CoordinatorCache:
    def __init__(
        self,
        transactional_ids_max: int = TRANSACTIONAL_IDS_MAX,
        group_ids_max: int = GROUP_IDS_MAX,
    ) -> None:
        self._lock = threading.Lock()
        self._transactions = _Numbering(transactional_ids_max)
        self._groups = _Numbering(group_ids_max)

    def _numbering(self, key_type: CoordinatorKeyType) -> _Numbering:
        return self._groups if key_type is CoordinatorKeyType.GROUP else self._transactions

    def partition_of(self, key_type: CoordinatorKeyType, key: str) -> int | None:
        """The key's coordinator partition, when known without asking."""
        if key_type is CoordinatorKeyType.PRODUCER_ID:
            return coordinator_partition_of(int(key))
        with self._lock:
            return self._numbering(key_type).partitions.get(key)

    def address_of(self, key_type: CoordinatorKeyType, partition: int | None) -> str | None:
        """The broker of coordinator ``partition`` of ``key_type``'s numbering, if known."""
        if partition is None:
            return None
        with self._lock:
            return self._numbering(key_type).addresses.get(partition)

    def learn(self, key_type: CoordinatorKeyType, key: str, found: FoundCoordinator) -> None:
        partition = found.coordinator_partition
        if partition == NO_COORDINATOR_PARTITION:
            return  # nothing to keep it under
        with self._lock:
            numbering = self._numbering(key_type)
            numbering.addresses[partition] = found.broker.address
            if key_type is not CoordinatorKeyType.PRODUCER_ID:
                names = numbering.partitions
                if key not in names and len(names) >= numbering.keys_max:
                    names.pop(next(iter(names)))  # the oldest
                names[key] = partition

    def forget(self, key_type: CoordinatorKeyType, partition: int | None, address: str) -> None:
        if partition is None:
            return
        with self._lock:
            addresses = self._numbering(key_type).addresses
            if addresses.get(partition) == address:
                del addresses[partition]

    def known(self, key_type: CoordinatorKeyType) -> dict[int, str]:
        """Every coordinator partition's broker of ``key_type``'s numbering, as now known
        (a copy)."""
        with self._lock:
            return dict(self._numbering(key_type).addresses)
