"""Nobody walks into a secure cluster: every internal method, sent by strangers, clients and
a broker forging another's word, to every gRPC port of three real brokers, is refused and
changes nothing; and honest clients work on it with ACLs on.

The cluster (``secure_cluster``): client TLS, tokens, an ACL file, broker certificates
(the internal services on a mutual-TLS listener of their own), a ZooKeeper credential.
Each attack the issue named before brokers authenticated each other has a test here that
reproduces it as it was done then (the internal services answered anyone on the client
port); each now ends in a refusal, and the cluster's files and znodes are unchanged.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from cluster_support import wait_for
from pki_support import make_pki
from secure_cluster import TOKENS, SecureCluster, make_client_certificate, running_secure_cluster

from twinlog.engine.base.errors import AuthorizationError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.internal_topics import TXN_JOURNAL_TOPIC
from twinlog.engine.replication.fetch_calls import LogKind, ReplicaFetch, ReplicaFetchPartition
from twinlog.engine.transactions.partition_calls import (
    ApplyAbort,
    ApplyCommit,
    CallEpochs,
    CountEntries,
    LookupProducer,
    RegisterPartition,
    SettleOffsetsHolder,
    coordinator_partition_of,
)
from twinlog.rpc.cli.local_zookeeper import LocalZooKeeper
from twinlog.rpc.client import Admin, Consumer, Producer
from twinlog.rpc.generated.twinlog.v1 import coordination_pb2_grpc, replication_pb2_grpc
from twinlog.rpc.replication import coordination_convert as convert
from twinlog.rpc.replication.convert import fetch_to_proto
from twinlog.rpc.wire.errors import NAME_KEY
from twinlog.rpc.wire.metadata import AUTHORIZATION_KEY

pytestmark = pytest.mark.slow

TOPIC = "alice-orders"
PARTITIONS = 3
HUGE_EPOCH = 2**30
CALL_TIMEOUT_S = 5.0


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, zookeeper: LocalZooKeeper
) -> Iterator[SecureCluster]:
    with running_secure_cluster(tmp_path_factory.mktemp("secure"), zookeeper) as opened:
        with Admin(opened.bootstrap, connection=opened.options("admin")) as admin:
            admin.create_topic(TOPIC, PARTITIONS, {"replication.factor": "3"})
        for partition in range(PARTITIONS):
            wait_for(
                f"{TOPIC}-{partition} with 3 in sync",
                lambda p=partition: (
                    (s := opened.partition_state(TOPIC, p)) is not None
                    and s.leader > 0
                    and len(s.isr) == 3
                ),
            )
        yield opened


@pytest.fixture(scope="module")
def strangers(tmp_path_factory: pytest.TempPathFactory, cluster: SecureCluster) -> dict[str, Any]:
    """Certificates of callers that are no broker: CN=alice from the cluster CA, and a
    broker-named certificate from another CA."""
    folder = tmp_path_factory.mktemp("strangers")
    other_ca = make_pki(folder / "other-ca")
    return {
        "alice_cert": make_client_certificate(cluster.pki, "alice", folder),
        "other_ca_cert": (other_ca / "client.pem", other_ca / "client.key"),
        "other_ca": other_ca / "ca.pem",
    }


# --- the internal calls, as protobuf requests --------------------------------------------


def _epochs(coordinator_partition: int, epoch: int = HUGE_EPOCH) -> CallEpochs:
    return CallEpochs(coordinator_partition, epoch, 0)


def _calls(cluster: SecureCluster, transaction_id: int = 4353) -> list[tuple[str, str, Any]]:
    """(service, method, request) for every internal method, each as an attacker sends it."""
    tp = TopicPartition(TOPIC, 0)
    part = coordinator_partition_of(transaction_id)
    fetch = ReplicaFetch(
        replica_id=2,
        broker_epoch=HUGE_EPOCH,
        partitions=(
            ReplicaFetchPartition(tp, 1 << 40, -1, 0),
            ReplicaFetchPartition(tp, 0, -1, 0, LogKind.JOURNAL),
        ),
        max_wait_ms=0,
    )
    return [
        ("replication", "Fetch", fetch_to_proto(fetch)),
        (
            "coordination",
            "RegisterPartition",
            convert.register_to_proto(
                RegisterPartition(transaction_id, tp, 1, 0, _epochs(part, 0))
            ),
        ),
        (
            "coordination",
            "CountEntries",
            convert.count_to_proto(CountEntries(transaction_id, tp, _epochs(part))),
        ),
        (
            "coordination",
            "ApplyCommit",
            convert.commit_to_proto(ApplyCommit(transaction_id, tp, None, 0, _epochs(part))),
        ),
        (
            "coordination",
            "ApplyCommits",
            convert.commits_to_proto(
                [
                    ApplyCommit(transaction_id, tp, None, 0, _epochs(part)),
                    ApplyCommit(transaction_id + 256, tp, None, 0, _epochs(part)),
                ]
            ),
        ),
        (
            "coordination",
            "ApplyAbort",
            convert.abort_to_proto(ApplyAbort(transaction_id, tp, _epochs(part))),
        ),
        (
            "coordination",
            "SettleOffsetsHolder",
            convert.settle_to_proto(
                SettleOffsetsHolder(transaction_id, transaction_id + 256, "alice-g", tp, True)
            ),
        ),
        (
            "coordination",
            "LookupProducer",
            convert.lookup_to_proto(LookupProducer(transaction_id, 0)),
        ),
    ]


def _send(
    channel: grpc.Channel, service: str, method: str, request: Any, token: str | None = None
) -> grpc.RpcError | Any:
    stub: Any = (
        replication_pb2_grpc.ReplicationStub(channel)
        if service == "replication"
        else coordination_pb2_grpc.CoordinationStub(channel)
    )
    metadata = [(AUTHORIZATION_KEY, f"Bearer {token}")] if token else None
    try:
        return getattr(stub, method)(request, timeout=CALL_TIMEOUT_S, metadata=metadata)
    except grpc.RpcError as error:
        return error


def _error_name(error: grpc.RpcError) -> str:
    metadata: Any = error.trailing_metadata() or ()  # type: ignore[attr-defined]
    return next((str(value) for key, value in metadata if key == NAME_KEY), "")


REFUSED_AT_THE_DOOR = {
    grpc.StatusCode.UNAVAILABLE,  # the TLS handshake failed: no or a foreign certificate
    grpc.StatusCode.UNIMPLEMENTED,  # the client port does not serve the internal services
    grpc.StatusCode.PERMISSION_DENIED,  # a certificate of the cluster CA, but no broker's
    grpc.StatusCode.UNAUTHENTICATED,
}


def _client_port_channel(cluster: SecureCluster, broker_id: int, tls: bool) -> grpc.Channel:
    address = cluster.brokers[broker_id].address
    if not tls:
        return grpc.insecure_channel(address)
    ca = (cluster.client_pki / "ca.pem").read_bytes()
    return grpc.secure_channel(address, grpc.ssl_channel_credentials(ca))


def _callers(
    cluster: SecureCluster, strangers: dict[str, Any], broker_id: int
) -> Iterator[tuple[str, Callable[[], grpc.Channel], str | None]]:
    """(who, channel maker, token) for every caller that is no broker, on every port."""
    inter = cluster.inter_broker_address(broker_id)
    yield "client port, plain text", lambda: _client_port_channel(cluster, broker_id, False), None
    for principal in ("admin", "mallory"):
        yield (
            f"client port, TLS, {principal}'s token",
            lambda: _client_port_channel(cluster, broker_id, True),
            TOKENS[principal],
        )
    yield "inter-broker port, plain text", lambda: grpc.insecure_channel(inter), None
    yield (
        "inter-broker port, TLS without a certificate",
        lambda: cluster.internal_channel(broker_id, None),
        None,
    )
    yield (
        "inter-broker port, admin's token, no certificate",
        lambda: cluster.internal_channel(broker_id, None),
        TOKENS["admin"],
    )
    yield (
        "inter-broker port, another CA's certificate",
        lambda: cluster.internal_channel(broker_id, strangers["other_ca_cert"]),
        None,
    )
    yield (
        "inter-broker port, CN=alice from the cluster CA, with her token",
        lambda: cluster.internal_channel(broker_id, strangers["alice_cert"]),
        TOKENS["alice"],
    )


# --- the matrix --------------------------------------------------------------------------


def test_every_internal_method_from_every_stranger_to_every_port_is_refused_and_changes_nothing(
    cluster: SecureCluster, strangers: dict[str, Any]
) -> None:
    before = cluster.settled_fingerprint()
    refused = 0
    for broker_id in cluster.brokers:
        for who, channel_of, token in _callers(cluster, strangers, broker_id):
            with channel_of() as channel:
                for service, method, request in _calls(cluster):
                    answer = _send(channel, service, method, request, token)
                    assert isinstance(answer, grpc.RpcError), (broker_id, who, method, answer)
                    assert answer.code() in REFUSED_AT_THE_DOOR, (
                        broker_id,
                        who,
                        method,
                        answer.code(),
                        answer.details(),
                    )
                    refused += 1
    assert refused == len(cluster.brokers) * 8 * len(_calls(cluster))
    assert cluster.fingerprint() == before


def test_a_stranger_with_a_cluster_ca_certificate_is_audited(
    cluster: SecureCluster, strangers: dict[str, Any]
) -> None:
    with cluster.internal_channel(1, strangers["alice_cert"]) as channel:
        _, method, request = _calls(cluster)[3]
        answer = _send(channel, "coordination", method, request)
    assert isinstance(answer, grpc.RpcError)
    assert answer.code() is grpc.StatusCode.PERMISSION_DENIED
    assert _error_name(answer) == "ClusterAuthorizationError"
    wait_for(
        "the refusal in broker 1's audit log",
        lambda: (
            "internal.refused" in cluster.brokers[1].log()
            and "coordination.apply_commit" in cluster.brokers[1].log()
        ),
        timeout_s=5,
    )


# --- a broker forging another's word ---------------------------------------------------------


def _leader(cluster: SecureCluster, topic: str, partition: int) -> int:
    state = cluster.partition_state(topic, partition)
    assert state is not None and state.leader > 0
    return state.leader


def test_a_broker_fetching_in_another_brokers_name_or_with_a_stale_epoch_is_refused(
    cluster: SecureCluster,
) -> None:
    """The attack that lost acknowledged writes: fetches naming each follower, with its
    registered broker epoch, at the leader's log end (which the leader's answer tells),
    acknowledged a record no follower held; after the leader's death it was gone."""
    leader = _leader(cluster, TOPIC, 0)
    follower, forger = [b for b in cluster.brokers if b != leader][:2]
    tp = TopicPartition(TOPIC, 0)
    admin = Admin(cluster.bootstrap, connection=cluster.options("admin"))
    try:
        log_end = admin.describe_topic(TOPIC).partitions[0].log_end_offset
    finally:
        admin.close()
    before = cluster.settled_fingerprint()
    with cluster.internal_channel(leader, cluster.broker_certificate(forger)) as channel:
        for offset in (log_end, log_end + 1, 1 << 40):
            as_other = ReplicaFetch(follower, cluster.broker_epoch(follower),
                                    (ReplicaFetchPartition(tp, offset, -1, 0),), max_wait_ms=0)  # fmt: skip
            answer = _send(channel, "replication", "Fetch", fetch_to_proto(as_other))
            assert isinstance(answer, grpc.RpcError), offset
            assert _error_name(answer) == "ClusterAuthorizationError", answer.details()
        stale = ReplicaFetch(forger, HUGE_EPOCH,
                             (ReplicaFetchPartition(tp, log_end, -1, 0),), max_wait_ms=0)  # fmt: skip
        answer = _send(channel, "replication", "Fetch", fetch_to_proto(stale))
        assert isinstance(answer, grpc.RpcError)
        assert _error_name(answer) == "StaleBrokerEpochError", answer.details()
    assert cluster.fingerprint() == before


def test_a_broker_posing_as_a_coordinator_it_does_not_lead_is_refused(
    cluster: SecureCluster,
) -> None:
    """The attacks that applied another's open transaction, and that locked a coordinator
    out of a partition with a huge coordinator epoch."""
    leader = _leader(cluster, TOPIC, 0)
    journal = {p: _leader(cluster, TXN_JOURNAL_TOPIC, p) for p in range(4)}
    # a coordinator partition the forger does not lead; its transaction ids end in its bits
    forger = next(b for b in cluster.brokers if b != leader)
    coordinator = next(p for p, b in journal.items() if b != forger)
    transaction_id = (77 << 8) | coordinator
    tp = TopicPartition(TOPIC, 0)
    before = cluster.settled_fingerprint()
    with cluster.internal_channel(leader, cluster.broker_certificate(forger)) as channel:
        for method, request in (
            ("CountEntries", convert.count_to_proto(
                CountEntries(transaction_id, tp, _epochs(coordinator)))),
            ("ApplyCommit", convert.commit_to_proto(
                ApplyCommit(transaction_id, tp, None, 0, _epochs(coordinator)))),
            ("ApplyAbort", convert.abort_to_proto(
                ApplyAbort(transaction_id, tp, _epochs(coordinator)))),
            ("ApplyCommit", convert.commit_to_proto(  # its own claim wrong: not the owner
                ApplyCommit(transaction_id, tp, None, 0, _epochs((coordinator + 1) % 4)))),
            ("ApplyCommits", convert.commits_to_proto([
                ApplyCommit(transaction_id, tp, None, 0, _epochs(coordinator)),
                ApplyCommit(transaction_id + 256, tp, None, 0, _epochs(coordinator))])),
            *_mixed_groups(cluster, journal, forger, transaction_id, tp),
        ):  # fmt: skip
            answer = _send(channel, "coordination", method, request)
            assert isinstance(answer, grpc.RpcError), method
            assert _error_name(answer) in (
                "NotCoordinatorError",  # another broker leads that coordinator partition
                "ClusterAuthorizationError",  # that coordinator does not own the id
            ), (method, answer.details())
    assert cluster.fingerprint() == before


def _mixed_groups(
    cluster: SecureCluster,
    journal: dict[int, int],
    forger: int,
    transaction_id: int,
    tp: TopicPartition,
) -> list[tuple[str, Any]]:
    """A copy group whose first commit the forger may send (a coordinator partition it
    leads, at its true epoch) and whose second is another coordinator's: refused whole,
    not in part (else the first would be recorded applied)."""
    own = next((p for p, b in journal.items() if b == forger), None)
    if own is None:
        return []
    state = cluster.partition_state(TXN_JOURNAL_TOPIC, own)
    assert state is not None
    own_id = (78 << 8) | own
    group = [
        ApplyCommit(own_id, tp, None, 0, _epochs(own, state.leader_epoch)),
        ApplyCommit(transaction_id, tp, None, 0, _epochs(transaction_id & 0xFF)),
    ]
    return [("ApplyCommits", convert.commits_to_proto(group))]


def test_the_real_coordinator_claiming_an_epoch_above_zookeepers_is_refused_and_not_remembered(
    cluster: SecureCluster,
) -> None:
    leader = _leader(cluster, TOPIC, 1)
    coordinator = next(p for p in range(4) if _leader(cluster, TXN_JOURNAL_TOPIC, p) != leader)
    coordinator_broker = _leader(cluster, TXN_JOURNAL_TOPIC, coordinator)
    transaction_id = (99 << 8) | coordinator
    tp = TopicPartition(TOPIC, 1)
    with cluster.internal_channel(leader, cluster.broker_certificate(coordinator_broker)) as ch:
        answer = _send(ch, "coordination", "ApplyAbort",
                       convert.abort_to_proto(ApplyAbort(transaction_id, tp, _epochs(coordinator))))  # fmt: skip
    assert isinstance(answer, grpc.RpcError)
    assert _error_name(answer) == "TransactionCoordinatorFencedError", answer.details()
    assert "above" in (answer.details() or "")
    # Not remembered: that coordinator still commits on that partition.
    _commit_through(cluster, tp, coordinator)


def _commit_through(cluster: SecureCluster, tp: TopicPartition, coordinator: int) -> None:
    """A transaction of alice's whose coordinator is ``coordinator`` commits on ``tp``."""
    for attempt in range(64):
        transactional_id = f"alice-t-{uuid.uuid4().hex[:8]}-{attempt}"
        producer = Producer(
            cluster.bootstrap,
            connection=cluster.options("alice"),
            transactional_id=transactional_id,
        )
        try:
            producer.init_transactions()
            identity = producer._transactions.identity
            assert identity is not None
            if coordinator_partition_of(identity.producer_id) != coordinator:
                continue
            with producer.transaction():
                producer.send(tp.topic, b"after the forged epoch", partition=tp.partition)
            return
        finally:
            producer.close()
    raise AssertionError(f"no transactional id of coordinator {coordinator} in 64 tries")


def test_a_broker_registering_for_a_partition_or_settling_for_a_group_it_does_not_lead_is_refused(
    cluster: SecureCluster,
) -> None:
    leader = _leader(cluster, TOPIC, 2)
    coordinator_broker = _leader(cluster, TXN_JOURNAL_TOPIC, 0)
    forger = next(b for b in cluster.brokers if b not in (leader,))
    transaction_id = (5 << 8) | 0
    tp = TopicPartition(TOPIC, 2)
    before = cluster.settled_fingerprint()
    with cluster.internal_channel(
        coordinator_broker, cluster.broker_certificate(forger)
    ) as channel:
        if forger != leader:
            answer = _send(channel, "coordination", "RegisterPartition",
                           convert.register_to_proto(
                               RegisterPartition(transaction_id, tp, 1, 0, _epochs(0, 0))))  # fmt: skip
            assert isinstance(answer, grpc.RpcError)
            assert _error_name(answer) == "NotLeaderOrFollowerError", answer.details()
        for group in (f"alice-g{n}" for n in range(16)):
            offsets = _offsets_partition_leader(cluster, group)
            if offsets != forger:
                break
        answer = _send(channel, "coordination", "SettleOffsetsHolder",
                       convert.settle_to_proto(
                           SettleOffsetsHolder(transaction_id, transaction_id + 256, group, tp,
                                               True)))  # fmt: skip
        assert isinstance(answer, grpc.RpcError)
        assert _error_name(answer) == "NotCoordinatorError", answer.details()
    assert cluster.fingerprint() == before


def _offsets_partition_leader(cluster: SecureCluster, group: str) -> int:
    from twinlog.engine.broker.group_offsets import offsets_partition_for

    partition = offsets_partition_for(group, 4).partition
    return _leader(cluster, "__consumer_offsets", partition)


# --- the attacks end to end ----------------------------------------------------------------


def test_an_open_transaction_cannot_be_applied_by_a_stranger_and_her_abort_leaves_nothing(
    cluster: SecureCluster, strangers: dict[str, Any]
) -> None:
    """The attack that made consumers read aborted data: sweep ids with CountEntries, have
    an open transaction applied; her later abort left her records in the log."""
    tp = TopicPartition(TOPIC, 0)
    producer = Producer(
        cluster.bootstrap, connection=cluster.options("alice"), transactional_id="alice-victim"
    )
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(TOPIC, b"never committed", partition=0).result(timeout=20)
        leader = _leader(cluster, TOPIC, 0)
        for who, channel_of, token in _callers(cluster, strangers, leader):
            with channel_of() as channel:
                for transaction_id in range(1, 1 << 12):
                    request = convert.count_to_proto(
                        CountEntries(transaction_id, tp, _epochs(transaction_id & 255, 1))
                    )
                    answer = _send(channel, "coordination", "CountEntries", request, token)
                    assert isinstance(answer, grpc.RpcError), (who, transaction_id)
                    if answer.code() is grpc.StatusCode.UNAVAILABLE:
                        break  # no handshake: every id would be the same
                    assert answer.code() in REFUSED_AT_THE_DOOR, (who, answer.details())
                    if transaction_id > 64:
                        break  # refused at the door: the sweep would only repeat it
        producer.abort_transaction()
    finally:
        producer.close()
    assert b"never committed" not in _values(cluster, tp)


def _values(cluster: SecureCluster, tp: TopicPartition) -> list[bytes]:
    consumer = Consumer(cluster.bootstrap, connection=cluster.options("admin"))
    try:
        consumer.assign([(tp.topic, tp.partition)])
        consumer.seek_to_beginning()
        found: list[bytes] = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            records = consumer.poll(timeout_ms=500)
            if not records and found:
                break
            found += [record.value or b"" for record in records]
            if not records and time.monotonic() > deadline - 8:
                break
        return found
    finally:
        consumer.close()


# --- honest clients with ACLs on a cluster ----------------------------------------------------


def test_idempotent_and_transactional_sends_reach_every_partitions_leader_with_acls_on(
    cluster: SecureCluster,
) -> None:
    """Producer-id ownership was asked only of the local coordinator: with an ACL file, a
    send to a partition led elsewhere than the producer's coordinator failed with
    NotCoordinatorError (two partitions in three)."""
    leaders = {p: _leader(cluster, TOPIC, p) for p in range(PARTITIONS)}
    assert len(set(leaders.values())) > 1, leaders
    idempotent = Producer(cluster.bootstrap, connection=cluster.options("alice"))
    try:
        futures = [
            idempotent.send(TOPIC, f"idempotent {p}".encode(), partition=p)
            for p in range(PARTITIONS)
        ]
        for future in futures:
            future.result(timeout=30)
    finally:
        idempotent.close()
    transactional = Producer(
        cluster.bootstrap, connection=cluster.options("alice"), transactional_id="alice-honest"
    )
    try:
        transactional.init_transactions()
        for round_number in range(2):
            with transactional.transaction():
                for p in range(PARTITIONS):
                    transactional.send(TOPIC, f"txn {round_number} {p}".encode(), partition=p)
    finally:
        transactional.close()
    for p in range(PARTITIONS):
        values = _values(cluster, TopicPartition(TOPIC, p))
        assert f"idempotent {p}".encode() in values
        assert f"txn 1 {p}".encode() in values


def test_kafka_clients_send_idempotent_and_transactional_batches_to_every_leader_with_acls_on(
    cluster: SecureCluster,
) -> None:
    kafka = pytest.importorskip("kafka")
    producer = kafka.KafkaProducer(
        enable_idempotence=True, acks="all", **cluster.kafka_python("alice")
    )
    try:
        for p in range(PARTITIONS):
            producer.send(TOPIC, f"kafka idempotent {p}".encode(), partition=p).get(timeout=30)
    finally:
        producer.close(timeout=10)
    transactional = kafka.KafkaProducer(
        transactional_id="alice-kafka", acks="all", **cluster.kafka_python("alice")
    )
    try:
        transactional.init_transactions()
        transactional.begin_transaction()
        for p in range(PARTITIONS):
            transactional.send(TOPIC, f"kafka txn {p}".encode(), partition=p)
        transactional.commit_transaction()
    finally:
        transactional.close(timeout=10)
    for p in range(PARTITIONS):
        values = _values(cluster, TopicPartition(TOPIC, p))
        assert f"kafka idempotent {p}".encode() in values
        assert f"kafka txn {p}".encode() in values


def test_a_client_with_a_token_cannot_read_a_topic_or_open_transactions_it_is_not_granted(
    cluster: SecureCluster,
) -> None:
    """The internal Fetch read any topic and the journal's open batches (a transaction's
    records before its commit); the client API refuses mallory, and no port serves her
    the internal Fetch, with her token or without."""
    leader = _leader(cluster, TOPIC, 0)
    tp = TopicPartition(TOPIC, 0)
    fetch = ReplicaFetch(
        2 if leader != 2 else 3,
        0,
        (ReplicaFetchPartition(tp, 0, -1, 0), ReplicaFetchPartition(tp, 0, -1, 0, LogKind.JOURNAL)),
        max_wait_ms=0,
    )
    for who, channel_of, token in (
        ("client port", lambda: _client_port_channel(cluster, leader, True), TOKENS["mallory"]),
        ("inter-broker port", lambda: cluster.internal_channel(leader, None), TOKENS["mallory"]),
        ("inter-broker port, plain", lambda: grpc.insecure_channel(
            cluster.inter_broker_address(leader)), None),
    ):  # fmt: skip
        with channel_of() as channel:
            answer = _send(channel, "replication", "Fetch", fetch_to_proto(fetch), token)
        assert isinstance(answer, grpc.RpcError), (who, answer)
        assert answer.code() in REFUSED_AT_THE_DOOR, (who, answer.code())
    consumer = Consumer(cluster.bootstrap, connection=cluster.options("mallory"))
    try:
        with pytest.raises(AuthorizationError) as raised:
            consumer.assign([(TOPIC, 0)])
            consumer.seek_to_beginning()
            consumer.poll(timeout_ms=2000)
        assert "may not read" in str(raised.value)
    finally:
        consumer.close()


def test_the_cluster_refuses_to_start_with_tokens_but_no_broker_certificates(
    cluster: SecureCluster, tmp_path: Path
) -> None:
    from server_process import run_cli

    done = run_cli(
        "serve", "--data-dir", str(tmp_path / "d"), "--port", "0",
        "--broker-id", "9", "--zookeeper", cluster.connect,
        "--tokens-file", str(cluster.tokens_file),
        timeout_s=60,
    )  # fmt: skip
    assert done.returncode != 0
    assert "--inter-broker-tls-cert" in done.stderr + done.stdout
    assert not (tmp_path / "d").exists() or not any((tmp_path / "d").iterdir())
