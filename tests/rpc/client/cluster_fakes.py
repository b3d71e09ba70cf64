"""A cluster of in-memory brokers for the cluster client's routing tests: no network.

``FakeCluster`` holds the truth (who leads each partition, each partition's log, which
addresses are down) and the metadata the brokers answer, which a test may hold back
(``serve_metadata``) to play a controller that has not noticed a change yet. Its
``opener`` makes one ``FakeNode`` per address, as ``BrokerPool`` expects. Every call
is recorded as (address, method); a call to an address in ``stalled`` times out
(RequestTimedOutError after its request timeout, cut to the call's deadline: a paused
broker, its connection still open). Produce deduplicates by the batch's bytes, as a
broker deduplicates by producer id and sequence.

Transaction coordinators: with ``coordinators`` None (the default) the brokers are older
than FindCoordinator (``find_coordinator`` answers None) and take every coordinator call,
as before. Given a map (coordinator partition -> broker id, None: no leader yet), a broker
answers FindCoordinator from it, coordinator calls for a partition it does not lead with
NotCoordinatorError, and ``loading[broker_id]`` calls with CoordinatorLoadInProgressError
first. Commits and aborts are kept per transaction id: a commit retried is answered as
done, an abort after a commit is refused, as a coordinator does; ``ambiguous_commits``
commits are applied and then fail with the error given (the answer lost).

Group coordinators: with ``group_coordinators`` None the brokers name themselves for a
group (partition -1, as clusters did before ``__consumer_offsets`` was replicated) and
take every group call; ``send_offsets_to_transaction`` then needs the transaction's
coordinator, as there. Given a map (``__consumer_offsets`` partition -> broker id,
None: no leader yet), FindCoordinator names the leader of the group's partition
(``offsets_partition_for`` over ``offsets_partitions``), and the group calls are refused
elsewhere (NotCoordinatorError), or while ``loading`` as above. Committed offsets are
kept per (group, topic-partition) in ``offsets``. No tests here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from twinlog.engine.base.cluster_metadata import (
    BrokerEndpoint,
    ClusterMetadata,
    PartitionMetadata,
    TopicMetadata,
)
from twinlog.engine.base.errors import (
    BrokerUnavailableError,
    CoordinatorLoadInProgressError,
    FencedLeaderEpochError,
    InvalidTxnStateError,
    NotCoordinatorError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
    TwinlogError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
)
from twinlog.engine.base.types import (
    FetchResult,
    PartitionDescription,
    ProduceResult,
    ProducerIdentity,
    TopicDescription,
    TopicPartition,
)
from twinlog.engine.broker.group_offsets import offsets_partition_for
from twinlog.engine.broker.internal_topics import coordinator_partition_of_transactional_id
from twinlog.engine.transactions.partition_calls import PARTITION_BITS, coordinator_partition_of
from twinlog.rpc.client.call_deadline import request_timeout_s
from twinlog.rpc.client.connection_options import ConnectionOptions
from twinlog.rpc.client.produce_stream import ExecutorPipe, ProducePipe
from twinlog.rpc.wire.broker_api import CoordinatorKeyType, FoundCoordinator


def address_of(broker_id: int) -> str:
    return f"10.0.0.{broker_id}:7070"


class FakeCluster:
    """Thread rule: any thread; one lock."""

    def __init__(self, broker_ids: Iterable[int] = (1, 2, 3), cluster_id: str | None = "c1"):
        self.lock = threading.Lock()
        self.broker_ids = list(broker_ids)
        self.cluster_id = cluster_id
        self.leaders: dict[tuple[str, int], int] = {}
        self.leader_epochs: dict[tuple[str, int], int] = {}  # +1 at every leader move
        self.sent_epochs: list[tuple[str, int]] = []  # (method, current_leader_epoch) sent
        self.logs: dict[tuple[str, int], list[bytes]] = {}
        self.down: set[str] = set()
        self.stalled: set[str] = set()  # paused: every call there times out
        self.calls: list[tuple[str, str]] = []
        self.frozen_metadata: ClusterMetadata | None = None  # served instead of the truth
        self.ambiguous_once: set[tuple[str, int]] = set()  # append, then fail as unreachable
        self.advertised_host: str | None = None  # overrides each broker's host in metadata
        # Transaction coordinators (see the module's text).
        self.journal_partitions = 4
        self.coordinators: dict[int, int | None] | None = None
        self.loading: dict[int, int] = {}  # broker id -> calls answered "loading" first
        self.ambiguous_commits: list[TwinlogError] = []  # raised after applying a commit
        self.after_commit: Callable[[], None] | None = None  # run after each commit applied
        self.committed: list[int] = []  # transaction ids, in the order they were committed
        self.aborted: list[int] = []
        self.next_id = 1
        # Group coordinators (see the module's text).
        self.offsets_partitions = 5
        self.group_coordinators: dict[int, int | None] | None = None
        self.offsets: dict[tuple[str, TopicPartition], int] = {}

    def coordinate(self, leaders: dict[int, int | None]) -> None:
        """Coordinator partition -> leading broker id (None: no leader yet)."""
        with self.lock:
            self.coordinators = dict(leaders)

    def coordinate_groups(self, leaders: dict[int, int | None]) -> None:
        """``__consumer_offsets`` partition -> leading broker id (None: no leader yet)."""
        with self.lock:
            self.group_coordinators = dict(leaders)

    def coordinator_of(self, key_type: CoordinatorKeyType, key: str) -> int:
        if key_type is CoordinatorKeyType.GROUP:
            return offsets_partition_for(key, self.offsets_partitions).partition
        if key_type is CoordinatorKeyType.TRANSACTION:
            return coordinator_partition_of_transactional_id(key, self.journal_partitions)
        return coordinator_partition_of(int(key))

    def new_id(self, partition: int) -> int:
        """An id of ``partition``'s coordinator (its low bits), lock held."""
        self.next_id += 1
        return (self.next_id << PARTITION_BITS) | partition

    def create(self, topic: str, leaders: list[int]) -> None:
        with self.lock:
            for partition, leader in enumerate(leaders):
                self.leaders[(topic, partition)] = leader
                self.leader_epochs[(topic, partition)] = 0
                self.logs[(topic, partition)] = []

    def move_leader(self, topic: str, partition: int, leader: int) -> None:
        with self.lock:
            self.leaders[(topic, partition)] = leader
            self.leader_epochs[(topic, partition)] += 1

    def truth(self) -> ClusterMetadata:
        topics: dict[str, list[PartitionMetadata]] = {}
        for (topic, partition), leader in sorted(self.leaders.items()):
            replicas = tuple(self.broker_ids)
            topics.setdefault(topic, []).append(
                PartitionMetadata(
                    partition, leader, self.leader_epochs[(topic, partition)], replicas, replicas
                )
            )
        brokers = tuple(
            BrokerEndpoint(
                broker_id,
                self.advertised_host or address_of(broker_id).split(":")[0],
                7070,
            )
            for broker_id in self.broker_ids
            if address_of(broker_id) not in self.down
        )
        return ClusterMetadata(
            self.cluster_id,
            self.broker_ids[0],
            brokers,
            tuple(TopicMetadata(name, tuple(items)) for name, items in topics.items()),
        )

    def hold_metadata(self) -> None:
        """Answer the metadata of now until ``release_metadata`` (a controller that lags)."""
        with self.lock:
            self.frozen_metadata = self.truth()

    def release_metadata(self) -> None:
        with self.lock:
            self.frozen_metadata = None

    def opener(self, address: str, options: ConnectionOptions) -> FakeNode:
        return FakeNode(self, address, options)

    def calls_of(self, method: str) -> list[str]:
        with self.lock:
            return [address for address, name in self.calls if name == method]


class FakeNode:
    def __init__(
        self, cluster: FakeCluster, address: str, options: ConnectionOptions | None = None
    ) -> None:
        self.cluster = cluster
        self.address = address
        self.options = options or ConnectionOptions()
        self.broker_id = int(address.split(":")[0].rsplit(".", 1)[1])
        self.closed = False

    def _enter(self, method: str) -> None:
        # As RemoteBroker: a request whose call's deadline has passed is not sent.
        timeout_s = request_timeout_s(self.options.request_timeout_ms / 1000)
        with self.cluster.lock:
            self.cluster.calls.append((self.address, method))
            if self.address in self.cluster.down:
                raise BrokerUnavailableError(f"UNAVAILABLE: {self.address} is down")
            stalled = self.address in self.cluster.stalled
        if stalled:  # no answer until the request's timeout, as gRPC's deadline ends it
            time.sleep(timeout_s)
            raise RequestTimedOutError(f"DEADLINE_EXCEEDED: {self.address} is paused")

    def _lead(self, topic: str, partition: int, current_leader_epoch: int = -1) -> tuple[str, int]:
        """Lock held. The partition's key if this node leads it and ``current_leader_epoch``
        (when sent) is its epoch, as a broker checks them."""
        key = (topic, partition)
        leader = self.cluster.leaders.get(key)
        if leader is None:
            raise UnknownTopicOrPartitionError(f"no {topic}-{partition}")
        if leader != self.broker_id:
            raise NotLeaderOrFollowerError(f"broker {self.broker_id} does not lead {key}")
        ours = self.cluster.leader_epochs[key]
        if current_leader_epoch != -1 and current_leader_epoch < ours:
            raise FencedLeaderEpochError(f"{key}: epoch {current_leader_epoch} < {ours}")
        if current_leader_epoch > ours:
            raise UnknownLeaderEpochError(f"{key}: epoch {current_leader_epoch} > {ours}")
        return key

    def close(self) -> None:
        self.closed = True

    def cluster_metadata(
        self, topics: Iterable[str] | None = None, timeout_ms: int | None = None
    ) -> ClusterMetadata:
        self._enter("cluster_metadata")
        with self.cluster.lock:
            metadata = self.cluster.frozen_metadata or self.cluster.truth()
        if topics:
            wanted = set(topics)
            metadata = replace(
                metadata, topics=tuple(t for t in metadata.topics if t.name in wanted)
            )
        return metadata

    def produce(
        self,
        topic: str,
        partition: int,
        batch: bytes,
        attempt: str = "",
        transaction_id: int = -1,
        current_leader_epoch: int = -1,
    ) -> ProduceResult:
        self._enter("produce")
        with self.cluster.lock:
            self.cluster.sent_epochs.append(("produce", current_leader_epoch))
            key = self._lead(topic, partition, current_leader_epoch)
            log = self.cluster.logs[key]
            if batch in log:
                return ProduceResult(log.index(batch), duplicate=True)
            log.append(batch)
            if key in self.cluster.ambiguous_once:
                self.cluster.ambiguous_once.discard(key)
                raise BrokerUnavailableError("UNAVAILABLE: the connection broke after the append")
            return ProduceResult(len(log) - 1, duplicate=False)

    def open_produce_stream(self) -> ProducePipe:
        return ExecutorPipe(self, threads=1)

    def fetch(
        self,
        topic: str,
        partition: int,
        offset: int,
        max_bytes: int = 1 << 20,
        max_wait_ms: int = 0,
        min_bytes: int = 1,
        current_leader_epoch: int = -1,
    ) -> FetchResult:
        self._enter("fetch")
        with self.cluster.lock:
            self.cluster.sent_epochs.append(("fetch", current_leader_epoch))
            key = self._lead(topic, partition, current_leader_epoch)
            return FetchResult(
                b"".join(self.cluster.logs[key][offset:]), 0, len(self.cluster.logs[key])
            )

    def list_offset(self, topic: str, partition: int, spec: str | int) -> int:
        self._enter("list_offset")
        with self.cluster.lock:
            key = self._lead(topic, partition)
            return 0 if spec == "earliest" else len(self.cluster.logs[key])

    def describe_topic(self, name: str) -> TopicDescription:
        self._enter("describe_topic")
        with self.cluster.lock:
            count = sum(1 for topic, _ in self.cluster.leaders if topic == name)
        if not count:
            raise UnknownTopicOrPartitionError(f"no topic {name}")
        return TopicDescription(
            name, tuple(PartitionDescription(p, 0, 0, 0, 0) for p in range(count))
        )

    def init_producer(
        self, transactional_id: str | None = None, transaction_timeout_ms: int | None = None
    ) -> ProducerIdentity:
        self._enter("init_producer")
        with self.cluster.lock:
            coordinators = self.cluster.coordinators
            if coordinators is None:
                return ProducerIdentity(1000 + self.broker_id, 0)
            if transactional_id is None:  # one of this broker's own coordinators
                mine = sorted(n for n, b in coordinators.items() if b == self.broker_id)
                if not mine:
                    raise NotCoordinatorError(f"broker {self.broker_id} coordinates nothing")
                return ProducerIdentity(self.cluster.new_id(mine[0]), 0)
            partition = self.cluster.coordinator_of(
                CoordinatorKeyType.TRANSACTION, transactional_id
            )
            self._coordinates(partition)
            return ProducerIdentity(self.cluster.new_id(partition), 0)

    # --- transaction coordinators ---------------------------------------------------------

    def _coordinates(self, partition: int, group: bool = False) -> None:
        """Lock held. Refuse a coordinator call this broker cannot serve now."""
        coordinators = self.cluster.group_coordinators if group else self.cluster.coordinators
        if coordinators is None:
            return  # an older cluster: every broker takes every call
        if coordinators.get(partition) != self.broker_id:
            kind = "group coordinator" if group else "coordinator"
            raise NotCoordinatorError(f"broker {self.broker_id} is not {kind} {partition}")
        if self.cluster.loading.get(self.broker_id, 0) > 0:
            self.cluster.loading[self.broker_id] -= 1
            raise CoordinatorLoadInProgressError(f"broker {self.broker_id} is loading {partition}")

    def _coordinator_call(self, method: str, producer_id: int) -> None:
        self._enter(method)
        with self.cluster.lock:
            self._coordinates(coordinator_partition_of(producer_id))

    def _group_call(self, method: str, group_id: str) -> None:
        self._enter(method)
        with self.cluster.lock:
            partition = self.cluster.coordinator_of(CoordinatorKeyType.GROUP, group_id)
            self._coordinates(partition, group=True)

    def find_coordinator(self, key_type: CoordinatorKeyType, key: str) -> FoundCoordinator | None:
        self._enter("find_coordinator")
        with self.cluster.lock:
            coordinators = self.cluster.coordinators
            if coordinators is None:
                return None  # a server older than FindCoordinator
            if key_type is CoordinatorKeyType.GROUP and self.cluster.group_coordinators is None:
                leader: int | None = self.broker_id  # groups not placed: the broker asked
                partition = -1
            elif key_type is CoordinatorKeyType.GROUP:
                partition = self.cluster.coordinator_of(key_type, key)
                leader = self.cluster.group_coordinators.get(partition)
            else:
                partition = self.cluster.coordinator_of(key_type, key)
                leader = coordinators.get(partition)
            if leader is None:
                raise NotCoordinatorError(f"no coordinator for {key} yet; retry")
            return FoundCoordinator(
                partition, BrokerEndpoint(leader, address_of(leader).split(":")[0], 7070)
            )

    def begin_transaction(
        self, producer_id: int, producer_generation: int, request_id: int = 0
    ) -> int:
        self._coordinator_call("begin_transaction", producer_id)
        with self.cluster.lock:
            return self.cluster.new_id(coordinator_partition_of(producer_id))

    def add_partitions_to_transaction(
        self, transaction_id: int, producer_id: int, producer_generation: int, partitions: object
    ) -> None:
        self._coordinator_call("add_partitions_to_transaction", producer_id)

    def send_offsets_to_transaction(
        self,
        transaction_id: int,
        producer_id: int,
        producer_generation: int,
        group_id: str,
        offsets: object,
        member: object = None,
    ) -> None:
        if self.cluster.group_coordinators is None:  # older: at the transaction's coordinator
            self._coordinator_call("send_offsets_to_transaction", producer_id)
        else:
            self._group_call("send_offsets_to_transaction", group_id)

    def commit_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, int], member: object = None
    ) -> None:
        self._group_call("commit_offsets", group_id)
        with self.cluster.lock:
            for topic_partition, offset in offsets.items():
                self.cluster.offsets[(group_id, topic_partition)] = offset

    def fetch_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        self._group_call("fetch_offsets", group_id)
        with self.cluster.lock:
            return {tp: self.cluster.offsets.get((group_id, tp), -1) for tp in partitions}

    def commit_transaction(
        self,
        transaction_id: int,
        producer_id: int,
        producer_generation: int,
        wait_for_applied: bool = False,
        attempts: object = None,
        batches_written: object = None,
    ) -> None:
        self._coordinator_call("commit_transaction", producer_id)
        with self.cluster.lock:
            if transaction_id in self.cluster.aborted:
                raise InvalidTxnStateError(f"transaction {transaction_id} was aborted")
            if transaction_id in self.cluster.committed:
                return  # a retried commit: done already
            self.cluster.committed.append(transaction_id)
            lost = self.cluster.ambiguous_commits.pop(0) if self.cluster.ambiguous_commits else None
            hook = self.cluster.after_commit
        if hook is not None:
            hook()
        if lost is not None:
            raise lost

    def abort_transaction(
        self, transaction_id: int, producer_id: int, producer_generation: int
    ) -> None:
        self._coordinator_call("abort_transaction", producer_id)
        with self.cluster.lock:
            if transaction_id in self.cluster.committed:
                raise InvalidTxnStateError(f"transaction {transaction_id} was committed")
            if transaction_id not in self.cluster.aborted:
                self.cluster.aborted.append(transaction_id)

    def __getattr__(self, name: str) -> Any:
        """Every other broker call: recorded, answered with None."""
        if name.startswith("_"):
            raise AttributeError(name)

        def call(*args: object, **kwargs: object) -> None:
            self._enter(name)

        return call
