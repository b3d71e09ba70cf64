"""The FindCoordinator call: its conversions, and the server's answer through
``RemoteBroker``. A single-node server names itself for every key (on a fake and on a
real embedded broker); a cluster broker names the leader of ``__txn_journal``-N, or for a
group the leader of its ``__consumer_offsets`` partition, from its metadata source, or
answers NotCoordinatorError, saying why, while there is none; bad keys and keys the ACL
hides are refused; an older server's UNIMPLEMENTED reads as None. The client that
follows coordinators: ``test_find_coordinator_routing``."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from rpc_fakes import FakeBroker, fake_server

from twinlog.engine.base.cluster_metadata import (
    BrokerEndpoint,
    ClusterMetadata,
    PartitionMetadata,
    TopicMetadata,
)
from twinlog.engine.base.errors import (
    AuthorizationError,
    InvalidConfigError,
    InvalidTxnStateError,
    NotCoordinatorError,
)
from twinlog.engine.broker.group_offsets import OFFSETS_TOPIC, offsets_partition_for
from twinlog.engine.broker.internal_topics import (
    TXN_JOURNAL_TOPIC,
    coordinator_partition_of_transactional_id,
)
from twinlog.engine.transactions.partition_calls import coordinator_partition_of
from twinlog.rpc.client.connection_options import ConnectionOptions
from twinlog.rpc.client.remote import RemoteBroker
from twinlog.rpc.cluster.coordinator_source import CoordinatorSource
from twinlog.rpc.generated.twinlog.v1 import admin_pb2, admin_pb2_grpc
from twinlog.rpc.server.config import ServerConfig
from twinlog.rpc.server.server import RpcServer
from twinlog.rpc.wire.broker_api import (
    NO_COORDINATOR_PARTITION,
    CoordinatorKeyType,
    FoundCoordinator,
)
from twinlog.rpc.wire.cluster_convert import (
    KEY_TYPE_TO_PROTO,
    coordinator_from_proto,
    coordinator_to_proto,
    key_type_from_proto,
)

TRANSACTION = CoordinatorKeyType.TRANSACTION
PRODUCER_ID = CoordinatorKeyType.PRODUCER_ID
GROUP = CoordinatorKeyType.GROUP

# --- conversions -----------------------------------------------------------------------------


@pytest.mark.parametrize("key_type", list(CoordinatorKeyType))
def test_key_types_survive_the_wire(key_type: CoordinatorKeyType) -> None:
    assert key_type_from_proto(KEY_TYPE_TO_PROTO[key_type]) is key_type


@pytest.mark.parametrize("value", [admin_pb2.COORDINATOR_KEY_TYPE_UNSPECIFIED, 99])
def test_an_unspecified_or_unknown_key_type_is_refused(value: int) -> None:
    with pytest.raises(InvalidConfigError, match="key_type"):
        key_type_from_proto(value)  # type: ignore[arg-type]


@pytest.mark.parametrize("partition", [NO_COORDINATOR_PARTITION, 0, 255])
def test_an_answer_survives_the_wire(partition: int) -> None:
    found = FoundCoordinator(partition, BrokerEndpoint(7, "::1", 7070))
    wire = admin_pb2.FindCoordinatorResponse.FromString(
        coordinator_to_proto(found).SerializeToString()
    )
    assert coordinator_from_proto(wire) == found
    assert found.broker.address == "[::1]:7070"


# --- server side: a single node ------------------------------------------------------------


def test_a_single_node_names_itself_for_every_key() -> None:
    with fake_server() as (_broker, address), RemoteBroker(address) as remote:
        me = BrokerEndpoint(0, "127.0.0.1", int(address.rsplit(":", 1)[1]))
        # A fake broker does not say how many journal partitions it has.
        assert remote.find_coordinator(TRANSACTION, "app-1") == FoundCoordinator(-1, me)
        assert remote.find_coordinator(PRODUCER_ID, "1234") == FoundCoordinator(1234 & 255, me)
        assert remote.find_coordinator(GROUP, "billing") == FoundCoordinator(-1, me)


@pytest.fixture()
def embedded_server(tmp_path: Path) -> Iterator[tuple[RemoteBroker, str]]:
    from twinlog.engine.broker.broker import Broker

    with Broker.open(tmp_path / "data", journal_partitions=4) as broker:
        server = RpcServer(broker, ServerConfig(port=0))
        server.start()
        try:
            address = f"127.0.0.1:{server.port}"
            with RemoteBroker(address) as remote:
                yield remote, address
        finally:
            server.stop(grace_ms=0)


def test_a_real_broker_names_the_journal_partition_its_ids_carry(
    embedded_server: tuple[RemoteBroker, str],
) -> None:
    remote, address = embedded_server
    expected = coordinator_partition_of_transactional_id("app-1", 4)
    found = remote.find_coordinator(TRANSACTION, "app-1")
    assert found is not None
    assert (found.coordinator_partition, found.broker.address) == (expected, address)
    # The producer id init_producer gives carries the same partition: a client that found
    # the transactional id's coordinator routes the producer's calls there without asking.
    identity = remote.init_producer("app-1")
    assert coordinator_partition_of(identity.producer_id) == expected
    by_id = remote.find_coordinator(PRODUCER_ID, str(identity.producer_id))
    assert by_id is not None and by_id.coordinator_partition == expected


def test_bad_keys_are_refused(embedded_server: tuple[RemoteBroker, str]) -> None:
    remote, _address = embedded_server
    for key in ("abc", "-5", "1e3", "", "١٢"):  # the last: non-ASCII digits
        with pytest.raises(InvalidConfigError, match="not a producer id"):
            remote.find_coordinator(PRODUCER_ID, key)
    with pytest.raises(InvalidConfigError, match="empty"):
        remote.find_coordinator(TRANSACTION, "")
    with pytest.raises(InvalidTxnStateError, match="not issued"):
        remote.find_coordinator(PRODUCER_ID, str((7 << 8) | 44))  # partition 44 of 4
    with pytest.raises(grpc.RpcError) as caught:  # the raw call: no key type
        remote.administration.FindCoordinator(admin_pb2.FindCoordinatorRequest(key="x"))
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT


def test_find_coordinator_needs_describe_on_the_transactional_id_or_group(
    tmp_path: Path,
) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("alice-token-0123456789 alice\n")
    acl = tmp_path / "acl"
    acl.write_text("alice write transactional-id:app*\nalice read group:billing*\n")
    with (
        fake_server(tokens_file=str(tokens), acl_file=str(acl)) as (_broker, address),
        RemoteBroker(address, ConnectionOptions(token="alice-token-0123456789")) as alice,
    ):
        assert alice.find_coordinator(TRANSACTION, "app-1") is not None  # write implies it
        assert alice.find_coordinator(GROUP, "billing-eu") is not None  # read implies it
        assert alice.find_coordinator(PRODUCER_ID, "7") is not None  # authenticated is enough
        with pytest.raises(AuthorizationError, match="transactional-id:other"):
            alice.find_coordinator(TRANSACTION, "other")
        with pytest.raises(AuthorizationError, match="group:payroll"):
            alice.find_coordinator(GROUP, "payroll")


def test_a_server_without_find_coordinator_answers_none() -> None:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    admin_pb2_grpc.add_AdministrationServicer_to_server(
        admin_pb2_grpc.AdministrationServicer(), server
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with RemoteBroker(f"127.0.0.1:{port}") as remote:
            assert remote.find_coordinator(TRANSACTION, "app-1") is None
    finally:
        server.stop(0)


# --- server side: a cluster broker ---------------------------------------------------------

BROKERS = tuple(BrokerEndpoint(n, f"10.0.0.{n}", 7070) for n in (1, 2, 3))


class StaticMetadata:
    """A cluster's metadata source that answers what it was given, and counts reads."""

    def __init__(self, metadata: ClusterMetadata) -> None:
        self.answer = metadata
        self.reads: list[Sequence[str] | None] = []

    def metadata(self, topics: Sequence[str] | None = None) -> ClusterMetadata:
        self.reads.append(None if topics is None else list(topics))
        return self.answer


def cluster_metadata(
    leaders: Sequence[int] | None,
    brokers: tuple[BrokerEndpoint, ...] = BROKERS,
    offsets_leaders: Sequence[int] | None = None,
) -> ClusterMetadata:
    """``__txn_journal`` with partition N led by ``leaders[N]`` (-1: none), and
    ``__consumer_offsets`` likewise by ``offsets_leaders``; None: no such topic."""
    topics = []
    for name, led_by in ((TXN_JOURNAL_TOPIC, leaders), (OFFSETS_TOPIC, offsets_leaders)):
        if led_by is not None:
            partitions = tuple(
                PartitionMetadata(n, leader, 0, (1, 2, 3), (1, 2, 3))
                for n, leader in enumerate(led_by)
            )
            topics.append(TopicMetadata(name, partitions))
    return ClusterMetadata("c1", 1, brokers, tuple(topics))


def test_a_cluster_broker_names_the_journal_partitions_leader_over_grpc() -> None:
    leaders = [3, 1, 2, 3]
    offsets_leaders = [2, 3, 1, 2, 3]
    source = StaticMetadata(cluster_metadata(leaders, offsets_leaders=offsets_leaders))
    broker = FakeBroker()
    broker.broker_id = 2  # type: ignore[attr-defined]  # as a cluster's twinlog.Broker has
    server = RpcServer(broker, ServerConfig(port=0), metadata_source=source)
    server.start()
    try:
        with RemoteBroker(f"127.0.0.1:{server.port}") as remote:
            partition = coordinator_partition_of_transactional_id("app-1", 4)  # 4: the topic's
            assert remote.find_coordinator(TRANSACTION, "app-1") == FoundCoordinator(
                partition, BROKERS[leaders[partition] - 1]
            )
            producer_id = (12 << 8) | 2
            assert remote.find_coordinator(PRODUCER_ID, str(producer_id)) == FoundCoordinator(
                2, BROKERS[1]
            )
            # Groups: the leader of the group's __consumer_offsets partition.
            group_partition = offsets_partition_for("billing", 5).partition
            assert remote.find_coordinator(GROUP, "billing") == FoundCoordinator(
                group_partition, BROKERS[offsets_leaders[group_partition] - 1]
            )
            # One read each, of one topic.
            assert source.reads == [[TXN_JOURNAL_TOPIC], [TXN_JOURNAL_TOPIC], [OFFSETS_TOPIC]]
    finally:
        server.stop(grace_ms=0)


def test_the_brokers_journal_partition_count_wins_over_the_topics() -> None:
    source = StaticMetadata(cluster_metadata([1, 2, 3, 1]))
    coordinators = CoordinatorSource(source, journal_partitions=lambda: 2)
    expected = coordinator_partition_of_transactional_id("app-7", 2)
    found = coordinators.find(TRANSACTION, "app-7")
    assert found.coordinator_partition == expected
    with pytest.raises(InvalidTxnStateError, match="not issued"):
        coordinators.find(PRODUCER_ID, str((5 << 8) | 3))  # partition 3 of 2
    without_count = CoordinatorSource(source)
    with pytest.raises(InvalidTxnStateError, match="not issued"):
        without_count.find(PRODUCER_ID, str((5 << 8) | 9))  # partition 9 of the topic's 4


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        (cluster_metadata(None), "__txn_journal does not exist yet"),
        (cluster_metadata([-1, -1, -1, -1]), "has no leader"),
        (cluster_metadata([1, 1, 1, 1], brokers=BROKERS[1:]), "led by broker 1, which is not"),
    ],
)
def test_no_live_leader_is_not_coordinator_and_says_why(
    metadata: ClusterMetadata, message: str
) -> None:
    coordinators = CoordinatorSource(StaticMetadata(metadata), journal_partitions=lambda: 4)
    for key_type, key in ((TRANSACTION, "app-1"), (PRODUCER_ID, "258")):
        with pytest.raises(NotCoordinatorError, match=message) as caught:
            coordinators.find(key_type, key)
        assert caught.value.retriable and "retry" in str(caught.value)


def test_a_groups_coordinator_is_its_offsets_partitions_leader() -> None:
    offsets_leaders = [1, 2, 3, 1, 2, 3, 1]
    coordinators = CoordinatorSource(
        StaticMetadata(cluster_metadata([1, 2, 3, 1], offsets_leaders=offsets_leaders)),
        journal_partitions=lambda: 4,
    )
    answers = set()
    for group in ("billing", "payroll", "audit"):
        found = coordinators.find(GROUP, group)
        partition = offsets_partition_for(group, len(offsets_leaders)).partition
        assert found == FoundCoordinator(partition, BROKERS[offsets_leaders[partition] - 1])
        answers.add(partition)
    # Spread over the partitions, numbered as __consumer_offsets's (billing's is 4: there
    # is no journal partition 4), never as the journal's.
    assert answers == {4, 3, 0}


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        (cluster_metadata([1, 2, 3, 1]), "__consumer_offsets does not exist yet"),
        (cluster_metadata([1, 2, 3, 1], offsets_leaders=[]), "does not exist yet"),
        (cluster_metadata([1, 2, 3, 1], offsets_leaders=[-1, -1, -1]), "has no leader"),
        (
            cluster_metadata([2, 2, 2, 2], BROKERS[1:], offsets_leaders=[1, 1, 1]),
            "led by broker 1, which is not",
        ),
    ],
)
def test_a_group_without_a_live_coordinator_is_not_coordinator_and_says_why(
    metadata: ClusterMetadata, message: str
) -> None:
    coordinators = CoordinatorSource(StaticMetadata(metadata))
    with pytest.raises(NotCoordinatorError, match=message) as caught:
        coordinators.find(GROUP, "billing")
    assert caught.value.retriable
    assert "group 'billing'" in str(caught.value) and "retry" in str(caught.value)
    assert OFFSETS_TOPIC in str(caught.value)
