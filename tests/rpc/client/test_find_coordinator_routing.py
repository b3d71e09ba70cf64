"""The cluster client that follows transaction coordinators (``ClusterBroker`` over
``cluster_fakes``): coordinator calls reach the coordinator FindCoordinator names, kept
per coordinator partition; NotCoordinatorError or an unreachable coordinator makes the
client find it again, CoordinatorLoadInProgressError retries the same broker after a
pause; a commit whose answer was lost is sent again as a commit, never turned into an
abort; a coordinator that never comes fails the call at its deadline with a typed error."""

from __future__ import annotations

import time

import pytest
from cluster_fakes import FakeCluster, address_of

from twinlog.engine.base.cluster_metadata import BrokerEndpoint
from twinlog.engine.base.errors import (
    BrokerUnavailableError,
    NotCoordinatorError,
    RequestTimedOutError,
    TwinlogError,
)
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.internal_topics import coordinator_partition_of_transactional_id
from twinlog.engine.broker.partition_calls import coordinator_partition_of
from twinlog.rpc.client import Producer
from twinlog.rpc.client.call_deadline import deadline_at
from twinlog.rpc.client.cluster import ClusterBroker
from twinlog.rpc.client.connection_options import ConnectionOptions
from twinlog.rpc.client.coordinator_cache import CoordinatorCache
from twinlog.rpc.client.retry import RetryPolicy
from twinlog.rpc.wire.broker_api import CoordinatorKeyType, FoundCoordinator

TRANSACTION = CoordinatorKeyType.TRANSACTION
PRODUCER_ID = CoordinatorKeyType.PRODUCER_ID
GROUP = CoordinatorKeyType.GROUP

# --- the client's cache ------------------------------------------------------------------------


def test_the_cache_keeps_coordinators_per_partition_and_forgets_only_what_failed() -> None:
    cache = CoordinatorCache(transactional_ids_max=2)
    found = FoundCoordinator(3, BrokerEndpoint(2, "10.0.0.2", 7070))
    assert cache.partition_of(TRANSACTION, "app") is None
    cache.learn(TRANSACTION, "app", found)
    assert cache.partition_of(TRANSACTION, "app") == 3
    # A producer id of partition 3 shares the answer (its low bits).
    assert cache.address_of(cache.partition_of(PRODUCER_ID, str((9 << 8) | 3))) == "10.0.0.2:7070"
    cache.forget(3, "10.0.0.9:7070")  # another broker failed: the newer answer stays
    assert cache.address_of(3) == "10.0.0.2:7070"
    cache.forget(3, "10.0.0.2:7070")
    assert cache.address_of(3) is None and cache.partition_of(TRANSACTION, "app") == 3
    cache.learn(TRANSACTION, "b", found)
    cache.learn(TRANSACTION, "c", found)  # over the cap: the oldest id is dropped
    assert cache.partition_of(TRANSACTION, "app") is None
    cache.learn(GROUP, "g", FoundCoordinator(-1, found.broker))  # nothing to keep it under
    assert cache.known() == {3: "10.0.0.2:7070"}


# --- client routing ----------------------------------------------------------------------------

BOOTSTRAP = ",".join(address_of(broker_id) for broker_id in (1, 2, 3))
QUICK = RetryPolicy(backoff_ms=5, backoff_max_ms=40)
APP = "app-1"
APP_PARTITION = coordinator_partition_of_transactional_id(APP, 4)


@pytest.fixture()
def cluster() -> FakeCluster:
    fake = FakeCluster()
    fake.create("orders", [1, 2, 3])
    fake.coordinate({n: 3 if n == APP_PARTITION else 2 for n in range(4)})
    return fake


def client(
    cluster: FakeCluster, request_timeout_ms: int = 2_000, sleeps: list[float] | None = None
) -> ClusterBroker:
    def sleep(seconds: float) -> None:
        if sleeps is not None:
            sleeps.append(seconds)
        time.sleep(seconds)

    return ClusterBroker(
        BOOTSTRAP,
        ConnectionOptions(request_timeout_ms=request_timeout_ms),
        opener=cluster.opener,
        backoff=QUICK,
        sleep=sleep,
    )


def test_coordinator_calls_go_to_the_coordinator_found(cluster: FakeCluster) -> None:
    with client(cluster) as broker:
        identity = broker.init_producer(APP)
        pid, generation = identity.producer_id, identity.producer_generation
        transaction_id = broker.begin_transaction(pid, generation)
        broker.add_partitions_to_transaction(
            transaction_id, pid, generation, [TopicPartition("orders", 0)]
        )
        broker.send_offsets_to_transaction(transaction_id, pid, generation, "billing", {})
        broker.commit_transaction(transaction_id, pid, generation)
        second = broker.begin_transaction(pid, generation)
        broker.abort_transaction(second, pid, generation)
        broker.commit_offsets("billing", {})  # groups: the home broker
    coordinator = address_of(3)
    for method in (
        "init_producer",
        "begin_transaction",
        "add_partitions_to_transaction",
        "send_offsets_to_transaction",
        "commit_transaction",
        "abort_transaction",
    ):
        assert set(cluster.calls_of(method)) == {coordinator}, method
    # Asked once: the producer id carries the coordinator partition the answer was kept under.
    assert cluster.calls_of("find_coordinator") == [address_of(1)]
    assert cluster.calls_of("commit_offsets") == [address_of(1)]
    assert cluster.committed == [transaction_id] and cluster.aborted == [second]


@pytest.mark.parametrize("how", ["moved", "died"])
def test_a_coordinator_that_moved_or_died_is_found_again(cluster: FakeCluster, how: str) -> None:
    with client(cluster) as broker:
        identity = broker.init_producer(APP)
        cluster.coordinate({APP_PARTITION: 1})
        if how == "died":
            cluster.down.add(address_of(3))
        broker.begin_transaction(identity.producer_id, identity.producer_generation)
    assert cluster.calls_of("begin_transaction") == [address_of(3), address_of(1)]
    assert len(cluster.calls_of("find_coordinator")) == 2


def test_a_coordinator_still_loading_is_asked_again_after_a_pause(cluster: FakeCluster) -> None:
    sleeps: list[float] = []
    with client(cluster, sleeps=sleeps) as broker:
        identity = broker.init_producer(APP)
        cluster.loading[3] = 2
        broker.begin_transaction(identity.producer_id, identity.producer_generation)
    assert cluster.calls_of("begin_transaction") == [address_of(3)] * 3
    assert len(cluster.calls_of("find_coordinator")) == 1  # the same broker: not found again
    assert len(sleeps) == 2 and all(pause > 0 for pause in sleeps)
    assert sleeps[1] > sleeps[0] * 1.2  # growing (within the jitter)


@pytest.mark.parametrize(
    "lost",
    [
        BrokerUnavailableError("UNAVAILABLE: the connection broke after the commit"),
        RequestTimedOutError("DEADLINE_EXCEEDED: the commit's answer did not come"),
    ],
)
def test_an_ambiguous_commit_is_sent_again_as_a_commit(
    cluster: FakeCluster, lost: TwinlogError
) -> None:
    with client(cluster) as broker:
        identity = broker.init_producer(APP)
        pid, generation = identity.producer_id, identity.producer_generation
        transaction_id = broker.begin_transaction(pid, generation)
        cluster.ambiguous_commits.append(lost)
        broker.commit_transaction(transaction_id, pid, generation)
    assert cluster.calls_of("commit_transaction") == [address_of(3)] * 2
    assert cluster.calls_of("abort_transaction") == []
    assert cluster.committed == [transaction_id] and cluster.aborted == []


def test_a_producer_never_aborts_after_a_commit_whose_outcome_is_unknown(
    cluster: FakeCluster,
) -> None:
    with (
        client(cluster, request_timeout_ms=300) as broker,
        Producer(broker, APP, linger_ms=0, retry=QUICK, default_api_timeout_ms=600) as producer,
    ):
        producer.init_transactions()

        def lose_the_coordinator() -> None:
            cluster.coordinate({APP_PARTITION: None})  # dies with the answer; none elected
            cluster.after_commit = None

        cluster.ambiguous_commits.append(BrokerUnavailableError("UNAVAILABLE: broke mid-commit"))
        cluster.after_commit = lose_the_coordinator
        started = time.monotonic()
        with pytest.raises(NotCoordinatorError), producer.transaction():  # typed, at 600 ms
            first = producer.transaction_id
            producer.send("orders", b"v", partition=0)
        assert time.monotonic() - started < 2.0
        assert cluster.calls_of("abort_transaction") == []
        assert producer.transaction_id == first  # still open: only a commit may follow
        cluster.coordinate({APP_PARTITION: 2})  # elected at last, with the journal
        producer.commit_transaction()
        assert cluster.committed == [first] and cluster.aborted == []
        assert cluster.calls_of("commit_transaction")[-1] == address_of(2)
        assert cluster.calls_of("abort_transaction") == []


def test_a_coordinator_that_never_comes_fails_the_call_at_its_deadline(
    cluster: FakeCluster,
) -> None:
    cluster.coordinate({n: None for n in range(4)})
    with client(cluster, request_timeout_ms=300) as broker:
        started = time.monotonic()
        with pytest.raises(NotCoordinatorError, match="no coordinator"):
            broker.init_producer(APP)
        assert time.monotonic() - started < 2.0
        assert 2 <= len(cluster.calls_of("find_coordinator")) < 100
    # A coordinator named but unreachable: BrokerUnavailableError at the deadline.
    cluster.coordinate({APP_PARTITION: 3})
    cluster.down.add(address_of(3))
    with client(cluster, request_timeout_ms=10_000) as broker:
        started = time.monotonic()
        with deadline_at(time.monotonic() + 0.3), pytest.raises(BrokerUnavailableError):
            broker.init_producer(APP)  # an enclosing call's deadline wins when earlier
        assert time.monotonic() - started < 2.0
        assert len(cluster.calls_of("init_producer")) >= 2


def test_idempotent_ids_come_from_a_broker_that_coordinates_something(
    cluster: FakeCluster,
) -> None:
    cluster.coordinate({0: 2, 1: 2, 2: 3, 3: 3})  # broker 1, the home broker, leads none
    with client(cluster) as broker:
        first = broker.init_producer()
        second = broker.init_producer()
    assert cluster.calls_of("init_producer") == [address_of(1), address_of(2), address_of(2)]
    assert coordinator_partition_of(first.producer_id) in (0, 1)
    assert first != second
    assert cluster.calls_of("find_coordinator") == []


def test_a_single_node_is_never_asked_find_coordinator() -> None:
    single = FakeCluster(broker_ids=[1], cluster_id=None)
    single.create("orders", [1])
    single.coordinate({n: 1 for n in range(4)})
    with client(single) as broker:
        identity = broker.init_producer(APP)
        broker.begin_transaction(identity.producer_id, identity.producer_generation)
    assert single.calls_of("find_coordinator") == []
    assert single.calls_of("begin_transaction") == [address_of(1)]


def test_older_servers_get_coordinator_calls_at_the_home_broker() -> None:
    older = FakeCluster()  # no coordinators: FindCoordinator answers None
    older.create("orders", [1, 2, 3])
    older.down.add(address_of(1))
    with client(older) as broker:
        identity = broker.init_producer(APP)
        broker.begin_transaction(identity.producer_id, identity.producer_generation)
    home = address_of(2)
    assert older.calls_of("init_producer") == [home]
    assert older.calls_of("begin_transaction") == [home]
