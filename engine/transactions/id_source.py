"""Where producer ids and transaction ids come from: ``IdSource``.

Shaped like Kafka's ProducerIdManager: ids are handed out from blocks, and a
block is reserved durably (a local file today, ``id_blocks/<kind>`` in ZooKeeper by
a conditional write in a cluster) before its first id is used. So ids of a kind
only increase, also across restarts and, in a cluster, across the brokers that
take turns as a coordinator; a restart skips what was unused of its last block.

Kinds: "producer_id" and "transaction_id". The coordinator adds its partition in
the low bits (``twinlog.engine.transactions.coordinator``), so each source id is used once.
"""

from __future__ import annotations

from typing import Protocol

ID_KINDS = ("producer_id", "transaction_id")


class IdSource(Protocol):
    """Thread-safe: any thread may call either method."""

    def next(self, kind: str) -> int:
        """The next id of ``kind``: above every id of that kind handed out before."""
        ...

    def peek(self, kind: str) -> int:
        """The id ``next(kind)`` would return now (a low watermark when nothing is open)."""
        ...
