"""K transactions left open at one coordinator, as K stalled producers would leave them.

Each is a ``Producer`` with its own transactional id (all owned by the same
coordinator): ``init_transactions()``, ``begin_transaction()``, one record, ``flush()``,
and no commit. The producers share one cluster client (``ClusterBroker`` on the
bootstrap list), a few open them at once, and all but a sample are closed once their
record is acknowledged: closing a producer leaves its transaction open at the
coordinator until its timeout (the largest the coordinator takes, 15 minutes, so none
expires during the phase unless opening them all takes most of it: the phase then
stops). The sample is committed after the failover, through the new coordinator.

``abort_rest`` ends the others with the admin abort, so the phases that follow meet a
coordinator without a backlog of open transactions.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeoutError
from dataclasses import dataclass

from bench.cluster.waiting import BenchTimeoutError
from twinlog.engine.base.errors import TwinlogError
from twinlog.engine.base.types import TransactionState
from twinlog.engine.broker.config import BrokerConfig
from twinlog.rpc.client import Producer
from twinlog.rpc.client.cluster import ClusterBroker
from twinlog.rpc.client.connection_options import ConnectionOptions
from twinlog.rpc.client.remote import RemoteBroker

OPENERS = 8  # producers opened at once (each is a few journal writes, replicated)
CLOSE_TIMEOUT_MS = 5_000
# The largest timeout the bench's brokers accept: their default transaction_timeout_ms_max
# (15 minutes, Kafka's transaction.max.timeout.ms).
OPEN_TRANSACTION_TIMEOUT_MS = BrokerConfig().transaction_timeout_ms_max


@dataclass(frozen=True)
class OpenTransaction:
    transactional_id: str
    transaction_id: int


@dataclass(frozen=True)
class StillOpen:
    listed: int  # of ours, listed by the new coordinator's broker (any state)
    ongoing: int  # of those, still ONGOING (neither committed nor aborted by the failover)


class OpenTransactions:
    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        payload: bytes,
        timeout_s: float,
        sample: int,
    ) -> None:
        self.topic = topic
        self.partitions = partitions
        self.payload = payload
        self.timeout_ms = round(timeout_s * 1000)
        self.sample = sample
        self.client = ClusterBroker(
            bootstrap, ConnectionOptions(request_timeout_ms=self.timeout_ms)
        )
        self.opened: list[OpenTransaction] = []
        self._kept: dict[int, Producer] = {}  # transaction id -> its producer (the sample)
        self._lock = threading.Lock()

    def open(self, transactional_ids: Sequence[str], budget_s: float) -> float:
        """Open one transaction per id; the seconds it took. Raises the first failure, and
        BenchTimeoutError when opening them all takes more than ``budget_s``."""
        started_s = time.monotonic()
        deadline_s = started_s + budget_s
        pool = ThreadPoolExecutor(OPENERS, thread_name_prefix="bench-open-txn")
        try:
            pending = [
                pool.submit(self._open_one, index, transactional_id)
                for index, transactional_id in enumerate(transactional_ids)
            ]
            for future in pending:
                try:
                    found = future.result(timeout=max(0.0, deadline_s - time.monotonic()))
                except FutureTimeoutError:
                    raise BenchTimeoutError(
                        f"opening {len(transactional_ids):,} transactions took more than "
                        f"{budget_s:.0f} s ({len(self.opened):,} open): the first would time "
                        f"out ({OPEN_TRANSACTION_TIMEOUT_MS / 1000:.0f} s) before the failover "
                        "is measured; open fewer"
                    ) from None
                self.opened.append(found)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)  # after a failure: no more opened
        return time.monotonic() - started_s

    def _open_one(self, index: int, transactional_id: str) -> OpenTransaction:
        producer = Producer(
            self.client,
            transactional_id=transactional_id,
            compression="none",
            linger_ms=0,
            transaction_timeout_ms=OPEN_TRANSACTION_TIMEOUT_MS,
            default_api_timeout_ms=self.timeout_ms,
        )
        keep = False
        try:
            producer.init_transactions()
            transaction_id = producer.begin_transaction()
            future = producer.send(self.topic, self.payload, partition=index % self.partitions)
            producer.flush(self.timeout_ms)
            error = future.exception(timeout=0)
            if error is not None:
                raise RuntimeError(
                    f"transaction {transactional_id!r}: its record was not acknowledged: {error!r}"
                ) from error
            with self._lock:
                keep = len(self._kept) < self.sample
                if keep:
                    self._kept[transaction_id] = producer
            return OpenTransaction(transactional_id, transaction_id)
        finally:
            if not keep:
                producer.close(CLOSE_TIMEOUT_MS)

    def still_open_at(self, address: str) -> StillOpen:
        """How many of ours the broker at ``address`` (the new coordinator's) lists."""
        ours = {t.transaction_id for t in self.opened}
        options = ConnectionOptions(request_timeout_ms=self.timeout_ms)
        with RemoteBroker(address, options) as broker:
            listed = [t for t in broker.list_transactions() if t.transaction_id in ours]
        ongoing = [t for t in listed if t.state is TransactionState.ONGOING]
        return StillOpen(len(listed), len(ongoing))

    def commit_sample(self) -> tuple[int, dict[str, int]]:
        """Commit the sample through the new coordinator: (committed, errors by class)."""
        committed = 0
        errors: dict[str, int] = {}
        for producer in self._kept.values():
            try:
                producer.commit_transaction()
                committed += 1
            except TwinlogError as error:
                errors[type(error).__name__] = errors.get(type(error).__name__, 0) + 1
        return committed, errors

    def abort_rest(self) -> tuple[int, dict[str, int]]:
        """The admin abort of every one not in the sample: (aborted, errors by class, an
        unknown transaction included)."""
        rest = [t.transaction_id for t in self.opened if t.transaction_id not in self._kept]
        errors: dict[str, int] = {}

        def abort(transaction_id: int) -> bool:
            try:
                self.client.admin_abort_transaction(transaction_id)
                return True
            except TwinlogError as error:  # UnknownTransactionError: no longer open
                with self._lock:
                    errors[type(error).__name__] = errors.get(type(error).__name__, 0) + 1
                return False

        with ThreadPoolExecutor(OPENERS, thread_name_prefix="bench-abort-txn") as pool:
            aborted = sum(pool.map(abort, rest))
        return aborted, errors

    def close(self) -> None:
        for producer in self._kept.values():
            producer.close(CLOSE_TIMEOUT_MS)
        self._kept.clear()
        self.client.close()
