"""``ClusterBroker``: the broker API over a cluster, each call sent where it belongs.

    broker = ClusterBroker("127.0.0.1:9001,127.0.0.1:9002,127.0.0.1:9003")
    Producer(broker) ...   # or Producer("h1:p1,h2:p2,h3:p3"): connect() opens one

It asks any reachable bootstrap broker for the cluster's metadata (``Metadata``), keeps
it (``metadata_cache``), and sends:

    produce, fetch, list_offset,      to the partition's leader; on an answer that says
    describe_producers,               the leader moved or vanished (ROUTING_ERRORS) the
    delete_records                    metadata is refreshed and the call sent again, with
                                      a growing pause, until the call's deadline
    open_produce_stream               a pipe per leader (``cluster_pipe``); the producer's
                                      sender retries, this routes
    create/delete/list/describe topic any live broker: the home broker first, the next
                                      one when a broker is unreachable
    init_producer(transactional_id),  the key's transaction coordinator, as FindCoordinator
    begin, add_partitions,            names it (by transactional id; by producer id for the
    commit, abort,                    others, by transaction id for the admin abort), kept
    admin_abort_transaction           per coordinator partition (``coordinator_cache``):
                                      see "Following coordinators" below
    commit_offsets, fetch_offsets,    the group's coordinator, the leader of its
    send_offsets                      ``__consumer_offsets`` partition, as FindCoordinator
                                      names it (by group id), kept per offsets partition;
                                      followed as a transaction coordinator is
    init_producer(None)               the home broker, or the next one while a broker is
                                      unreachable or coordinates nothing (an idempotent
                                      producer's id comes from one of the answering
                                      broker's own coordinators)
    list_transactions                 the home broker, the first bootstrap address that
                                      answered

Following coordinators: NotCoordinatorError, an unreachable broker, or a request that
timed out there: the cached coordinator is forgotten, found again, and the call sent
there; a broker that was unreachable or timed out is asked FindCoordinator last (a paused
coordinator is often the broker that answered the metadata, asked first otherwise).
CoordinatorLoadInProgressError: the same broker again after a pause. Pauses grow as a
leader's, within the call's deadline. Every coordinator call
is safe to send again: a retried begin carries its request id, offsets are committed or
sent again as they are, and a commit whose first attempt may have been applied (the
broker went away or the request timed out mid-commit) is sent again as a commit, never
turned into an abort (Kafka's rule: a commit whose outcome is unknown can only be
retried). A server without FindCoordinator (older) gets these calls at the home broker,
once, as before; so do group calls when the servers name no coordinator for a group (an
older cluster, where each broker kept the offsets sent to it), except send_offsets,
which such a cluster ran at the transaction's coordinator.

A produce retried here keeps its bytes (producer id, generation, sequence): a leader
that has the first attempt (it was replicated before the old leader died) answers it
as a duplicate, so nothing is written twice. The deadline of a routed call is the
client call's own (``call_deadline``), else ``request_timeout_ms`` (plus a fetch's
long-poll wait); never longer, and at most ``cluster_retry.ROUTING_ATTEMPTS_MAX``
attempts.

The leader's, the coordinator's and the idempotent id's routes retry in one loop,
``cluster_retry.retry_routed``: each gives what one attempt does (where it goes, what
it forgets when the target moved) and which answers mean "again"; the pauses are
``ROUTING_BACKOFF``'s (``engine.base.backoff``), 50 ms doubling to 1 s, jittered.

A single-node server answers the Metadata call as a standalone broker 0: then every
call goes to the address that answered, exactly as ``RemoteBroker`` would send it
(and FindCoordinator is not asked).

Thread rule: every method may be called from any thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TypeVar

from twinlog.engine.base.backoff import Backoff
from twinlog.engine.base.cluster_metadata import ClusterMetadata
from twinlog.engine.base.errors import (
    BrokerUnavailableError,
    CoordinatorLoadInProgressError,
    InvalidConfigError,
    NotCoordinatorError,
    RequestTimedOutError,
    TwinlogError,
)
from twinlog.engine.base.types import (
    FetchResult,
    ProducerDescription,
    ProduceResult,
    ProducerIdentity,
    TopicDescription,
    TopicPartition,
    TransactionDescription,
)
from twinlog.engine.broker.leader_elections import ElectionResult
from twinlog.engine.broker.reassignments import MoveResult, PartitionMove, Reassignment
from twinlog.engine.groups.group_calls import (
    OUTSIDE_ANY_GROUP,
    GroupDescription,
    GroupHeartbeat,
    GroupHeartbeatAnswer,
    GroupListing,
    GroupMemberRef,
)
from twinlog.engine.records.batch_format import NO_PARTITION_LEADER_EPOCH, NO_TRANSACTION_ID
from twinlog.rpc.client.bootstrap import parse_bootstrap
from twinlog.rpc.client.broker_pool import BrokerPool, NodeBroker, NodeOpener
from twinlog.rpc.client.call_deadline import (
    current_deadline_s,
    deadline_at,
    deadline_passed,
    sent_nothing,
)
from twinlog.rpc.client.cluster_pipe import (
    ROUTING_ERRORS,
    STALE_METADATA_ERRORS,
    ClusterProducePipe,
)
from twinlog.rpc.client.cluster_retry import retry_routed
from twinlog.rpc.client.connection_options import ConnectionOptions
from twinlog.rpc.client.coordinator_cache import CoordinatorCache
from twinlog.rpc.client.metadata_cache import MetadataCache
from twinlog.rpc.client.remote import RemoteBroker
from twinlog.rpc.policy.acl_bindings import AclEntry
from twinlog.rpc.wire.broker_api import NO_COORDINATOR_PARTITION, CoordinatorKeyType

Result = TypeVar("Result")

# Pauses between two attempts of a routed call: 50 ms doubling to 1 s (with jitter), the
# producer's own; a leader change takes a ZooKeeper session timeout to be noticed.
ROUTING_BACKOFF = Backoff(initial_ms=50, max_ms=1_000)

# Answers that mean "the coordinator is elsewhere now, or out of reach": find it again.
# A request that timed out at the coordinator may have been applied; every coordinator
# call may be sent again (a commit as a commit), so it is.
COORDINATOR_MOVED_ERRORS: tuple[type[TwinlogError], ...] = (
    NotCoordinatorError,
    BrokerUnavailableError,
    RequestTimedOutError,
)
# ...and the one that means "the same broker, shortly": it is loading the coordinator.
COORDINATOR_RETRY_ERRORS: tuple[type[TwinlogError], ...] = (
    CoordinatorLoadInProgressError,
    *COORDINATOR_MOVED_ERRORS,
)
# Brokers that cannot give an idempotent producer its id now: ask the next one.
NO_ID_HERE_ERRORS: tuple[type[TwinlogError], ...] = (
    NotCoordinatorError,
    CoordinatorLoadInProgressError,
    BrokerUnavailableError,
)


class _Unplaced:
    """A coordinator route's attempt found no coordinator to send to: the servers name
    none (older ones, or groups on a cluster that does not place them)."""


UNPLACED = _Unplaced()


class ClusterBroker:
    def __init__(
        self,
        bootstrap: str | Sequence[str],
        options: ConnectionOptions | None = None,
        *,
        opener: NodeOpener = RemoteBroker,
        sleep: Callable[[float], None] = time.sleep,
        backoff: Backoff = ROUTING_BACKOFF,
        metadata_cache: Callable[[list[str], BrokerPool], MetadataCache] = MetadataCache,
    ) -> None:
        addresses = parse_bootstrap(
            bootstrap if isinstance(bootstrap, str) else ",".join(bootstrap)
        )
        self.options = options or ConnectionOptions()
        self.pool = BrokerPool(self.options, opener)
        self.metadata = metadata_cache(addresses, self.pool)
        self.coordinators = CoordinatorCache()
        self._sleep = sleep
        self._backoff = backoff
        self._id_giver: str | None = None  # the broker that last gave an idempotent id

    def __repr__(self) -> str:
        return f"ClusterBroker({','.join(self.metadata.bootstrap)!r})"

    def close(self) -> None:
        self.pool.close()

    def __enter__(self) -> ClusterBroker:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def cluster_metadata(
        self, topics: Iterable[str] | None = None, timeout_ms: int | None = None
    ) -> ClusterMetadata:
        """Fresh metadata from any broker (``topics`` None: every topic)."""
        asked = None if topics is None else sorted(set(topics))
        failures: list[str] = []
        for address in self.metadata.addresses():
            try:
                return self.pool.get(address).cluster_metadata(asked, timeout_ms)
            except TwinlogError as error:
                if not error.retriable:
                    raise
                failures.append(f"{address}: {type(error).__name__}: {error}")
        raise BrokerUnavailableError(
            "no broker answered for the cluster's metadata: " + "; ".join(failures)
        )

    # --- where calls go ------------------------------------------------------------------

    def leader_address(self, topic: str, partition: int) -> str:
        """Where ``topic``-``partition``'s calls go now (``leader_route``)."""
        return self.leader_route(topic, partition)[0]

    def leader_route(self, topic: str, partition: int) -> tuple[str, int]:
        """Where ``topic``-``partition``'s calls go now, and the leader epoch the metadata
        names for it, sent with produce and fetch calls so that a broker whose leadership
        the metadata does not describe refuses them (FencedLeaderEpochError: the metadata
        is stale; UnknownLeaderEpochError: the broker has not learnt of it yet). A partition
        without a known live leader goes to the home broker, whose answer
        (NotLeaderOrFollowerError, retriable, or UnknownTopicOrPartitionError) says what to
        do; a single node and a partition without a leader send no epoch."""
        snapshot = self.metadata.current(topic)
        if snapshot.metadata.standalone:
            return snapshot.answered_by, NO_PARTITION_LEADER_EPOCH
        leader = snapshot.metadata.leader(topic, partition)
        found = snapshot.metadata.partition(topic, partition)
        if leader is None or found is None:
            return self.metadata.home(), NO_PARTITION_LEADER_EPOCH
        return leader.address, found.leader_epoch

    def _deadline_s(self, extra_wait_ms: int = 0) -> float:
        own_s = time.monotonic() + (self.options.request_timeout_ms + extra_wait_ms) / 1000
        enclosing_s = current_deadline_s()
        return own_s if enclosing_s is None else min(own_s, enclosing_s)

    def _on_leader(
        self,
        topic: str,
        partition: int,
        call: Callable[[NodeBroker, int], Result],
        extra_wait_ms: int = 0,
    ) -> Result:
        """``call(broker, leader_epoch)`` on the partition's leader, routed again after a
        ROUTING_ERRORS answer (not before a refresh is allowed: asking the same broker
        again would be in vain)."""
        address = ""

        def attempt() -> Result:
            nonlocal address
            address = ""
            try:
                address, leader_epoch = self.leader_route(topic, partition)
                return call(self.pool.get(address), leader_epoch)
            except STALE_METADATA_ERRORS as error:
                # A moved leader, or a stalled one (timed out: not sent again, the call's
                # time is spent): ask where it leads now.
                self._routing_failed(address, error)
                raise

        return retry_routed(
            attempt,
            retry_on=ROUTING_ERRORS,
            deadline_s=self._deadline_s(extra_wait_ms),
            backoff=self._backoff,
            what=lambda: f"{topic}-{partition} at {address or '(no metadata)'}",
            sleep=self._sleep,
            pause_floor_s=self.metadata.refresh_wait_s,
        )

    def _on_any(self, call: Callable[[NodeBroker], Result]) -> Result:
        """``call`` on the home broker, or the next live one while brokers are unreachable.

        A broker that became unreachable during a call may have applied it: a create
        sent again to the next broker then says TopicExistsError, as Kafka's admin does."""
        with deadline_at(self._deadline_s()):
            addresses = [self.metadata.home(), *self.metadata.addresses()]
            last: BrokerUnavailableError | None = None
            for address in dict.fromkeys(addresses):
                try:
                    return call(self.pool.get(address))
                except BrokerUnavailableError as error:
                    self.metadata.invalidate()
                    last = error
            assert last is not None
            raise last

    def _on_home(self, call: Callable[[NodeBroker], Result]) -> Result:
        return call(self.pool.get(self.metadata.home()))

    # --- coordinators -----------------------------------------------------------------------

    def coordinator_address(self, key_type: CoordinatorKeyType, key: str) -> str | None:
        """Where ``key``'s coordinator calls go now: the cached coordinator, else the one
        FindCoordinator names (asked of any live broker, and kept). None: the brokers have
        no FindCoordinator (older servers), or name no coordinator of their own for a
        group (a cluster from before groups had them); the caller's fallback, as before.

        Raises NotCoordinatorError while no broker coordinates the key (retriable), and
        BrokerUnavailableError or RequestTimedOutError when no broker answers (a broker
        that fails to answer is asked last from then on: ``MetadataCache.suspect``)."""
        snapshot = self.metadata.current()
        if snapshot.metadata.standalone:
            return snapshot.answered_by
        partition = self.coordinators.partition_of(key_type, key)
        cached = self.coordinators.address_of(key_type, partition)
        if cached is not None:
            return cached
        last: BrokerUnavailableError | RequestTimedOutError | None = None
        for address in self.metadata.addresses():
            if last is not None and deadline_passed():
                break  # the rest would fail unsent: not suspects
            try:
                found = self.pool.get(address).find_coordinator(key_type, key)
            except (BrokerUnavailableError, RequestTimedOutError) as error:
                # A paused broker times out: ask the next one, and this one last from now
                # (it is often the first address: the one that answered the metadata).
                self._routing_failed(address, error)
                last = error
                continue
            if found is None:
                return None
            if (
                key_type is CoordinatorKeyType.GROUP
                and found.coordinator_partition == NO_COORDINATOR_PARTITION
            ):
                return None  # an older cluster: "the broker asked", groups not placed
            self.coordinators.learn(key_type, key, found)
            return found.broker.address
        raise last or BrokerUnavailableError("no broker to ask FindCoordinator of")

    def _on_coordinator(
        self,
        key_type: CoordinatorKeyType,
        key: str,
        call: Callable[[NodeBroker], Result],
        unplaced: Callable[[], Result] | None = None,
    ) -> Result:
        """``call`` on ``key``'s coordinator, followed while it moves (see the module).
        ``unplaced``: what to do when the servers name no coordinator (``coordinator_address``
        None); the home broker, once, unless given."""
        address = ""

        def attempt() -> Result | _Unplaced:
            nonlocal address
            address = ""
            try:
                found = self.coordinator_address(key_type, key)
                if found is None:
                    return UNPLACED
                address = found
                return call(self.pool.get(address))
            except COORDINATOR_MOVED_ERRORS as error:
                # Found again at the next attempt; the key's partition stays known.
                partition = self.coordinators.partition_of(key_type, key)
                self.coordinators.forget(key_type, partition, address)
                if not isinstance(error, NotCoordinatorError):
                    self._routing_failed(address, error)
                raise

        deadline_s = self._deadline_s()
        answer = retry_routed(
            attempt,
            retry_on=COORDINATOR_RETRY_ERRORS,
            deadline_s=deadline_s,
            backoff=self._backoff,
            what=lambda: f"coordinator of {key_type.value} {key} at {address or '(not found)'}",
            sleep=self._sleep,
        )
        if not isinstance(answer, _Unplaced):
            return answer
        with deadline_at(deadline_s):
            if unplaced is not None:
                return unplaced()
            return self._on_home(call)  # older servers: the home broker, once, as before

    def _init_idempotent(self, transaction_timeout_ms: int | None) -> ProducerIdentity:
        """An idempotent producer's id, from any broker that coordinates something: the one
        that gave the last, the home broker, then every other known broker in turn; the
        whole round again after a pause while none can, until the call's deadline."""
        deadline_s = self._deadline_s()
        with deadline_at(deadline_s):
            # Once known, the home broker never changes: only the first call asks for
            # metadata here, and when no broker answers that, it fails at once.
            home = self.metadata.home()

        def ask_round() -> ProducerIdentity:
            addresses = [self._id_giver or home, home, *self.metadata.addresses()]
            last: TwinlogError | None = None
            for address in dict.fromkeys(addresses):
                try:
                    identity = self.pool.get(address).init_producer(None, transaction_timeout_ms)
                except NO_ID_HERE_ERRORS as error:
                    if isinstance(error, BrokerUnavailableError):
                        self.metadata.invalidate()
                    last = error
                    continue
                self._id_giver = address
                return identity
            assert last is not None  # the home broker at least was asked
            raise last

        return retry_routed(
            ask_round,
            retry_on=NO_ID_HERE_ERRORS,
            deadline_s=deadline_s,
            backoff=self._backoff,
            what=lambda: "an idempotent producer's id, from every broker",
            sleep=self._sleep,
        )

    # --- topics ---------------------------------------------------------------------------

    def create_topic(
        self, name: str, partitions: int = 1, config: Mapping[str, str] | None = None
    ) -> TopicDescription:
        return self._on_any(lambda broker: broker.create_topic(name, partitions, config))

    def create_partitions(
        self, name: str, partitions: int, *, validate_only: bool = False
    ) -> TopicDescription:
        return self._on_any(
            lambda broker: broker.create_partitions(name, partitions, validate_only=validate_only)
        )

    def alter_topic_config(
        self,
        name: str,
        set_values: Mapping[str, str],
        deleted: Sequence[str] = (),
        *,
        validate_only: bool = False,
    ) -> TopicDescription:
        return self._on_any(
            lambda broker: broker.alter_topic_config(
                name, set_values, deleted, validate_only=validate_only
            )
        )

    def delete_topic(self, name: str) -> None:
        self._on_any(lambda broker: broker.delete_topic(name))

    def list_topics(self) -> list[str]:
        return self._on_any(lambda broker: broker.list_topics())

    def describe_topic(self, name: str) -> TopicDescription:
        return self._on_any(lambda broker: broker.describe_topic(name))

    # --- ACLs: any broker keeps them for all (in ZooKeeper) ------------------------------

    def list_acls(
        self, principal: str | None = None, resource_type: str | None = None
    ) -> list[AclEntry]:
        return self._on_any(lambda broker: broker.list_acls(principal, resource_type))

    def create_acls(self, entries: list[AclEntry]) -> list[AclEntry]:
        return self._on_any(lambda broker: broker.create_acls(entries))

    def delete_acls(self, entries: list[AclEntry]) -> list[AclEntry]:
        return self._on_any(lambda broker: broker.delete_acls(entries))

    def auto_create_topic(
        self, name: str, creating: Callable[[], AbstractContextManager[object]] | None = None
    ) -> TopicDescription:
        """Any broker creates it (CreateTopics' path); ``creating`` is not sent."""
        return self._on_any(lambda broker: broker.auto_create_topic(name))

    def topic_settings(self, name: str) -> list[tuple[str, str, bool]]:
        return self._on_any(lambda broker: broker.topic_settings(name))

    def elect_preferred_leaders(
        self, partitions: Sequence[TopicPartition] | None, timeout_ms: int
    ) -> list[ElectionResult]:
        return self._on_any(lambda broker: broker.elect_preferred_leaders(partitions, timeout_ms))

    def reassign_partitions(
        self, moves: Sequence[PartitionMove], throttle_bytes_per_s: int, timeout_ms: int
    ) -> list[MoveResult]:
        return self._on_any(
            lambda broker: broker.reassign_partitions(moves, throttle_bytes_per_s, timeout_ms)
        )

    def shutdown_broker(self, broker_id: int) -> None:
        """Stop broker ``broker_id`` (a controlled shutdown), asked at its own address."""
        with deadline_at(self._deadline_s()):
            endpoint = self.cluster_metadata().broker(broker_id)
            if endpoint is None:
                raise InvalidConfigError(
                    f"broker {broker_id} is not registered: it is stopped already, or the id "
                    "is wrong (twinlog cluster describe lists the brokers)"
                )
            self.pool.get(endpoint.address).shutdown_broker(broker_id)

    def partition_reassignments(self) -> list[Reassignment]:
        """Every live broker's answer merged: each lists every reassignment that runs, and
        the partitions' leaders add how far behind the new replicas are."""
        snapshot = self.metadata.current()
        if snapshot.metadata.standalone:
            return self._on_home(lambda broker: broker.partition_reassignments())
        found: dict[tuple[str, int], Reassignment] = {}
        for address in sorted(b.address for b in snapshot.metadata.brokers):
            with deadline_at(self._deadline_s()):
                try:
                    answer = self.pool.get(address).partition_reassignments()
                except BrokerUnavailableError:
                    self.metadata.invalidate()
                    continue  # the others still say what runs
            for reassignment in answer:
                key = (reassignment.topic, reassignment.partition)
                if key not in found or reassignment.progress:
                    found[key] = reassignment
        return [found[key] for key in sorted(found)]

    # --- producing ---------------------------------------------------------------------------

    def init_producer(
        self, transactional_id: str | None = None, transaction_timeout_ms: int | None = None
    ) -> ProducerIdentity:
        if transactional_id is None:
            return self._init_idempotent(transaction_timeout_ms)
        return self._on_coordinator(
            CoordinatorKeyType.TRANSACTION,
            transactional_id,
            lambda broker: broker.init_producer(transactional_id, transaction_timeout_ms),
        )

    def produce(
        self,
        topic: str,
        partition: int,
        batch: bytes,
        attempt: str = "",
        transaction_id: int = NO_TRANSACTION_ID,
        current_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    ) -> ProduceResult:
        # ``current_leader_epoch``: the caller's is ignored, the routing's own is sent
        return self._on_leader(
            topic,
            partition,
            lambda broker, leader_epoch: broker.produce(
                topic, partition, batch, attempt, transaction_id, leader_epoch
            ),
        )

    def open_produce_stream(self) -> ClusterProducePipe:
        return ClusterProducePipe(
            self.leader_route,
            lambda address: self.pool.get(address).open_produce_stream(),
            self._routing_failed,
        )

    def _routing_failed(self, address: str, error: TwinlogError) -> None:
        """A call at ``address`` says the metadata is stale; a broker that timed out or was
        unreachable is asked last for the next metadata (it may be paused)."""
        self.metadata.invalidate()
        if (
            address
            and isinstance(error, (RequestTimedOutError, BrokerUnavailableError))
            and not sent_nothing(error)
        ):
            self.metadata.suspect(address)

    def begin_transaction(
        self, producer_id: int, producer_generation: int, request_id: int = 0
    ) -> int:
        return self._on_coordinator(
            CoordinatorKeyType.PRODUCER_ID,
            str(producer_id),
            lambda broker: broker.begin_transaction(producer_id, producer_generation, request_id),
        )

    def add_partitions_to_transaction(
        self,
        transaction_id: int,
        producer_id: int,
        producer_generation: int,
        partitions: Iterable[TopicPartition],
    ) -> None:
        chosen = list(partitions)
        self._on_coordinator(
            CoordinatorKeyType.PRODUCER_ID,
            str(producer_id),
            lambda broker: broker.add_partitions_to_transaction(
                transaction_id, producer_id, producer_generation, chosen
            ),
        )

    def coordinator_leads(self, producer_id: int, partitions: Sequence[TopicPartition]) -> bool:
        """``CoordinatorPlacement``: from the cached coordinator and metadata (a single
        node leads everything it coordinates)."""
        try:
            coordinator = self.coordinator_address(CoordinatorKeyType.PRODUCER_ID, str(producer_id))
            return coordinator is not None and all(
                self.leader_address(topic, partition) == coordinator
                for topic, partition in partitions
            )
        except TwinlogError:
            return False  # cannot tell now: adding them first is the safe choice

    def send_offsets_to_transaction(
        self,
        transaction_id: int,
        producer_id: int,
        producer_generation: int,
        group_id: str,
        offsets: Mapping[TopicPartition, int],
        member: GroupMemberRef = OUTSIDE_ANY_GROUP,
    ) -> None:
        """At the group's coordinator (it joins the offsets to the transaction at the
        transaction's coordinator itself); at the transaction's coordinator on a cluster
        whose groups have no coordinators of their own, where older brokers ran it."""

        def call(broker: NodeBroker) -> None:
            broker.send_offsets_to_transaction(
                transaction_id, producer_id, producer_generation, group_id, offsets, member
            )

        self._on_coordinator(
            CoordinatorKeyType.GROUP,
            group_id,
            call,
            unplaced=lambda: self._on_coordinator(
                CoordinatorKeyType.PRODUCER_ID, str(producer_id), call
            ),
        )

    def commit_transaction(
        self,
        transaction_id: int,
        producer_id: int,
        producer_generation: int,
        wait_for_applied: bool = False,
        attempts: Iterable[str] | None = None,
        batches_written: Mapping[TopicPartition, int] | None = None,
    ) -> None:
        chosen = None if attempts is None else list(attempts)
        self._on_coordinator(
            CoordinatorKeyType.PRODUCER_ID,
            str(producer_id),
            lambda broker: broker.commit_transaction(
                transaction_id,
                producer_id,
                producer_generation,
                wait_for_applied,
                chosen,
                batches_written,
            ),
        )

    def abort_transaction(
        self, transaction_id: int, producer_id: int, producer_generation: int
    ) -> None:
        self._on_coordinator(
            CoordinatorKeyType.PRODUCER_ID,
            str(producer_id),
            lambda broker: broker.abort_transaction(
                transaction_id, producer_id, producer_generation
            ),
        )

    # --- consuming ---------------------------------------------------------------------------

    def fetch(
        self,
        topic: str,
        partition: int,
        offset: int,
        max_bytes: int = 1 << 20,
        max_wait_ms: int = 0,
        min_bytes: int = 1,
        current_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    ) -> FetchResult:
        # ``current_leader_epoch``: the caller's is ignored, the routing's own is sent
        return self._on_leader(
            topic,
            partition,
            lambda broker, leader_epoch: broker.fetch(
                topic, partition, offset, max_bytes, max_wait_ms, min_bytes, leader_epoch
            ),
            extra_wait_ms=max_wait_ms,
        )

    def list_offset(self, topic: str, partition: int, spec: str | int) -> int:
        return self._on_leader(
            topic, partition, lambda broker, _epoch: broker.list_offset(topic, partition, spec)
        )

    def commit_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int],
        member: GroupMemberRef = OUTSIDE_ANY_GROUP,
    ) -> None:
        self._on_coordinator(
            CoordinatorKeyType.GROUP,
            group_id,
            lambda broker: broker.commit_offsets(group_id, offsets, member),
        )

    def fetch_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        chosen = list(partitions)
        return self._on_coordinator(
            CoordinatorKeyType.GROUP,
            group_id,
            lambda broker: broker.fetch_offsets(group_id, chosen),
        )

    # --- consumer groups -----------------------------------------------------------------------

    def group_heartbeat(self, call: GroupHeartbeat) -> GroupHeartbeatAnswer:
        return self._on_coordinator(
            CoordinatorKeyType.GROUP, call.group_id, lambda broker: broker.group_heartbeat(call)
        )

    def list_groups(self) -> list[GroupListing]:
        """Every live broker's groups (each lists those it coordinates); while a group's
        coordinator moves, the listing with members wins."""
        snapshot = self.metadata.current()
        if snapshot.metadata.standalone:
            return self._on_home(lambda broker: broker.list_groups())
        found: dict[str, GroupListing] = {}
        for address in sorted(b.address for b in snapshot.metadata.brokers):
            with deadline_at(self._deadline_s()):
                for listing in self.pool.get(address).list_groups():
                    known = found.get(listing.group_id)
                    if known is None or listing.member_count > known.member_count:
                        found[listing.group_id] = listing
        return [found[g] for g in sorted(found)]

    def describe_group(self, group_id: str) -> GroupDescription:
        return self._on_coordinator(
            CoordinatorKeyType.GROUP, group_id, lambda broker: broker.describe_group(group_id)
        )

    def delete_group(self, group_id: str) -> None:
        self._on_coordinator(
            CoordinatorKeyType.GROUP, group_id, lambda broker: broker.delete_group(group_id)
        )

    def delete_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, TwinlogError | None]:
        asked = list(partitions)
        return self._on_coordinator(
            CoordinatorKeyType.GROUP,
            group_id,
            lambda broker: broker.delete_offsets(group_id, asked),
        )

    # --- admin ---------------------------------------------------------------------------------

    def list_transactions(self) -> list[TransactionDescription]:
        return self._on_home(lambda broker: broker.list_transactions())

    def admin_abort_transaction(self, transaction_id: int) -> None:
        self._on_coordinator(
            CoordinatorKeyType.PRODUCER_ID,
            str(transaction_id),
            lambda broker: broker.admin_abort_transaction(transaction_id),
        )

    def describe_producers(self, topic: str, partition: int) -> list[ProducerDescription]:
        return self._on_leader(
            topic, partition, lambda broker, _epoch: broker.describe_producers(topic, partition)
        )

    def delete_records(self, topic: str, partition: int, before_offset: int) -> int:
        # Only the leader deletes; a retry after a moved leader is harmless (the start
        # never moves back, and the same offset again changes nothing).
        return self._on_leader(
            topic,
            partition,
            lambda broker, _epoch: broker.delete_records(topic, partition, before_offset),
        )
