"""A partition leader that stalls (a paused process, a link that swallows bytes) is
left for its successor: a request that timed out there marks the metadata stale, as
one the broker refused or one that found no broker does, so the retry, or the next
call, goes where the partition leads now (Kafka's client disconnects a node whose
request timed out and asks for fresh metadata).

Without it (``STALE_METADATA_ERRORS`` in ``rpc/client/cluster_pipe.py``) a producer sent
every retry of a batch to the stalled broker until its delivery timeout, unless the
connection itself broke first (gRPC's keepalive, tens of seconds later). Found by the
cluster case F12 (``tests/system/cluster/test_f12_f16_f17_coordinator_cut.py``): the
coordinator's broker, paused, also led a partition of the next transaction."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from cluster_fakes import FakeCluster, address_of

from twinlog.engine.base.errors import RequestTimedOutError
from twinlog.rpc.client import Producer
from twinlog.rpc.client.call_deadline import deadline_at
from twinlog.rpc.client.cluster import ClusterBroker
from twinlog.rpc.client.connection_options import ConnectionOptions
from twinlog.rpc.client.retry import RetryPolicy

BOOTSTRAP = ",".join(address_of(broker_id) for broker_id in (1, 2, 3))
QUICK = RetryPolicy(backoff_ms=5, backoff_max_ms=40)
REQUEST_TIMEOUT_MS = 2_000


@pytest.fixture()
def cluster() -> FakeCluster:
    fake = FakeCluster()
    fake.create("orders", [1, 2, 3])
    return fake


@pytest.fixture()
def broker(cluster: FakeCluster) -> Iterator[ClusterBroker]:
    with ClusterBroker(
        BOOTSTRAP,
        ConnectionOptions(request_timeout_ms=REQUEST_TIMEOUT_MS),
        opener=cluster.opener,
        backoff=QUICK.backoff,
    ) as opened:
        yield opened


def stall_leader(cluster: FakeCluster) -> None:
    """Broker 1, leader of orders-0, stalls; broker 2 leads orders-0 in its place."""
    cluster.stalled.add(address_of(1))
    cluster.move_leader("orders", 0, 2)


def test_a_producer_retries_a_batch_timed_out_at_a_stalled_leader_at_its_successor(
    cluster: FakeCluster, broker: ClusterBroker
) -> None:
    delivery_timeout_ms = REQUEST_TIMEOUT_MS + 1_000
    with Producer(
        broker,
        linger_ms=0,
        retry=QUICK,
        delivery_timeout_ms=delivery_timeout_ms,
        request_timeout_ms=REQUEST_TIMEOUT_MS,
    ) as producer:
        assert producer.send("orders", b"first", partition=0).result(timeout=10).offset == 0
        stall_leader(cluster)
        asked_before = len(cluster.calls_of("cluster_metadata"))
        second = producer.send("orders", b"second", partition=0)
        producer.flush()
        error = second.exception(timeout=10)
    assert error is None, f"retried at the stalled leader only: {error}"
    assert cluster.calls_of("produce")[-1] == address_of(2)
    # The refresh asked another broker: the stalled one is asked last for a while.
    assert address_of(1) not in cluster.calls_of("cluster_metadata")[asked_before:]
    assert len(cluster.logs[("orders", 0)]) == 2  # each batch once


def test_a_call_timed_out_at_a_stalled_leader_sends_the_next_to_its_successor(
    cluster: FakeCluster, broker: ClusterBroker
) -> None:
    broker.produce("orders", 0, b"first")
    assert broker.metadata.addresses()[0] == address_of(1)  # it answered the metadata
    stall_leader(cluster)
    asked_before = len(cluster.calls_of("cluster_metadata"))
    try:
        broker.fetch("orders", 0, 0)
    except RequestTimedOutError:
        pass  # a real stall takes the call's whole deadline: no time for a retry
    time.sleep(broker.metadata.refresh_wait_s())  # as a real timed-out call would have
    assert broker.produce("orders", 0, b"second").base_offset == 1
    assert cluster.calls_of("produce")[-1] == address_of(2)
    # The refresh asked another broker: the stalled one is asked last for a while.
    assert address_of(1) not in cluster.calls_of("cluster_metadata")[asked_before:]


def test_a_refresh_whose_deadline_a_stalled_broker_spent_suspects_that_broker_alone(
    cluster: FakeCluster, broker: ClusterBroker
) -> None:
    """The brokers a spent deadline left unasked are not suspects: marking them too put
    every broker back in its old order, the stalled one first (CI's F12 failure)."""
    broker.produce("orders", 0, b"first")  # broker 1 answered the metadata: asked first
    cluster.stalled.add(address_of(1))
    asked_before = len(cluster.calls_of("cluster_metadata"))
    with (
        deadline_at(time.monotonic() + 0.3),
        pytest.raises(RequestTimedOutError, match="deadline passed while asking"),
    ):
        broker.metadata.refresh()
    assert cluster.calls_of("cluster_metadata")[asked_before:] == [address_of(1)]
    assert broker.metadata.addresses()[-1] == address_of(1)
    assert broker.metadata.addresses()[0] == address_of(2)
    broker.metadata.refresh()  # no deadline: the next broker answers at once
    assert cluster.calls_of("cluster_metadata")[-1] == address_of(2)


def test_a_request_never_sent_for_want_of_time_suspects_no_broker(
    cluster: FakeCluster, broker: ClusterBroker
) -> None:
    broker.produce("orders", 0, b"first")  # broker 1 answered the metadata: asked first
    with (
        deadline_at(time.monotonic() - 1.0),
        pytest.raises(RequestTimedOutError, match="nothing was sent"),
    ):
        broker.fetch("orders", 0, 0)
    assert broker.metadata.addresses()[0] == address_of(1)
