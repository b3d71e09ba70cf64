"""What clients do to a ``FaultCluster`` while a test hurts it, and what they saw.

    producer = AckedProducer(cluster, topic, "f11")      # one idempotent producer
    producer.send(b"...")         # to whoever leads now; retried until acknowledged
    with BackgroundProducer(producer), TailingConsumer(cluster, topic) as consumer:
        ...                       # faults
    producer.acknowledged         # {value: offset} of every acknowledged batch

A producer sends one record per batch, with unique values, to the leader named by the
partition's state znode (as a client with fresh metadata would), and retries a batch
with the same sequence until it is acknowledged: an idempotent retry is never written
twice, so a value appears at most once in the log, and every acknowledged value must be
at its acknowledged offset at the end (``cluster_checks``).

A consumer reads the leader's log from offset 0, following the leader as it moves, and
records each (offset, value) it was given: whatever a consumer saw was committed, so the
final log must hold the same value at that offset (F23).

Each acts as a principal of its own (``cluster_security``), with the narrow grants it
needs: a producer as ``producer`` (write), a consumer as ``reader`` (read), a
transactional writer as ``txn-writer`` (write, and its ``*-writer`` transactional id).
Each keeps when it met which error (``error_times``), so a run can tell the errors of a
fault from those of a quiet cluster.

Thread rule: ``AckedProducer`` and ``TailingConsumer`` from one thread each (the
background ones run their own); their records are read once they are stopped.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

from broker_support import batch
from cluster_faults import FaultCluster
from cluster_security import PRODUCER, READER, TXN_WRITER

from twinlog.engine.base.errors import (
    BrokerUnavailableError,
    CoordinatorLoadInProgressError,
    NotCoordinatorError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    TwinlogError,
)
from twinlog.engine.base.types import ProducerIdentity
from twinlog.engine.records.batch_reader import iter_batches
from twinlog.rpc.client.producer import Producer

RETRY_PAUSE_S = 0.05
SEND_TIMEOUT_S = 60.0  # one batch's retries: covers a failover (session timeout + election)
FETCH_WAIT_MS = 200


INIT_TIMEOUT_S = 60.0  # the cluster creates __txn_journal and loads its coordinators


def _init_idempotent(cluster: FaultCluster) -> ProducerIdentity:
    """An idempotent producer id from any live broker that coordinates a journal partition
    (one that leads none answers NotCoordinatorError; one loading, LoadInProgress)."""
    deadline = time.monotonic() + INIT_TIMEOUT_S
    last: Exception | None = None
    while time.monotonic() < deadline:
        for broker_id, broker in cluster.brokers.items():
            if not broker.alive:
                continue
            try:
                with cluster.client(
                    broker_id, request_timeout_ms=20_000, principal=PRODUCER
                ) as remote:
                    return remote.init_producer()
            except (
                NotCoordinatorError,
                CoordinatorLoadInProgressError,
                BrokerUnavailableError,
            ) as error:
                last = error
        time.sleep(RETRY_PAUSE_S * 4)
    raise AssertionError(f"no broker gave an idempotent producer id in {INIT_TIMEOUT_S} s: {last}")


class AckedProducer:
    def __init__(
        self,
        cluster: FaultCluster,
        topic: str,
        tag: str,
        value_bytes: int = 0,
        incompressible: bool = False,
    ) -> None:
        """``value_bytes``: pad each value to this length; ``incompressible``: with bytes
        that do not compress, so the log holds that many (batches are zstd-compressed)."""
        self.cluster = cluster
        self.topic = topic
        self.tag = tag
        self.value_bytes = value_bytes
        self.incompressible = incompressible
        self.identity = _init_idempotent(cluster)
        self.sequence = 0
        self.acknowledged: dict[bytes, int] = {}
        self.acknowledged_at: list[float] = []  # monotonic time of each acknowledgement
        self.errors: Counter[str] = Counter()
        self.error_times: list[tuple[float, str]] = []  # (monotonic time, error class)

    def next_value(self) -> bytes:
        prefix = f"{self.tag}-{self.sequence}-".encode()
        if not self.incompressible:
            return prefix.ljust(self.value_bytes, b"v")
        noise = random.Random(prefix).randbytes(max(self.value_bytes - len(prefix), 0))
        return prefix + noise

    def send(
        self,
        timeout_s: float = SEND_TIMEOUT_S,
        stop: threading.Event | None = None,
        broker_id: int | None = None,
    ) -> int:
        """Send the next value until acknowledged; its offset. To ``broker_id`` only, or
        (None) to whoever leads now. AssertionError after ``timeout_s``; -1 when ``stop``
        is set first (the batch stays pending: the next ``send`` retries it)."""
        value = self.next_value()
        payload = batch([value], self.identity, sequence=self.sequence)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if stop is not None and stop.is_set():
                return -1
            leader = self.cluster.running_leader(self.topic) if broker_id is None else broker_id
            if leader is not None:
                try:
                    with self.cluster.client(leader, principal=PRODUCER) as remote:
                        offset = remote.produce(self.topic, 0, payload).base_offset
                except TwinlogError as error:
                    self.errors[type(error).__name__] += 1
                    self.error_times.append((time.monotonic(), type(error).__name__))
                    if not error.retriable:
                        raise
                else:
                    self.acknowledged[value] = offset
                    self.acknowledged_at.append(time.monotonic())
                    self.sequence += 1
                    return offset
            time.sleep(RETRY_PAUSE_S)
        raise AssertionError(
            f"{value!r} not acknowledged within {timeout_s:.0f} s; errors so far {self.errors}"
        )

    def send_many(self, count: int) -> None:
        for _ in range(count):
            self.send()


class BackgroundProducer:
    """``producer.send`` in a loop on a thread of its own, until the ``with`` ends; to
    ``broker_id`` only (a client with stale metadata), or to whoever leads."""

    def __init__(self, producer: AckedProducer, broker_id: int | None = None) -> None:
        self.producer = producer
        self.broker_id = broker_id
        self._stop = threading.Event()
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="background-producer", daemon=True)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.producer.send(stop=self._stop, broker_id=self.broker_id)
        except BaseException as error:  # reported by __exit__, on the test's thread
            self._failure = error

    def acknowledged_count(self) -> int:
        return len(self.producer.acknowledged)

    def __enter__(self) -> BackgroundProducer:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(SEND_TIMEOUT_S)
        assert not self._thread.is_alive(), "the background producer did not stop"
        if self._failure is not None and kind is None:
            raise AssertionError(f"the background producer failed: {self._failure!r}")


class TailingConsumer:
    """A consumer thread that reads from offset 0 at whoever leads, until the ``with`` ends."""

    def __init__(self, cluster: FaultCluster, topic: str) -> None:
        self.cluster = cluster
        self.topic = topic
        self.seen: list[tuple[int, bytes | None]] = []
        self.errors: Counter[str] = Counter()
        self.error_times: list[tuple[float, str]] = []  # (monotonic time, error class)
        self.reads_from: set[int] = set()  # the brokers it read from
        self._stop = threading.Event()
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="tailing-consumer", daemon=True)

    def _run(self) -> None:
        offset = 0
        try:
            while not self._stop.is_set():
                leader = self.cluster.running_leader(self.topic)
                if leader is None:
                    time.sleep(RETRY_PAUSE_S)
                    continue
                try:
                    with self.cluster.client(leader, principal=READER) as remote:
                        result = remote.fetch(self.topic, 0, offset, max_wait_ms=FETCH_WAIT_MS)
                except TwinlogError as error:
                    self.errors[type(error).__name__] += 1
                    self.error_times.append((time.monotonic(), type(error).__name__))
                    time.sleep(RETRY_PAUSE_S)
                    continue
                for one in iter_batches(result.records):
                    for record in one.records():
                        if record.offset >= offset:
                            self.seen.append((record.offset, record.value))
                            offset = record.offset + 1
                            self.reads_from.add(leader)
        except BaseException as error:  # reported by __exit__
            self._failure = error

    def __enter__(self) -> TailingConsumer:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(10)
        assert not self._thread.is_alive(), "the consumer did not stop"
        if self._failure is not None and kind is None:
            raise AssertionError(f"the consumer failed: {self._failure!r}")


class OneProduce:
    """One batch sent once to one broker on a thread of its own (a write a zombie or a cut
    leader takes): ``outcome`` is its offset if acknowledged, else the error."""

    def __init__(
        self, cluster: FaultCluster, topic: str, broker_id: int, value: bytes, timeout_ms: int
    ) -> None:
        self.value = value
        self.outcome: int | BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, args=(cluster, topic, broker_id, timeout_ms), daemon=True
        )
        self._thread.start()

    def _run(self, cluster: FaultCluster, topic: str, broker_id: int, timeout_ms: int) -> None:
        try:
            with cluster.client(
                broker_id, request_timeout_ms=timeout_ms, principal=PRODUCER
            ) as remote:
                self.outcome = remote.produce(topic, 0, batch([self.value])).base_offset
        except BaseException as error:  # the expected ending: read by the test
            self.outcome = error

    def wait(self, timeout_s: float) -> int | BaseException | None:
        self._thread.join(timeout_s)
        assert not self._thread.is_alive(), f"the produce of {self.value!r} never ended"
        return self.outcome


def refuses_writes(cluster: FaultCluster, topic: str, leader: int) -> bool:
    """True once ``leader`` refuses a write before writing it (NotEnoughReplicasError).
    Until it has read the state ZooKeeper holds it may not lead yet (NotLeaderOrFollower),
    or may append and then answer NotEnoughReplicasAfterAppendError (the batch may or may
    not be kept): False. An acknowledgement fails the test."""
    with cluster.client(leader, principal=PRODUCER) as remote:
        try:
            remote.produce(topic, 0, batch([b"refused"]))
        except NotEnoughReplicasError:
            return True
        except (NotEnoughReplicasAfterAppendError, NotLeaderOrFollowerError):
            return False
    raise AssertionError(f"broker {leader} acknowledged a write it should refuse")


# --- transactions ------------------------------------------------------------------------

# What a transaction's end was, as its producer knows it. OPEN: the writer stopped before
# deciding; NEVER_COMMITTED: failed or aborted before a commit was ever asked for (nothing
# of it may be read); UNKNOWN: a commit was asked for and no answer came (all or nothing).
COMMITTED = "committed"
ABORTED = "aborted"
NEVER_COMMITTED = "never-committed"
UNKNOWN = "unknown"
TXN_REQUEST_TIMEOUT_MS = 5000  # a paused or cut coordinator costs one call this much
TXN_API_TIMEOUT_MS = 60_000  # a commit retried across a coordinator failover fits in this


@dataclass
class Txn:
    """One transaction of a ``TransactionalWriter``: its values per partition, in order."""

    tag: str
    values: dict[int, list[bytes]]
    outcome: str = NEVER_COMMITTED
    error: str = ""

    def all_values(self) -> list[bytes]:
        return [value for values in self.values.values() for value in values]


class TransactionalWriter:
    """A transactional ``Producer`` on the cluster's bootstrap list writing transactions of
    unique values; each one's outcome as the producer learnt it (``transactions``).

    After any failure the producer is closed and a new one takes the same transactional
    id (``init_transactions`` fences the old one), as an application restarting would.

    Thread rule: one thread at a time (``run_one`` from the test's, or ``start``/``stop``
    around a background loop); ``transactions`` read once stopped."""

    def __init__(
        self,
        cluster: FaultCluster,
        topic: str,
        partitions: int,
        tag: str,
        *,
        abort_ratio: float = 0.0,
        rng: random.Random | None = None,
        api_timeout_ms: int = TXN_API_TIMEOUT_MS,
        bootstrap: str | None = None,
    ) -> None:
        """``bootstrap``: the producer's (``cluster.bootstrap`` when None)."""
        self.cluster = cluster
        self.bootstrap = bootstrap or cluster.bootstrap
        self.topic = topic
        self.partitions = partitions
        self.tag = tag
        self.abort_ratio = abort_ratio
        self.rng = rng or random.Random(0)
        self.api_timeout_ms = api_timeout_ms
        self.transactions: list[Txn] = []
        self.errors: Counter[str] = Counter()
        self.error_times: list[tuple[float, str]] = []  # (monotonic time, error class)
        self._producer: Producer | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None

    def producer(self) -> Producer:
        if self._producer is None:
            producer = Producer(
                self.bootstrap,
                transactional_id=f"{self.tag}-writer",
                request_timeout_ms=TXN_REQUEST_TIMEOUT_MS,
                default_api_timeout_ms=self.api_timeout_ms,
                delivery_timeout_ms=self.api_timeout_ms,
                max_block_ms=self.api_timeout_ms,
                linger_ms=0,
                **self.cluster.client_arguments(TXN_WRITER),
            )
            try:
                producer.init_transactions()
            except BaseException:
                producer.close(timeout_ms=1000)
                raise
            self._producer = producer
        return self._producer

    def _drop_producer(self) -> None:
        if self._producer is not None:
            try:
                self._producer.close(timeout_ms=1000)
            except Exception:  # closing a broken producer: nothing to learn
                pass
            self._producer = None

    def new_txn(self, partitions: list[int] | None = None, records: int = 2) -> Txn:
        number = len(self.transactions)
        chosen = partitions if partitions is not None else list(range(self.partitions))
        return Txn(
            f"{self.tag}-t{number}",
            {
                p: [f"{self.tag}-t{number}-p{p}-r{r}".encode() for r in range(records)]
                for p in chosen
            },
        )

    def run_one(
        self,
        txn: Txn | None = None,
        abort: bool = False,
        before_commit: Callable[[], None] | None = None,
    ) -> Txn:
        """Begin, send ``txn``'s values, flush, ``before_commit()``, then commit (or abort).
        Failures are recorded in the Txn, not raised."""
        txn = txn or self.new_txn()
        self.transactions.append(txn)
        try:
            producer = self.producer()
            producer.begin_transaction()
            for partition, values in txn.values.items():
                for value in values:
                    producer.send(self.topic, value, partition=partition)
            producer.flush()
            if before_commit is not None:
                before_commit()
            if abort:
                producer.abort_transaction()
                txn.outcome = ABORTED
                return txn
            txn.outcome = UNKNOWN
            producer.commit_transaction()
            txn.outcome = COMMITTED
        except (TwinlogError, OSError) as error:
            txn.error = f"{type(error).__name__}: {error}"
            self.errors[type(error).__name__] += 1
            self.error_times.append((time.monotonic(), type(error).__name__))
            self._drop_producer()
        return txn

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                count = self.rng.randint(1, self.partitions)
                partitions = sorted(self.rng.sample(range(self.partitions), count))
                txn = self.new_txn(partitions, records=self.rng.randint(1, 3))
                self.run_one(txn, abort=self.rng.random() < self.abort_ratio)
                if txn.outcome not in (COMMITTED, ABORTED):
                    time.sleep(RETRY_PAUSE_S * 4)
        except BaseException as error:  # reported by stop, on the test's thread
            self._failure = error

    def start(self) -> TransactionalWriter:
        self._thread = threading.Thread(target=self._run, name=f"txn-{self.tag}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 2 * TXN_API_TIMEOUT_MS / 1000) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            assert not self._thread.is_alive(), f"the writer {self.tag} did not stop"
        self._drop_producer()
        if self._failure is not None:
            raise AssertionError(f"the writer {self.tag} failed: {self._failure!r}")

    def committed_count(self) -> int:
        return sum(1 for txn in self.transactions if txn.outcome == COMMITTED)

    def __enter__(self) -> TransactionalWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._drop_producer()
