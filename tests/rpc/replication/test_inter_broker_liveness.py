"""What the inter-broker door must never do to honest brokers: starve the replica fetches
that its waiting coordination calls wait for, make every caller wait for a failing
ZooKeeper read of its own, or go back to an older broker-epoch read."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest

from twinlog.engine.base.types import TopicPartition
from twinlog.engine.replication.fetch_calls import (
    FetchedPartition,
    ReplicaFetch,
    ReplicaFetchPartition,
)
from twinlog.engine.transactions.partition_calls import ApplyCommit, CallEpochs
from twinlog.rpc.cli.cluster_certs import make_broker_certificates
from twinlog.rpc.cluster.leader_locator import ZooKeeperLeaderLocator
from twinlog.rpc.generated.twinlog.v1 import coordination_pb2_grpc, replication_pb2_grpc
from twinlog.rpc.replication.broker_identity import BrokerTls
from twinlog.rpc.replication.channel import open_channel
from twinlog.rpc.replication.convert import fetch_to_proto
from twinlog.rpc.replication.coordination_convert import commit_to_proto
from twinlog.rpc.replication.internal_checks import RegisteredEpochs
from twinlog.rpc.replication.internal_guard import InternalGuard
from twinlog.rpc.server.inter_broker import InterBrokerDoor, InterBrokerServer

WORKER_THREADS = 16
WAIT_S = 10.0


@dataclass
class WaitingLeader:
    """A partition leader whose ApplyCommit waits for a follower's fetch (as a copy waits
    for its high watermark), up to ``WAIT_S``."""

    fetched: threading.Event = field(default_factory=threading.Event)
    applies_waiting: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def replica_fetch(self, request: ReplicaFetch) -> list[FetchedPartition]:
        self.fetched.set()
        return []

    @property
    def local_partition_leaders(self) -> WaitingLeader:
        return self

    def apply_commit(self, request: ApplyCommit) -> None:
        with self.lock:
            self.applies_waiting += 1
        self.fetched.wait(WAIT_S)


@pytest.fixture()
def door(tmp_path: Path) -> Iterator[tuple[InterBrokerServer, WaitingLeader, BrokerTls]]:
    files = make_broker_certificates(tmp_path, [1, 2])
    server_tls = BrokerTls.load(2, str(files[2].certificate), str(files[2].key), str(files[2].ca))
    caller_tls = BrokerTls.load(1, str(files[1].certificate), str(files[1].key), str(files[1].ca))
    leader = WaitingLeader()
    server = InterBrokerServer(
        leader,
        InterBrokerDoor(InternalGuard(), server_tls, ("127.0.0.1", 0)),
        options=[],
        response_bytes_max=1 << 20,
        worker_threads=WORKER_THREADS,
    )
    server.start()
    try:
        yield server, leader, caller_tls
    finally:
        leader.fetched.set()
        server.stop(0)


def test_waiting_coordination_calls_leave_threads_for_the_fetches_they_wait_for(
    door: tuple[InterBrokerServer, WaitingLeader, BrokerTls],
) -> None:
    """More ApplyCommits than the server has threads, each waiting for a fetch: the fetch
    is still served (before, with every thread taken, it queued behind them until their
    acknowledgement timeout)."""
    server, leader, tls = door
    commit = commit_to_proto(
        ApplyCommit(5, TopicPartition("orders", 0), None, 0, CallEpochs(5, 0, 0))
    )
    answers: list[grpc.StatusCode] = []

    def apply() -> None:
        with open_channel(server.address, tls=tls, broker_id=2) as channel:
            try:
                coordination_pb2_grpc.CoordinationStub(channel).ApplyCommit(commit, timeout=WAIT_S)
                answers.append(grpc.StatusCode.OK)
            except grpc.RpcError as error:
                answers.append(error.code())  # type: ignore[attr-defined]

    threads = [threading.Thread(target=apply) for _ in range(WORKER_THREADS + 4)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + WAIT_S
    while leader.applies_waiting < WORKER_THREADS // 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    fetch = ReplicaFetch(1, 0, (ReplicaFetchPartition(TopicPartition("orders", 0), 0, -1, 0),))
    started = time.monotonic()
    with open_channel(server.address, tls=tls, broker_id=2) as channel:
        replication_pb2_grpc.ReplicationStub(channel).Fetch(fetch_to_proto(fetch), timeout=5)
    assert time.monotonic() - started < 5
    for thread in threads:
        thread.join(WAIT_S + 5)
    # every call ended (answered, or refused retriably: no slot within a second, or a
    # connection a loaded machine did not set up in time), and those in a slot were served
    assert len(answers) == len(threads)
    assert grpc.StatusCode.OK in answers, answers
    retriable = {
        grpc.StatusCode.OK,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.UNAVAILABLE,
    }
    assert set(answers) <= retriable, answers


def test_callers_waiting_for_a_failing_zookeeper_read_share_its_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Eight callers ask while a read fails after 0.5 s: one read, not eight in a row."""
    import twinlog.rpc.cluster.leader_locator as module

    reads: list[float] = []

    def failing_read(session: object, topics: list[str], timeout_ms: int) -> None:
        reads.append(time.monotonic())
        time.sleep(0.5)
        raise ConnectionError("ZooKeeper away")

    monkeypatch.setattr(module, "read_cluster_metadata", failing_read)
    locator = ZooKeeperLeaderLocator(object(), max_age_s=0)  # type: ignore[arg-type]
    waits: list[float] = []

    def ask() -> None:
        started = time.monotonic()
        locator.partition_leader(TopicPartition("orders", 0), refresh=True)
        waits.append(time.monotonic() - started)

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(waits) == 8
    assert max(waits) < 1.6, waits  # before: 0.5, 1.0, ... 4.0 s
    assert len(reads) <= 3, reads


def test_an_older_epoch_read_that_ends_last_does_not_replace_a_newer_one() -> None:
    """Two reads of the registrations overlap; the one that began first ends last."""
    release_first = threading.Event()
    answers = iter([{1: 100}, {1: 200}])
    calls = 0

    def read() -> dict[int, int]:
        nonlocal calls
        calls += 1
        answer = next(answers)
        if calls == 1:
            release_first.wait(5)  # the older read, slow
        return answer

    epochs = RegisteredEpochs(read, refresh_interval_s=0)
    first = threading.Thread(target=epochs.epoch_of, args=(1, 200))
    first.start()
    time.sleep(0.1)
    assert epochs.epoch_of(1, 200) == 200  # the newer read, done first
    release_first.set()
    first.join(5)
    assert epochs.epoch_of(1, 200) == 200  # had the older read won, 100 would be held


def test_a_known_epoch_is_read_again_once_old() -> None:
    """A broker whose registration is gone is refused within the match age, not never."""
    registered = {1: 100}
    epochs = RegisteredEpochs(lambda: dict(registered), refresh_interval_s=0, match_age_max_s=0.2)
    assert epochs.epoch_of(1, 100) == 100
    del registered[1]  # its session expired
    assert epochs.epoch_of(1, 100) == 100  # trusted while young
    time.sleep(0.25)
    assert epochs.epoch_of(1, 100) is None


class SyncCountingSession:
    """A session whose ``sync_async`` is counted (the reads are stubbed)."""

    def __init__(self) -> None:
        self.syncs = 0
        self.client = self

    def sync_async(self, path: str) -> SyncCountingSession:
        self.syncs += 1
        return self

    def wait(self, pending: object) -> None:
        return None


def test_a_refresh_syncs_with_the_ensembles_leader_before_reading(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On an ensemble this broker's ZooKeeper server may lag the one a new leader learnt
    its role from: a refresh (which decides a refusal) syncs first; a cached read does not."""
    import twinlog.rpc.cluster.leader_locator as module
    from twinlog.engine.base.cluster_metadata import ClusterMetadata

    monkeypatch.setattr(
        module, "read_cluster_metadata", lambda session, topics, timeout_ms: ClusterMetadata()
    )
    session = SyncCountingSession()
    locator = ZooKeeperLeaderLocator(session)  # type: ignore[arg-type]
    locator.partition_leader(TopicPartition("orders", 0))
    assert session.syncs == 0
    locator.partition_leader(TopicPartition("orders", 0), refresh=True)
    assert session.syncs == 1
