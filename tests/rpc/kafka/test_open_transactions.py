"""The listener's table of Kafka producers' open transactions stays bounded."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from twinlog.rpc.kafka import open_transactions


def test_open_transactions_of_silent_producers_are_pruned(monkeypatch: Any) -> None:
    class Coordinator:
        def __init__(self) -> None:
            self.next_id = 100
            self.in_flight: set[int] = set()

        def begin_transaction(self, producer_id: int, producer_generation: int) -> int:
            self.next_id += 1
            self.in_flight.add(self.next_id)
            return self.next_id

        def list_transactions(self) -> list[Any]:
            return [SimpleNamespace(transaction_id=t) for t in sorted(self.in_flight)]

    monkeypatch.setattr(open_transactions, "ENTRIES_PRUNE_AT", 3)
    coordinator = Coordinator()
    table = open_transactions.OpenTransactions()
    for producer_id in range(3):
        table.ensure_open(coordinator, producer_id, 0)  # type: ignore[arg-type]
    coordinator.in_flight.discard(101)  # producer 0's transaction timed out
    table.ensure_open(coordinator, 3, 0)  # type: ignore[arg-type]
    assert len(table) == 3
    assert table.current(0, 0) is None and table.current(1, 0) == 102
