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

Thread rule: ``AckedProducer`` and ``TailingConsumer`` from one thread each (the
background ones run their own); their records are read once they are stopped.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from types import TracebackType

from broker_support import batch
from cluster_faults import FaultCluster

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
                with cluster.client(broker_id, request_timeout_ms=20_000) as remote:
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
    def __init__(self, cluster: FaultCluster, topic: str, tag: str, value_bytes: int = 0) -> None:
        """``value_bytes``: pad each value to this length (a log worth catching up)."""
        self.cluster = cluster
        self.topic = topic
        self.tag = tag
        self.value_bytes = value_bytes
        self.identity = _init_idempotent(cluster)
        self.sequence = 0
        self.acknowledged: dict[bytes, int] = {}
        self.errors: Counter[str] = Counter()

    def next_value(self) -> bytes:
        return f"{self.tag}-{self.sequence}-".encode().ljust(self.value_bytes, b"v")

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
                    with self.cluster.client(leader) as remote:
                        offset = remote.produce(self.topic, 0, payload).base_offset
                except TwinlogError as error:
                    self.errors[type(error).__name__] += 1
                    if not error.retriable:
                        raise
                else:
                    self.acknowledged[value] = offset
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
                    with self.cluster.client(leader) as remote:
                        result = remote.fetch(self.topic, 0, offset, max_wait_ms=FETCH_WAIT_MS)
                except TwinlogError as error:
                    self.errors[type(error).__name__] += 1
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
            with cluster.client(broker_id, request_timeout_ms=timeout_ms) as remote:
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
    with cluster.client(leader) as remote:
        try:
            remote.produce(topic, 0, batch([b"refused"]))
        except NotEnoughReplicasError:
            return True
        except (NotEnoughReplicasAfterAppendError, NotLeaderOrFollowerError):
            return False
    raise AssertionError(f"broker {leader} acknowledged a write it should refuse")
