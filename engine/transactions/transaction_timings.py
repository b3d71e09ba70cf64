"""How long commits take: the two waits a transactional producer's records go through.

    commit  from a commit request reaching its coordinator to its decision being
            durable (PREPARE_COMMIT fsynced): what ``commit_transaction()`` waits for
    apply   from that decision to COMMITTED: every partition's copier has applied
            the transaction, so its records are readable

A broker shares one ``TransactionTimings`` among its coordinators; a server exports
the histograms (``twinlog.rpc.server.metrics``). Monotonic clock: a wall-clock jump
does not show up as a slow commit.

Thread rule: the histograms take any thread; the pending map has its own lock.
"""

from __future__ import annotations

import threading
import time

from twinlog.engine.base.latency_histogram import LatencyHistogram
from twinlog.journal.txn_records import Aborted, Committed, CoordinatorRecord, PrepareCommit


class TransactionTimings:
    def __init__(self) -> None:
        self.commit = LatencyHistogram()
        self.apply = LatencyHistogram()
        self._lock = threading.Lock()
        self._decided_s: dict[int, float] = {}  # transaction id -> when its commit was durable

    def journaled(self, record: CoordinatorRecord) -> None:
        """A coordinator journaled ``record``: start or end an apply time."""
        if isinstance(record, PrepareCommit):
            self.decided(record.transaction_id)
        elif isinstance(record, Committed):
            self.applied(record.transaction_id)
        elif isinstance(record, Aborted):
            self.forget(record.transaction_id)

    def decided(self, transaction_id: int) -> None:
        """PREPARE_COMMIT of ``transaction_id`` is durable: its apply time starts now."""
        with self._lock:
            self._decided_s[transaction_id] = time.monotonic()

    def applied(self, transaction_id: int) -> None:
        """COMMITTED of ``transaction_id`` is durable; a transaction whose decision this
        process did not see (replayed at start-up) is not counted."""
        with self._lock:
            decided_s = self._decided_s.pop(transaction_id, None)
        if decided_s is not None:
            self.apply.observe(time.monotonic() - decided_s)

    def forget(self, transaction_id: int) -> None:
        """The transaction ended otherwise (aborted): stop waiting for its apply."""
        with self._lock:
            self._decided_s.pop(transaction_id, None)
