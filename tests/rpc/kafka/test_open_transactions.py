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


def test_a_followed_transaction_is_replaced_when_the_producer_begins_one_here() -> None:
    """A listener that learnt a producer's transaction from its coordinator elsewhere, and
    then becomes its coordinator, begins the next transaction instead of reusing it."""
    table = open_transactions.OpenTransactions()
    table.follow(7, 0, 100)
    assert table.current(7, 0) == 100
    table.follow(7, 0, 100)  # the same: kept with its first sequences
    assert table.first_sequence(7, 100, "t", 0, 5) == 5
    assert table.first_sequence(7, 100, "t", 0, 9) == 5
    table.follow(7, 0, 101)  # the coordinator began another
    assert table.first_sequence(7, 101, "t", 0, 9) == 9
    begun = []

    class Broker:
        def begin_transaction(self, producer_id: int, producer_generation: int) -> int:
            begun.append((producer_id, producer_generation))
            return 102

    assert table.ensure_open(Broker(), 7, 0) == 102  # type: ignore[arg-type]
    assert begun == [(7, 0)]
    table.follow(7, 0, None)  # nothing open at the coordinator
    assert table.current(7, 0) is None
