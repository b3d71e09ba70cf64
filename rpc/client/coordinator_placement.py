"""Does a producer's transaction coordinator lead the partitions it is about to write?

Kafka's producer adds a transaction's partitions to it (AddPartitionsToTxn) before it
sends their first batches. Twinlog's does so to save the partitions' leaders one
ADD_PARTITIONS write each at a coordinator on another broker, which on a cluster is
a replicated write and a call between brokers apiece (RF 3, 4 producers: 72 against
77-80 ms of the brokers' CPU per transaction with it). Where the coordinator leads every
one of those partitions (a single node always), each first batch registers its
partition there at no call's cost and their writes share one journal sync, so the
request itself is the cost: one node at 8 producers committed 95-98 transactions a
second with it against 105-114 without (``python -m bench.scale``, two runs each).

A client that can tell (``ClusterBroker``, ``RemoteBroker``) says so here; one that
cannot (an embedded ``Broker``: a local call) adds the partitions first, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from twinlog.engine.base.types import TopicPartition


@runtime_checkable
class CoordinatorPlacement(Protocol):
    def coordinator_leads(self, producer_id: int, partitions: Sequence[TopicPartition]) -> bool:
        """True if the coordinator of ``producer_id``'s transactions is, as far as this
        client knows now, the broker leading every one of ``partitions``; False when it
        is not or cannot be told (then adding them first is the safe choice)."""
        ...
