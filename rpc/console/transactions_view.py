"""The Transactions page: the transactions in flight (producer, state, age, timeout,
partitions), and the admin abort (``Admin.abort_transaction``: its records are never read).

The broker answers no count of the transactions it finished; the console counts those it
has seen leave the list (committed or aborted, it cannot tell which) and the aborts it
made itself, since it started, and with ``--metrics`` shows how many commits the brokers'
coordinators decided since they started (aborts are counted nowhere).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from twinlog.engine.base.types import TransactionDescription
from twinlog.rpc.console.problems import Problem, attempt
from twinlog.rpc.console.session import ClusterSession


@dataclass(frozen=True)
class TransactionRow:
    transaction_id: int
    transactional_id: str
    producer: str  # id/generation
    state: str
    age_s: float
    timeout_s: float
    partitions: tuple[str, ...]
    groups: tuple[str, ...]

    @property
    def overdue(self) -> bool:
        return self.age_s > self.timeout_s


@dataclass
class TransactionsView:
    rows: list[TransactionRow] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    finished_seen: int = 0
    aborted_here: int = 0
    commits_decided: int | None = None  # from the brokers' metrics (None: not given)


class TransactionTally:
    """What the console saw finish since it started. Thread rule: any thread."""

    def __init__(self) -> None:
        self._open: set[int] = set()
        self.finished_seen = 0
        self.aborted_here = 0
        self._lock = threading.Lock()

    def saw(self, transaction_ids: set[int]) -> None:
        with self._lock:
            self.finished_seen += len(self._open - transaction_ids)
            self._open = set(transaction_ids)

    def aborted(self) -> None:
        with self._lock:
            self.aborted_here += 1


def row_of(item: TransactionDescription, now_ms: int) -> TransactionRow:
    return TransactionRow(
        item.transaction_id,
        item.transactional_id,
        f"{item.producer_id}/{item.producer_generation}",
        item.state.value,
        item.age_ms(now_ms) / 1000,
        item.timeout_ms / 1000,
        tuple(f"{tp.topic}-{tp.partition}" for tp in item.partitions),
        item.groups,
    )


def build_transactions(session: ClusterSession, tally: TransactionTally) -> TransactionsView:
    view = TransactionsView()
    with session.bounded():
        found = attempt(session.admin.list_transactions, "the transactions", view.problems)
        if session.target.metrics is not None:
            view.commits_decided = session.target.metrics.commits_decided(view.problems)
    now_ms = time.time_ns() // 1_000_000
    if found is not None:
        view.rows = sorted((row_of(item, now_ms) for item in found), key=lambda row: -row.age_s)
        tally.saw({item.transaction_id for item in found})
    view.finished_seen, view.aborted_here = tally.finished_seen, tally.aborted_here
    return view


def find_transaction(session: ClusterSession, transaction_id: int) -> TransactionRow | None:
    """The transaction to confirm an abort of; None when it is no longer in flight."""
    with session.bounded():
        found = session.admin.list_transactions()
    now_ms = time.time_ns() // 1_000_000
    for item in found:
        if item.transaction_id == transaction_id:
            return row_of(item, now_ms)
    return None


def abort_transaction(
    session: ClusterSession, transaction_id: int, tally: TransactionTally
) -> None:
    with session.bounded():
        session.admin.abort_transaction(transaction_id)
    tally.aborted()
