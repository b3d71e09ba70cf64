"""A transactional producer that commits small transactions in a loop, as a user's would:
a ``Producer`` on the cluster's bootstrap list (it finds its coordinator with
FindCoordinator and follows it), each transaction one record to every partition of a
topic, begin, send, flush, commit. Every commit is kept with the time its answer came.

On an error it counts the error's class, closes the producer and opens a new one with
the same transactional id (``init_transactions`` fences the old generation and
completes what it left), then goes on; an error that is not a ``TwinlogError`` is a bug
and ends the loop (``fatal``)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from twinlog.engine.base.errors import TwinlogError
from twinlog.rpc.client import Producer

ERROR_PAUSE_S = 0.1
CLOSE_TIMEOUT_MS = 1_000
COMMITS_KEPT_MAX = 100_000  # a bound on memory should a phase run long


@dataclass(frozen=True)
class Commit:
    begun_s: float  # monotonic, before begin_transaction()
    answered_s: float  # monotonic, when commit_transaction() returned


class CommitLoop:
    def __init__(
        self,
        bootstrap: str,
        transactional_id: str,
        topic: str,
        partitions: int,
        payload: bytes,
        timeout_s: float,
    ) -> None:
        self.bootstrap = bootstrap
        self.transactional_id = transactional_id
        self.topic = topic
        self.partitions = partitions
        self.payload = payload
        self.timeout_ms = round(timeout_s * 1000)
        self.commits: list[Commit] = []
        self.errors: dict[str, int] = {}  # error class -> count, for the report
        self.fatal: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-commit-loop", daemon=True)

    def start(self) -> CommitLoop:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop after the transaction under way (bounded by the calls' own timeouts)."""
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(timeout=2 * self.timeout_ms / 1000 + 5)

    def check(self) -> bool:
        """True; raises what ended the loop if something did."""
        if self.fatal is not None:
            raise RuntimeError(f"the committing producer failed: {self.fatal!r}") from self.fatal
        return True

    def first_commit_after(self, after_s: float) -> Commit | None:
        self.check()
        return next((c for c in list(self.commits) if c.answered_s > after_s), None)

    def last_commit_before(self, before_s: float) -> Commit | None:
        earlier = [c for c in list(self.commits) if c.answered_s < before_s]
        return earlier[-1] if earlier else None

    def _open(self) -> Producer:
        producer = Producer(
            self.bootstrap,
            transactional_id=self.transactional_id,
            compression="none",
            linger_ms=0,
            default_api_timeout_ms=self.timeout_ms,
        )
        try:
            producer.init_transactions()
        except BaseException:
            producer.close(CLOSE_TIMEOUT_MS)
            raise
        return producer

    def _commit_one(self, producer: Producer) -> None:
        begun_s = time.monotonic()
        producer.begin_transaction()
        futures = [
            producer.send(self.topic, self.payload, partition=partition)
            for partition in range(self.partitions)
        ]
        producer.flush(self.timeout_ms)
        for future in futures:
            error = future.exception(timeout=0)
            if error is not None:
                raise error
        producer.commit_transaction()
        if len(self.commits) < COMMITS_KEPT_MAX:
            self.commits.append(Commit(begun_s, time.monotonic()))

    def _run(self) -> None:
        producer: Producer | None = None
        try:
            while not self._stop.is_set():
                try:
                    if producer is None:
                        producer = self._open()
                    self._commit_one(producer)
                except TwinlogError as error:
                    name = type(error).__name__
                    self.errors[name] = self.errors.get(name, 0) + 1
                    if producer is not None:
                        producer.close(CLOSE_TIMEOUT_MS)
                        producer = None
                    self._stop.wait(ERROR_PAUSE_S)
        except Exception as error:  # a bug, not a figure: the phase reports it
            self.fatal = error
        finally:
            if producer is not None:
                producer.close(CLOSE_TIMEOUT_MS)
