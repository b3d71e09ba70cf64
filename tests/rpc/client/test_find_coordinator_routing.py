"""The cluster client that follows transaction and group coordinators (``ClusterBroker``
over ``cluster_fakes``): coordinator calls reach the coordinator FindCoordinator names,
kept per coordinator partition (a group's apart from a transaction's);
NotCoordinatorError or an unreachable coordinator makes the client find it again,
CoordinatorLoadInProgressError retries the same broker after a pause; a commit whose
answer was lost is sent again as a commit, never turned into an abort; a coordinator that
never comes fails the call at its deadline with a typed error; older servers get the
calls where they took them."""

from __future__ import annotations

import functools
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
from twinlog.engine.broker.group_offsets import offsets_partition_for
from twinlog.engine.broker.internal_topics import coordinator_partition_of_transactional_id
from twinlog.engine.transactions.partition_calls import coordinator_partition_of
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
    by_id = cache.partition_of(PRODUCER_ID, str((9 << 8) | 3))
    assert cache.address_of(PRODUCER_ID, by_id) == "10.0.0.2:7070"
    cache.forget(TRANSACTION, 3, "10.0.0.9:7070")  # another broker failed: the newer stays
    assert cache.address_of(TRANSACTION, 3) == "10.0.0.2:7070"
    cache.forget(TRANSACTION, 3, "10.0.0.2:7070")
    assert cache.address_of(TRANSACTION, 3) is None
    assert cache.partition_of(TRANSACTION, "app") == 3
    cache.learn(TRANSACTION, "b", found)
    cache.learn(TRANSACTION, "b", found)  # known already: nothing dropped for it
    assert cache.partition_of(TRANSACTION, "app") == 3
    cache.learn(TRANSACTION, "c", found)  # over the cap: the oldest id is dropped
    assert cache.partition_of(TRANSACTION, "app") is None
    cache.learn(GROUP, "g", FoundCoordinator(-1, found.broker))  # nothing to keep it under
    assert cache.partition_of(GROUP, "g") is None
    assert cache.known(TRANSACTION) == {3: "10.0.0.2:7070"} and cache.known(GROUP) == {}


def test_the_cache_keeps_group_coordinators_apart_from_transaction_coordinators() -> None:
    cache = CoordinatorCache(group_ids_max=2)
    journal = FoundCoordinator(3, BrokerEndpoint(2, "10.0.0.2", 7070))
    offsets = FoundCoordinator(3, BrokerEndpoint(1, "10.0.0.1", 7070))  # the same number
    cache.learn(TRANSACTION, "app", journal)
    cache.learn(GROUP, "billing", offsets)
    assert cache.partition_of(GROUP, "billing") == 3
    assert cache.partition_of(TRANSACTION, "billing") is None  # a group is no transactional id
    assert cache.address_of(GROUP, 3) == "10.0.0.1:7070"
    assert cache.address_of(TRANSACTION, 3) == "10.0.0.2:7070"
    assert cache.address_of(PRODUCER_ID, 3) == "10.0.0.2:7070"
    cache.forget(GROUP, 3, "10.0.0.2:7070")  # not the group coordinator's address: kept
    assert cache.address_of(GROUP, 3) == "10.0.0.1:7070"
    cache.forget(GROUP, 3, "10.0.0.1:7070")
    assert cache.address_of(GROUP, 3) is None
    assert cache.address_of(TRANSACTION, 3) == "10.0.0.2:7070"  # the other numbering's stays
    cache.learn(GROUP, "audit", offsets)
    cache.learn(GROUP, "payroll", offsets)  # over the groups' cap: the oldest group dropped
    assert cache.partition_of(GROUP, "billing") is None
    assert cache.partition_of(TRANSACTION, "app") == 3  # its own cap


# --- client routing ----------------------------------------------------------------------------

BOOTSTRAP = ",".join(address_of(broker_id) for broker_id in (1, 2, 3))
QUICK = RetryPolicy(backoff_ms=5, backoff_max_ms=40)
APP = "app-1"
APP_PARTITION = coordinator_partition_of_transactional_id(APP, 4)
GROUP_ID = "billing"
GROUP_PARTITION = offsets_partition_for(GROUP_ID, 5).partition  # of __consumer_offsets
OTHER_GROUP = "audit"
ORDERS_0 = TopicPartition("orders", 0)


@pytest.fixture()
def cluster() -> FakeCluster:
    """The transaction coordinator of APP is broker 3, the group coordinator of GROUP_ID
    broker 2; the home broker (the first to answer) is broker 1."""
    fake = FakeCluster()
    fake.create("orders", [1, 2, 3])
    fake.coordinate({n: 3 if n == APP_PARTITION else 2 for n in range(4)})
    fake.coordinate_groups({n: 2 if n == GROUP_PARTITION else 1 for n in range(5)})
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
        backoff=QUICK.backoff,
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
        broker.commit_transaction(transaction_id, pid, generation)
        second = broker.begin_transaction(pid, generation)
        broker.abort_transaction(second, pid, generation)
    coordinator = address_of(3)
    for method in (
        "init_producer",
        "begin_transaction",
        "add_partitions_to_transaction",
        "commit_transaction",
        "abort_transaction",
    ):
        assert set(cluster.calls_of(method)) == {coordinator}, method
    # Asked once: the producer id carries the coordinator partition the answer was kept under.
    assert cluster.calls_of("find_coordinator") == [address_of(1)]
    assert cluster.committed == [transaction_id] and cluster.aborted == [second]


def test_the_client_tells_whether_the_coordinator_leads_the_partitions(
    cluster: FakeCluster,
) -> None:
    """A producer adds a transaction's partitions ahead of their batches only where its
    coordinator (broker 3) does not lead them all (``coordinator_placement``)."""
    cluster.create("audit", [3, 3])
    with client(cluster) as broker:
        identity = broker.init_producer(APP)
        broker.begin_transaction(identity.producer_id, identity.producer_generation)
        leads = functools.partial(broker.coordinator_leads, identity.producer_id)
        assert leads([TopicPartition("orders", 2)])  # led by broker 3
        assert not leads([TopicPartition("orders", 0), TopicPartition("orders", 2)])
        assert leads([TopicPartition("audit", 0), TopicPartition("audit", 1)])
        assert not leads([TopicPartition("audit", 0), TopicPartition("nowhere", 0)])


def test_group_calls_go_to_the_groups_coordinator_found(cluster: FakeCluster) -> None:
    with client(cluster) as broker:
        identity = broker.init_producer(APP)
        pid, generation = identity.producer_id, identity.producer_generation
        transaction_id = broker.begin_transaction(pid, generation)
        broker.send_offsets_to_transaction(transaction_id, pid, generation, GROUP_ID, {})
        broker.commit_offsets(GROUP_ID, {ORDERS_0: 42})
        assert broker.fetch_offsets(GROUP_ID, [ORDERS_0]) == {ORDERS_0: 42}
        broker.commit_offsets(OTHER_GROUP, {ORDERS_0: 7})  # its own partition's leader
        broker.commit_transaction(transaction_id, pid, generation)
    group_coordinator = address_of(2)
    for method in ("send_offsets_to_transaction", "fetch_offsets"):
        assert cluster.calls_of(method) == [group_coordinator], method
    assert cluster.calls_of("commit_offsets") == [group_coordinator, address_of(1)]
    assert cluster.calls_of("commit_transaction") == [address_of(3)]
    # Once per key: the transactional id, then each group; kept afterwards.
    assert len(cluster.calls_of("find_coordinator")) == 3
    assert cluster.offsets == {(GROUP_ID, ORDERS_0): 42, (OTHER_GROUP, ORDERS_0): 7}


def test_a_group_and_a_transaction_of_the_same_partition_number_stay_apart(
    cluster: FakeCluster,
) -> None:
    assert GROUP_PARTITION == APP_PARTITION  # offsets partition 1, journal partition 1
    with client(cluster) as broker:
        identity = broker.init_producer(APP)  # journal partition 1: broker 3
        broker.commit_offsets(GROUP_ID, {ORDERS_0: 1})  # offsets partition 1: broker 2
        broker.begin_transaction(identity.producer_id, identity.producer_generation)
        broker.commit_offsets(GROUP_ID, {ORDERS_0: 2})
    assert cluster.calls_of("begin_transaction") == [address_of(3)]
    assert cluster.calls_of("commit_offsets") == [address_of(2)] * 2
    assert len(cluster.calls_of("find_coordinator")) == 2  # nothing refused, nothing asked again


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


def test_a_paused_coordinator_is_asked_last_when_the_coordinator_is_found_again(
    cluster: FakeCluster,
) -> None:
    """The coordinator's broker is paused (F12): each request there takes its whole
    timeout, and it answered the metadata, so a refresh or a FindCoordinator asks it
    first. The producer's commit, retried per request timeout, must not ask it first at
    every attempt (that spends each attempt there, until the commit's own timeout): a
    broker that timed out is asked last, and the brokers a spent deadline left unasked
    are not suspects."""
    cluster.coordinate({n: 1 if n == APP_PARTITION else 2 for n in range(4)})
    with (
        client(cluster, request_timeout_ms=300) as broker,
        Producer(broker, APP, linger_ms=0, retry=QUICK, default_api_timeout_ms=5_000) as producer,
    ):
        producer.init_transactions()
        assert broker.metadata.addresses()[0] == address_of(1)  # it answered last
        producer.begin_transaction()
        producer.send("orders", b"v", partition=1)  # at broker 2
        cluster.stalled.add(address_of(1))
        cluster.coordinate({n: 2 for n in range(4)})  # its successor, elected meanwhile
        started = time.monotonic()
        producer.commit_transaction()
        elapsed_s = time.monotonic() - started
    assert cluster.committed and cluster.calls_of("commit_transaction")[-1] == address_of(2)
    # A timeout at the coordinator, at most one more at the refresh or FindCoordinator.
    assert elapsed_s < 3 * 0.3 + 0.5, f"{elapsed_s:.1f} s to find the new coordinator"
    assert len(cluster.calls_of("commit_transaction")) <= 3


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


@pytest.mark.parametrize("how", ["moved", "died"])
def test_a_group_coordinator_that_moved_or_died_is_found_again(
    cluster: FakeCluster, how: str
) -> None:
    with client(cluster) as broker:
        broker.commit_offsets(GROUP_ID, {ORDERS_0: 1})
        cluster.coordinate_groups({GROUP_PARTITION: 3})
        if how == "died":
            cluster.down.add(address_of(2))
        broker.commit_offsets(GROUP_ID, {ORDERS_0: 2})
        assert broker.fetch_offsets(GROUP_ID, [ORDERS_0]) == {ORDERS_0: 2}
    assert cluster.calls_of("commit_offsets") == [address_of(2), address_of(2), address_of(3)]
    assert cluster.calls_of("fetch_offsets") == [address_of(3)]
    assert len(cluster.calls_of("find_coordinator")) == 2


def test_a_group_coordinator_still_loading_is_asked_again_after_a_pause(
    cluster: FakeCluster,
) -> None:
    sleeps: list[float] = []
    with client(cluster, sleeps=sleeps) as broker:
        cluster.loading[2] = 2
        assert broker.fetch_offsets(GROUP_ID, [ORDERS_0]) == {ORDERS_0: -1}
    assert cluster.calls_of("fetch_offsets") == [address_of(2)] * 3
    assert len(cluster.calls_of("find_coordinator")) == 1
    assert len(sleeps) == 2 and all(pause > 0 for pause in sleeps)


def test_a_group_coordinator_that_never_comes_fails_the_call_at_its_deadline(
    cluster: FakeCluster,
) -> None:
    cluster.coordinate_groups({n: None for n in range(5)})
    with client(cluster, request_timeout_ms=300) as broker:
        started = time.monotonic()
        with pytest.raises(NotCoordinatorError, match="no coordinator") as caught:
            broker.commit_offsets(GROUP_ID, {ORDERS_0: 1})
        assert caught.value.retriable
        assert time.monotonic() - started < 2.0
        assert 2 <= len(cluster.calls_of("find_coordinator")) < 100
    assert cluster.calls_of("commit_offsets") == [] and cluster.offsets == {}


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
        # Typed and retriable, at the 600 ms deadline: NotCoordinatorError when the last attempt
        # got the cluster's answer, RequestTimedOutError when a loaded machine let the deadline
        # pass before it was sent. Either way the outcome stays unknown and no abort may follow.
        with (
            pytest.raises((NotCoordinatorError, RequestTimedOutError)) as raised,
            producer.transaction(),
        ):
            first = producer.transaction_id
            producer.send("orders", b"v", partition=0)
        assert raised.value.retriable
        assert time.monotonic() - started < 5.0
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
    single.coordinate_groups({n: 1 for n in range(5)})
    with client(single) as broker:
        identity = broker.init_producer(APP)
        broker.begin_transaction(identity.producer_id, identity.producer_generation)
        broker.commit_offsets(GROUP_ID, {ORDERS_0: 1})
    assert single.calls_of("find_coordinator") == []
    assert single.calls_of("begin_transaction") == [address_of(1)]
    assert single.calls_of("commit_offsets") == [address_of(1)]


def test_older_servers_get_coordinator_calls_at_the_home_broker() -> None:
    older = FakeCluster()  # no coordinators: FindCoordinator answers None
    older.create("orders", [1, 2, 3])
    older.down.add(address_of(1))
    with client(older) as broker:
        identity = broker.init_producer(APP)
        transaction_id = broker.begin_transaction(
            identity.producer_id, identity.producer_generation
        )
        broker.send_offsets_to_transaction(
            transaction_id, identity.producer_id, identity.producer_generation, GROUP_ID, {}
        )
        broker.commit_offsets(GROUP_ID, {ORDERS_0: 1})
        broker.fetch_offsets(GROUP_ID, [ORDERS_0])
    home = address_of(2)
    for method in (
        "init_producer",
        "begin_transaction",
        "send_offsets_to_transaction",
        "commit_offsets",
        "fetch_offsets",
    ):
        assert older.calls_of(method) == [home], method


def test_a_cluster_naming_no_group_coordinators_keeps_groups_where_they_were_sent(
    cluster: FakeCluster,
) -> None:
    """Brokers from before __consumer_offsets was replicated answer a group's
    FindCoordinator with themselves (partition -1): the group calls go to the home broker,
    which kept the group's offsets, and send_offsets to the transaction's coordinator,
    which ran it there."""
    cluster.group_coordinators = None
    with client(cluster) as broker:
        identity = broker.init_producer(APP)
        pid, generation = identity.producer_id, identity.producer_generation
        transaction_id = broker.begin_transaction(pid, generation)
        broker.send_offsets_to_transaction(transaction_id, pid, generation, GROUP_ID, {})
        broker.commit_offsets(GROUP_ID, {ORDERS_0: 1})
        broker.fetch_offsets(GROUP_ID, [ORDERS_0])
    assert cluster.calls_of("send_offsets_to_transaction") == [address_of(3)]
    assert cluster.calls_of("commit_offsets") == [address_of(1)]
    assert cluster.calls_of("fetch_offsets") == [address_of(1)]
