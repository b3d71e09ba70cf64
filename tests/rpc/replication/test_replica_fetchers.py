"""A follower's fetchers against a leader's Replication service on a real gRPC server."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Iterator

import grpc
import pytest
from replication_fakes import (
    FAKE_LEADER_THREADS,
    WAIT_S,
    FakeFollower,
    FakeLeader,
    LeaderServer,
    records,
)

from twinlog.engine.base.backoff import Backoff
from twinlog.engine.base.errors import InvalidConfigError, NotLeaderOrFollowerError
from twinlog.engine.base.types import TopicPartition
from twinlog.rpc.replication.fetcher import ReplicaFetchers
from twinlog.rpc.replication.leader_fetcher import LeaderFetcher

LEADER_ID = 1
TP0 = TopicPartition("orders", 0)
TP1 = TopicPartition("orders", 1)
LOGGER = "twinlog.replication"


@pytest.fixture()
def leader() -> FakeLeader:
    return FakeLeader({TP0: 5, TP1: 3})


@pytest.fixture()
def server(leader: FakeLeader) -> Iterator[LeaderServer]:
    running = LeaderServer(leader)
    yield running
    running.stop()


def _fetchers(follower: FakeFollower, address: str | None) -> ReplicaFetchers:
    return ReplicaFetchers(follower, lambda leader_id: address, backoff_ms=20, backoff_max_ms=200)


def _warnings(caplog: pytest.LogCaptureFixture, level: int = logging.WARNING) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == level]


def test_records_flow_and_apply_gets_what_the_leader_answered(
    leader: FakeLeader, server: LeaderServer
) -> None:
    follower = FakeFollower([TP0, TP1])
    with _fetchers(follower, server.address) as fetchers:
        fetchers.ensure(LEADER_ID)
        fetchers.ensure(LEADER_ID)  # a second ensure starts no second thread
        follower.wait(lambda: follower.count(TP0) == 5 and follower.count(TP1) == 3, "catch-up")
        names = [thread.name for thread in threading.enumerate()]
        assert names.count(f"replica-fetcher-{LEADER_ID}") == 1
        assert fetchers.leaders() == {LEADER_ID}
        # Records appended while a long poll waits reach the follower through it.
        leader.wait(lambda: leader.waiting > 0, "a long poll")
        leader.append(TP1, 4)
        follower.wait(lambda: follower.count(TP1) == 7, "the appended records")
    assert bytes(follower.data[TP0]) == records(0, 5)
    assert bytes(follower.data[TP1]) == records(0, 7)
    assert {leader_id for leader_id, _ in follower.applied} == {LEADER_ID}
    applied = [fetched for _, fetched in follower.applied]
    assert applied == leader.answers[: len(applied)]  # each answer handed over as it came
    first = leader.requests[0]
    assert (first.replica_id, first.broker_epoch, first.max_wait_ms) == (2, 77, 500)


def test_fetch_rounds_start_no_thread(
    leader: FakeLeader, server: LeaderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A round is one blocking call: gRPC starts a thread for a ``.future()`` call on a
    channel with no other call in flight, which a fetcher's every round was."""
    follower = FakeFollower([TP0, TP1])
    with _fetchers(follower, server.address) as fetchers:
        fetchers.ensure(LEADER_ID)
        follower.wait(lambda: follower.count(TP0) == 5 and follower.count(TP1) == 3, "catch-up")
        started: list[str] = []
        start = threading.Thread.start

        def counted(thread: threading.Thread) -> None:
            started.append(thread.name)
            start(thread)

        monkeypatch.setattr(threading.Thread, "start", counted)
        rounds_before = len(leader.requests)
        for number in range(10):
            leader.wait(lambda: leader.waiting > 0, "a long poll")
            leader.append(TP0, 1)
            follower.wait(lambda n=number: follower.count(TP0) == 6 + n, "the appended record")
        assert len(leader.requests) - rounds_before >= 10
        # The fake leader's server, in this process, may add a handler thread (it did when
        # a long poll and the next fetch overlapped on a loaded machine): not the fetchers'.
        assert [name for name in started if not name.startswith(FAKE_LEADER_THREADS)] == []


def test_a_partition_refused_reaches_apply_and_is_logged_once(
    leader: FakeLeader, server: LeaderServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    leader.refuse[TP0] = NotLeaderOrFollowerError("broker 1 does not lead orders-0")
    follower = FakeFollower([TP0])
    with _fetchers(follower, server.address) as fetchers:
        fetchers.ensure(LEADER_ID)
        follower.wait(lambda: len(follower.applied) >= 3, "three refused rounds")
        refused = follower.applied[0][1][0]
        assert (refused.error, refused.message) == (
            "NotLeaderOrFollowerError",
            "broker 1 does not lead orders-0",
        )
        assert refused.records == b"" and follower.count(TP0) == 0
        # Every partition refused: the fetcher backs off, warning once, not per round.
        [warning] = _warnings(caplog)
        assert "NotLeaderOrFollowerError" in warning and f"leader {LEADER_ID}" in warning
        assert server.address in warning
        del leader.refuse[TP0]
        follower.wait(lambda: follower.count(TP0) == 5, "records after the refusal")
    assert any("again" in message for message in _warnings(caplog, logging.INFO))


def test_an_error_of_the_whole_call_is_rebuilt_and_logged_once_per_change(
    leader: FakeLeader, server: LeaderServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    leader.raise_whole = NotLeaderOrFollowerError("broker 1 leads nothing you follow")
    follower = FakeFollower([TP0])
    with _fetchers(follower, server.address) as fetchers:
        fetchers.ensure(LEADER_ID)
        leader.wait(lambda: len(leader.requests) >= 3, "three attempts")
        assert follower.applied == []  # nothing to apply from a failed call
        leader.raise_whole = InvalidConfigError("orders-0 is misconfigured")  # not retriable
        leader.wait(lambda: len(leader.requests) >= 6, "three more attempts")
        assert len(_warnings(caplog)) == 1 and "NotLeaderOrFollowerError" in _warnings(caplog)[0]
        [error] = _warnings(caplog, logging.ERROR)
        assert "InvalidConfigError: orders-0 is misconfigured" in error
        leader.raise_whole = None
        follower.wait(lambda: follower.count(TP0) == 5, "records once the leader answers")


def test_the_fetcher_survives_its_leader_restarting_on_the_same_port(
    leader: FakeLeader, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    first = LeaderServer(leader)
    follower = FakeFollower([TP0])
    fetchers = _fetchers(follower, first.address)
    second = None
    try:
        fetchers.ensure(LEADER_ID)
        follower.wait(lambda: follower.count(TP0) == 5, "catch-up")
        leader.wait(lambda: leader.waiting > 0, "a long poll in flight")
        first.stop()  # the long poll is cancelled, then connections are refused
        leader.append(TP0, 2)
        seen = follower.requests_made
        follower.wait(lambda: follower.requests_made >= seen + 3, "retries while it is down")
        [warning] = _warnings(caplog)  # one outage, one warning, whatever gRPC said
        assert f"leader {LEADER_ID} at {first.address} failed" in warning
        assert _warnings(caplog, logging.ERROR) == []
        second = LeaderServer(leader, first.port)
        follower.wait(lambda: follower.count(TP0) == 7, "records after the restart")
    finally:
        assert fetchers.close()
        if second is not None:
            second.stop()
    assert len(_warnings(caplog)) == 1
    assert [m for m in _warnings(caplog, logging.INFO) if "again" in m]


def test_the_address_is_asked_again_after_a_failure(leader: FakeLeader) -> None:
    moved = FakeLeader({TP0: 9})
    old, new = LeaderServer(leader), LeaderServer(moved)
    where = {"address": None}  # not known at first, then the old one, then the new one
    follower = FakeFollower([TP0])
    fetchers = ReplicaFetchers(follower, lambda leader_id: where["address"], backoff_ms=20)
    try:
        fetchers.ensure(LEADER_ID)
        follower.wait(lambda: follower.requests_made >= 2, "rounds without an address")
        where["address"] = old.address
        follower.wait(lambda: follower.count(TP0) == 5, "records from the old address")
        where["address"] = new.address
        old.stop()
        follower.wait(lambda: follower.count(TP0) == 9, "records from the new address")
    finally:
        assert fetchers.close()
        new.stop()


def test_close_cancels_a_long_poll_in_flight(leader: FakeLeader, server: LeaderServer) -> None:
    follower = FakeFollower([TP0], max_wait_ms=60_000)
    fetchers = _fetchers(follower, server.address)
    fetchers.ensure(LEADER_ID)
    follower.wait(lambda: follower.count(TP0) == 5, "catch-up")
    leader.wait(lambda: leader.waiting > 0, "a long poll in flight")
    started = time.monotonic()
    assert fetchers.close(timeout_s=WAIT_S)
    assert time.monotonic() - started < WAIT_S / 3  # not the 60 s long poll
    assert fetchers.leaders() == set()
    fetchers.ensure(LEADER_ID)  # closed: starts nothing
    assert "replica-fetcher-1" not in [thread.name for thread in threading.enumerate()]


def test_stop_then_ensure_starts_a_fresh_fetcher(leader: FakeLeader, server: LeaderServer) -> None:
    follower = FakeFollower([TP0], max_wait_ms=60_000)
    with _fetchers(follower, server.address) as fetchers:
        fetchers.ensure(LEADER_ID)
        follower.wait(lambda: follower.count(TP0) == 5, "catch-up")
        leader.wait(lambda: leader.waiting > 0, "a long poll in flight")
        assert fetchers.stop(LEADER_ID, wait_s=WAIT_S)
        assert fetchers.leaders() == set() and fetchers.stop(LEADER_ID)
        leader.append(TP0, 1)
        fetchers.ensure(LEADER_ID)
        follower.wait(lambda: follower.count(TP0) == 6, "records after the restart")


def test_nothing_to_fetch_waits_until_woken() -> None:
    follower = FakeFollower([])
    leader = FakeLeader({TP0: 2})
    server = LeaderServer(leader)
    # A long idle interval: only ensure() can make the next round come soon.
    fetchers = ReplicaFetchers(follower, lambda leader_id: server.address, idle_wait_ms=60_000)
    try:
        fetchers.ensure(LEADER_ID)
        follower.wait(lambda: follower.requests_made == 1, "the first question")
        follower.follow([TP0])
        fetchers.ensure(LEADER_ID)
        follower.wait(lambda: follower.count(TP0) == 2, "records once woken")
    finally:
        assert fetchers.close()
        server.stop()


def test_a_server_side_error_arrives_with_its_class_and_flags(
    leader: FakeLeader, server: LeaderServer
) -> None:
    from twinlog.rpc.generated.twinlog.v1 import replication_pb2, replication_pb2_grpc
    from twinlog.rpc.wire.errors import error_from_rpc_error

    leader.raise_whole = NotLeaderOrFollowerError("not here")
    with grpc.insecure_channel(server.address) as channel:
        stub = replication_pb2_grpc.ReplicationStub(channel)
        with pytest.raises(grpc.RpcError) as caught:
            stub.Fetch(replication_pb2.ReplicaFetchRequest(), timeout=WAIT_S)
    assert caught.value.code() is grpc.StatusCode.UNAVAILABLE
    rebuilt = error_from_rpc_error(caught.value)
    assert type(rebuilt) is NotLeaderOrFollowerError and rebuilt.retriable
    assert str(rebuilt) == "not here"


def test_ensure_replaces_a_fetcher_that_ended_on_a_bug(
    leader: FakeLeader,
    server: LeaderServer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    original = LeaderFetcher._round
    rounds = {"n": 0}
    ended = threading.Event()

    def buggy_once(self: LeaderFetcher) -> None:
        rounds["n"] += 1
        if rounds["n"] == 1:
            ended.set()
            raise RuntimeError("a bug in the fetcher itself")
        original(self)

    monkeypatch.setattr(LeaderFetcher, "_round", buggy_once)
    follower = FakeFollower([TP0])
    with _fetchers(follower, server.address) as fetchers:
        fetchers.ensure(LEADER_ID)
        assert ended.wait(WAIT_S)
        for thread in threading.enumerate():
            if thread.name == f"replica-fetcher-{LEADER_ID}":
                thread.join(WAIT_S)
        assert fetchers.leaders() == {LEADER_ID}  # still asked for, though its thread ended
        fetchers.ensure(LEADER_ID)
        follower.wait(lambda: follower.count(TP0) == 5, "records from its replacement")
    assert any("ended unexpectedly" in r.getMessage() for r in caplog.records)


def test_a_leader_whose_role_is_on_its_way_is_asked_again_at_the_first_backoff_step(
    leader: FakeLeader, server: LeaderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new leader that has not taken its role yet refuses with NotLeaderOrFollowerError;
    its promotion barrier waits for this follower, so the fetcher retries at the first
    backoff step and never doubles it (a controlled shutdown's failover took a second
    while it did). Other failures still back off."""
    steps: list[int] = []  # the retry number of every pause taken from the backoff
    delay_s = Backoff.delay_s

    def counting(backoff: Backoff, attempt: int, rng: random.Random | None = None) -> float:
        steps.append(attempt)
        return delay_s(backoff, attempt, rng)

    monkeypatch.setattr(Backoff, "delay_s", counting)
    leader.raise_whole = NotLeaderOrFollowerError("broker 1 does not lead orders-0 yet")
    follower = FakeFollower([TP0])
    with _fetchers(follower, server.address) as fetchers:
        fetchers.ensure(LEADER_ID)
        leader.wait(lambda: len(leader.requests) >= 6, "five retries")
        assert len(steps) >= 5 and set(steps) == {1}  # the first step, never doubled
        leader.raise_whole = InvalidConfigError("orders-0 is misconfigured")
        leader.wait(lambda: len(leader.requests) >= 10, "three more attempts")
        assert 2 in steps  # a refusal that is not a role in transit backs off as before
        leader.raise_whole = None
        follower.wait(lambda: follower.count(TP0) == 5, "records once the role arrived")
