"""A client that keeps writing to one partition and follows its leader through ZooKeeper,
as a client with a metadata cache does: ``acks=all`` produce of one idempotent 1 KiB
record at a time through ``RemoteBroker``; on a retriable error it waits
``retry_backoff_ms`` (Kafka's ``retry.backoff.ms`` is 100), reads who leads from
ZooKeeper, and sends the same batch again (same sequence: a repeat is dropped by the
broker, never written twice). Every acknowledgement is kept with its time and broker."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from bench.cluster.cluster import BenchCluster
from twinlog.engine.base.errors import TwinlogError
from twinlog.engine.base.types import ProducerIdentity
from twinlog.engine.records.batch_builder import RecordBatchBuilder
from twinlog.rpc.client.cluster import ClusterBroker
from twinlog.rpc.client.connection_options import ConnectionOptions
from twinlog.rpc.client.remote import RemoteBroker

REQUEST_TIMEOUT_MS = 10_000
ACKS_KEPT_MAX = 100_000  # a bound on memory should a phase run long


@dataclass(frozen=True)
class Ack:
    time_s: float  # monotonic, when the answer arrived
    broker_id: int


class FollowingWriter:
    def __init__(
        self,
        cluster: BenchCluster,
        topic: str,
        partition: int,
        payload: bytes,
        retry_backoff_ms: int,
        name: str = "writer",
    ) -> None:
        self.cluster = cluster
        self.topic = topic
        self.partition = partition
        self.payload = payload
        self.retry_backoff_s = retry_backoff_ms / 1000
        self.acks: list[Ack] = []
        self.errors: dict[str, int] = {}  # error class -> count, for the report
        self.fatal: BaseException | None = None
        # An idempotent id comes from a broker that coordinates a journal partition: the
        # cluster client finds one among the live brokers.
        addresses = ",".join(cluster.live_addresses().values())
        with ClusterBroker(addresses, ConnectionOptions(request_timeout_ms=60_000)) as client:
            self.identity: ProducerIdentity = client.init_producer()
        self._sequence = 0
        self._clients: dict[str, RemoteBroker] = {}
        self._leader: tuple[int, str] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"bench-{name}", daemon=True)

    def start(self) -> FollowingWriter:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:  # started (a phase may end before the probe is)
            self._thread.join(timeout=REQUEST_TIMEOUT_MS / 1000 + 5)
        for client in self._clients.values():
            client.close()

    def first_ack_after(self, after_s: float, not_from: int) -> Ack | None:
        return next((a for a in self.acks if a.time_s > after_s and a.broker_id != not_from), None)

    def last_ack_from(self, broker_id: int, before_s: float) -> Ack | None:
        earlier = [a for a in self.acks if a.broker_id == broker_id and a.time_s < before_s]
        return earlier[-1] if earlier else None

    def _batch(self) -> bytes:
        builder = RecordBatchBuilder(
            "none",
            producer_id=self.identity.producer_id,
            producer_generation=self.identity.producer_generation,
            base_sequence=self._sequence,
        )
        builder.append(self.payload)
        return builder.build()

    def _refresh_leader(self) -> None:
        """Who leads, from ZooKeeper: the partition state, then the leader's registration."""
        self._leader = None
        state = self.cluster.state(self.topic, self.partition)
        if state is None or state.leader <= 0:
            return
        address = self.cluster.live_addresses().get(state.leader)
        if address is not None:
            self._leader = (state.leader, address)

    def _client(self, address: str) -> RemoteBroker:
        if address not in self._clients:
            options = ConnectionOptions(request_timeout_ms=REQUEST_TIMEOUT_MS)
            self._clients[address] = RemoteBroker(address, options)
        return self._clients[address]

    def _run(self) -> None:
        batch = self._batch()
        while not self._stop.is_set():
            try:
                if self._leader is None:
                    self._refresh_leader()
                if self._leader is None:
                    self._stop.wait(self.retry_backoff_s)
                    continue
                broker_id, address = self._leader
                self._client(address).produce(self.topic, self.partition, batch)
            except TwinlogError as error:
                self.errors[type(error).__name__] = self.errors.get(type(error).__name__, 0) + 1
                if not error.retriable:
                    self.fatal = error
                    return
                self._leader = None
                self._stop.wait(self.retry_backoff_s)
                continue
            except Exception as error:  # a bug, not a figure: the phase reports it
                self.fatal = error
                return
            if len(self.acks) < ACKS_KEPT_MAX:
                self.acks.append(Ack(time.monotonic(), broker_id))
            self._sequence += 1
            batch = self._batch()
