"""A partition's gate for the appends of each open transaction, frozen at its count.

Rule J3 (CLUSTER.md section 3.4): a transactional batch that passed its checks is
either in the entry count its commit records, or refused; never acknowledged and
then left out of the copy. Each append of T holds T's gate open while it journals;
``freeze`` (count_entries, APPLY) shuts it and waits for the appends already
inside, so the count read after it is final. The gate also caches T's
registration with its coordinator (producer id, generation), so only the first
batch of T here asks the coordinator.

A batch of a frozen T asks the coordinator again (``register_partition``): it
refuses while it counts and once it decided; if the decision failed (its
journal write did, say on a full disk), T is open again and the batch ``thaw``s
the gate. A thaw loses to any freeze that came after the batch looked.

An entry lives from T's first append (or its freeze) until APPLY forgets it; a
refused first append leaves nothing behind.

A batch that does not name its transaction (Kafka's protocol has no field for it) is
T's when an entry here was registered for its producer generation and is not frozen
(``open_transaction_of``): every end of T (commit, abort, a timeout's or a fenced
producer's abort) freezes T on each partition registered with it before the decision
is written, so an entry registered and not frozen is a transaction its coordinator
still has open. Only the first batch of T here asks the coordinator which it is.

Thread rule: any thread; one condition variable per partition.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass(slots=True)
class GateEntry:
    in_flight: int = 0
    frozen: bool = False
    freezes: int = 0  # how many freezes this entry has seen (a thaw names the one it undoes)
    registered: tuple[int, int] | None = None  # (producer id, generation) the coordinator took
    groups: set[str] = field(default_factory=set)  # groups whose offsets it recorded (ADD_OFFSETS)
    # Held by one append of T at a time from its sequence check until the tracker has
    # recorded it: a retry racing its original then finds it recorded (a duplicate),
    # as Kafka checks and appends under the log's lock.
    append_lock: threading.Lock = field(default_factory=threading.Lock)


class TransactionGate:
    def __init__(self, where: str) -> None:
        self._where = where
        self._condition = threading.Condition()
        self._entries: dict[int, GateEntry] = {}
        # (producer id, generation) -> the transaction whose entry it registered: at most
        # one open transaction per producer generation, so the newest registration wins
        self._registered_by: dict[tuple[int, int], int] = {}

    @contextmanager
    def appending(self, transaction_id: int) -> Iterator[GateEntry]:
        """Hold T's gate for one append: a freeze waits until it is released. The caller
        asks the coordinator before appending if ``frozen_at`` says T is frozen."""
        with self._condition:
            entry = self._entries.setdefault(transaction_id, GateEntry())
            entry.in_flight += 1
        try:
            yield entry
        finally:
            with self._condition:
                entry.in_flight -= 1
                if entry.in_flight == 0:
                    self._condition.notify_all()
                    if entry.registered is None and not entry.frozen:
                        self._drop(transaction_id)  # refused before registering

    def mark_registered(
        self, transaction_id: int, entry: GateEntry, sender: tuple[int, int]
    ) -> None:
        """T's coordinator accepted ``sender``'s registration of this partition."""
        with self._condition:
            entry.registered = sender
            self._registered_by[sender] = transaction_id

    def open_transaction_of(self, sender: tuple[int, int]) -> int | None:
        """The transaction ``sender`` (producer id, generation) registered here and nobody
        has frozen, or None: then only its coordinator knows."""
        with self._condition:
            transaction_id = self._registered_by.get(sender)
            if transaction_id is None:
                return None
            entry = self._entries.get(transaction_id)
            if entry is None or entry.frozen or entry.registered != sender:
                return None
            return transaction_id

    def _drop(self, transaction_id: int) -> None:
        """Remove T's entry and its registration index. Under ``_condition``."""
        entry = self._entries.pop(transaction_id, None)
        if entry is not None and entry.registered is not None:
            if self._registered_by.get(entry.registered) == transaction_id:
                del self._registered_by[entry.registered]

    def freeze(self, transaction_id: int) -> None:
        """Mark T frozen; return once the appends in progress have finished."""
        with self._condition:
            entry = self._entries.setdefault(transaction_id, GateEntry())
            entry.frozen = True
            entry.freezes += 1
            self._condition.wait_for(lambda: entry.in_flight == 0)

    def frozen_at(self, entry: GateEntry) -> int | None:
        """The freeze ``entry`` is under (its count), or None if it is not frozen."""
        with self._condition:
            return entry.freezes if entry.frozen else None

    def thaw(self, entry: GateEntry, freezes: int) -> None:
        """Undo freeze number ``freezes`` (the coordinator took the batch: T is open and
        not being decided); a later freeze stays."""
        with self._condition:
            if entry.freezes == freezes:
                entry.frozen = False

    def forget(self, transaction_id: int) -> None:
        """Drop T's entry after APPLY: a later batch of T asks the coordinator again,
        which refuses it (and the journal refuses an applied or aborted T too)."""
        with self._condition:
            entry = self._entries.get(transaction_id)
            if entry is not None and entry.in_flight == 0:
                self._drop(transaction_id)

    def open_count(self) -> int:
        """Transactions with an entry here (for tests and figures)."""
        with self._condition:
            return len(self._entries)
