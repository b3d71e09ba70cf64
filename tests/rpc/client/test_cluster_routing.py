"""The cluster client's routing, refresh and retry (``ClusterBroker``) over in-memory
brokers (``cluster_fakes``): each partition's calls reach its leader, a moved or dead
leader is followed within the call's deadline, retries keep the batch's bytes, and the
calls without a partition go to the home broker or any live one."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from cluster_fakes import FakeCluster, address_of

from twinlog.engine.base.errors import (
    AuthenticationError,
    BrokerUnavailableError,
    InvalidConfigError,
    LogClosedError,
    NotLeaderOrFollowerError,
)
from twinlog.rpc.client import Producer
from twinlog.rpc.client.bootstrap import parse_bootstrap
from twinlog.rpc.client.call_deadline import deadline_at
from twinlog.rpc.client.cluster import ClusterBroker
from twinlog.rpc.client.connection import connect
from twinlog.rpc.client.connection_options import ConnectionOptions
from twinlog.rpc.client.remote import RemoteBroker
from twinlog.rpc.client.retry import RetryPolicy

BOOTSTRAP = ",".join(address_of(broker_id) for broker_id in (1, 2, 3))
QUICK = RetryPolicy(backoff_ms=5, backoff_max_ms=40)


@pytest.fixture()
def cluster() -> FakeCluster:
    fake = FakeCluster()
    fake.create("orders", [1, 2, 3])
    return fake


def client(
    cluster: FakeCluster, bootstrap: str = BOOTSTRAP, request_timeout_ms: int = 2_000
) -> ClusterBroker:
    return ClusterBroker(
        bootstrap,
        ConnectionOptions(request_timeout_ms=request_timeout_ms),
        opener=cluster.opener,
        backoff=QUICK.backoff,
    )


@pytest.fixture()
def broker(cluster: FakeCluster) -> Iterator[ClusterBroker]:
    with client(cluster) as opened:
        yield opened


def test_each_partition_goes_to_its_leader(cluster: FakeCluster, broker: ClusterBroker) -> None:
    for partition in range(3):
        broker.produce("orders", partition, b"batch-%d" % partition)
        assert broker.list_offset("orders", partition, "latest") == 1
        broker.fetch("orders", partition, 0)
    assert cluster.calls_of("produce") == [address_of(1), address_of(2), address_of(3)]
    assert cluster.calls_of("fetch") == [address_of(1), address_of(2), address_of(3)]
    assert len(cluster.calls_of("cluster_metadata")) == 1  # asked once, then kept


def test_a_moved_leader_is_followed_after_one_refresh(
    cluster: FakeCluster, broker: ClusterBroker
) -> None:
    broker.produce("orders", 0, b"first")
    cluster.move_leader("orders", 0, 2)
    assert broker.produce("orders", 0, b"second").base_offset == 1
    assert cluster.calls_of("produce") == [address_of(1), address_of(1), address_of(2)]
    assert len(cluster.calls_of("cluster_metadata")) == 2


def test_produce_and_fetch_carry_the_leader_epoch_their_metadata_names(
    cluster: FakeCluster, broker: ClusterBroker
) -> None:
    cluster.move_leader("orders", 1, 3)
    cluster.move_leader("orders", 1, 2)  # back: epoch 2
    broker.produce("orders", 0, b"a")
    broker.produce("orders", 1, b"b")
    broker.fetch("orders", 1, 0)
    pipe = broker.open_produce_stream()  # the producer's path
    try:
        pipe.submit("orders", 1, b"c").result(5)
    finally:
        pipe.close(5)
    assert cluster.sent_epochs == [("produce", 0), ("produce", 2), ("fetch", 2), ("produce", 2)]


def test_a_leader_that_lost_and_regained_its_partition_fences_stale_metadata(
    cluster: FakeCluster, broker: ClusterBroker
) -> None:
    broker.produce("orders", 0, b"first")  # the metadata is kept: broker 1, epoch 0
    cluster.move_leader("orders", 0, 2)
    cluster.move_leader("orders", 0, 1)  # broker 1 leads again, at epoch 2
    assert broker.produce("orders", 0, b"second").base_offset == 1
    # Broker 1 answered the stale epoch FencedLeaderEpochError: refreshed, then accepted.
    assert cluster.sent_epochs == [("produce", 0), ("produce", 0), ("produce", 2)]
    assert cluster.calls_of("produce") == [address_of(1)] * 3
    assert len(cluster.calls_of("cluster_metadata")) == 2


def test_a_dead_leader_is_retried_until_the_metadata_names_another(
    cluster: FakeCluster, broker: ClusterBroker
) -> None:
    broker.produce("orders", 0, b"first")
    cluster.hold_metadata()  # the controller has not noticed yet
    cluster.down.add(address_of(1))
    cluster.move_leader("orders", 0, 3)
    release = threading.Timer(0.3, cluster.release_metadata)
    release.start()
    assert broker.produce("orders", 0, b"second").base_offset == 1  # within its 2 s
    tries_at_dead = cluster.calls_of("produce").count(address_of(1)) - 1
    assert tries_at_dead >= 2  # retried, with pauses, while the metadata lagged
    assert cluster.calls_of("produce")[-1] == address_of(3)
    assert cluster.logs[("orders", 0)] == [b"first", b"second"]


def test_a_retried_produce_keeps_its_bytes_and_is_not_written_twice(
    cluster: FakeCluster, broker: ClusterBroker
) -> None:
    cluster.ambiguous_once.add(("orders", 0))  # appended, then the answer is lost
    result = broker.produce("orders", 0, b"once")
    assert result.duplicate and result.base_offset == 0
    assert cluster.logs[("orders", 0)] == [b"once"]


def test_a_leader_that_never_comes_back_fails_the_call_at_its_deadline(
    cluster: FakeCluster,
) -> None:
    cluster.hold_metadata()  # still naming broker 1, registered and leading
    cluster.down.add(address_of(1))
    with client(cluster, request_timeout_ms=300) as broker:
        started = time.monotonic()
        with pytest.raises(BrokerUnavailableError):
            broker.produce("orders", 0, b"lost")
        assert time.monotonic() - started < 2.0  # its 300 ms, not 100 attempts' pauses
        attempts = cluster.calls_of("produce").count(address_of(1))
        assert 2 <= attempts < 100
    # An enclosing call's deadline, when earlier than request_timeout_ms, wins.
    with client(cluster, request_timeout_ms=10_000) as broker:
        started = time.monotonic()
        with deadline_at(time.monotonic() + 0.2), pytest.raises(BrokerUnavailableError):
            broker.fetch("orders", 0, 0)
        assert time.monotonic() - started < 5.0


def test_an_error_that_is_not_about_routing_is_not_retried(
    cluster: FakeCluster, broker: ClusterBroker
) -> None:
    from twinlog.engine.base.errors import UnknownTopicOrPartitionError

    with pytest.raises(UnknownTopicOrPartitionError):
        broker.list_offset("missing", 0, "latest")
    assert len(cluster.calls_of("list_offset")) == 1


def test_metadata_comes_from_the_first_bootstrap_broker_that_answers(
    cluster: FakeCluster,
) -> None:
    cluster.down.add(address_of(1))
    cluster.move_leader("orders", 0, 2)
    with client(cluster) as broker:
        broker.produce("orders", 0, b"x")
        assert cluster.calls_of("cluster_metadata") == [address_of(1), address_of(2)]
        assert broker.metadata.home() == address_of(2)
        broker.begin_transaction(1, 0)  # coordinator calls: the home broker
        broker.commit_offsets("group", {})
        assert cluster.calls_of("begin_transaction") == [address_of(2)]
        assert cluster.calls_of("commit_offsets") == [address_of(2)]


def test_calls_without_a_partition_fail_over_to_the_next_live_broker(
    cluster: FakeCluster, broker: ClusterBroker
) -> None:
    assert broker.describe_topic("orders").name == "orders"
    assert broker.metadata.home() == address_of(1)
    cluster.down.add(address_of(1))
    assert broker.init_producer().producer_id == 1002  # ids are the cluster's: any broker
    assert broker.describe_topic("orders").name == "orders"
    assert cluster.calls_of("describe_topic") == [address_of(1), address_of(1), address_of(2)]
    with pytest.raises(BrokerUnavailableError):  # a transactional id's coordinator is home
        broker.init_producer("app-1")


def test_no_reachable_broker_names_every_address(cluster: FakeCluster) -> None:
    cluster.down.update(address_of(broker_id) for broker_id in (1, 2, 3))
    with (
        client(cluster, request_timeout_ms=200) as broker,
        pytest.raises(BrokerUnavailableError, match="no broker answered") as caught,
    ):
        broker.produce("orders", 0, b"x")
    for broker_id in (1, 2, 3):
        assert address_of(broker_id) in str(caught.value)


def test_a_refused_metadata_request_is_not_asked_of_the_others(cluster: FakeCluster) -> None:
    def refusing(address: str, options: ConnectionOptions) -> object:
        node = cluster.opener(address, options)

        def refuse(*args: object) -> None:
            cluster.calls.append((address, "cluster_metadata"))
            raise AuthenticationError("not known")

        node.cluster_metadata = refuse  # type: ignore[method-assign]
        return node

    broker = ClusterBroker(BOOTSTRAP, opener=refusing)  # type: ignore[arg-type]
    with pytest.raises(AuthenticationError):
        broker.produce("orders", 0, b"x")
    assert cluster.calls_of("cluster_metadata") == [address_of(1)]


def test_a_single_node_gets_every_call_at_the_address_it_was_asked_at() -> None:
    single = FakeCluster(broker_ids=[1], cluster_id=None)
    single.create("orders", [1, 1])
    single.advertised_host = "0.0.0.0"  # what --host 0.0.0.0 advertises: not reachable
    with client(single, bootstrap=address_of(1) + ",") as broker:
        broker.produce("orders", 1, b"x")
        broker.describe_topic("orders")
    assert single.calls_of("produce") == [address_of(1)]
    assert set(address for address, _ in single.calls) == {address_of(1)}


def test_refreshes_are_rate_limited_and_single_flight(cluster: FakeCluster) -> None:
    with client(cluster) as broker:
        broker.metadata.current("orders")
        for _ in range(20):
            broker.metadata.invalidate()
            broker.metadata.current("orders")
        assert len(cluster.calls_of("cluster_metadata")) == 1  # within refresh_backoff_ms
        time.sleep(broker.metadata.refresh_backoff_ms / 1000)
        broker.metadata.invalidate()
        threads = [threading.Thread(target=broker.metadata.current) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(cluster.calls_of("cluster_metadata")) == 2


def test_a_producer_follows_leader_changes_without_loss_or_duplicates(
    cluster: FakeCluster,
) -> None:
    with client(cluster) as broker, Producer(broker, linger_ms=0, retry=QUICK) as producer:
        futures = []
        for number in range(60):
            if number == 20:
                cluster.move_leader("orders", 0, 3)
            if number == 40:  # a leader that dies with the answer of an appended batch lost
                cluster.ambiguous_once.add(("orders", 0))
                cluster.move_leader("orders", 0, 2)
            futures.append(producer.send("orders", b"v%d" % number, partition=0))
            producer.flush()
        assert [future.result(timeout=10).offset for future in futures][:40] == list(range(40))
    batches = cluster.logs[("orders", 0)]
    assert len(batches) == len(set(batches)) == 60  # each batch once
    assert {"10.0.0.3:7070", "10.0.0.2:7070"} <= set(cluster.calls_of("produce"))


def test_connect_opens_a_cluster_client_for_a_bootstrap_list_only() -> None:
    single, owned = connect("127.0.0.1:7070")
    assert isinstance(single, RemoteBroker) and owned
    single.close()
    for target in ("127.0.0.1:7070,127.0.0.1:7071", "127.0.0.1:7070,"):
        many, owned = connect(target)
        assert isinstance(many, ClusterBroker) and owned
        many.close()


@pytest.mark.parametrize("text", ["", ",", "host", "host:", "host:0", "host:70000", ":7070"])
def test_a_bad_bootstrap_list_is_refused_naming_it(text: str) -> None:
    with pytest.raises(InvalidConfigError, match="bootstrap"):
        parse_bootstrap(text)


def test_a_bootstrap_list_keeps_its_order_without_blanks_or_repeats() -> None:
    assert parse_bootstrap(" a:1, b:2,,a:1,[::1]:3 ") == ["a:1", "b:2", "[::1]:3"]


def test_not_leader_errors_reach_the_caller_when_time_runs_out(cluster: FakeCluster) -> None:
    cluster.hold_metadata()
    cluster.move_leader("orders", 0, 2)  # the metadata keeps naming broker 1
    with client(cluster, request_timeout_ms=200) as broker, pytest.raises(NotLeaderOrFollowerError):
        broker.list_offset("orders", 0, "latest")


def test_a_call_on_a_closed_client_fails_at_once_and_is_not_routed_again(
    cluster: FakeCluster,
) -> None:
    """A fetch still under way when its consumer closed (its fetch threads are left to
    finish) used to route again and again on the closed connections until its deadline."""
    broker = client(cluster, request_timeout_ms=10_000)
    broker.produce("orders", 0, b"first")
    broker.close()
    started = time.monotonic()
    with pytest.raises(LogClosedError, match="client is closed") as caught:
        broker.fetch("orders", 0, 0)
    assert not caught.value.retriable
    assert time.monotonic() - started < 1.0
