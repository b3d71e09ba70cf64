"""The coordination calls through ``twinlog.v1.Coordination`` on real gRPC servers on
loopback, each around a real single-node broker: broker A's client reaches broker B's
partitions (``__consumer_offsets`` ones too) and coordinators where a (fake) locator says
they are, and every refusal comes back as the class the in-process call raises."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from broker_support import batch

from twinlog.engine.base.errors import (
    BrokerUnavailableError,
    FencedLeaderEpochError,
    InvalidTxnStateError,
    NotCoordinatorError,
    NotLeaderOrFollowerError,
    PendingTransactionError,
    ProducerFencedError,
    RequestTimedOutError,
    TransactionCoordinatorFencedError,
    TwinlogError,
    UnknownLeaderEpochError,
    UnknownProducerIdError,
    UnknownTransactionError,
)
from twinlog.engine.base.types import ProducerIdentity, TopicPartition, TransactionState
from twinlog.engine.broker.broker import Broker
from twinlog.engine.broker.seam_adapters import HereCoordinators
from twinlog.engine.records.batch_reader import iter_batches
from twinlog.engine.transactions.partition_calls import (
    ApplyAbort,
    ApplyCommit,
    CallEpochs,
    CountEntries,
    EntryCount,
    RegisterPartition,
    SettleOffsetsHolder,
    coordinator_partition_of,
)
from twinlog.rpc.generated.twinlog.v1 import coordination_pb2, coordination_pb2_grpc
from twinlog.rpc.replication.coordination_client import (
    RemotePartitionLeaders,
    RemoteTransactionCoordinators,
)
from twinlog.rpc.replication.coordination_locator import GONE, Location
from twinlog.rpc.replication.coordination_service import add_coordination_service
from twinlog.rpc.server.config import ServerConfig
from twinlog.rpc.server.server import RpcServer

A, B, C, D = 1, 2, 3, 4  # broker ids: A calls; B is a real broker; C and D refuse all
TOPIC = "seam"
P0 = TopicPartition(TOPIC, 0)
P1 = TopicPartition(TOPIC, 1)
TIMEOUT_S = 2.0


# --- servers and a locator ---------------------------------------------------------------


class CountingCalls(grpc.ServerInterceptor):
    """Records the name of every method called."""

    def __init__(self) -> None:
        self.methods: list[str] = []

    def intercept_service(self, continuation: Any, handler_call_details: Any) -> Any:
        self.methods.append(handler_call_details.method.rsplit("/", 1)[-1])
        return continuation(handler_call_details)


class Serving:
    """A gRPC server on a free loopback port serving Coordination for ``host``; ``calls``
    names the methods it was called with."""

    def __init__(self, host: Any) -> None:
        self.calls = CountingCalls()
        self.server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=4), interceptors=[self.calls]
        )
        add_coordination_service(self.server, host)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.address = f"127.0.0.1:{self.port}"
        self.server.start()

    def stop(self) -> None:
        self.server.stop(0).wait()


class Refusing:
    """A broker that neither leads nor coordinates anything; counts the calls it got."""

    def __init__(self) -> None:
        self.calls = 0
        self.local_partition_leaders = self

    def register_partition_here(self, request: RegisterPartition) -> None:
        self.calls += 1
        raise NotCoordinatorError(f"broker does not coordinate {request.transaction_id}")

    def settle_offsets_holder_here(self, request: SettleOffsetsHolder) -> None:
        self.calls += 1
        raise NotCoordinatorError(f"broker does not coordinate {request.holder_id}")

    def _refuse(self, request: Any) -> Any:
        self.calls += 1
        raise NotLeaderOrFollowerError(f"{request.topic_partition}: not led here")

    count_entries = apply_commit = apply_abort = _refuse

    def leader_epoch(self, topic_partition: TopicPartition) -> int:
        return 0


class Hanging:
    """A broker whose partition calls never finish (until ``release``)."""

    def __init__(self) -> None:
        self.calls = 0
        self.release = threading.Event()
        self.local_partition_leaders = self

    def apply_abort(self, request: ApplyAbort) -> None:
        self.calls += 1
        self.release.wait(10)


@dataclass
class FakeLocator:
    """Answers from dicts; ``after_refresh`` replaces an answer once a refresh is asked."""

    leaders: dict[TopicPartition, Location | None] = field(default_factory=dict)
    coordinators: dict[int, int | None] = field(default_factory=dict)
    leaders_after_refresh: dict[TopicPartition, Location | None] = field(default_factory=dict)
    coordinators_after_refresh: dict[int, int | None] = field(default_factory=dict)
    asked: list[tuple[object, bool]] = field(default_factory=list)

    @property
    def refreshes(self) -> int:
        return sum(1 for _, refresh in self.asked if refresh)

    def partition_leader(
        self, topic_partition: TopicPartition, refresh: bool = False
    ) -> Location | None:
        self.asked.append((topic_partition, refresh))
        if refresh and topic_partition in self.leaders_after_refresh:
            self.leaders[topic_partition] = self.leaders_after_refresh.pop(topic_partition)
        return self.leaders.get(topic_partition)

    def coordinator(self, coordinator_partition: int, refresh: bool = False) -> int | None:
        self.asked.append((coordinator_partition, refresh))
        if refresh and coordinator_partition in self.coordinators_after_refresh:
            self.coordinators[coordinator_partition] = self.coordinators_after_refresh.pop(
                coordinator_partition
            )
        return self.coordinators.get(coordinator_partition)


@dataclass
class World:
    a: Broker
    b: Broker
    refusing: Refusing
    addresses: dict[int, str]
    locator: FakeLocator
    stops: list[Any]
    b_calls: CountingCalls

    def leaders(self, timeout_s: float = TIMEOUT_S) -> RemotePartitionLeaders:
        remote = RemotePartitionLeaders(
            A,
            self.a.local_partition_leaders,
            self.locator,
            self.addresses.get,
            timeout_s=timeout_s,
        )
        self.stops.append(remote.close)
        return remote

    def coordinators(self, timeout_s: float = TIMEOUT_S) -> RemoteTransactionCoordinators:
        remote = RemoteTransactionCoordinators(
            A, HereCoordinators(self.a), self.locator, self.addresses.get, timeout_s=timeout_s
        )
        self.stops.append(remote.close)
        return remote


def _open(path: Path) -> Broker:
    broker = Broker.open(path, transaction_check_interval_ms=60_000)
    broker.create_topic(TOPIC, 2)
    return broker


@pytest.fixture()
def world(tmp_path: Path) -> Iterator[World]:
    a, b = _open(tmp_path / "a"), _open(tmp_path / "b")
    refusing = Refusing()
    b_server, c_server, d_server = Serving(b), Serving(refusing), Serving(refusing)
    addresses = {B: b_server.address, C: c_server.address, D: d_server.address}
    stops: list[Any] = []
    try:
        yield World(a, b, refusing, addresses, FakeLocator(), stops, b_server.calls)
    finally:
        for stop in reversed(stops):
            stop()
        for server in (b_server, c_server, d_server):
            server.stop()
        a.close()
        b.close()


def open_transaction(broker: Broker, name: str) -> tuple[ProducerIdentity, int]:
    identity = broker.init_producer(name)
    return identity, broker.begin_transaction(identity.producer_id, identity.producer_generation)


def epochs_of(transaction_id: int, coordinator_epoch: int = 0, leader_epoch: int = 0) -> CallEpochs:
    return CallEpochs(coordinator_partition_of(transaction_id), coordinator_epoch, leader_epoch)


def values_in_log(broker: Broker, partition: int) -> list[bytes]:
    found: list[bytes] = []
    offset = 0
    while True:
        records = broker.fetch(TOPIC, partition, offset, max_bytes=1 << 30).records
        if not records:
            return found
        for item in iter_batches(records):
            found.extend(r.value or b"" for r in item.records())
            offset = item.header.next_offset


# --- partition leaders ---------------------------------------------------------------


def test_count_commit_and_abort_act_on_the_broker_the_locator_names(world: World) -> None:
    world.locator.leaders = {P0: Location(B, 0), P1: Location(B, 0)}
    leaders = world.leaders()
    identity, committed = open_transaction(world.b, "committed")
    world.b.produce(TOPIC, 0, batch([b"one"], identity, 0, committed))
    world.b.produce(TOPIC, 0, batch([b"two"], identity, 1, committed))
    # A holds the same topic, empty: a count answered by A itself would be 0.
    count = leaders.count_entries(CountEntries(committed, P0, epochs_of(committed)))
    assert count == EntryCount(2)
    leaders.apply_commit(ApplyCommit(committed, P0, None, 2, epochs_of(committed)))
    assert values_in_log(world.b, 0) == [b"one", b"two"]
    assert values_in_log(world.a, 0) == []

    other, aborted = open_transaction(world.b, "aborted")
    world.b.produce(TOPIC, 1, batch([b"gone"], other, 0, aborted))
    partition = world.b.partition(TopicPartition(TOPIC, 1))
    assert partition.journaled_entries(aborted) == 1
    leaders.apply_abort(ApplyAbort(aborted, P1, epochs_of(aborted)))
    assert partition.journaled_entries(aborted) == 0
    assert values_in_log(world.b, 1) == []


def test_a_copy_group_travels_in_one_call_and_each_commit_gets_its_outcome(
    world: World,
) -> None:
    world.locator.leaders = {P0: Location(B, 0)}
    leaders = world.leaders()
    requests = []
    for name in ("first", "second", "aborted", "third"):
        identity, transaction_id = open_transaction(world.b, name)
        world.b.produce(TOPIC, 0, batch([name.encode()], identity, 0, transaction_id))
        epochs = epochs_of(transaction_id)
        if name == "aborted":
            leaders.apply_abort(ApplyAbort(transaction_id, P0, epochs))
        requests.append(ApplyCommit(transaction_id, P0, None, 0, epochs))
    world.b_calls.methods.clear()
    outcomes = leaders.apply_commits(requests)
    assert world.b_calls.methods == ["ApplyCommits"]  # one call for the group
    assert [type(outcome) for outcome in outcomes] == [
        type(None),
        type(None),
        InvalidTxnStateError,  # the class an in-process call raises, for this one alone
        type(None),
    ]
    assert "ABORTED" in str(outcomes[2])
    assert values_in_log(world.b, 0) == [b"first", b"second", b"third"]
    assert values_in_log(world.a, 0) == []
    # Delivered again: each already applied, nothing copied twice.
    assert leaders.apply_commits(requests)[:2] == [None, None]
    assert values_in_log(world.b, 0) == [b"first", b"second", b"third"]


def test_a_copy_group_refused_by_its_broker_is_every_commits_error(world: World) -> None:
    world.locator.leaders = {P0: Location(C, 0)}  # C refuses everything
    leaders = world.leaders()
    requests = [ApplyCommit(t, P0, None, 0, epochs_of(t)) for t in (256, 512)]
    outcomes = leaders.apply_commits(requests)
    assert [type(outcome) for outcome in outcomes] == [NotLeaderOrFollowerError] * 2


def test_attempts_none_and_empty_reach_the_partition_apart(world: World) -> None:
    world.locator.leaders = {P0: Location(B, 0), P1: Location(B, 0)}
    leaders = world.leaders()
    for partition, attempts, expected in (
        (0, None, [b"plain", b"tagged"]),  # every attempt's batches
        (1, (), [b"plain"]),  # untagged batches only
    ):
        identity, transaction_id = open_transaction(world.b, f"attempts-{partition}")
        world.b.produce(TOPIC, partition, batch([b"plain"], identity, 0, transaction_id))
        world.b.produce(
            TOPIC, partition, batch([b"tagged"], identity, 0, transaction_id), attempt="task-1"
        )
        tp = TopicPartition(TOPIC, partition)
        epochs = epochs_of(transaction_id)
        count = leaders.count_entries(CountEntries(transaction_id, tp, epochs)).entry_count
        leaders.apply_commit(ApplyCommit(transaction_id, tp, attempts, count, epochs))
        assert values_in_log(world.b, partition) == expected


def test_a_stale_coordinator_epoch_comes_back_fenced(world: World) -> None:
    world.locator.leaders = {P0: Location(B, 0)}
    leaders = world.leaders()
    identity, transaction_id = open_transaction(world.b, "fenced")
    world.b.produce(TOPIC, 0, batch([b"kept"], identity, 0, transaction_id))
    newer = epochs_of(transaction_id, coordinator_epoch=1)
    assert leaders.count_entries(CountEntries(transaction_id, P0, newer)) == EntryCount(1)
    stale = epochs_of(transaction_id, coordinator_epoch=0)
    with pytest.raises(TransactionCoordinatorFencedError) as raised:
        leaders.apply_commit(ApplyCommit(transaction_id, P0, None, 1, stale))
    assert raised.value.fatal and not raised.value.retriable
    with pytest.raises(TransactionCoordinatorFencedError):
        leaders.apply_abort(ApplyAbort(transaction_id, P0, stale))
    assert (
        world.b.partition(TopicPartition(TOPIC, 0)).journaled_entries(transaction_id) == 1
    )  # untouched
    assert values_in_log(world.b, 0) == []
    assert world.locator.refreshes == 0  # not a question of where the leader is


def test_a_stale_leader_epoch_comes_back_fenced_and_refreshes_the_locator(world: World) -> None:
    world.locator.leaders = {P0: Location(B, 2)}
    leaders = world.leaders()
    identity, transaction_id = open_transaction(world.b, "leader-epochs")
    world.b.produce(TOPIC, 0, batch([b"v"], identity, 0, transaction_id))
    world.b.partition(TopicPartition(TOPIC, 0)).epochs.become_leader(2)
    with pytest.raises(FencedLeaderEpochError) as fenced:
        leaders.apply_commit(
            ApplyCommit(transaction_id, P0, None, 1, epochs_of(transaction_id, leader_epoch=1))
        )
    assert fenced.value.retriable
    assert world.locator.refreshes == 1  # the caller's next epochs come from a fresh read
    with pytest.raises(UnknownLeaderEpochError):
        leaders.apply_abort(ApplyAbort(transaction_id, P0, epochs_of(transaction_id, 0, 3)))
    assert world.b.partition(TopicPartition(TOPIC, 0)).journaled_entries(transaction_id) == 1
    # The epoch a coordinator puts in its calls: what the locator says.
    assert leaders.leader_epoch(P0) == 2
    leaders.apply_commit(ApplyCommit(transaction_id, P0, None, 1, epochs_of(transaction_id, 0, 2)))
    assert values_in_log(world.b, 0) == [b"v"]


def test_an_unreachable_broker_is_a_retriable_error_within_the_deadline(world: World) -> None:
    with socket.socket() as unused:  # a port nobody listens on once closed
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    world.addresses[9] = f"127.0.0.1:{port}"
    world.locator.leaders = {P0: Location(9, 0)}
    leaders = world.leaders(timeout_s=TIMEOUT_S)
    started = time.monotonic()
    with pytest.raises(BrokerUnavailableError) as raised:
        leaders.count_entries(CountEntries(5, P0, epochs_of(5)))
    assert raised.value.retriable
    assert time.monotonic() - started < TIMEOUT_S
    assert "broker 9" in str(raised.value)
    assert world.locator.refreshes == 1  # one refresh; nothing moved, so no second send


def test_a_broker_that_never_answers_is_cut_off_at_the_deadline(world: World) -> None:
    hanging = Hanging()
    serving = Serving(hanging)
    world.addresses[9] = serving.address
    world.locator.leaders = {P0: Location(9, 0)}
    leaders = world.leaders(timeout_s=0.5)
    started = time.monotonic()
    try:
        with pytest.raises(RequestTimedOutError) as raised:
            leaders.apply_abort(ApplyAbort(5, P0, epochs_of(5)))
        elapsed = time.monotonic() - started
    finally:
        hanging.release.set()
        serving.stop()
    assert raised.value.retriable
    assert 0.5 <= elapsed < 1.5
    assert hanging.calls == 1  # a deadline is not a stale location: not sent again


def test_a_silent_port_is_a_retriable_error_within_the_deadline(world: World) -> None:
    with socket.socket() as silent:  # accepts connections, never speaks HTTP/2
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        world.addresses[9] = f"127.0.0.1:{silent.getsockname()[1]}"
        world.locator.leaders = {P0: Location(9, 0)}
        leaders = world.leaders(timeout_s=0.5)
        started = time.monotonic()
        with pytest.raises((RequestTimedOutError, BrokerUnavailableError)) as raised:
            leaders.apply_abort(ApplyAbort(5, P0, epochs_of(5)))
        elapsed = time.monotonic() - started
    assert raised.value.retriable
    assert elapsed < 1.5


def test_a_broker_without_an_address_or_a_partition_without_a_leader_is_retriable(
    world: World,
) -> None:
    world.locator.leaders = {P0: Location(9, 0), P1: None}
    leaders = world.leaders()
    with pytest.raises(BrokerUnavailableError, match="broker 9 has no registered address"):
        leaders.apply_abort(ApplyAbort(5, P0, epochs_of(5)))
    with pytest.raises(NotLeaderOrFollowerError, match="no live leader is known") as raised:
        leaders.apply_abort(ApplyAbort(5, P1, epochs_of(5)))
    assert raised.value.retriable


def test_a_moved_leader_costs_one_refresh_and_one_more_send(world: World) -> None:
    world.locator.leaders = {P0: Location(C, 0)}
    world.locator.leaders_after_refresh = {P0: Location(B, 0)}
    leaders = world.leaders()
    identity, transaction_id = open_transaction(world.b, "moved")
    world.b.produce(TOPIC, 0, batch([b"v"], identity, 0, transaction_id))
    count = leaders.count_entries(CountEntries(transaction_id, P0, epochs_of(transaction_id)))
    assert count == EntryCount(1)
    assert world.refusing.calls == 1 and world.locator.refreshes == 1


def test_a_refusal_everywhere_is_tried_at_most_twice(world: World) -> None:
    world.locator.leaders = {P0: Location(C, 0)}
    world.locator.leaders_after_refresh = {P0: Location(D, 0)}  # moved, and refuses too
    leaders = world.leaders()
    with pytest.raises(NotLeaderOrFollowerError, match="not led here"):
        leaders.apply_abort(ApplyAbort(5, P0, epochs_of(5)))
    assert world.refusing.calls == 2 and world.locator.refreshes == 1
    # Nothing moved: the refusal is raised after the refresh, not sent again.
    world.refusing.calls = 0
    with pytest.raises(NotLeaderOrFollowerError):
        leaders.apply_abort(ApplyAbort(5, P0, epochs_of(5)))
    assert world.refusing.calls == 1 and world.locator.refreshes == 2


def test_this_brokers_partitions_are_answered_in_process(world: World) -> None:
    world.locator.leaders = {P0: Location(A, 0)}
    leaders = world.leaders()
    identity, transaction_id = open_transaction(world.a, "here")
    world.a.produce(TOPIC, 0, batch([b"here"], identity, 0, transaction_id))
    assert leaders.count_entries(CountEntries(transaction_id, P0, epochs_of(transaction_id))) == (
        EntryCount(1)
    )


def test_an_offsets_partition_is_reached_at_its_leader_like_any(world: World) -> None:
    """``__consumer_offsets`` is replicated: its partitions' calls go to their leaders (the
    groups' coordinators), not to this broker's own copy."""
    identity, transaction_id = open_transaction(world.b, "offsets")
    world.b.send_offsets_to_transaction(
        transaction_id, identity.producer_id, identity.producer_generation, "billing", {P0: 7}
    )
    offsets = world.b.group_offsets.partition_for("billing")
    world.locator.leaders = {offsets: Location(B, 3)}
    leaders = world.leaders()
    epochs = epochs_of(transaction_id)
    # A holds the same partition without the batch: a count answered by A would be 0.
    assert leaders.count_entries(CountEntries(transaction_id, offsets, epochs)) == EntryCount(1)
    assert (offsets, False) in world.locator.asked
    assert leaders.leader_epoch(offsets) == 3  # the leader's epoch, as for any partition


def test_a_deleted_partition_is_answered_as_the_in_process_call_does(world: World) -> None:
    world.locator.leaders = {TopicPartition("deleted", 0): GONE}
    leaders = world.leaders()
    gone = TopicPartition("deleted", 0)
    assert leaders.count_entries(CountEntries(5, gone, epochs_of(5))) == EntryCount(-1)
    leaders.apply_commit(ApplyCommit(5, gone, None, 1, epochs_of(5)))  # skipped, as locally
    assert world.locator.refreshes >= 1  # a cached GONE is read again before it is believed


def test_leader_epoch_is_the_locators_and_never_older_than_this_brokers(world: World) -> None:
    world.locator.leaders = {P0: Location(B, 5), P1: None}
    leaders = world.leaders()
    assert leaders.leader_epoch(P0) == 5
    assert leaders.leader_epoch(P1) == 0  # unknown
    world.a.partition(TopicPartition(TOPIC, 0)).epochs.become_leader(
        7
    )  # this broker knows a newer one
    world.locator.asked.clear()
    assert leaders.leader_epoch(P0) == 7
    assert (P0, True) in world.locator.asked  # and the stale answer was read again


def test_a_closed_transport_refuses_other_brokers_but_still_answers_here(world: World) -> None:
    world.locator.leaders = {P0: Location(B, 0), P1: Location(A, 0)}
    leaders = world.leaders()
    leaders.close()
    with pytest.raises(BrokerUnavailableError, match="closed"):
        leaders.apply_abort(ApplyAbort(5, P0, epochs_of(5)))
    leaders.apply_abort(ApplyAbort(5, P1, epochs_of(5)))


# --- coordinators ----------------------------------------------------------------------


def _register(identity: ProducerIdentity, transaction_id: int) -> RegisterPartition:
    return RegisterPartition(
        transaction_id,
        P0,
        identity.producer_id,
        identity.producer_generation,
        epochs_of(transaction_id),
    )


def test_register_partition_reaches_the_coordinator_the_locator_names(world: World) -> None:
    identity, transaction_id = open_transaction(world.b, "register")
    world.locator.coordinators = {coordinator_partition_of(transaction_id): B}
    world.coordinators().register_partition(_register(identity, transaction_id))
    [described] = world.b.list_transactions()
    assert described.partitions == (P0,)
    assert world.a.list_transactions() == []


def test_a_coordinators_refusal_is_the_class_the_in_process_call_raises(world: World) -> None:
    identity, transaction_id = open_transaction(world.b, "refused")
    owner = coordinator_partition_of(transaction_id)
    world.locator.coordinators = {owner: B}
    coordinators = world.coordinators()
    # A coordinator epoch B's coordinator is not at.
    fenced = RegisterPartition(
        transaction_id,
        P0,
        identity.producer_id,
        identity.producer_generation,
        CallEpochs(owner, 1, 0),
    )
    with pytest.raises(TransactionCoordinatorFencedError):
        coordinators.register_partition(fenced)
    # An id B's coordinators never issued: the same class and words as in-process.
    foreign = RegisterPartition((1 << 20) | 200, P0, identity.producer_id, 0, CallEpochs(200, 0, 0))
    world.locator.coordinators[coordinator_partition_of(foreign.transaction_id)] = B
    with pytest.raises(TwinlogError) as in_process:
        world.b.register_partition_here(foreign)
    with pytest.raises(TwinlogError) as remote:
        coordinators.register_partition(foreign)
    assert type(remote.value) is type(in_process.value)
    assert str(in_process.value) in str(remote.value)
    assert world.b.list_transactions()[0].partitions == ()  # nothing registered


def test_a_coordinator_nobody_leads_is_not_coordinator(world: World) -> None:
    identity, transaction_id = open_transaction(world.b, "nobody")
    world.locator.coordinators = {coordinator_partition_of(transaction_id): None}
    with pytest.raises(NotCoordinatorError, match="no live broker") as raised:
        world.coordinators().register_partition(_register(identity, transaction_id))
    assert raised.value.retriable
    assert world.locator.refreshes == 1


def test_a_moved_coordinator_costs_one_refresh_and_one_more_send(world: World) -> None:
    identity, transaction_id = open_transaction(world.b, "moved-coordinator")
    owner = coordinator_partition_of(transaction_id)
    world.locator.coordinators = {owner: C}
    world.locator.coordinators_after_refresh = {owner: B}
    world.coordinators().register_partition(_register(identity, transaction_id))
    assert world.b.list_transactions()[0].partitions == (P0,)
    assert world.refusing.calls == 1 and world.locator.refreshes == 1


def test_a_coordinator_that_refuses_and_did_not_move_is_not_asked_again(world: World) -> None:
    identity, transaction_id = open_transaction(world.b, "stays")
    world.locator.coordinators = {coordinator_partition_of(transaction_id): C}
    with pytest.raises(NotCoordinatorError) as raised:
        world.coordinators().register_partition(_register(identity, transaction_id))
    assert raised.value.retriable
    assert world.refusing.calls == 1 and world.locator.refreshes == 1


@pytest.mark.parametrize("producer_known_there", [True, False])
def test_a_deposed_coordinators_unknown_costs_one_refresh_and_one_more_send(
    world: World, producer_known_there: bool
) -> None:
    """A coordinator moved away answers "unknown" for what its successor began until it
    learns of the move (A here, which never saw the transaction): the call goes on to
    the coordinator the refreshed locator names."""
    identity, transaction_id = open_transaction(world.b, "deposed")
    if producer_known_there:  # the same producer id, issued there before the move
        assert world.a.init_producer("deposed").producer_id == identity.producer_id
    owner = coordinator_partition_of(transaction_id)
    world.locator.coordinators = {owner: A}
    world.locator.coordinators_after_refresh = {owner: B}
    world.coordinators().register_partition(_register(identity, transaction_id))
    assert world.b.list_transactions()[0].partitions == (P0,)
    assert world.locator.refreshes == 1


def test_an_unknown_transaction_where_the_coordinator_stays_is_answered(world: World) -> None:
    identity, transaction_id = open_transaction(world.b, "unknown-here")
    world.locator.coordinators = {coordinator_partition_of(transaction_id): A}
    with pytest.raises((UnknownTransactionError, UnknownProducerIdError)):
        world.coordinators().register_partition(_register(identity, transaction_id))
    assert world.locator.refreshes == 1


def test_this_brokers_coordinator_registers_in_process(world: World) -> None:
    identity, transaction_id = open_transaction(world.a, "local")
    world.locator.coordinators = {coordinator_partition_of(transaction_id): A}
    world.coordinators().register_partition(_register(identity, transaction_id))
    assert world.a.list_transactions()[0].partitions == (P0,)


def test_an_offsets_partition_registers_with_the_transactions_coordinator(world: World) -> None:
    """A group coordinator's offsets partition joins a transaction coordinated elsewhere
    (send_offsets_to_transaction runs at the group coordinator)."""
    identity, transaction_id = open_transaction(world.b, "remote-offsets")
    world.locator.coordinators = {coordinator_partition_of(transaction_id): B}
    offsets = world.a.group_offsets.partition_for("billing")
    world.coordinators().register_partition(
        RegisterPartition(
            transaction_id,
            offsets,
            identity.producer_id,
            identity.producer_generation,
            epochs_of(transaction_id),
        )
    )
    assert world.b.list_transactions()[0].partitions == (offsets,)
    assert world.a.list_transactions() == []


# --- settling a group's offsets holder (KIP-447) ----------------------------------------


def _settle(holder_id: int, newcomer_id: int) -> SettleOffsetsHolder:
    return SettleOffsetsHolder(holder_id, newcomer_id, "billing", P0)


def _state(broker: Broker, transaction_id: int) -> TransactionState | None:
    """The transaction's state at ``broker``; None once it is no longer in flight."""
    for described in broker.list_transactions():
        if described.transaction_id == transaction_id:
            return described.state
    return None


class Pending:
    """A coordinator whose holder is being committed: every settle is refused, retriable."""

    def __init__(self) -> None:
        self.calls = 0

    def settle_offsets_holder_here(self, request: SettleOffsetsHolder) -> None:
        self.calls += 1
        raise PendingTransactionError(f"transaction {request.holder_id} is being committed")


def test_settle_aborts_an_older_holder_at_the_coordinator_the_locator_names(
    world: World,
) -> None:
    _identity, holder = open_transaction(world.b, "older-holder")
    world.locator.coordinators = {coordinator_partition_of(holder): B}
    world.coordinators().settle_offsets_holder(_settle(holder, holder + (1 << 8)))
    assert _state(world.b, holder) is None  # aborted: no longer in flight
    # A holder its coordinator does not know (complete, or never begun): nothing to do.
    world.coordinators().settle_offsets_holder(_settle(holder + (5 << 8), holder + (6 << 8)))


def test_a_newer_holder_fences_the_newcomer_with_the_in_process_class(world: World) -> None:
    _identity, holder = open_transaction(world.b, "newer-holder")
    world.locator.coordinators = {coordinator_partition_of(holder): B}
    zombie = _settle(holder, holder - (1 << 8))
    with pytest.raises(ProducerFencedError) as remote:
        world.coordinators().settle_offsets_holder(zombie)
    with pytest.raises(ProducerFencedError) as in_process:
        world.b.settle_offsets_holder_here(zombie)
    assert remote.value.fatal and not remote.value.retriable
    assert str(in_process.value) in str(remote.value)
    assert _state(world.b, holder) is TransactionState.ONGOING  # the holder keeps them
    assert world.locator.refreshes == 0  # a refusal, not a question of where


def test_a_pending_holder_is_a_retriable_refusal_sent_once(world: World) -> None:
    pending = Pending()
    serving = Serving(pending)
    world.addresses[9] = serving.address
    holder = (3 << 8) | 1
    world.locator.coordinators = {1: 9}
    try:
        with pytest.raises(PendingTransactionError, match="being committed") as raised:
            world.coordinators().settle_offsets_holder(_settle(holder, holder + (1 << 8)))
    finally:
        serving.stop()
    assert raised.value.retriable
    assert pending.calls == 1 and world.locator.refreshes == 0  # the caller retries


def test_settle_follows_a_moved_coordinator_once(world: World) -> None:
    _identity, holder = open_transaction(world.b, "moved-holder")
    owner = coordinator_partition_of(holder)
    world.locator.coordinators = {owner: C}
    world.locator.coordinators_after_refresh = {owner: B}
    world.coordinators().settle_offsets_holder(_settle(holder, holder + (1 << 8)))
    assert _state(world.b, holder) is None  # aborted: no longer in flight
    assert world.refusing.calls == 1 and world.locator.refreshes == 1
    # Refused where it stays, or nobody leads: NotCoordinatorError, retriable, not resent.
    world.refusing.calls = 0
    world.locator.coordinators = {owner: C}
    with pytest.raises(NotCoordinatorError):
        world.coordinators().settle_offsets_holder(_settle(holder, holder + (1 << 8)))
    assert world.refusing.calls == 1
    world.locator.coordinators = {owner: None}
    with pytest.raises(NotCoordinatorError, match="no live broker") as raised:
        world.coordinators().settle_offsets_holder(_settle(holder, holder + (1 << 8)))
    assert raised.value.retriable and world.refusing.calls == 1


def test_settle_at_this_brokers_coordinator_is_made_in_process(world: World) -> None:
    _identity, holder = open_transaction(world.a, "local-holder")
    world.locator.coordinators = {coordinator_partition_of(holder): A}
    assert A not in world.addresses  # a send to A would fail: no address
    world.coordinators().settle_offsets_holder(_settle(holder, holder + (1 << 8)))
    assert _state(world.a, holder) is None  # aborted: no longer in flight


# --- the server ------------------------------------------------------------------------


def _count_over(address: str) -> coordination_pb2.CountEntriesResponse:
    with grpc.insecure_channel(address) as channel:
        stub = coordination_pb2_grpc.CoordinationStub(channel)
        request = coordination_pb2.CountEntriesRequest(transaction_id=5)
        request.topic_partition.topic = "nothing"
        answer: coordination_pb2.CountEntriesResponse = stub.CountEntries(request, timeout=5)
        return answer


def test_a_cluster_brokers_server_serves_coordination_and_a_single_node_does_not(
    tmp_path: Path,
) -> None:
    """Served where Replication is: like it, the service trusts whoever reaches the port,
    so a single-node server (where nothing calls it) leaves it out."""
    for broker_id, served in ((1, True), (None, False)):
        broker = Broker.open(tmp_path / f"broker-{broker_id}", broker_id=broker_id)
        server = RpcServer(broker, ServerConfig(host="127.0.0.1", port=0))
        server.start()
        try:
            if served:  # a partition nobody holds: answered as deleted, as in-process
                assert _count_over(f"127.0.0.1:{server.port}").entry_count == -1
            else:
                with pytest.raises(grpc.RpcError) as raised:
                    _count_over(f"127.0.0.1:{server.port}")
                assert raised.value.code() is grpc.StatusCode.UNIMPLEMENTED
        finally:
            server.stop(grace_ms=0)
            broker.close()
